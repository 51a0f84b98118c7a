"""Generic calls obey the consumer's rules: a condition rule and an override (``disabled``)
pushed with ``dubbo-py rules push`` steer ``$invoke`` calls between two live Apache Dubbo 3.3.6
``estate.DubboProvider`` processes (each names itself in the user it returns)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import dubbo_py
from dubbo_py.consumer.generic import GenericReference
from tests.support.java_estate import JavaDubboProvider
from tests.support.processes import dubbo_py_cli

pytestmark = pytest.mark.zookeeper

SERVICE = "estate.UserService"


@pytest.fixture(scope="module")
def providers(estate_registry: str, estate_group: str) -> Iterator[dict[str, JavaDubboProvider]]:
    started: dict[str, JavaDubboProvider] = {}
    try:
        for name in ("r1", "r2"):
            started[name] = JavaDubboProvider(
                "--registry", estate_registry, "--application", "java-estate-generic-rules",
                "--name", name, "--version", "1.0.0", "--group", estate_group,
            ).__enter__()  # fmt: skip
        yield started
    finally:
        for provider in started.values():
            provider.__exit__(None, None, None)


@pytest.fixture(scope="module")
def users(
    estate_registry: str,
    estate_group: str,
    providers: dict[str, JavaDubboProvider],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GenericReference]:
    cache = tmp_path_factory.mktemp("generic-rules") / "cache.json"
    with dubbo_py.Application("py-generic-rules", estate_registry, cache_path=cache) as app:
        ref = app.generic_reference(SERVICE, version="1.0.0", group=estate_group, timeout=5.0)
        deadline = time.monotonic() + 10
        while len(ref.providers) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        yield ref


def _push(registry: str, tmp_path: Path, key: str, text: str) -> None:
    path = tmp_path / "rule.yaml"
    path.write_text(text, encoding="utf-8")
    assert key in dubbo_py_cli(registry, "rules", "push", str(path), "--key", key)


def _served(users: GenericReference, calls: int = 20) -> Counter[str]:
    return Counter(users.getUser(7)["name"].split("@")[1] for _ in range(calls))


def _until(check: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "the rule did not take effect in time"
        time.sleep(0.1)


def test_rules_steer_generic_calls(
    users: GenericReference,
    providers: dict[str, JavaDubboProvider],
    estate_registry: str,
    estate_group: str,
    tmp_path: Path,
) -> None:
    assert set(_served(users)) == {"r1", "r2"}
    prefix = f"{SERVICE}:1.0.0:{estate_group}"
    port = providers["r2"].address.rsplit(":", 1)[1]
    condition = f"{prefix}.condition-router"
    # The routers see the real method name (not $invoke).
    _push(
        estate_registry,
        tmp_path,
        condition,
        "configVersion: v3.0\nscope: service\n"
        f"key: {estate_group}/{SERVICE}:1.0.0\nenabled: true\nforce: true\n"
        f"conditions:\n  - 'method = getUser => port = {port}'\n",
    )
    try:
        _until(lambda: set(_served(users, 5)) == {"r2"})
        assert set(_served(users)) == {"r2"}
    finally:
        dubbo_py_cli(estate_registry, "rules", "delete", condition)
    _until(lambda: set(_served(users)) == {"r1", "r2"})

    override = f"{prefix}.configurators"
    _push(
        estate_registry,
        tmp_path,
        override,
        "configVersion: v3.0\nscope: service\n"
        f"key: {estate_group}/{SERVICE}:1.0.0\nenabled: true\n"
        f"configs:\n  - addresses: ['{providers['r1'].address}']\n    side: provider\n"
        "    parameters:\n      disabled: true\n",
    )
    try:
        _until(lambda: [p.address for p in users.providers] == [providers["r2"].address])
        assert set(_served(users)) == {"r2"}
    finally:
        dubbo_py_cli(estate_registry, "rules", "delete", override)
    _until(lambda: len(users.providers) == 2)
