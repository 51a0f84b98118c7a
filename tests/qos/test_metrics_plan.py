"""Consumer metrics on the compiled fast path: a consumer with metrics keeps the call plan of
plain failover calls, and what it records there is what the metrics filters record when the
plan is off -- the same calls (successes, a business error, a timeout, a retried failover)
give the same counters. Both flavours, blocking and asyncio. Real gRPC providers on loopback,
direct ``tri://`` addresses."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import dubbo_py
from dubbo_py.consumer.filters import ConsumerFilters
from dubbo_py.invocation import Invocation
from dubbo_py.qos.metrics import MethodKey, MetricsCollector


class Flaky:
    """Shared by the providers: how many of the coming calls answer UNAVAILABLE (a provider
    that cannot take the call, which failover retries on another)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.refuse = 0

    def take(self) -> bool:
        with self.lock:
            if self.refuse:
                self.refuse -= 1
                return True
            return False


@dubbo_py.service(version="1.0.0")
class Greeter(greeter_pb2_grpc.GreeterServicer):
    def __init__(self, flaky: Flaky) -> None:
        self.flaky = flaky

    def SayHello(self, request: Any, context: Any) -> Any:
        if request.name == "bad":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no such name")
        if request.name == "slow":
            time.sleep(0.5)
        if self.flaky.take():
            context.abort(grpc.StatusCode.UNAVAILABLE, "not now")
        return greeter_pb2.HelloReply(message=f"Hello, {request.name}!")


@pytest.fixture(scope="module")
def providers() -> Iterator[tuple[list[str], Flaky]]:
    """Two Greeter providers on loopback, sharing one :class:`Flaky`."""
    flaky = Flaky()
    app = dubbo_py.Application("plan-metrics-provider", "tri://127.0.0.1:1")
    addresses = [app.start(Greeter(flaky), port=0, host="127.0.0.1").address for _ in range(2)]
    yield addresses, flaky
    app.close()


def passthrough(invocation: Invocation, proceed: Any) -> Any:
    """A call filter without a plan hook: its methods take the filter stack, never a plan."""
    return proceed(invocation)


async def passthrough_async(invocation: Invocation, proceed: Any) -> Any:
    """:func:`passthrough` for the asyncio flavour."""
    return await proceed(invocation)


FLAVOURS = ("blocking", "asyncio")


class Consumer:
    """A consumer application with metrics on, and its stub of the ``flavour`` (an asyncio
    stub's calls run on a loop of the consumer's own); ``planned`` False adds a filter without
    a plan hook, so every call goes through the filters."""

    def __init__(self, addresses: list[str], planned: bool, flavour: str = "blocking") -> None:
        if planned:
            filters = ConsumerFilters()
        elif flavour == "asyncio":
            filters = ConsumerFilters(async_calls=(passthrough_async,))
        else:
            filters = ConsumerFilters(calls=(passthrough,))
        self.app = dubbo_py.Application(
            "plan-metrics-shop", "tri://" + ",".join(addresses), metrics=True, filters=filters
        )
        self.loop = asyncio.new_event_loop() if flavour == "asyncio" else None
        if self.loop is None:
            self.stub = self.app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
        else:
            self.stub = self.loop.run_until_complete(
                self.app.reference_async(greeter_pb2_grpc.GreeterStub, version="1.0.0")
            )
        call = self.stub.SayHello
        #: Calls that went through the method's stack (the strategy inside its filters).
        self.stacked = 0
        invoke = call._invoke

        def counted(invocation: Invocation) -> Any:
            self.stacked += 1
            return invoke(invocation)

        call._invoke = counted

    def call(self, name: str, timeout: float | None = None) -> grpc.StatusCode:
        try:
            made = self.stub.SayHello(greeter_pb2.HelloRequest(name=name), timeout=timeout)
            if self.loop is not None:
                self.loop.run_until_complete(made)
        except grpc.RpcError as error:
            return error.code()
        return grpc.StatusCode.OK

    def recorded(self) -> dict[str, Any]:
        """The consumer's metrics, less what depends on timing (latencies): the counters, the
        processing gauge, how many latencies and histogram observations were recorded."""
        metrics = self.app.metrics
        assert metrics is not None
        stats = metrics.method(MethodKey("consumer", "demo.Greeter", "SayHello", "", "1.0.0"))
        snap = stats.snapshot()
        registry = CollectorRegistry()
        registry.register(MetricsCollector(metrics))
        samples = {}
        for family in text_string_to_metric_families(generate_latest(registry).decode()):
            for sample in family.samples:
                timed = "rt_milliseconds" in sample.name and not sample.name.endswith("_count")
                if (
                    sample.name.startswith(("dubbo_consumer_", "dubbo_py_consumer_"))
                    and not sample.name.endswith("_created")
                    and not timed
                ):
                    samples[sample.name] = sample.value
        return {
            "snapshot": {k: snap[k] for k in ("total", "succeed", "failed", "failed_by_reason")},
            "processing": snap["processing"],
            "latencies": len(stats.recent),
            "observations": sum(stats.buckets),
            "samples": samples,
        }

    def close(self) -> None:
        if self.loop is None:
            self.app.close()
            return
        self.loop.run_until_complete(self.app.aclose())
        self.loop.close()


