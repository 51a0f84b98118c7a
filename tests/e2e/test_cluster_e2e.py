"""Cluster fault tolerance end to end: real provider processes, a real registry (ZooKeeper and
the embedded store), the generated stub, and the real gRPC path.

Attempts are counted by wrapping the method's ``ClusterContext.call`` (the provider call every
strategy goes through); everything else is the production code path.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.app.application import Reference
from dubbo_py.cluster.quarantine import QuarantineEvent
from dubbo_py.cluster.strategies.failback import FailbackQueue
from dubbo_py.consumer.filters import ConsumerFilters
from dubbo_py.errors import ClusterError
from dubbo_py.invocation import RETRIES_ATTACHMENT, Invocation
from dubbo_py.url import URL
from tests.e2e.conftest import wait_until
from tests.support.load import Load
from tests.support.processes import ProviderProcess

SERVICE = "demo.Greeter"
SETTLE = 0.1  # overrides: every call that starts 100 ms after a push obeys it
QUARANTINE_BOUND = 1.0  # a killed provider is quarantined within 1 s
PROBE_INTERVAL = 0.5
# A probe round starts at most one interval after the provider is back; the probe itself (a fresh
# channel, a connect and one health RPC, on a loaded 2-core machine) is allowed this on top.
PROBE_ALLOWANCE = 0.3


def hello(name: str = "x") -> greeter_pb2.HelloRequest:
    return greeter_pb2.HelloRequest(name=name)


def count_attempts(ref: Reference, method: str = "SayHello") -> list[str]:
    """Wrap the method's provider call; returns the list every attempt's address is appended to."""
    context = ref.contexts[method]
    inner = context.call
    attempts: list[str] = []
    lock = threading.Lock()

    def counted(provider: URL, invocation: Invocation, timeout: float | None) -> Any:
        with lock:
            attempts.append(provider.address)
        return inner(provider, invocation, timeout)

    context.call = counted
    return attempts


def dead_port() -> int:
    """A local port nothing listens on (bound and released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def application(registry_address: str, tmp_path: Path) -> Iterator[dubbo_py.Application]:
    with dubbo_py.Application("shop", registry_address, cache_path=tmp_path / "c.json") as app:
        yield app


def reference(app: dubbo_py.Application, count: int, **options: Any) -> Reference:
    options.setdefault("version", "1.0.0")
    options.setdefault("loadbalance", "roundrobin")
    options.setdefault("timeout", 5.0)
    ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, **options)
    wait_until(lambda: len(ref.directory.providers) == count, 15, f"{count} providers")
    return ref


# ------------------------------------------------------------------------------ strategies


