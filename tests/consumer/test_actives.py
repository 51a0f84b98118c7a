"""The consumer-side ``actives`` limit (Dubbo's ActiveLimitFilter): at most N calls of a method
in flight per provider; a call over it waits for a slot up to its timeout, then fails as shed
(retryable elsewhere)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from dubbo_py.cluster.method_settings import MethodSettings, SettingsTable
from dubbo_py.cluster.support.outcome import is_shed, retryable
from dubbo_py.consumer.actives import ActiveLimit, ActiveLimits, ActivesExceeded, AsyncActiveLimit
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

P1 = URL.parse("tri://127.0.0.1:5001/demo.Greeter")
P2 = URL.parse("tri://127.0.0.1:5002/demo.Greeter")
CALL = Invocation("demo.Greeter", "SayHello")


def _limits(actives: int) -> ActiveLimits:
    return ActiveLimits(SettingsTable({"SayHello": MethodSettings(actives=actives)}))


def test_without_a_limit_calls_go_straight_through() -> None:
    limits = _limits(0)
    assert ActiveLimit(limits)(P1, CALL, 1.0, lambda p, i, t: (p, t)) == (P1, 1.0)
    assert limits.in_flight(P1.address, "SayHello") == 0


def test_a_call_over_the_limit_waits_then_fails_as_shed() -> None:
    limits = _limits(1)
    limit = ActiveLimit(limits)
    holding, release = threading.Event(), threading.Event()

    def slow(_p: URL, _i: Invocation, _t: float | None) -> str:
        holding.set()
        release.wait()
        return "first"

    first = threading.Thread(target=lambda: limit(P1, CALL, None, slow))
    first.start()
    holding.wait()
    with pytest.raises(ActivesExceeded) as caught:
        limit(P1, CALL, 0.05, lambda *_: pytest.fail("must not be called"))
    # Nothing ran: shed, so strategies may try another provider (Dubbo's failover does).
    assert is_shed(caught.value) and retryable(caught.value, "SayHello", ())
    assert "actives=1" in caught.value.details()
    # Another provider has its own count.
    assert limit(P2, CALL, 0.05, lambda *_: "other") == "other"
    release.set()
    first.join()
    assert limits.in_flight(P1.address, "SayHello") == 0


def test_a_freed_slot_goes_to_the_waiting_call_with_what_is_left_of_its_timeout() -> None:
    limits = _limits(1)
    limit = ActiveLimit(limits)
    holding, release = threading.Event(), threading.Event()
    got: list[Any] = []

    def slow(_p: URL, _i: Invocation, _t: float | None) -> str:
        holding.set()
        release.wait()
        return "first"

    first = threading.Thread(target=lambda: limit(P1, CALL, None, slow))
    first.start()
    holding.wait()

    def second() -> None:
        got.append(limit(P1, CALL, 30.0, lambda _p, _i, t: t))

    waiting = threading.Thread(target=second)
    waiting.start()
    release.set()
    first.join()
    waiting.join()
    [left] = got
    assert left is not None and left < 30.0
    assert limits.in_flight(P1.address, "SayHello") == 0


def test_asyncio_calls_wait_without_blocking_the_loop_and_a_cancelled_wait_frees_nothing() -> None:
    async def scenario() -> None:
        limits = _limits(1)
        limit = AsyncActiveLimit(limits)
        running = 0
        most = 0
        gate = asyncio.Event()

        async def call(_p: URL, _i: Invocation, _t: float | None) -> int:
            nonlocal running, most
            running += 1
            most = max(most, running)
            await gate.wait()
            running -= 1
            return most

        tasks = [asyncio.create_task(limit(P1, CALL, 30.0, call)) for _ in range(3)]
        await asyncio.sleep(0)
        cancelled = asyncio.create_task(limit(P1, CALL, 30.0, call))
        await asyncio.sleep(0)
        cancelled.cancel()
        gate.set()
        assert await asyncio.gather(*tasks) == [1, 1, 1]
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert limits.in_flight(P1.address, "SayHello") == 0

    asyncio.run(scenario())


def test_a_reference_option_and_a_method_option_set_the_limit() -> None:
    from dubbo_py.config.model import ReferenceConfig
    from dubbo_py.config.options import MethodOptions
    from dubbo_py.consumer.settings import base_parameters, resolve_settings
    from dubbo_py.errors import ConfigError

    params = base_parameters(
        retries=None,
        timeout=None,
        forks=2,
        sticky=False,
        loadbalance="random",
        methods={"SayHelloStream": MethodOptions.of("SayHelloStream", {"actives": 3})},
        actives=5,
    )
    settings = resolve_settings(("SayHello", "SayHelloStream"), params)
    assert (settings["SayHello"].actives, settings["SayHelloStream"].actives) == (5, 3)
    with pytest.raises(ConfigError, match="actives"):
        ReferenceConfig(actives=-1)