def run(consumer: Consumer, flaky: Flaky) -> list[grpc.StatusCode]:
    """The same calls for either consumer; the retried failover last (it quarantines the
    provider that refused, after which no call is plain)."""
    codes = [consumer.call(f"n{i}") for i in range(5)]
    codes.append(consumer.call("bad"))
    codes.append(consumer.call("slow", timeout=0.1))
    codes.append(consumer.call("n5"))
    flaky.refuse = 1
    codes.append(consumer.call("n6"))
    assert flaky.refuse == 0
    return codes


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_metrics_consumer_records_the_same_with_the_plan_on_and_off(
    providers: tuple[list[str], Flaky], flavour: str
) -> None:
    addresses, flaky = providers
    seen = {}
    for planned in (True, False):
        consumer = Consumer(addresses, planned, flavour)
        try:
            codes = run(consumer, flaky)
            time.sleep(0.5)  # the slow call ends on the provider before the next consumer's
            seen[planned] = consumer.recorded()
            stacked = consumer.stacked
            plan = consumer.stub.SayHello._plan
        finally:
            consumer.close()
        ok, bad = grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT
        late = grpc.StatusCode.DEADLINE_EXCEEDED
        assert codes == [ok] * 5 + [bad, late, ok, ok]
        if planned:
            # Only the first call, which compiled the plan, went through the stack; the retried
            # call's failover went on inside the plan's hooks.
            assert plan is not None and plan.observers is not None
            assert stacked == 1
        else:
            assert plan is None and stacked == len(codes)
    assert seen[True] == seen[False]
    recorded = seen[True]
    assert recorded["snapshot"] == {
        "total": 9,
        "succeed": 7,
        "failed": 2,
        "failed_by_reason": {
            "timeout": 1,
            "limit": 0,
            "network": 0,
            "service_unavailable": 0,
            "business": 1,
            "codec": 0,
            "unknown": 0,
        },
    }
    assert recorded["processing"] == 0
    assert (recorded["latencies"], recorded["observations"]) == (9, 9)
    assert recorded["samples"]["dubbo_py_consumer_attempts_total"] == 10
    assert recorded["samples"]["dubbo_py_consumer_retries_total"] == 1


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_metrics_keep_the_call_plan(providers: tuple[list[str], Flaky], flavour: str) -> None:
    addresses, _ = providers
    consumer = Consumer(addresses, planned=True, flavour=flavour)
    try:
        for i in range(20):
            assert consumer.call(f"n{i}") is grpc.StatusCode.OK
        plan = consumer.stub.SayHello._plan
        recorded = consumer.recorded()
    finally:
        consumer.close()
    assert plan is not None, "metrics turned the compiled call plan off"
    assert consumer.stacked == 1  # the first call, which compiled the plan
    assert recorded["snapshot"]["succeed"] == 20
    assert recorded["samples"]["dubbo_py_consumer_attempts_total"] == 20


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_traced_call_takes_the_filters(
    providers: tuple[list[str], Flaky], monkeypatch: pytest.MonkeyPatch, flavour: str
) -> None:
    addresses, _ = providers
    consumer = Consumer(addresses, planned=True, flavour=flavour)
    try:
        for i in range(3):
            consumer.call(f"n{i}")
        assert consumer.stacked == 1
        # A tracer provider set up: the CLIENT span travels in the call's metadata, which only
        # the filters add, so the plan's call hook declines.
        monkeypatch.setattr("dubbo_py.qos.tracing._on", True)
        for i in range(3):
            consumer.call(f"n{i}")
        assert consumer.stacked == 4
        assert consumer.recorded()["snapshot"]["succeed"] == 6
    finally:
        consumer.close()
