"""The public surface of ``dubbo_py`` is pinned: a name added or removed is a deliberate change.

As httpx's ``test_exported_members.py``: every name in ``__all__`` resolves, is documented, and
``dir(dubbo_py)`` shows exactly those public names (the lazy imports hide nothing and add
nothing). The docs and examples import from ``dubbo_py`` only.
"""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import dubbo_py

ROOT = Path(__file__).resolve().parents[2]

PUBLIC = {
    # the application and its values
    "Application", "Reference", "service", "URL", "Invocation", "TripleContext", "__version__",
    # filters around calls and attempts, and plan hooks
    "ConsumerFilters", "CallFilter", "AttemptFilter", "AsyncCallFilter", "AsyncAttemptFilter",
    "MockFilter", "AsyncMockFilter", "RecordStats", "AsyncRecordStats", "CallHook", "AttemptHook",
    # configuration
    "ApplicationConfig", "ProtocolConfig", "QosConfig", "ReferenceConfig", "RegistryConfig",
    "load_config", "parse_config",
    # errors
    "BadVersionError", "CallCredentialsError", "ClusterError", "ConfigError", "MockSpecError",
    "NoNodeError",
    "NoProviderError", "NodeExistsError", "NotEmptyError", "OptionError", "PositionedError",
    "ProviderUnavailable", "RegistryAddressError", "RegistryUnreachableError", "RuleError",
    "StoreError", "TLSConfigError", "URLError",
    # registry stores and layout
    "Store", "EmbeddedStore", "ZooKeeperStore", "EtcdStore", "config_path", "rule_key",
    # cluster parts a user composes or reads
    "FailbackQueue", "Quarantine", "RetryBudget", "HedgingPolicy", "grpc_health_probe", "CallStats",
    "default_stats", "method_key", "get_loadbalance", "effective_weight",
    # rules as a library
    "RouterChain", "Snapshot", "condition_router_from_url", "condition_routers_from_yaml",
    "script_router_from_url", "ShardRouter", "BoundShardRouter", "locate", "make_layout",
    "parse_shard_rule", "plan_split",
    # Hessian2, the serialization of Java-interface services
    "JavaObject", "JavaEnum", "JavaException", "JavaLong", "JavaBigInteger", "JavaInstant",
    "JavaLocalDateTime", "TypedList", "TypedMap", "Hessian2Encoder", "Hessian2Decoder",
    "Hessian2Error", "Hessian2DecodeError", "Hessian2EncodeError", "from_throwable",
    "hessian2_dumps", "hessian2_loads",
    # generic calls to Java-interface services over dubbo://
    "GenericReference", "GenericResult", "GenericSignatureError",
    "DubboCallError", "DubboConnectionError", "DubboRemoteError",
    "DubboTimeoutError",
    # Triple without IDL: the direct call of a Java-interface method and its errors
    "TripleWrapperChannels", "TripleWrapperError", "TripleWrapperResult",
    "TripleWrapperTimeoutError", "triple_invoke",
}  # fmt: skip


def test_the_public_names_are_exactly_the_pinned_ones() -> None:
    assert set(dubbo_py.__all__) == PUBLIC
    assert len(dubbo_py.__all__) == len(PUBLIC)  # no name listed twice


def test_every_public_name_resolves_and_is_documented() -> None:
    for name in sorted(PUBLIC - {"__version__"}):
        member = getattr(dubbo_py, name)
        assert member.__module__.startswith("dubbo_py."), name
        assert (member.__doc__ or "").strip(), f"{name} has no docstring"


def test_dir_shows_the_public_names() -> None:
    shown = {name for name in dir(dubbo_py) if not name.startswith("_")}
    assert PUBLIC - {"__version__"} <= shown
    assert shown - PUBLIC <= {"annotations", "importlib", "TYPE_CHECKING", "Any"} | {
        # submodules imported by other tests in the same process show as attributes
        name
        for name in shown
        if hasattr(getattr(dubbo_py, name), "__path__")
        or hasattr(getattr(dubbo_py, name), "__file__")
    }


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        dubbo_py.Nope  # type: ignore[attr-defined]  # noqa: B018


def test_docs_and_examples_import_from_dubbo_py_only() -> None:
    deep = re.compile(r"^\s*(?:from dubbo_py\.[\w.]+ import|import dubbo_py\.)", re.M)
    offenders = []
    for path in [*ROOT.joinpath("docs").rglob("*.md"), *ROOT.joinpath("examples").rglob("*.py")]:
        if path.name == "benchmarks.md":  # records of past commands, kept as they were run
            continue
        for match in deep.finditer(path.read_text(encoding="utf-8")):
            offenders.append(f"{path.relative_to(ROOT)}: {match.group(0).strip()}")
    assert offenders == []


OLD_PATHS = {
    "dubbo_py.rpc.filters": ("ConsumerFilters", "dubbo_py.consumer.filters"),
    "dubbo_py.rpc.application": ("Application", "dubbo_py.app.application"),
    "dubbo_py.rpc.startup": ("RegistryUnreachableError", "dubbo_py.app.startup"),
    "dubbo_py.rpc.dispatch": ("TripleContext", "dubbo_py.provider.dispatch"),
    "dubbo_py.registry.embedded": ("EmbeddedStore", "dubbo_py.registry.store.embedded"),
    "dubbo_py.registry.zookeeper": ("ZooKeeperStore", "dubbo_py.registry.store.zookeeper"),
    "dubbo_py.registry.etcd": ("EtcdStore", "dubbo_py.registry.store.etcd.store"),
}


@pytest.mark.parametrize("old", sorted(OLD_PATHS))
def test_a_moved_module_imports_from_its_old_path_with_a_warning(old: str) -> None:
    """A fresh interpreter, so the module's first import (the one that warns) is seen."""
    name, new = OLD_PATHS[old]
    code = (
        "import warnings, importlib\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        f"    from {old} import {name} as value\n"
        f"assert value is getattr(importlib.import_module({new!r}), {name!r})\n"
        "moved = [w for w in seen if issubclass(w.category, DeprecationWarning)]\n"
        "assert len(moved) == 1, [str(w.message) for w in seen]\n"
        "print(moved[0].filename.endswith('<string>'), moved[0].message)\n"
    )
    with warnings.catch_warnings():
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=False
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("True "), result.stdout  # points at the importing line
    assert f"{old} moved to {new}" in result.stdout
