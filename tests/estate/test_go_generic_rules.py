"""Generic calls to dubbo-go obey the consumer's rules: a condition rule and an override
(``disabled``) pushed with ``dubbo-py rules push`` steer ``$invoke`` calls over ``dubbo://``
between two live dubbo-go 3.3.2 ``userservice`` processes (each names itself in what it
returns)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import dubbo_py
from dubbo_py.consumer.generic import GenericReference
from tests.support.go_estate import GoUserService
from tests.support.processes import dubbo_py_cli

pytestmark = pytest.mark.zookeeper

SERVICE = "estate.UserService"


@pytest.fixture(scope="module")
def providers(estate_registry: str, estate_group: str) -> Iterator[dict[str, GoUserService]]:
    started: dict[str, GoUserService] = {}
    try:
        for name in ("g1", "g2"):
            started[name] = GoUserService(
                "--registry", estate_registry, "--application", "go-estate-generic-rules",
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
    providers: dict[str, GoUserService],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GenericReference]:
    cache = tmp_path_factory.mktemp("go-generic-rules") / "cache.json"
    with dubbo_py.Application("py-go-generic-rules", estate_registry, cache_path=cache) as app:
        ref = app.generic_reference(SERVICE, version="1.0.0", group=estate_group, timeout=5.0)
        _until(lambda: len(ref.providers) == 2)
        yield ref


def _push(registry: str, tmp_path: Path, key: str, text: str) -> None:
    path = tmp_path / "rule.yaml"
    path.write_text(text, encoding="utf-8")
    assert key in dubbo_py_cli(registry, "rules", "push", str(path), "--key", key)


def _served(users: GenericReference, calls: int = 20) -> Counter[str]:
    return Counter(users.echo("x").split(":")[0] for _ in range(calls))


def _until(check: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "the rule did not take effect in time"
        time.sleep(0.1)


def test_rules_steer_generic_calls_to_go_providers(
    users: GenericReference,
    providers: dict[str, GoUserService],
    estate_registry: str,
    estate_group: str,
    tmp_path: Path,
) -> None:
    # dubbo-go registers weight=0; dubbo-py balances providers that all weigh 0 as equals.
    assert {p.parameters.get("weight") for p in users.providers} == {"0"}
    assert set(_served(users)) == {"g1", "g2"}
    prefix = f"{SERVICE}:1.0.0:{estate_group}"
    port = providers["g2"].address.rsplit(":", 1)[1]
    condition = f"{prefix}.condition-router"
    # The router sees the real method name (echo), not $invoke: getUser is left alone.
    _push(
        estate_registry,
        tmp_path,
        condition,
        "configVersion: v3.0\nscope: service\n"
        f"key: {estate_group}/{SERVICE}:1.0.0\nenabled: true\nforce: true\n"
        f"conditions:\n  - 'method = echo => port = {port}'\n",
    )
    try:
        _until(lambda: set(_served(users, 5)) == {"g2"})
        assert set(_served(users)) == {"g2"}
        names = {users.getUser(7)["name"].split("@")[1] for _ in range(20)}
        assert names == {"g1", "g2"}
    finally:
        dubbo_py_cli(estate_registry, "rules", "delete", condition)
    _until(lambda: set(_served(users)) == {"g1", "g2"})

    override = f"{prefix}.configurators"
    _push(
        estate_registry,
        tmp_path,
        override,
        "configVersion: v3.0\nscope: service\n"
        f"key: {estate_group}/{SERVICE}:1.0.0\nenabled: true\n"
        f"configs:\n  - addresses: ['{providers['g1'].address}']\n    side: provider\n"
        "    parameters:\n      disabled: true\n",
    )
    try:
        _until(lambda: [p.address for p in users.providers] == [providers["g2"].address])
        assert set(_served(users)) == {"g2"}
    finally:
        dubbo_py_cli(estate_registry, "rules", "delete", override)
    _until(lambda: len(users.providers) == 2)
