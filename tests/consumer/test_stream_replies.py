"""How a stub hands back a server-streaming call's replies without a frame of its own per
reply (issue 36): the asyncio stream opens when its first reply is awaited, is counted in
flight until then, and is over once it failed or was closed, as the async generator it
replaces was; the read-ahead first reply is chained to the rest in both flavours."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from types import SimpleNamespace
from typing import Any

import grpc
import pytest

from dubbo_py.consumer.channel import _OpeningStream
from dubbo_py.consumer.in_flight import CallsInFlight
from dubbo_py.consumer.invoker import _primed, _primed_async
from dubbo_py.invocation import Invocation


async def _replies(items: list[Any], fail_after: int | None = None) -> AsyncIterator[Any]:
    for i, item in enumerate(items):
        if fail_after is not None and i == fail_after:
            raise grpc.RpcError("broken")
        yield item


def _site(invoke: Any) -> Any:
    return SimpleNamespace(
        _in_flight=CallsInFlight(),
        _service="demo.Greeter",
        _method="SayHelloStream",
        _invoke=invoke,
    )


def test_the_stream_opens_at_the_first_reply_counted_in_flight_until_open() -> None:
    seen_in_flight: list[int] = []

    async def invoke(invocation: Invocation) -> Any:
        seen_in_flight.append(len(site._in_flight))
        return await _primed_async(_replies(["a", "b", "c"]))

    site = _site(invoke)

    async def run() -> list[Any]:
        stream = _OpeningStream(site, Invocation("demo.Greeter", "SayHelloStream", None))
        assert seen_in_flight == []  # nothing is called before the first reply is awaited
        out = [reply async for reply in stream]
        assert len(site._in_flight) == 0
        return out

    assert asyncio.run(run()) == ["a", "b", "c"]
    assert seen_in_flight == [1]


def test_a_stream_that_failed_to_open_is_over() -> None:
    async def invoke(invocation: Invocation) -> Any:
        raise grpc.RpcError("no provider")

    site = _site(invoke)

    async def run() -> None:
        stream = _OpeningStream(site, Invocation("demo.Greeter", "SayHelloStream", None))
        with pytest.raises(grpc.RpcError):
            await stream.__anext__()
        assert len(site._in_flight) == 0
        with pytest.raises(StopAsyncIteration):
            await stream.__anext__()

    asyncio.run(run())


def test_a_closed_stream_is_over_and_a_closing_application_refuses_it() -> None:
    async def invoke(invocation: Invocation) -> Any:
        return await _primed_async(_replies(["a", "b"]))

    async def run() -> None:
        site = _site(invoke)
        stream = _OpeningStream(site, Invocation("demo.Greeter", "SayHelloStream", None))
        assert await stream.__anext__() == "a"
        await stream.aclose()
        with pytest.raises(StopAsyncIteration):
            await stream.__anext__()
        closing = _site(invoke)
        closing._in_flight.refuse()
        refused = _OpeningStream(closing, Invocation("demo.Greeter", "SayHelloStream", None))
        with pytest.raises(Exception, match="closed"):
            await refused.__anext__()

    asyncio.run(run())


def test_a_failure_after_the_first_reply_reaches_the_caller() -> None:
    async def run() -> list[Any]:
        primed = await _primed_async(_replies(["a", "b", "c"], fail_after=2))
        out = []
        with pytest.raises(grpc.RpcError):
            async for reply in primed:
                out.append(reply)
        return out

    assert asyncio.run(run()) == ["a", "b"]
    assert asyncio.run(_collect(_primed_async(_replies([])))) == []


async def _collect(primed: Any) -> list[Any]:
    return [reply async for reply in await primed]


def test_blocking_replies_chain_the_first_to_the_rest() -> None:
    def replies(fail: bool) -> Iterator[str]:
        yield "a"
        yield "b"
        if fail:
            raise grpc.RpcError("broken")

    assert list(_primed(replies(False))) == ["a", "b"]
    assert list(_primed(iter(()))) == []
    rest = _primed(replies(True))
    assert next(rest) == "a" and next(rest) == "b"
    with pytest.raises(grpc.RpcError):
        next(rest)
