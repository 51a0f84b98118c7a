"""Generic calls to dubbo-go obey the consumer's rules: a condition rule and an override
(``disabled``) pushed with ``dubbo-py rules push`` steer ``$invoke`` calls over ``dubbo://``
between two live dubbo-go 3.3.2 ``userservice`` processes (each names itself in what it
returns)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

import dubbo_py
from dubbo_py.consumer.generic import GenericReference
from tests.estate.test_java_generic_rules import _push
from tests.support.go_estate import GoUserService
from tests.support.java_estate import side_by_side
from tests.support.processes import dubbo_py_cli
from tests.support.waiting import wait_until

pytestmark = pytest.mark.zookeeper

SERVICE = "estate.UserService"


@pytest.fixture(scope="module")
def providers(estate_registry: str, estate_group: str) -> Iterator[dict[str, GoUserService]]:
    names = ("g1", "g2")
    common = ("--registry", estate_registry, "--application", "go-estate-generic-rules")
    where = ("--version", "1.0.0", "--group", estate_group)
    with side_by_side(
        *(GoUserService(*common, "--name", name, *where) for name in names)
    ) as started:
        yield dict(zip(names, started, strict=True))


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
        wait_until(lambda: len(ref.providers) == 2, 10.0, "both Go providers")
        yield ref


def _served(users: GenericReference, calls: int = 20) -> Counter[str]:
    return Counter(users.echo("x").split(":")[0] for _ in range(calls))


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
        wait_until(lambda: set(_served(users, 5)) == {"g2"}, 10.0, "the rule")
        assert set(_served(users)) == {"g2"}
        names = {users.getUser(7)["name"].split("@")[1] for _ in range(20)}
        assert names == {"g1", "g2"}
    finally:
        dubbo_py_cli(estate_registry, "rules", "delete", condition)
    wait_until(lambda: set(_served(users)) == {"g1", "g2"}, 10.0, "the delete")

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
        wait_until(
            lambda: [p.address for p in users.providers] == [providers["g2"].address],
            10.0,
            "the override",
        )
        assert set(_served(users)) == {"g2"}
    finally:
        dubbo_py_cli(estate_registry, "rules", "delete", override)
    wait_until(lambda: len(users.providers) == 2, 10.0, "the delete")
