"""Provider overload protection: the limits themselves, how options reach them, the server
interceptors on real in-process gRPC servers (blocking and asyncio), and how a consumer treats a
shed call (retried elsewhere even when not idempotent; never quarantined)."""

from __future__ import annotations

import asyncio
import threading
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.cluster.outlier import OutlierDetector
from dubbo_py.cluster.quarantine import Quarantine
from dubbo_py.cluster.strategies.failover import failover
from dubbo_py.cluster.support.outcome import SHED_KEY, is_shed
from dubbo_py.config.loader import parse_config
from dubbo_py.errors import ClusterError, ConfigError
from dubbo_py.invocation import Invocation
from dubbo_py.provider.limits import (
    ConcurrencyLimit,
    GradientLimit,
    RateLimit,
    guards_for,
    servicer_guards,
)
from dubbo_py.provider.server import ExportPlan, export
from dubbo_py.provider.service import options_of
from dubbo_py.url import URL
from tests.cluster.test_cluster_strategies import FakeRpcError, Providers, call, context, urls

# ------------------------------------------------------------------------------ the limits


def test_concurrency_limit_admits_up_to_its_limit_and_frees_on_release() -> None:
    limit = ConcurrencyLimit(2)
    assert limit.try_acquire() and limit.try_acquire()
    assert not limit.try_acquire()
    limit.release(0.1)
    assert limit.try_acquire()


def test_rate_limit_counts_in_fixed_windows_as_dubbo() -> None:
    now = [0.0]
    limit = RateLimit(3, 1.0, clock=lambda: now[0])
    assert [limit.try_acquire() for _ in range(4)] == [True, True, True, False]
    now[0] = 0.99
    assert not limit.try_acquire()
    now[0] = 1.0  # the window ended: a full allowance again
    assert [limit.try_acquire() for _ in range(4)] == [True, True, True, False]


def saturate(limit: GradientLimit, rtt: float, rounds: int) -> None:
    """Keep the limiter full, every call taking ``rtt`` seconds."""
    for _ in range(rounds):
        taken = 0
        while limit.try_acquire():
            taken += 1
        for _ in range(taken):
            limit.release(rtt)


def test_gradient_limit_grows_at_steady_latency_and_shrinks_when_latency_climbs() -> None:
    limit = GradientLimit(initial=10, minimum=2, maximum=100)
    saturate(limit, 0.010, 20)
    grown = limit.limit
    assert grown > 10
    saturate(limit, 0.100, 1)  # ten times slower: requests are queueing somewhere
    assert 2 <= limit.limit < grown / 2
    # a latency that stays becomes the new normal, and the limit grows back
    saturate(limit, 0.100, 40)
    assert limit.limit == 100


def test_gradient_limit_holds_still_when_it_is_not_what_holds_calls_back() -> None:
    limit = GradientLimit(initial=20)
    for _ in range(200):  # one call at a time, however slow, never moves it
        assert limit.try_acquire()
        limit.release(1.0)
    assert limit.limit == 20


# ------------------------------------------------------------------------------ options


def test_executes_per_method_falls_back_to_the_service_and_zero_means_none() -> None:
    guards = guards_for(
        "demo.Greeter",
        ("SayHello", "SayHelloStream", "Other"),
        {"executes": "5", "SayHello.executes": "2", "Other.executes": "0"},
    )
    assert set(guards) == {"/demo.Greeter/SayHello", "/demo.Greeter/SayHelloStream"}
    (hello,) = guards["/demo.Greeter/SayHello"].limits
    assert isinstance(hello, ConcurrencyLimit) and hello.limit == 2


def test_tps_is_shared_by_the_methods_of_a_service() -> None:
    guards = guards_for("s", ("A", "B"), {"tps": "1", "tps.interval": "1000"})
    (a,) = guards["/s/A"].limits
    (b,) = guards["/s/B"].limits
    assert a is b and isinstance(a, RateLimit) and a.interval == 1.0


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"executes": "many"}, "executes='many'"),
        ({"tps": "10", "tps.interval": "0"}, "tps.interval"),
        ({"flowcontrol": "magic"}, "flowcontrol='magic'"),
        ({"flowcontrol": "gradient", "flowcontrol.min": "9", "flowcontrol.max": "3"}, "min"),
    ],
)
def test_bad_limits_are_refused_naming_the_parameter(params: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError, match=named.replace(".", r"\.")):
        guards_for("s", ("A",), params)


def test_service_decorator_takes_limits_per_service_and_per_method() -> None:
    @dubbo_py.service(tps=100, tps_interval=1000, methods={"SayHello": {"executes": 2}})
    class Greeter(greeter_pb2_grpc.GreeterServicer):
        pass

    params = options_of(Greeter()).url_parameters()
    assert params["tps"] == "100" and params["tps.interval"] == "1000"
    assert params["SayHello.executes"] == "2"
    assert set(servicer_guards([Greeter()])) == {
        "/demo.Greeter/SayHello",
        "/demo.Greeter/SayHelloStream",
    }


def test_dubbo_yaml_takes_limits_and_names_a_bad_one(tmp_path: Path) -> None:
    text = """
application: {name: p}
services:
  demo.Greeter:
    tps: 50
    tps.interval: 1000
    flowcontrol: gradient
    methods: {SayHello: {executes: 2}}
"""
    config = parse_config(text, source="dubbo.yaml", base=tmp_path)
    params = config.services["demo.Greeter"].url_parameters()
    assert params["tps"] == "50" and params["SayHello.executes"] == "2"
    assert params["flowcontrol"] == "gradient"
    with pytest.raises(ConfigError, match=r"services\.demo\.Greeter.*executes='lots'"):
        parse_config(
            text.replace("executes: 2", "executes: lots"), source="dubbo.yaml", base=tmp_path
        )


