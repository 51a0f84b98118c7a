"""The consumer's observers as wrappers around a call and around each attempt: what they count,
for both flavours, with the call they wrap faked (one class each)."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from dubbo_py.invocation import Invocation
from dubbo_py.qos.consumer import (
    AsyncAttemptObserver,
    AsyncCallObserver,
    AttemptObserver,
    CallObserver,
    call_failure_reason,
)
from dubbo_py.qos.metrics import MethodKey, Metrics
from dubbo_py.url import URL

PROVIDER = URL.parse("tri://127.0.0.1:50051/demo.Greeter?version=1.0.0")


class Failure(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, tried: tuple[str, ...] | None = None) -> None:
        self._code = code
        if tried is not None:
            self.tried = tried

    def code(self) -> grpc.StatusCode:
        return self._code


def counts(metrics: Metrics) -> dict[str, object]:
    return metrics.method(MethodKey("consumer", "demo.Greeter", "SayHello", "", "1.0.0")).snapshot()


def test_calls_are_counted_by_outcome() -> None:
    metrics = Metrics("shop")
    observe = CallObserver(metrics, "demo.Greeter", "1.0.0", "")
    call = Invocation("demo.Greeter", "SayHello", None)
    assert observe(call, lambda invocation: "reply") == "reply"

    def timing_out(invocation: Invocation) -> Any:
        raise Failure(grpc.StatusCode.DEADLINE_EXCEEDED, ("a",))

    with pytest.raises(Failure):
        observe(call, timing_out)
    snap = counts(metrics)
    assert (snap["total"], snap["succeed"], snap["failed"]) == (2, 1, 1)
    assert snap["failed_by_reason"]["timeout"] == 1  # type: ignore[index]
    assert snap["processing"] == 0


def test_a_call_that_found_no_provider_is_service_unavailable() -> None:
    assert call_failure_reason(Failure(grpc.StatusCode.UNAVAILABLE, ())) == "service_unavailable"
    assert call_failure_reason(Failure(grpc.StatusCode.UNAVAILABLE, ("a",))) == "network"
    assert call_failure_reason(RuntimeError("no status")) == "unknown"


def test_without_metrics_the_call_is_passed_through() -> None:
    observe = CallObserver(None, "demo.Greeter", "1.0.0", "")
    call = Invocation("demo.Greeter", "SayHello", None)
    assert observe(call, lambda invocation: invocation) is call


def test_attempts_are_counted_per_method() -> None:
    attempts = AttemptObserver(Metrics("shop"), "demo.Greeter")
    call = Invocation("demo.Greeter", "SayHello", None)
    for _ in range(3):
        attempts(PROVIDER, call, 1.0, lambda provider, invocation, timeout: timeout)
    assert attempts.counts == {"SayHello": 3}


def test_asyncio_observers_count_the_same() -> None:
    metrics = Metrics("shop")
    observe = AsyncCallObserver(metrics, "demo.Greeter", "1.0.0", "")
    attempts = AsyncAttemptObserver(metrics, "demo.Greeter")
    call = Invocation("demo.Greeter", "SayHello", None)

    async def attempt(provider: URL, invocation: Invocation, timeout: float | None) -> str:
        return "reply"

    async def proceed(invocation: Invocation) -> Any:
        return await attempts(PROVIDER, invocation, None, attempt)

    async def failing(invocation: Invocation) -> Any:
        raise Failure(grpc.StatusCode.INVALID_ARGUMENT, ("a",))

    async def scenario() -> None:
        assert await observe(call, proceed) == "reply"
        with pytest.raises(Failure):
            await observe(call, failing)

    asyncio.run(scenario())
    snap = counts(metrics)
    assert (snap["total"], snap["succeed"]) == (2, 1)
    assert snap["failed_by_reason"]["business"] == 1  # type: ignore[index]
    assert attempts.counts == {"SayHello": 1}
