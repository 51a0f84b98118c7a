"""Several registries, end to end (issue 26): two ZooKeeper servers as two zones, provider
processes in each, a consumer subscribed to both that keeps its calls in its own zone, fails
over to the other when its zone's providers die (kill -9) or its zone's ZooKeeper stops, and
comes back; ``preferred``, ``weight``, the ``registry_zone`` attachment and
``registry_zone_force``; a provider registered in ZooKeeper and etcd at once, found by a
consumer on etcd alone, which obeys a rule pushed to etcd."""

from __future__ import annotations

import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.config.model import RegistryConfig
from dubbo_py.consumer.reference import Reference
from dubbo_py.registry.registry import Registry
from dubbo_py.registry.store.etcd.store import EtcdStore
from dubbo_py.registry.store.zookeeper import ZooKeeperStore
from tests.e2e.conftest import wait_until
from tests.e2e.test_etcd_e2e import KEY, _KeyWatch, _rule
from tests.support.chi_square import CHI2_999, chi_square
from tests.support.etcd import EtcdServer
from tests.support.load import Load
from tests.support.processes import ProviderProcess
from tests.support.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.zookeeper, pytest.mark.e2e]

REQUEST = greeter_pb2.HelloRequest(name="zones")


@pytest.fixture(scope="module")
def zones() -> Iterator[tuple[ZooKeeperServer, ZooKeeperServer]]:
    """Two ZooKeeper servers: zone A's and zone B's."""
    with ZooKeeperServer() as a, ZooKeeperServer() as b:
        yield a, b


@pytest.fixture
def addresses(zones: tuple[ZooKeeperServer, ZooKeeperServer]) -> tuple[str, str]:
    """Both zones' registry addresses, under a chroot of this test's own."""
    chroot = f"/multi-{uuid.uuid4().hex[:8]}"
    return f"zookeeper://{zones[0].address}{chroot}", f"zookeeper://{zones[1].address}{chroot}"


@pytest.fixture
def start() -> Iterator[Callable[..., ProviderProcess]]:
    started: list[ProviderProcess] = []

    def run(registry: str, *args: str) -> ProviderProcess:
        proc = ProviderProcess(registry, *args).start()
        started.append(proc)
        return proc

    yield run
    for proc in started:
        proc.kill()


def two_zones(
    a: str, b: str, *, a_options: dict[str, object] | None = None, **b_options: object
) -> dict[str, RegistryConfig]:
    return {
        "a": RegistryConfig(a, zone="A", **(a_options or {})),  # type: ignore[arg-type]
        "b": RegistryConfig(b, zone="B", **b_options),  # type: ignore[arg-type]
    }


def reference(app: dubbo_py.Application, providers: int) -> Reference[greeter_pb2_grpc.GreeterStub]:
    ref = app.reference_handle(
        greeter_pb2_grpc.GreeterStub, version="1.0.0", retries=2, timeout=5.0
    )
    wait_until(
        lambda: sum(len(s.assembly.directory.providers) for s in ref.stacks) == providers,
        20,
        f"{providers} providers over both registries",
    )
    return ref


