"""Generic calls (``$invoke``) to two live Apache Dubbo 3.3.6 ``dubbo://`` providers of
estate.UserService under the governance stub references have: the QoS port's ``/ls`` and
``getRouterSnapshot`` list the generic reference, a provider that hangs (SIGSTOP: its kernel
still accepts connections, its calls time out) is ejected as an outlier and comes back once it
answers heartbeats again, and hedging sends a call the hung provider does not answer to the
other one, whose answer wins -- a Java exception included.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import dubbo_py
from dubbo_py.consumer.generic import GenericReference
from tests.support.java_estate import JavaDubboProvider, side_by_side
from tests.support.processes import dubbo_py_cli

pytestmark = pytest.mark.zookeeper

SERVICE = "estate.UserService"
LONG = ["java.lang.Long"]


@dataclass(frozen=True)
class Served:
    """One protocol's export of UserService by a provider process."""

    process: JavaDubboProvider
    protocol: str
    group: str
    address: str
    #: The provider's label (``--name``): Java's exception messages name it.
    name: str


@pytest.fixture(scope="module")
def processes(estate_registry: str, estate_group: str) -> Iterator[list[JavaDubboProvider]]:
    """Two Java providers exporting UserService over ``dubbo://`` in the group
    ``<module group>-dubbo`` and over Triple without IDL in ``<module group>-tri``, each on a
    port of its own: the module's two halves share the two processes (a JVM start costs
    seconds of CPU) and a test's reference sees only its protocol's two exports. The tests
    run one at a time, so a provider a test hangs serves no other test meanwhile."""
    unstarted = []
    for name in ("gv1", "gv2"):
        args = [
            "--registry", estate_registry, "--application", f"java-estate-{name}",
            "--name", name, "--version", "1.0.0", "--group", f"{estate_group}-dubbo",
            "--tri-group", f"{estate_group}-tri",
        ]  # fmt: skip
        unstarted.append(JavaDubboProvider(*args))
    with side_by_side(*unstarted) as started:
        yield started


@pytest.fixture(scope="module", params=["dubbo", "tri"])
def providers(
    request: pytest.FixtureRequest, processes: list[JavaDubboProvider], estate_group: str
) -> list[Served]:
    """The two providers' exports over ``dubbo://`` or over Triple without IDL."""
    protocol = str(request.param)
    served = []
    for process in processes:
        dubbo_address, tri_address = process.ready_line.split()[1:3]
        served.append(
            Served(
                process,
                protocol,
                f"{estate_group}-{protocol}",
                dubbo_address if protocol == "dubbo" else tri_address,
                process.args[process.args.index("--name") + 1],
            )
        )
    return served


