"""What starting dubbo-py imports: only what the program uses.

``import dubbo_py`` (and reading its public names) must not load the CLI, the console, YAML
rule parsing or the ZooKeeper and etcd stores; ``dubbo-py --version`` must not load gRPC
either. Each is imported when it is used: a ``zookeeper://`` registry opened, a rule compiled
as a consumer compiles one, a CLI command run. The "uses" cases are here too, so each guard is
seen to fail when the module does get imported.

Every case runs in a fresh interpreter, since this test process has imported everything
already. No timings: the start-up figures are bench/bench_startup.py's, in
docs/benchmarks.md ("Start-up").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import dubbo_py

ROOT = Path(__file__).resolve().parents[2]

#: Loaded only by the programs that use them (a module counts with its submodules).
LAZY = (
    "dubbo_py.admin",  # the CLI and the console
    "click",
    "rich",
    "starlette",
    "uvicorn",
    "yaml",  # rule documents and dubbo.yaml
    "dubbo_py.yaml_loader",
    "lark",  # the condition rule grammar
    "dubbo_py.router.condition.parser",
    "kazoo",  # the ZooKeeper store
    "dubbo_py.registry.store.zookeeper",
    "dubbo_py.registry.store.etcd.store",  # the etcd store
)

RULE = """\
configVersion: v3.0
scope: service
key: demo.Greeter:1.0.0
conditions:
  - method = SayHello => region = hangzhou
"""


def imported_after(code: str) -> set[str]:
    """The modules a fresh interpreter has imported after running ``code``."""
    script = textwrap.dedent(code) + textwrap.dedent(
        """
        import json as _json, sys as _sys
        print("\\nMODULES " + _json.dumps(sorted(_sys.modules)))
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "DUBBO_PY_REGISTRY"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    last = done.stdout.rstrip().splitlines()[-1]
    assert last.startswith("MODULES "), done.stdout
    return set(json.loads(last.removeprefix("MODULES ")))


def loaded(modules: set[str], *names: str) -> list[str]:
    """Which of ``names`` (each with its submodules) are among ``modules``."""
    return sorted(n for n in names if any(m == n or m.startswith(n + ".") for m in modules))


def test_import_dubbo_py_loads_no_command_line_rules_zookeeper_or_grpc() -> None:
    modules = imported_after("import dubbo_py")
    assert loaded(modules, *LAZY, "grpc") == []


#: Public names that are a backend or a rule language themselves: reading one loads it.
BACKEND_NAMES = {
    "ZooKeeperStore": "kazoo",
    "EtcdStore": "dubbo_py.registry.store.etcd.store",
    "condition_router_from_url": "lark",
    "condition_routers_from_yaml": "lark",
    "script_router_from_url": "yaml",  # the script rule package reads YAML documents too
    # dubbo.yaml's reader
    "load_config": "yaml",
    "parse_config": "yaml",
    # the shard router's package reads shard rule documents
    **dict.fromkeys(
        [
            "BoundShardRouter",
            "ShardRouter",
            "locate",
            "make_layout",
            "parse_shard_rule",
            "plan_split",
        ],
        "yaml",
    ),
}


def test_the_public_names_load_no_command_line_rules_or_zookeeper() -> None:
    # What a provider or consumer program imports: the consumer stack and gRPC, nothing else.
    modules = imported_after(
        f"""
        import dubbo_py
        for name in dubbo_py.__all__:
            if name not in {sorted(BACKEND_NAMES)!r}:
                getattr(dubbo_py, name)
        from dubbo_py.errors import ClusterError, RuleError
        """
    )
    assert loaded(modules, "grpc", "dubbo_py.app.application") == [
        "dubbo_py.app.application",
        "grpc",
    ]
    assert loaded(modules, *LAZY) == []


