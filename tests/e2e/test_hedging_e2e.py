"""Hedged requests against a real blackhole: two real provider processes on a real ZooKeeper,
4 threads of load with a 1 s deadline, and one provider's port dropped by iptables (every packet
to and from it, so its connection hangs without an error while its registry session lives on).

With ``hedging=True`` no call fails and the rate stays above half of what it was: the calls sent
to the dark provider are answered by the other one after the hedging delay, and the dark one is
ejected after a few lost races. Without hedging, the calls in flight on it run out their
deadline (the contrast that shows the fault bites). The 15 s version with its figures is
``bench/bench_hedging_blackhole.py``."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.cluster.hedging import HedgedCall
from tests.app.test_qos_port import get, sample
from tests.e2e.conftest import wait_until
from tests.support.load import Load
from tests.support.netfault import NetFaults, NetFaultsUnavailable
from tests.support.processes import ProviderProcess
from tests.support.zookeeper import ZooKeeperServer

THREADS = 4
TIMEOUT = 1.0
BLACKHOLE = 5.0  # seconds (15 s in the bench script)


@pytest.fixture
def faults() -> Iterator[NetFaults]:
    """iptables faults in a chain of their own, removed afterwards (skip without iptables)."""
    try:
        made = NetFaults()
    except NetFaultsUnavailable as exc:
        pytest.skip(str(exc))
    with made:
        yield made


@pytest.fixture
def zk_registry(zookeeper: ZooKeeperServer) -> str:
    return f"zookeeper://{zookeeper.address}/hedge-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def two_providers(zk_registry: str) -> Iterator[list[ProviderProcess]]:
    started = [ProviderProcess(zk_registry).start(), ProviderProcess(zk_registry).start()]
    yield started
    for proc in started:
        proc.kill()


def _blackholed_run(
    registry: str, tmp_path: Path, faults: NetFaults, victim: ProviderProcess, **options: Any
) -> tuple[Load, float, dubbo_py.Reference[Any]]:
    app = dubbo_py.Application("shop", registry, cache_path=tmp_path / "c.json")
    ref = app.reference_handle(
        greeter_pb2_grpc.GreeterStub,
        version="1.0.0",
        timeout=TIMEOUT,
        quarantine_interval=0.5,
        **options,
    )
    try:
        wait_until(lambda: len(ref.directory.providers) == 2, 15, "2 providers")

        def call() -> str:
            return str(ref.stub.SayHello(greeter_pb2.HelloRequest(name="x")).provider)

        with Load(call, THREADS) as load:
            time.sleep(2.0)
            cut = time.monotonic()
            with faults.blackhole(victim.port):
                time.sleep(BLACKHOLE)
            time.sleep(0.5)
    finally:
        app.close()
    return load, cut, ref


def test_with_hedging_a_blackholed_provider_costs_no_call(
    zk_registry: str, tmp_path: Path, faults: NetFaults, two_providers: list[ProviderProcess]
) -> None:
    victim = two_providers[0]
    load, cut, ref = _blackholed_run(zk_registry, tmp_path, faults, victim, hedging=True)
    failed = load.errors()
    before = len(load.between(cut - 1.5, cut)) / 1.5
    during = len(load.between(cut, cut + BLACKHOLE)) / BLACKHOLE
    counts = ref.assembly.hedge_counts["SayHello"]
    print(
        f"hedging on: failed {len(failed)}; calls/s before {before:.0f}, during {during:.0f}; "
        f"hedges sent {counts.sent}, won {counts.won}, refused {counts.refused}; "
        f"ejections {ref.outliers.ejections}"
    )
    assert failed == [], failed[:5]
    assert during > 0.5 * before, (before, during)
    assert counts.won >= 1  # the dark provider's calls were answered by the other one
    assert ref.outliers.ejections >= 1  # ejected after lost races, not after deadlines


def test_without_hedging_calls_in_flight_on_the_blackholed_provider_fail(
    zk_registry: str, tmp_path: Path, faults: NetFaults, two_providers: list[ProviderProcess]
) -> None:
    victim = two_providers[0]
    load, cut, ref = _blackholed_run(zk_registry, tmp_path, faults, victim)
    failed = load.errors()
    before = len(load.between(cut - 1.5, cut)) / 1.5
    during = len(load.between(cut, cut + BLACKHOLE)) / BLACKHOLE
    print(
        f"hedging off: failed {len(failed)}; calls/s before {before:.0f}, during {during:.0f}; "
        f"ejections {ref.outliers.ejections}"
    )
    # The blackhole is real: calls on the dark provider run into their deadline.
    assert failed, "no call failed: the blackhole did not bite"
    assert all("Deadline Exceeded" in s.error for s in failed), failed[:5]
    assert "SayHello" not in ref.assembly.hedge_counts


# ------------------------------------------------------------------ override, asyncio, metrics


def test_a_consumer_override_turns_hedging_on_and_off_and_metrics_count_it(
    tmp_path: Path,
) -> None:
    """A slow provider (every SayHello takes 1 s) and a fast one, round robin: once an override
    turns hedging on, the slow one's calls are answered by the fast one after the delay, and
    /metrics counts the hedges; once the override goes, the method's plain call is back (the
    stack without hedging, unwrapped)."""
    registry = f"sqlite://{tmp_path}/registry.db"
    slow = ProviderProcess(registry, "--delay", "1.0").start()
    fast = ProviderProcess(registry).start()
    try:
        with dubbo_py.Application(
            "shop", registry, cache_path=tmp_path / "c.json", qos_port=0
        ) as app:
            ref = app.reference_handle(
                greeter_pb2_grpc.GreeterStub,
                version="1.0.0",
                timeout=5.0,
                loadbalance="roundrobin",
            )
            wait_until(lambda: len(ref.directory.providers) == 2, 15, "2 providers")
            context = ref.contexts["SayHello"]
            plain = context.call
            assert not isinstance(plain, HedgedCall)  # hedging off: nothing around the call
            registry_ = app.registry
            assert registry_ is not None
            key = "shop.configurators"
            registry_.put_config(
                key,
                "configVersion: v3.0\nscope: application\nkey: shop\nconfigs:\n"
                "  - side: consumer\n    addresses: [0.0.0.0]\n"
                "    parameters: {SayHello.hedging: {delay: 0.05, max_extra_load: 1.0}}\n",
            )
            wait_until(lambda: isinstance(context.call, HedgedCall), 5, "hedging on")
            answered = {
                ref.stub.SayHello(greeter_pb2.HelloRequest(name=str(i))).provider for i in range(6)
            }
            assert answered == {fast.address}
            counts = ref.assembly.hedge_counts["SayHello"]
            assert counts.won >= 2
            assert app.qos is not None
            text = get(app.qos.port, "/metrics")[1]
            labels = {"interface": "demo.Greeter", "method": "SayHello"}
            assert sample(text, "dubbo_py_consumer_hedges_sent_total", **labels) >= counts.won
            assert sample(text, "dubbo_py_consumer_hedges_won_total", **labels) == counts.won
            registry_.delete_config(key)
            wait_until(lambda: not isinstance(context.call, HedgedCall), 5, "hedging off")
            assert "SayHello" not in ref.assembly.hedging
    finally:
        slow.kill()
        fast.kill()


def test_asyncio_unary_and_server_streaming_calls_hedge_past_a_blackhole(
    zk_registry: str, tmp_path: Path, faults: NetFaults, two_providers: list[ProviderProcess]
) -> None:
    victim, other = two_providers
    failed: list[str] = []
    answered: set[str] = set()

    async def run() -> dubbo_py.Reference[Any]:
        app = dubbo_py.Application("shop", zk_registry, cache_path=tmp_path / "c.json")
        ref = await app.reference_handle_async(
            greeter_pb2_grpc.GreeterStub,
            version="1.0.0",
            timeout=TIMEOUT,
            loadbalance="roundrobin",
            hedging={"delay": 0.05},
        )
        try:
            while len(ref.directory.providers) < 2:
                await asyncio.sleep(0.05)
            with faults.blackhole(victim.port):
                for i in range(20):
                    try:
                        if i % 2:
                            reply = await ref.stub.SayHello(greeter_pb2.HelloRequest(name="x"))
                            answered.add(reply.provider)
                        else:
                            stream = ref.stub.SayHelloStream(
                                greeter_pb2.HelloRequest(name="x", count=3)
                            )
                            replies = [r async for r in stream]
                            assert len(replies) == 3
                            answered.update(r.provider for r in replies)
                    except Exception as exc:
                        failed.append(repr(exc))
        finally:
            await app.aclose()
        return ref

    ref = asyncio.run(run())
    assert failed == []
    assert answered == {other.address}
    counts = ref.assembly.hedge_counts
    assert counts["SayHello"].won + counts["SayHelloStream"].won >= 1