@contextmanager
def hung(provider: Served) -> Iterator[None]:
    """The provider's process stopped (SIGSTOP) for the block, then resumed."""
    assert provider.process.proc is not None
    os.kill(provider.process.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(provider.process.proc.pid, signal.SIGCONT)


def _qos(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}") as reply:
        return json.loads(reply.read().decode())


def _group(providers: list[Served]) -> str:
    return providers[0].group


def _both(ref: GenericReference, providers: list[Served]) -> None:
    deadline = time.monotonic() + 10
    while len(ref.providers) < 2:
        assert time.monotonic() < deadline, "the providers were not discovered"
        time.sleep(0.05)
    assert {p.address for p in ref.providers} == {p.address for p in providers}


def test_qos_lists_generic_references_and_their_router_snapshot(
    providers: list[Served], estate_registry: str, tmp_path: Path
) -> None:
    with dubbo_py.Application(
        "py-generic-governed-qos", estate_registry, cache_path=tmp_path / "c.json", qos_port=0
    ) as app:
        users = app.generic_reference(
            SERVICE, version="1.0.0", group=_group(providers), timeout=5.0
        )
        _both(users, providers)
        assert users.invoke("getUser", LONG, [7])["id"] == 7
        assert app.qos is not None
        port = app.qos.port
        key = f"{_group(providers)}/{SERVICE}:1.0.0"
        [listed] = [c for c in _qos(port, "/ls")["consumed"] if c["service"] == key]
        assert listed["generic"] is True
        assert (listed["interface"], listed["version"], listed["group"]) == (
            SERVICE,
            "1.0.0",
            _group(providers),
        )
        assert sorted(p["address"] for p in listed["providers"]) == sorted(
            p.address for p in providers
        )
        assert {p["protocol"] for p in listed["providers"]} == {providers[0].protocol}
        assert listed["quarantined"] == [] and listed["router_snapshot"] is False

        [chain] = _qos(port, f"/getRouterSnapshot?service={SERVICE}")["references"]
        assert chain["service"] == key and chain["generic"] is True
        assert sorted(chain["providers"]) == sorted(p.address for p in providers)
        assert sorted(chain["valid"]) == sorted(chain["providers"])
        assert chain["routers"], chain  # the chain in force (at least the built-in routers)
        assert all(r["excluded"] == {} for r in chain["routers"]), chain


def test_a_hung_provider_is_ejected_as_an_outlier_and_revived_when_it_answers(
    providers: list[Served], estate_registry: str, tmp_path: Path
) -> None:
    stopped, healthy = providers
    with dubbo_py.Application(
        "py-generic-governed-outlier", estate_registry, cache_path=tmp_path / "c.json"
    ) as app:
        users = app.generic_reference(
            SERVICE,
            version="1.0.0",
            group=_group(providers),
            timeout=1.0,
            retries=1,
            loadbalance="roundrobin",
            outlier_failures=2,
            quarantine_interval=0.3,
        )
        _both(users, providers)
        with hung(stopped):
            for n in range(1, 9):  # every call is answered: failover to the healthy one
                done = users.invoke_result("getUser", LONG, [n])
                assert done.provider is not None and done.provider.address == healthy.address
            [entry] = users.quarantine.entries()
            assert entry.address == stopped.address and "outlier" in entry.reason, entry
            assert users.outliers.ejections == 1
            # Its kernel still accepts connections, but it answers no heartbeat (dubbo://), no
            # health check (tri://): it stays out.
            time.sleep(1.0)
            assert [e.address for e in users.quarantine.entries()] == [stopped.address]
            assert {
                users.invoke_result("getUser", LONG, [n]).attempts[0].address for n in range(1, 5)
            } == {healthy.address}
        deadline = time.monotonic() + 10
        while users.quarantine.entries():
            assert time.monotonic() < deadline, "the resumed provider was not revived"
            time.sleep(0.1)
        # Back in rotation: it answers calls again (its first ones, right after SIGCONT, may
        # still time out on a busy machine and fail over).
        deadline = time.monotonic() + 10
        while True:
            answered = users.invoke_result("getUser", LONG, [1]).provider
            if answered is not None and answered.address == stopped.address:
                break
            assert time.monotonic() < deadline, "the revived provider answered no call"


def _hedged_reference(app: dubbo_py.Application, group: str) -> GenericReference:
    return app.generic_reference(
        SERVICE,
        version="1.0.0",
        group=group,
        timeout=3.0,
        retries=0,  # no failover: a call that went only to the hung provider would fail
        # The first argument picks the first provider: the test knows which calls go to the
        # provider it hangs (a hedge picks among the providers not tried yet).
        loadbalance="consistenthash",
        outlier_failures=0,  # keep the hung provider in rotation, so hedges are needed
        hedging={"delay": 0.1, "max_extra_load": 1.0},
    )


def _ids_of(ref: GenericReference, provider: Served, count: int) -> list[int]:
    """``count`` user ids whose calls go to ``provider`` first (consistent hashing)."""
    ids = []
    for n in range(1, 200):
        done = ref.invoke_result("getUser", LONG, [n])
        if done.provider is not None and done.provider.address == provider.address:
            ids.append(n)
            if len(ids) == count:
                return ids
    raise AssertionError(f"fewer than {count} ids hash to {provider.address}")


def _hedges(ref: GenericReference) -> tuple[int, int]:
    """The hedges of ``getUser`` sent and won so far."""
    counts = ref.hedge_counts.get("getUser")
    return (0, 0) if counts is None else (counts.sent, counts.won)


def test_a_hedge_to_the_other_provider_wins_over_a_hung_one(
    providers: list[Served], estate_registry: str, tmp_path: Path
) -> None:
    stopped, healthy = providers
    with dubbo_py.Application(
        "py-generic-governed-hedging", estate_registry, cache_path=tmp_path / "c.json"
    ) as app:
        users = _hedged_reference(app, _group(providers))
        _both(users, providers)
        ids = _ids_of(users, stopped, 6)
        # (On a busy machine a healthy call may outlast the delay and be hedged already.)
        before = _hedges(users)

        async def awaited() -> list[Any]:
            return [await users.invoke_result_async("getUser", LONG, [n]) for n in ids[3:]]

        with hung(stopped):
            results = [users.invoke_result("getUser", LONG, [n]) for n in ids[:3]]
            results += asyncio.run(awaited())
        # Each call went first to the hung provider; the hedge answered (retries=0: without
        # it, the call would have failed at its 3 s deadline).
        for done in results:
            assert [p.address for p in done.attempts] == [stopped.address, healthy.address]
            assert done.provider is not None and done.provider.address == healthy.address
        sent, won = _hedges(users)
        assert (sent - before[0], won - before[1]) == (6, 6)


def test_a_java_exception_is_an_answer_not_hedged_past(
    providers: list[Served], estate_registry: str, tmp_path: Path
) -> None:
    with dubbo_py.Application(
        "py-generic-governed-hedged-error", estate_registry, cache_path=tmp_path / "c.json"
    ) as app:
        users = _hedged_reference(app, _group(providers))
        _both(users, providers)
        assert users.invoke_result("getUser", LONG, [1]).provider is not None  # connections up
        # 0 is the id getUser refuses, and it hashes to one of the two providers: with each
        # one hung in turn, the other's exception is the answer of every call -- the hedge's
        # when the hung one was asked first (raised, not hedged past to the hung provider's
        # timeout: retries=0, so that would fail the call with DubboTimeoutError).
        for stopped, other in (providers, providers[::-1]):
            with hung(stopped):
                with pytest.raises(dubbo_py.JavaException) as blocking:
                    users.invoke("getUser", LONG, [0])
                with pytest.raises(dubbo_py.JavaException) as awaited:
                    asyncio.run(users.invoke_async("getUser", LONG, [0]))
            label = other.name
            for raised in (blocking, awaited):
                assert raised.value.message == f"no user 0 at {label}", raised.value
        counts = users.hedge_counts["getUser"]
        assert counts.won >= 2 and counts.sent >= counts.won


def test_hedging_switched_on_by_an_override_rule(
    providers: list[Served], estate_registry: str, tmp_path: Path
) -> None:
    stopped, healthy = providers
    group = _group(providers)
    with dubbo_py.Application(
        "py-generic-governed-ruled", estate_registry, cache_path=tmp_path / "c.json"
    ) as app:
        users = app.generic_reference(
            SERVICE,
            version="1.0.0",
            group=group,
            timeout=3.0,
            retries=0,
            loadbalance="consistenthash",
            outlier_failures=0,
        )
        _both(users, providers)
        ids = _ids_of(users, stopped, 2)
        key = f"{SERVICE}:1.0.0:{group}.configurators"
        rule = tmp_path / "hedging.yaml"
        rule.write_text(
            "configVersion: v3.0\nscope: service\n"
            f"key: {group}/{SERVICE}:1.0.0\nenabled: true\n"
            "configs:\n  - side: consumer\n    applications: [py-generic-governed-ruled]\n"
            "    parameters:\n      getUser.hedging: 'delay=0.1,max_extra_load=1.0'\n",
            encoding="utf-8",
        )
        assert key in dubbo_py_cli(estate_registry, "rules", "push", str(rule), "--key", key)
        try:
            deadline = time.monotonic() + 10
            while not any("getUser.hedging" in d.consumer_overrides for d in users.directories):
                assert time.monotonic() < deadline, "the hedging rule did not arrive"
                time.sleep(0.05)
            with hung(stopped):
                results = [users.invoke_result("getUser", LONG, [n]) for n in ids]
            for done in results:
                assert [p.address for p in done.attempts] == [stopped.address, healthy.address]
            assert users.hedge_counts["getUser"].won == 2
        finally:
            dubbo_py_cli(estate_registry, "rules", "delete", key)


def test_without_hedging_the_hung_providers_calls_fail(
    providers: list[Served], estate_registry: str, tmp_path: Path
) -> None:
    # Without hedging the hung provider's share of the calls fails (retries=0): the test above
    # fails without hedging.
    stopped, _healthy = providers
    with dubbo_py.Application(
        "py-generic-governed-plain", estate_registry, cache_path=tmp_path / "c.json"
    ) as app:
        users = app.generic_reference(
            SERVICE,
            version="1.0.0",
            group=_group(providers),
            timeout=0.5,
            retries=0,
            loadbalance="roundrobin",
            outlier_failures=0,
        )
        _both(users, providers)
        failed = 0
        with hung(stopped):
            for n in range(4):
                try:
                    users.invoke("getUser", LONG, [n + 1])
                except dubbo_py.JavaException:
                    raise
                except Exception:
                    failed += 1
        assert failed >= 1
        assert users.hedge_counts == {}