@pytest.mark.parametrize("name", sorted(BACKEND_NAMES))
def test_a_backend_public_name_loads_its_backend_when_read(name: str) -> None:
    assert loaded(imported_after("import dubbo_py"), BACKEND_NAMES[name]) == []
    code = f"import dubbo_py\ndubbo_py.{name}"
    assert loaded(imported_after(code), BACKEND_NAMES[name]) == [BACKEND_NAMES[name]]


def test_a_zookeeper_registry_loads_kazoo_when_it_is_opened() -> None:
    # Nothing listens on port 1: the store is opened, fails to connect and is closed.
    code = """
        import dubbo_py
        app = dubbo_py.Application("startup-probe", registry="zookeeper://127.0.0.1:1",
                                   connect_timeout=0.1)
        {use}
        app.close()
        """
    assert loaded(imported_after(code.format(use="")), "kazoo") == []
    assert loaded(imported_after(code.format(use="app.registry")), "kazoo") == ["kazoo"]


def test_a_rule_loads_yaml_and_its_grammar_when_it_is_compiled() -> None:
    # The rule-kind table is how every consumer compiles a document that arrives.
    modules = imported_after(
        f"""
        from dubbo_py.registry.rule_kinds import Target, kind_named
        kind = kind_named("condition-router")
        assert kind is not None
        routers = kind.compile(Target.SERVICE, {RULE!r}, "test")
        assert routers
        """
    )
    assert loaded(modules, "yaml", "lark", "dubbo_py.router.condition.parser") == [
        "dubbo_py.router.condition.parser",
        "lark",
        "yaml",
    ]
    assert loaded(modules, "dubbo_py.admin", "kazoo") == []


def _cli(*args: str) -> str:
    return f"""
        from dubbo_py.admin.cli import main
        try:
            main({list(args)!r})
        except SystemExit as exc:
            assert exc.code == 0, exc.code
        """


def test_dubbo_py_version_loads_neither_grpc_nor_any_command() -> None:
    modules = imported_after(_cli("--version"))
    assert "dubbo_py.admin.cli" in modules
    assert loaded(modules, "grpc", "kazoo", "yaml", "lark", "rich", "dubbo_py.admin.console") == []
    assert sorted(m for m in modules if m.startswith("dubbo_py.admin.")) == [
        "dubbo_py.admin.cli",
        "dubbo_py.admin.common",
    ]


def test_rules_validate_loads_the_rule_tools_only(tmp_path: Path) -> None:
    rule = tmp_path / "greeter-condition.yaml"
    rule.write_text(RULE, encoding="utf-8")
    modules = imported_after(_cli("rules", "validate", str(rule)))
    assert loaded(modules, "yaml", "lark", "dubbo_py.admin.commands.rules") == [
        "dubbo_py.admin.commands.rules",
        "lark",
        "yaml",
    ]
    assert loaded(modules, "grpc", "kazoo", "dubbo_py.admin.console", "starlette") == []
    # What a rule would reach is worked out against a live registry only.
    assert loaded(modules, "dubbo_py.admin.rules.reach", "dubbo_py.admin.rules.scenario") == []


@pytest.mark.parametrize(
    "name", ["Application", "Reference", "service", "URL", "Invocation", "__version__"]
)
def test_every_public_name_reads_as_before(name: str) -> None:
    import dubbo_py.app.application
    import dubbo_py.invocation
    import dubbo_py.provider.service
    import dubbo_py.url
    import dubbo_py.version

    homes = {
        "Application": dubbo_py.app.application,
        "Reference": dubbo_py.app.application,
        "service": dubbo_py.provider.service,
        "URL": dubbo_py.url,
        "Invocation": dubbo_py.invocation,
        "__version__": dubbo_py.version,
    }
    assert getattr(dubbo_py, name) is getattr(homes[name], name)
    assert name in dir(dubbo_py)


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = dubbo_py.no_such_name  # type: ignore[attr-defined]
    with pytest.raises(ImportError):
        from dubbo_py.errors import NoSuchError  # type: ignore[attr-defined]  # noqa: F401
