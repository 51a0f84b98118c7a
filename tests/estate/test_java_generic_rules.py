"""Generic calls obey the consumer's rules: a condition rule and an override (``disabled``)
pushed with ``dubbo-py rules push`` steer ``$invoke`` calls between two live Apache Dubbo 3.3.6
``estate.DubboProvider`` processes (each names itself in the user it returns)."""

from __future__ import annotations

import itertools
import threading
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
        # No outlier ejection: the override test times calls out on purpose (a rule's 200 ms
        # for a 600 ms call), and three in a row on one provider would eject it.
        ref = app.generic_reference(
            SERVICE, version="1.0.0", group=estate_group, timeout=5.0, outlier_failures=0
        )
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


def test_consumer_override_parameters_apply_to_generic_calls(
    users: GenericReference,
    estate_registry: str,
    estate_group: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The reference's own timeout is 5 s; a consumer-side override of 200 ms beats it, as it
    # beats a Java consumer's reference config. roundrobin over two equal providers alternates
    # them, which random balancing does for ten calls in a row once in 512.
    caplog.set_level("INFO", logger="dubbo_py.consumer.generic")
    assert users.invoke("sleep", ["int"], [600]) == 600
    override = f"{SERVICE}:1.0.0:{estate_group}.configurators"
    _push(
        estate_registry,
        tmp_path,
        override,
        "configVersion: v3.0\nscope: service\n"
        f"key: {estate_group}/{SERVICE}:1.0.0\nenabled: true\n"
        "configs:\n  - side: consumer\n    applications: [py-generic-rules]\n"
        "    parameters:\n      sleep.timeout: 200\n      loadbalance: roundrobin\n"
        "      retries: 0\n      actives: 3\n",
    )
    try:

        def timed_out() -> bool:
            try:
                users.invoke("sleep", ["int"], [600])
            except TimeoutError:
                return True
            return False

        _until(timed_out)
        # What generic calls do not act on is said (once), not dropped.
        assert "consumer override actives=3 is not applied to generic calls" in caplog.text
        # retries 0: the timed-out call was tried on one provider only (each failed attempt
        # is logged; with the reference's 2 retries both providers would be).
        caplog.clear()
        with pytest.raises(TimeoutError):
            users.invoke("sleep", ["int"], [600])
        attempts = [r for r in caplog.records if f"{SERVICE}#sleep on" in r.getMessage()]
        assert len(attempts) == 1, [r.getMessage() for r in attempts]
        # sleep.timeout is that method's: getUser keeps the reference's 5 s.
        names = [users.invoke_result("getUser", None, [7]).provider.address for _ in range(10)]
        assert all(a != b for a, b in itertools.pairwise(names)), names
    finally:
        dubbo_py_cli(estate_registry, "rules", "delete", override)
    _until(lambda: users.invoke("sleep", ["int"], [600]) == 600)


def test_leastactive_sees_the_generic_calls_in_flight(
    providers: dict[str, JavaDubboProvider],
    estate_registry: str,
    estate_group: str,
    tmp_path: Path,
) -> None:
    # While a slow call is in flight on one provider, leastactive sends every other call of the
    # method to the other one (Dubbo counts the active calls per method; with no statistics
    # recorded it would balance them at random over both).
    with dubbo_py.Application(
        "py-generic-leastactive", estate_registry, cache_path=tmp_path / "c.json"
    ) as app:
        ref = app.generic_reference(
            SERVICE, version="1.0.0", group=estate_group, timeout=10.0, loadbalance="leastactive"
        )
        _until(lambda: len(ref.providers) == 2)
        slow: list[str] = []
        worker = threading.Thread(
            target=lambda: slow.append(ref.invoke("sleep", ["int"], [2500]) and "done")
        )
        worker.start()
        _until(lambda: sum(c.active for c in ref.stats.views()) == 1)
        [busy] = [c.address for c in ref.stats.views() if c.active == 1]
        served = Counter(
            ref.invoke_result("sleep", ["int"], [0]).provider.address  # type: ignore[union-attr]
            for _ in range(10)
        )
        worker.join(10)
        assert slow == ["done"]
        assert busy not in served and sum(served.values()) == 10, (busy, served)