def test_strategies_against_live_and_killed_providers(
    registry_address: str, providers: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    p1, p2, p3 = providers(), providers(), providers()
    everyone = {p1.address, p2.address, p3.address}
    with application(registry_address, tmp_path) as app:
        failover = reference(app, 3)
        failover_attempts = count_attempts(failover)
        failsafe = reference(app, 3, cluster="failsafe")
        forking = reference(app, 3, cluster="forking", forks=2)
        forking_attempts = count_attempts(forking)
        broadcast = reference(app, 3, cluster="broadcast")
        broadcast_attempts = count_attempts(broadcast)
        sticky = reference(app, 3, sticky=True)
        failfast = reference(app, 3, cluster="failfast")

        # failover spreads; an application error is the provider's answer: one attempt, as is.
        assert {failover.stub.SayHello(hello()).provider for _ in range(6)} == everyone
        failover_attempts.clear()
        with pytest.raises(grpc.RpcError) as info:
            failover.stub.SayHello(hello("fail"))
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert not isinstance(info.value, ClusterError) and len(failover_attempts) == 1
        # failsafe swallows it: an empty reply.
        assert failsafe.stub.SayHello(hello("fail")) == greeter_pb2.HelloReply()
        # forking calls two distinct providers per call; broadcast calls all three.
        for _ in range(3):
            before = len(forking_attempts)
            assert forking.stub.SayHello(hello()).provider in everyone
            # the slower fork may still be starting when the first answer is back
            wait_until(lambda n=before + 2: len(forking_attempts) >= n, 5, "both forks")
            assert len(set(forking_attempts[before:])) == 2
        assert len(forking_attempts) == 6
        broadcast.stub.SayHello(hello())
        assert sorted(broadcast_attempts) == sorted(everyone)
        # sticky: one provider while it works.
        (held,) = {sticky.stub.SayHello(hello()).provider for _ in range(10)}

        victim = next(p for p in (p1, p2, p3) if p.address == held)
        victim.kill()  # still registered for a while: a dead provider in the list

        # sticky moves to another provider and stays there; failover never fails.
        moved = [sticky.stub.SayHello(hello()).provider for _ in range(10)]
        assert held not in moved and len(set(moved)) == 1
        assert all(failover.stub.SayHello(hello()).provider != held for _ in range(12))
        # failfast: the call that meets the dead provider fails, naming it; the quarantine then
        # keeps the others from meeting it.
        outcomes = []
        for _ in range(9):
            try:
                outcomes.append(failfast.stub.SayHello(hello()).provider)
            except ClusterError as error:
                outcomes.append(error)
        errors = [o for o in outcomes if isinstance(o, ClusterError)]
        assert len(errors) == 1, outcomes
        assert errors[0].tried == (held,) and errors[0].code() == grpc.StatusCode.UNAVAILABLE
        assert f"{SERVICE}.SayHello" in errors[0].details()
        # broadcast fails when any provider failed and names it.
        with pytest.raises(ClusterError) as bcast:
            broadcast.stub.SayHello(hello())
        assert held in bcast.value.details() and set(bcast.value.tried) == everyone
        # forking survives it.
        assert all(forking.stub.SayHello(hello()).provider != held for _ in range(6))


def test_failover_outage_error_and_per_call_retries(
    registry_address: str, providers: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    started = [providers(), providers(), providers()]
    with application(registry_address, tmp_path) as app:
        ref = reference(app, 3, timeout=2.0)
        attempts = count_attempts(ref)
        for p in started:
            p.kill()
        with pytest.raises(ClusterError) as info:
            ref.stub.SayHello(hello())
        # Three attempts (retries=2), three different providers, all named.
        assert sorted(attempts) == sorted(p.address for p in started)
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE
        for part in (f"{SERVICE}.SayHello", *attempts):
            assert part in info.value.details()
        attempts.clear()
        with pytest.raises(ClusterError) as once:
            ref.stub.SayHello(hello(), metadata=[(RETRIES_ATTACHMENT, "0")])
        assert len(attempts) == 1 and once.value.tried == tuple(attempts)


def test_failback_retries_in_the_background_until_the_provider_is_back(
    registry_address: str, providers: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    p1 = providers()
    queue = FailbackQueue(period=0.3, max_attempts=100)
    with application(registry_address, tmp_path) as app:
        ref = reference(app, 1, cluster="failback", failback=queue, quarantine_interval=0.2)
        attempts = count_attempts(ref)
        p1.kill()
        with pytest.raises(ClusterError):
            ref.stub.SayHello(hello())
        assert len(queue) == 1
        providers(port=p1.port)
        wait_until(lambda: queue.succeeded == 1, 20, "the background retry to succeed")
        assert queue.abandoned == 0 and len(attempts) >= 2


# ------------------------------------------------------------------------------ retry budget


def test_total_outage_never_multiplies_load(registry_address: str, tmp_path: Path) -> None:
    with application(registry_address, tmp_path) as app:
        assert app.registry is not None
        for _ in range(3):  # three providers on ports nothing listens on
            app.registry.register(
                URL.parse(
                    f"tri://127.0.0.1:{dead_port()}/{SERVICE}?interface={SERVICE}"
                    "&version=1.0.0&side=provider&methods=SayHello,SayHelloStream"
                )
            )
        ref = reference(app, 3, timeout=1.0)
        attempts = count_attempts(ref)
        requests = [0]
        lock = threading.Lock()

        def call() -> str:
            with lock:
                requests[0] += 1
            return str(ref.stub.SayHello(hello()).provider)

        marks: list[tuple[int, int]] = []
        with Load(call, threads=4, pause=0) as load:
            for _ in range(4):
                time.sleep(0.6)
                with lock:
                    marks.append((requests[0], len(attempts)))
        total_requests, total_attempts = requests[0], len(attempts)
        assert len(load.errors()) == len(load.samples) == total_requests  # nothing answered
        reserve = ref.budget.reserve
        assert total_requests > 5 * reserve, "too few requests to say anything"
        # Over the whole run: 20 % of the requests plus the reserve (without a budget: 3x).
        assert total_requests <= total_attempts <= 1.2 * total_requests + reserve
        # Once the reserve is spent, attempts grow by at most 1.2x the requests.
        (r0, a0), (r1, a1) = marks[1], marks[-1]
        assert r1 - r0 > reserve
        assert a1 - a0 <= 1.2 * (r1 - r0) + 2, (marks, reserve)


# ------------------------------------------------------------------------------ quarantine


def test_kill9_is_quarantined_within_1s_and_restart_is_revived_within_one_probe(
    registry_address: str, providers: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    p1, p2, p3 = providers(), providers(), providers()
    with application(registry_address, tmp_path) as app:
        ref = reference(app, 3, quarantine_interval=PROBE_INTERVAL)
        events: list[tuple[float, QuarantineEvent]] = []
        ref.quarantine.on_change(lambda e: events.append((time.time(), e)))
        served_at: dict[str, list[float]] = {}
        lock = threading.Lock()

        def call() -> str:
            provider = str(ref.stub.SayHello(hello()).provider)
            with lock:
                served_at.setdefault(provider, []).append(time.time())
            return provider

        with Load(call, threads=8) as load:
            time.sleep(0.5)
            killed_at = time.time()
            p2.kill()
            wait_until(
                lambda: any(e.address == p2.address for e in ref.quarantine.entries()),
                5,
                "the killed provider in quarantine",
            )
            (entry,) = ref.quarantine.entries()
            time.sleep(0.5)
            restarted = providers(port=p2.port)
            ready_at = time.time()
            wait_until(
                lambda: any(t >= ready_at for t in served_at.get(p2.address, ())),
                10,
                "the restarted provider serving",
            )
            time.sleep(0.3)
        assert not load.errors(), load.errors()[:3]
        assert entry.since - killed_at <= QUARANTINE_BOUND, entry
        assert restarted.address == p2.address
        assert not ref.quarantine.entries(), (events, ready_at)
        revived = [t for t, e in events if e.kind in ("revived", "removed") and t >= ready_at]
        first_served = min(t for t in served_at[p2.address] if t >= ready_at)
        bound = PROBE_INTERVAL + PROBE_ALLOWANCE
        assert (revived or [ready_at])[0] - ready_at <= bound, (events, ready_at)
        assert first_served - ready_at <= bound, (first_served - ready_at, events)
        assert {p1.address, p3.address} <= set(served_at)


# ------------------------------------------------------------------------------ mock


class GreeterMock:
    """The mock class ``tests.e2e.test_cluster_e2e:GreeterMock``."""

    def SayHello(self, request: greeter_pb2.HelloRequest) -> greeter_pb2.HelloReply:
        return greeter_pb2.HelloReply(message=f"degraded {request.name}", shard=7)


def test_mock(
    registry_address: str, providers: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    providers()
    dead = providers("--version", "2.0.0")
    dead.kill()
    with application(registry_address, tmp_path) as app:
        forced = reference(app, 1, mock='force:return {"message": "busy", "shard": 3}')
        forced_attempts = count_attempts(forced)
        assert forced.stub.SayHello(hello()) == greeter_pb2.HelloReply(message="busy", shard=3)
        assert not forced_attempts  # never calls a provider

        fail = reference(app, 1, mock='fail:return {"message": "later"}')
        assert fail.stub.SayHello(hello("ada")).message == "Hello, ada!"
        with pytest.raises(grpc.RpcError) as info:  # an application error is not mocked
            fail.stub.SayHello(hello("fail"))
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT

        # Version 2.0.0's only provider is dead: a transport failure, mocked.
        on_dead = reference(app, 1, version="2.0.0", mock='fail:return {"message": "later"}')
        assert on_dead.stub.SayHello(hello()) == greeter_pb2.HelloReply(message="later")
        classy = reference(  # per method: the mock class has only SayHello
            app,
            1,
            version="2.0.0",
            methods={"SayHello": {"mock": "fail:tests.e2e.test_cluster_e2e:GreeterMock"}},
        )
        assert classy.stub.SayHello(hello("bo")) == greeter_pb2.HelloReply(
            message="degraded bo", shard=7
        )
        thrower = reference(
            app, 1, version="2.0.0", methods={"SayHello": {"mock": "throw busy, retry later"}}
        )
        with pytest.raises(ClusterError, match="busy, retry later") as thrown:
            thrower.stub.SayHello(hello())
        assert thrown.value.code() == grpc.StatusCode.UNAVAILABLE
        force_throw = reference(app, 1, mock="force:throw maintenance")
        force_attempts = count_attempts(force_throw)
        with pytest.raises(ClusterError, match="maintenance"):
            force_throw.stub.SayHello(hello())
        assert not force_attempts


def test_failsafe_and_mocks_answer_a_streaming_method_with_a_stream(
    registry_address: str, providers: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    dead = providers("--version", "2.0.0")
    dead.kill()  # registered, not answering: every call fails at the transport level
    streamed = greeter_pb2.HelloRequest(name="s", count=3)
    with application(registry_address, tmp_path) as app:
        failsafe = reference(app, 1, version="2.0.0", cluster="failsafe")
        assert list(failsafe.stub.SayHelloStream(streamed)) == []  # nothing, not an error
        fail = reference(app, 1, version="2.0.0", mock='fail:return {"message": "later"}')
        assert list(fail.stub.SayHelloStream(streamed)) == [greeter_pb2.HelloReply(message="later")]
        forced = reference(app, 1, version="2.0.0", mock='force:return {"message": "busy"}')
        assert [r.message for r in forced.stub.SayHelloStream(streamed)] == ["busy"]
        # Unary methods of the same references answer with the message itself.
        assert failsafe.stub.SayHello(hello()) == greeter_pb2.HelloReply()
        assert fail.stub.SayHello(hello()).message == "later"


# ------------------------------------------------------------------------------ override rules


def _override_url(p: ProviderProcess, **params: str) -> URL:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return URL.parse(
        f"override://{p.address}/{SERVICE}?category=configurators&dynamic=false&{query}"
    )


@pytest.mark.parametrize("carrier", ["url-weight-0", "yaml-disabled"])
def test_override_drains_a_provider_within_100ms_without_failed_calls(
    carrier: str,
    registry_address: str,
    providers: Callable[..., ProviderProcess],
    tmp_path: Path,
) -> None:
    p1, p2 = providers(), providers()
    with application(registry_address, tmp_path) as app:
        ref = reference(app, 2)
        registry = app.registry
        assert registry is not None
        key = f"{SERVICE}:1.0.0:.configurators"
        rule = _override_url(p1, weight="0")
        with Load(lambda: str(ref.stub.SayHello(hello()).provider), threads=4) as load:
            time.sleep(0.5)
            pushed = time.monotonic()
            if carrier == "url-weight-0":
                registry.register(rule)
            else:
                registry.put_config(
                    key,
                    "configVersion: v3.0\nscope: service\nkey: demo.Greeter\nconfigs:\n"
                    f"  - addresses: ['{p1.address}']\n    side: provider\n"
                    "    parameters: {disabled: true}\n",
                )
            time.sleep(1.0)
            deleted = time.monotonic()
            if carrier == "url-weight-0":
                registry.unregister(rule)
            else:
                registry.delete_config(key)
            time.sleep(1.0)
        assert not load.errors(), load.errors()[:3]
        before = {s.provider for s in load.between(0, pushed)}
        during = load.between(pushed + SETTLE, deleted)
        after = {s.provider for s in load.between(deleted + SETTLE)}
        assert before == after == {p1.address, p2.address}
        assert during and {s.provider for s in during} == {p2.address}


def test_consumer_side_override_changes_timeout_and_loadbalance(
    registry_address: str, providers: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    providers(), providers()
    with application(registry_address, tmp_path) as app:
        # Record the deadline each attempt hands to gRPC (what an override must change).
        deadlines: list[float | None] = []

        def recording(
            provider: URL, invocation: Invocation, timeout: float | None, proceed: Any
        ) -> Any:
            deadlines.append(timeout)
            return proceed(provider, invocation, timeout)

        filters = ConsumerFilters(attempts=(recording,))
        ref = reference(app, 2, loadbalance="random", retries=2, filters=filters)
        context = ref.contexts["SayHello"]
        registry = app.registry
        assert registry is not None
        key = "shop.configurators"  # application scope: this consumer application
        registry.put_config(
            key,
            "configVersion: v3.0\nscope: application\nkey: shop\nconfigs:\n"
            "  - side: consumer\n    addresses: [0.0.0.0]\n"
            "    parameters: {timeout: 300, loadbalance: roundrobin, SayHello.retries: 0}\n",
        )
        wait_until(lambda: context.settings["SayHello"].retries == 0, 5, "the consumer override")
        assert getattr(context.balancer, "name", "") == "roundrobin"
        assert ref.stub.SayHello(hello("ada")).message == "Hello, ada!"
        assert deadlines[-1] == pytest.approx(0.3)  # timeout is in ms, as in Dubbo
        registry.delete_config(key)
        wait_until(lambda: context.settings["SayHello"].retries == 2, 5, "the override to go")
        assert ref.stub.SayHello(hello("back")).message == "Hello, back!"
        assert deadlines[-1] == pytest.approx(5.0)
        assert getattr(context.balancer, "name", "") == "random"