# ------------------------------------------------------------------ on real gRPC servers


class Gate:
    """A Greeter whose SayHello waits until released (to hold calls in flight)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)


def blocking_greeter(gate: Gate) -> Any:
    @dubbo_py.service(executes=1)
    class Greeter(greeter_pb2_grpc.GreeterServicer):
        def SayHello(self, request: Any, context: Any) -> Any:
            gate.entered.release()
            gate.release.wait(10)
            return greeter_pb2.HelloReply(message="hi")

        def SayHelloStream(self, request: Any, context: Any) -> Any:
            gate.entered.release()
            gate.release.wait(10)
            yield greeter_pb2.HelloReply(message="a")
            yield greeter_pb2.HelloReply(message="b")

    return Greeter()


def test_blocking_server_sheds_over_executes_with_the_marker_then_admits_again() -> None:
    gate = Gate()
    server = export(ExportPlan((blocking_greeter(gate),), "p"), None)
    try:
        with grpc.insecure_channel(server.address) as channel:
            stub = greeter_pb2_grpc.GreeterStub(channel)
            with futures.ThreadPoolExecutor(2) as pool:
                first = pool.submit(stub.SayHello, greeter_pb2.HelloRequest(), timeout=10)
                assert gate.entered.acquire(timeout=10)
                with pytest.raises(grpc.RpcError) as shed:
                    stub.SayHello(greeter_pb2.HelloRequest(), timeout=10)
                # the stream's limit is its own (executes is per method)
                streamed = pool.submit(
                    lambda: list(stub.SayHelloStream(greeter_pb2.HelloRequest(), timeout=10))
                )
                assert gate.entered.acquire(timeout=10)
                gate.release.set()
                assert first.result().message == "hi"
                assert [r.message for r in streamed.result()] == ["a", "b"]
            error = shed.value
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "executes=1" in error.details() and "shed without running" in error.details()
            assert (SHED_KEY, "executes") in tuple(error.trailing_metadata())
            assert is_shed(error)
            # slots were given back: calls pass again
            assert stub.SayHello(greeter_pb2.HelloRequest(), timeout=10).message == "hi"
            assert len(list(stub.SayHelloStream(greeter_pb2.HelloRequest(), timeout=10))) == 2
    finally:
        server.stop(0)


def test_asyncio_server_sheds_over_executes_with_the_marker() -> None:
    async def scenario() -> None:
        release = asyncio.Event()
        entered = asyncio.Event()

        @dubbo_py.service(executes=1)
        class Greeter(greeter_pb2_grpc.GreeterServicer):
            async def SayHello(self, request: Any, context: Any) -> Any:  # type: ignore[override]
                entered.set()
                await release.wait()
                return greeter_pb2.HelloReply(message="hi")

        from dubbo_py.provider.server import export_async

        server = await export_async(ExportPlan((Greeter(),), "p"), None)
        try:
            async with grpc.aio.insecure_channel(server.address) as channel:
                stub = greeter_pb2_grpc.GreeterStub(channel)
                first = asyncio.ensure_future(stub.SayHello(greeter_pb2.HelloRequest()))
                await asyncio.wait_for(entered.wait(), 10)
                with pytest.raises(grpc.aio.AioRpcError) as shed:
                    await stub.SayHello(greeter_pb2.HelloRequest())
                release.set()
                assert (await first).message == "hi"
                assert (await stub.SayHello(greeter_pb2.HelloRequest())).message == "hi"
            assert shed.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert is_shed(shed.value)
        finally:
            await server.server.stop(0)

    asyncio.run(scenario())


# ------------------------------------------------------------------ the consumer's side


class Shed(FakeRpcError):
    """RESOURCE_EXHAUSTED as a provider sheds it (marked) or an application raises it."""

    def __init__(self, marked: bool) -> None:
        super().__init__(grpc.StatusCode.RESOURCE_EXHAUSTED, "over its limit")
        self._metadata = ((SHED_KEY, "executes"),) if marked else ()

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata


def test_a_shed_call_is_retried_elsewhere_without_quarantine_even_when_not_idempotent() -> None:
    fake = Providers()
    busy = urls(2)[0]

    def provider_call(provider: URL, invocation: Invocation, timeout: float | None) -> Any:
        if provider == busy:
            fake.calls.append(provider.address)
            raise Shed(marked=True)
        return fake(provider, invocation, timeout)

    quarantine = Quarantine(lambda url: False)
    outliers = OutlierDetector(quarantine, lambda: 2)
    ctx = context(fake, urls(2), quarantine=quarantine, outliers=outliers)
    ctx.call = provider_call
    outliers.failing[busy.address] = 2  # a shed call is an answer: it resets the run
    for _ in range(6):
        assert failover(ctx, call()).provider == "10.0.0.2:50051"
    assert fake.calls.count(busy.address) == 3
    assert len(quarantine) == 0 and not outliers.failing


def test_an_unmarked_resource_exhausted_may_have_run_and_is_not_retried() -> None:
    fake = Providers()

    def provider_call(provider: URL, invocation: Invocation, timeout: float | None) -> Any:
        fake.calls.append(provider.address)
        raise Shed(marked=False)

    ctx = context(fake, urls(2))
    ctx.call = provider_call
    with pytest.raises(ClusterError) as info:
        failover(ctx, call())
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert len(fake.calls) == 1
