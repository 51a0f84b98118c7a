"""Provider channels: pools reset and drop channels, and the invokers' cached callables keep up."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable

import grpc
import pytest
from demo import greeter_pb2

from dubbo_py.consumer.invoker import AsyncChannelPool, ChannelPool, MethodInvoker
from dubbo_py.consumer.method import StubMethod
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


PROVIDER = URL.parse(f"tri://127.0.0.1:{closed_port()}/demo.Greeter?interface=demo.Greeter")
PATH = "/demo.Greeter/SayHello"


class RacingPool(ChannelPool):
    """Hands out a channel, then -- before the invoker caches a callable on it -- does what a
    revival does on the quarantine's thread: reset the channel and forget the callables."""

    def __init__(self) -> None:
        # The reset channel stays open for a while, as it does by default (30 s): grpcio 1.85
        # crashes the process when a multicallable is made on a closed channel.
        super().__init__(linger=60)
        self.invoker: MethodInvoker | None = None
        self.race = True
        self.handed_out: list[grpc.Channel] = []

    def channel(self, provider: URL) -> grpc.Channel:
        channel = super().channel(provider)
        self.handed_out.append(channel)
        if self.race and self.invoker is not None:
            self.race = False
            self.reset(provider.address)
            self.invoker.forget([provider.address])
        return channel


def call(invoker: MethodInvoker) -> None:
    request = greeter_pb2.HelloRequest(name="x")
    with pytest.raises(grpc.RpcError):  # nothing listens there
        invoker(PROVIDER, Invocation("demo.Greeter", "SayHello", request), 0.2)


def make_invoker(pool: ChannelPool) -> MethodInvoker:
    return MethodInvoker(
        pool,
        StubMethod(
            PATH, greeter_pb2.HelloRequest.SerializeToString, greeter_pb2.HelloReply.FromString
        ),
    )


def test_a_callable_made_on_a_channel_reset_meanwhile_is_not_kept() -> None:
    pool = RacingPool()
    invoker = make_invoker(pool)
    pool.invoker = invoker
    try:
        call(invoker)  # made its callable on the channel that was reset under it
        assert PROVIDER.address not in invoker.multicallables
        call(invoker)  # so the next call asks the pool again and gets the fresh channel
        assert len(pool.handed_out) == 2
        assert pool.handed_out[1] is pool.current(PROVIDER.address)
        assert pool.handed_out[1] is not pool.handed_out[0]
        assert PROVIDER.address in invoker.multicallables
        call(invoker)  # and keeps it
        assert len(pool.handed_out) == 2
    finally:
        pool.close()


def test_reset_gives_the_next_call_a_new_channel() -> None:
    pool = ChannelPool(linger=60)
    invoker = make_invoker(pool)
    try:
        call(invoker)
        first = pool.current(PROVIDER.address)
        assert first is not None
        assert pool.reset(PROVIDER.address)
        invoker.forget([PROVIDER.address])
        assert pool.current(PROVIDER.address) is None
        call(invoker)
        second = pool.current(PROVIDER.address)
        assert second is not None and second is not first
        assert not pool.reset("127.0.0.1:1")  # nothing open there
    finally:
        pool.close()


# ---------------------------------------------------------------------------- asyncio flavour


def other(n: int) -> URL:
    return URL.parse(f"tri://127.0.0.1:{closed_port() + n}/demo.Greeter?interface=demo.Greeter")


def off_the_loop(work: Callable[[], object]) -> None:
    """Run ``work`` on another thread, as the quarantine's prober and the notify thread do."""
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()


def test_async_pool_replaces_a_reset_channel_and_closes_the_old_one_later() -> None:
    async def scenario() -> None:
        pool = AsyncChannelPool(linger=0.05)
        old = pool.channel(PROVIDER)
        assert pool.channel(PROVIDER) is old
        off_the_loop(lambda: pool.reset(PROVIDER.address))
        new = pool.channel(PROVIDER)
        assert new is not old
        assert pool.channel(PROVIDER) is new
        await asyncio.sleep(0.3)
        assert old.get_state() is grpc.ChannelConnectivity.SHUTDOWN
        assert new.get_state() is not grpc.ChannelConnectivity.SHUTDOWN
        await pool.close()
        assert new.get_state() is grpc.ChannelConnectivity.SHUTDOWN

    asyncio.run(scenario())


def test_async_pool_drops_channels_to_providers_that_left() -> None:
    async def scenario() -> None:
        pool = AsyncChannelPool(linger=30)
        stay, leave = other(1), other(2)
        kept, dropped = pool.channel(stay), pool.channel(leave)
        assert len(pool) == 2
        off_the_loop(lambda: pool.retain([stay]))
        assert pool.channel(stay) is kept  # the next call sweeps
        assert len(pool) == 1
        # Lingering, so calls in flight on it finish; closed by close() at the latest.
        assert dropped.get_state() is not grpc.ChannelConnectivity.SHUTDOWN
        await pool.close()
        assert dropped.get_state() is grpc.ChannelConnectivity.SHUTDOWN
        assert kept.get_state() is grpc.ChannelConnectivity.SHUTDOWN

    asyncio.run(scenario())