def test_calls_stay_in_zone_fail_over_on_kill9_and_return(
    addresses: tuple[str, str], start: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    a, b = addresses
    in_a = [start(a), start(a)]
    in_b = [start(b), start(b)]
    zone_of = {p.address: "A" for p in in_a} | {p.address: "B" for p in in_b}
    with dubbo_py.Application(
        "shop", two_zones(a, b), zone="A", cache_path=tmp_path / "c.json"
    ) as app:
        ref = reference(app, 4)
        # The consumer registered in both registries.
        for stack in ref.stacks:
            assert stack.registry is not None
            assert len(stack.registry.lookup("demo.Greeter", "consumers")) == 1
        with Load(lambda: ref.stub.SayHello(REQUEST).provider, threads=4) as load:
            wait_until(lambda: len(load.samples) > 200, 20, "calls to flow")
            steady = load.between(0)
            assert {zone_of[s.provider] for s in steady} == {"A"}

            killed = time.monotonic()
            for proc in in_a:
                proc.kill()
            wait_until(lambda: len(load.between(killed)) > 300, 30, "calls after the kill")
            after_kill = load.between(killed)
            assert not load.errors(), load.errors()[:3]
            assert {zone_of.get(s.provider) for s in after_kill[-100:]} == {"B"}

            restarted = [start(a), start(a)]
            zone_of |= {p.address: "A" for p in restarted}
            back = time.monotonic()
            wait_until(
                lambda: (
                    {zone_of.get(s.provider) for s in load.between(back)[-50:]} == {"A"}
                    and len(load.between(back)) > 50
                ),
                30,
                "calls back in zone A",
            )
        assert not load.errors(), load.errors()[:3]
        assert len(load.samples) > 600


def test_zone_a_zookeeper_stopped_under_load(
    zones: tuple[ZooKeeperServer, ZooKeeperServer],
    addresses: tuple[str, str],
    start: Callable[..., ProviderProcess],
    tmp_path: Path,
) -> None:
    a, b = addresses
    p_a, p_b = start(a), start(b)
    zone_of = {p_a.address: "A", p_b.address: "B"}
    try:
        with dubbo_py.Application(
            "shop", two_zones(a, b), zone="A", cache_path=tmp_path / "c.json"
        ) as app:
            ref = reference(app, 2)
            with Load(lambda: ref.stub.SayHello(REQUEST).provider, threads=4) as load:
                wait_until(lambda: len(load.samples) > 100, 20, "calls to flow")
                assert {zone_of[s.provider] for s in load.samples} == {"A"}
                stopped = time.monotonic()
                zones[0].stop()
                # A registry whose session is lost is skipped: calls go to zone B.
                wait_until(
                    lambda: (
                        {zone_of[s.provider] for s in load.between(stopped)[-50:]} == {"B"}
                        and len(load.between(stopped)) > 50
                    ),
                    20,
                    "calls moved to zone B",
                )
                zones[0].start()
                back = time.monotonic()
                wait_until(
                    lambda: (
                        {zone_of[s.provider] for s in load.between(back)[-50:]} == {"A"}
                        and len(load.between(back)) > 50
                    ),
                    30,
                    "calls back in zone A once its ZooKeeper is back",
                )
            assert not load.errors(), load.errors()[:3]
    finally:
        zones[0].start()


def test_preferred_weight_zone_attachment_and_force(
    addresses: tuple[str, str], start: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    a, b = addresses
    p_a, p_b = start(a), start(b)
    zone_of = {p_a.address: "A", p_b.address: "B"}

    def zones_of(
        ref: Reference[greeter_pb2_grpc.GreeterStub], calls: int, **kw: object
    ) -> Counter[str]:
        return Counter(zone_of[ref.stub.SayHello(REQUEST, **kw).provider] for _ in range(calls))  # type: ignore[arg-type]

    # preferred: every call to B, although the application is in zone A.
    with dubbo_py.Application(
        "shop", two_zones(a, b, preferred=True), zone="A", cache_path=tmp_path / "p.json"
    ) as app:
        assert zones_of(reference(app, 2), 100) == {"B": 100}

    # No zone, no preference: weights 100 and 300 split the calls 1:3.
    with dubbo_py.Application(
        "shop", two_zones(a, b, weight=300), cache_path=tmp_path / "w.json"
    ) as app:
        counts = zones_of(reference(app, 2), 800)
        assert chi_square(counts, {"A": 200, "B": 600}) < CHI2_999[1], counts

    with dubbo_py.Application(
        "shop", two_zones(a, b), zone="A", cache_path=tmp_path / "z.json"
    ) as app:
        ref = reference(app, 2)
        assert zones_of(ref, 50) == {"A": 50}
        # The call's zone wins over the application's.
        assert zones_of(ref, 50, metadata=[("registry_zone", "B")]) == {"B": 50}
        # A zone with no registry: not forced, the weighted pick among the available.
        assert set(zones_of(ref, 100, metadata=[("registry_zone", "C")])) == {"A", "B"}
        # Forced: the call fails rather than leave its zone.
        with pytest.raises(grpc.RpcError) as info:
            ref.stub.SayHello(
                REQUEST, metadata=[("registry_zone", "C"), ("registry_zone_force", "true")]
            )
        assert info.value.code() is grpc.StatusCode.UNAVAILABLE
        assert "zone 'C'" in info.value.details()
        forced_b = [("registry_zone", "B"), ("registry_zone_force", "true")]
        assert zones_of(ref, 20, metadata=forced_b) == {"B": 20}
        # Zone B's provider dies: a forced call fails, an unforced one goes to A.
        p_b.kill()
        with pytest.raises(grpc.RpcError) as info:
            for _ in range(3):  # the first finds it dead, the next see B unavailable
                ref.stub.SayHello(REQUEST, metadata=forced_b)
        assert info.value.code() is grpc.StatusCode.UNAVAILABLE
        assert zones_of(ref, 20, metadata=[("registry_zone", "B")]) == {"A": 20}


@pytest.mark.etcd
def test_provider_in_zookeeper_and_etcd_found_by_an_etcd_consumer(
    zones: tuple[ZooKeeperServer, ZooKeeperServer],
    etcd: EtcdServer,
    start: Callable[..., ProviderProcess],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    prefix = f"/multi-{uuid.uuid4().hex[:8]}"
    zk, ed = f"zookeeper://{zones[0].address}{prefix}", f"etcd://{etcd.address}{prefix}"
    p1, p2 = start(zk, "--registry", ed), start(zk, "--registry", ed)
    # Registered in both.
    zk_store = ZooKeeperStore(zones[0].address, prefix)
    assert zk_store.start()
    try:
        in_zk = {u.address for u in Registry(zk_store).lookup("demo.Greeter")}
        assert in_zk == {p1.address, p2.address}
    finally:
        zk_store.close()

    watch = _KeyWatch(etcd.address, f"{prefix}/dubbo/config/dubbo/{KEY}")
    operator = EtcdStore(etcd.address, prefix)
    assert operator.start()
    latencies = []
    try:
        with dubbo_py.Application("shop", ed, cache_path=tmp_path / "c.json") as app:
            ref = app.reference_handle(
                greeter_pb2_grpc.GreeterStub, version="1.0.0", loadbalance="roundrobin"
            )
            wait_until(lambda: len(ref.directory.providers) == 2, 20, "both providers on etcd")
            answered = {ref.stub.SayHello(REQUEST).provider for _ in range(10)}
            assert answered == {p1.address, p2.address}
            swaps: list[float] = []
            ref.directory.add_listener(lambda _chain: swaps.append(time.monotonic()))
            for round_ in range(3):
                target = (p2, p1)[round_ % 2]
                before, swapped = len(watch.seen), len(swaps)
                Registry(operator).put_config(KEY, _rule(target.port))
                wait_until(lambda b=before: len(watch.seen) > b, 10, "etcd's notification")
                wait_until(lambda n=swapped: len(swaps) > n, 2.0, "the rule applied")
                # From when etcd told a watcher of its own to when the consumer swapped in
                # the chain (the consumer may even be told first).
                latencies.append(max(0.0, swaps[swapped] - watch.seen[before]))
                answers = {ref.stub.SayHello(REQUEST).provider for _ in range(10)}
                assert answers == {target.address}
    finally:
        watch.close()
        operator.close()
    with capsys.disabled():
        print(
            f"\nrule pushed to etcd -> consumer applied: median "
            f"{statistics.median(latencies) * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms"
        )
    assert statistics.median(latencies) < 0.1, latencies


def test_asyncio_reference_over_two_embedded_registries(
    start: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    import asyncio

    a, b = f"sqlite://{tmp_path}/a.db", f"sqlite://{tmp_path}/b.db"
    p_a, p_b = start(a), start(b)
    zone_of = {p_a.address: "A", p_b.address: "B"}

    async def main() -> None:
        app = dubbo_py.Application("shop", two_zones(a, b), zone="B", cache_path=tmp_path / "c")
        try:
            ref = await app.reference_handle_async(greeter_pb2_grpc.GreeterStub, version="1.0.0")
            stub = ref.stub
            replies = [await stub.SayHello(REQUEST) for _ in range(20)]
            assert {zone_of[r.provider] for r in replies} == {"B"}
            in_a = await stub.SayHello(REQUEST, metadata=[("registry_zone", "A")])
            assert zone_of[in_a.provider] == "A"
            streamed = [r async for r in stub.SayHelloStream(greeter_pb2.HelloRequest(count=2))]
            assert {zone_of[r.provider] for r in streamed} == {"B"}
            p_b.kill()
            # Zone B's provider is gone: the call falls over to zone A, no error.
            replies = [await stub.SayHello(REQUEST) for _ in range(10)]
            assert {zone_of[r.provider] for r in replies} == {"A"}
        finally:
            await app.aclose()

    asyncio.run(main())
