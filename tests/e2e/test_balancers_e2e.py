"""Every load balancer against real provider processes, found through a real ZooKeeper.

The unit tests (``tests/cluster/test_loadbalance.py``) pin each formula on hand-made URLs;
these check that what reaches the providers follows it: weights written by the providers
themselves, call statistics recorded on the real gRPC path, and the consistent-hash ring rebuilt
when a provider joins. Providers start with ``--warmup 0`` so their full weight counts from the
start.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.app.application import Reference
from tests.e2e.conftest import wait_until
from tests.support.chi_square import chi_square
from tests.support.load import Load
from tests.support.processes import ProviderProcess
from tests.support.zookeeper import ZooKeeperServer

Providers = Callable[..., ProviderProcess]


@pytest.fixture
def registry_address(zookeeper: ZooKeeperServer) -> str:
    """Balancing does not depend on the registry: these run on ZooKeeper only."""
    return f"zookeeper://{zookeeper.address}/lb-{uuid.uuid4().hex[:8]}"


def start(providers: Providers, weight: int = 100, delay: float = 0.0) -> ProviderProcess:
    return providers("--warmup", "0", "--weight", str(weight), "--delay", str(delay))


def reference(app: dubbo_py.Application, count: int, loadbalance: str, **kw: Any) -> Reference:
    ref = app.reference_handle(
        greeter_pb2_grpc.GreeterStub, version="1.0.0", loadbalance=loadbalance, **kw
    )
    wait_until(lambda: len(ref.directory.providers) == count, 15, f"{count} providers")
    return ref


def call(ref: Reference, name: str = "x") -> str:
    return str(ref.stub.SayHello(greeter_pb2.HelloRequest(name=name), timeout=5).provider)


def test_random_follows_the_providers_weights(
    app: dubbo_py.Application, providers: Providers
) -> None:
    weighted = {start(providers, weight=w).address: w for w in (100, 200, 300)}
    ref = reference(app, 3, "random")
    n = 1200
    counts = Counter(call(ref) for _ in range(n))
    expected = {address: n * w / 600 for address, w in weighted.items()}
    assert set(counts) == set(weighted)
    # Unseeded (the consumer's own random source), so a stricter level than the unit tests'
    # 0.1 %: with two degrees of freedom P(X > x) = exp(-x / 2), so a correct balancer fails
    # this one in a million runs, while equal weights would score about 270.
    assert chi_square(counts, expected) < -2 * math.log(1e-6), (counts, expected)


def test_roundrobin_weights_5_1_1_give_the_smooth_sequence(
    app: dubbo_py.Application, providers: Providers
) -> None:
    heavy = start(providers, weight=5).address
    light = {start(providers, weight=1).address, start(providers, weight=1).address}
    ref = reference(app, 3, "roundrobin")
    sequence = [call(ref) for _ in range(21)]
    # Dubbo's smooth weighted round robin: A A B A C A A, three times over.
    first = sequence[:7]
    assert [a == heavy for a in first] == [True, True, False, True, False, True, True], sequence
    assert {first[2], first[4]} == light
    assert sequence == first * 3


def test_leastactive_steers_around_the_provider_with_calls_in_flight(
    app: dubbo_py.Application, providers: Providers
) -> None:
    slow = start(providers, delay=0.2).address
    start(providers)
    start(providers)
    ref = reference(app, 3, "leastactive")
    with Load(lambda: call(ref), threads=8, pause=0) as load:
        wait_until(lambda: len(load.samples) >= 1500, 30, "1500 calls")
    assert not load.errors(), load.errors()[:3]
    share = sum(s.provider == slow for s in load.samples) / len(load.samples)
    # Picked blindly, every provider would take a third of the calls whatever its speed; the
    # slow one is chosen only while it has no more calls in flight than the others.
    assert share < 0.1, (share, Counter(s.provider for s in load.samples))


@pytest.mark.parametrize("loadbalance", ["p2c", "adaptive"])
def test_two_choice_balancers_steer_away_from_a_slow_provider(
    app: dubbo_py.Application, providers: Providers, loadbalance: str
) -> None:
    slow = start(providers, delay=0.2).address
    start(providers)
    start(providers)
    ref = reference(app, 3, loadbalance)
    with Load(lambda: call(ref), threads=8, pause=0) as load:
        wait_until(lambda: len(load.samples) >= 1500, 30, "1500 calls")
    assert not load.errors(), load.errors()[:3]
    share = sum(s.provider == slow for s in load.samples) / len(load.samples)
    # Picked blindly, the slow provider would take a third of the calls: it loses every draw
    # against a provider with fewer calls in flight (p2c) or a lower latency x load (adaptive).
    assert share < 0.1, (share, Counter(s.provider for s in load.samples))


def test_shortestresponse_prefers_the_provider_that_answers_faster(
    app: dubbo_py.Application, providers: Providers
) -> None:
    slow = start(providers, delay=0.05).address
    start(providers)
    ref = reference(app, 2, "shortestresponse")
    counts = Counter(call(ref) for _ in range(300))
    # Equal weights and nothing measured yet: the first calls split evenly; once the slow one
    # answered, its average response time keeps it out.
    assert counts[slow] <= 10, counts


def test_consistenthash_keeps_each_key_on_one_provider_and_a_joiner_takes_about_a_third(
    app: dubbo_py.Application, providers: Providers
) -> None:
    start(providers)
    start(providers)
    ref = reference(app, 2, "consistenthash")
    keys = [f"user-{i}" for i in range(300)]
    before = {key: call(ref, key) for key in keys}
    assert all(call(ref, key) == before[key] for key in keys[:50])  # the same key, the same one
    assert len(set(before.values())) == 2

    joined = start(providers).address
    wait_until(lambda: len(ref.directory.providers) == 3, 15, "the third provider")
    after = {key: call(ref, key) for key in keys}
    moved = [key for key in keys if after[key] != before[key]]
    # Only keys that now belong to the new provider move; with 160 points per provider that is
    # about 1/3 of them.
    assert all(after[key] == joined for key in moved)
    assert 0.2 <= len(moved) / len(keys) <= 0.47, len(moved)


def test_asyncio_consumer_records_what_leastactive_reads(
    app: dubbo_py.Application, providers: Providers
) -> None:
    slow = start(providers, delay=0.2).address
    start(providers)
    start(providers)

    async def scenario() -> Counter[str]:
        try:
            stub = await app.reference_async(
                greeter_pb2_grpc.GreeterStub, version="1.0.0", loadbalance="leastactive"
            )
            directory = app.references[-1].directory
            await asyncio.to_thread(
                wait_until, lambda: len(directory.providers) == 3, 15, "3 providers"
            )
            counts: Counter[str] = Counter()

            async def worker() -> None:
                while sum(counts.values()) < 1000:
                    reply = await stub.SayHello(greeter_pb2.HelloRequest(name="a"), timeout=5)
                    counts[reply.provider] += 1

            await asyncio.gather(*(worker() for _ in range(8)))
            return counts
        finally:
            await app.aclose()

    counts = asyncio.run(scenario())
    assert counts[slow] / sum(counts.values()) < 0.1, counts
