"""One channel per provider address per application, shared by every reference: opened on
first use, closed when no reference holds it any more, replaced for all on a reset. Asyncio
references share one per event loop."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.consumer.connections import AsyncSharedChannels, SharedChannels


class FakeChannel:
    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = False

    def close(self) -> None:
        self.closed = True


class Holder:
    def __init__(self) -> None:
        self.dropped_addresses: list[str] = []

    def dropped(self, address: str) -> None:
        self.dropped_addresses.append(address)


def opener(opened: list[FakeChannel], name: str) -> Any:
    def open_channel() -> Any:
        channel = FakeChannel(name)
        opened.append(channel)
        return channel

    return open_channel


def test_holders_share_one_channel_until_the_last_one_releases_it() -> None:
    shared = SharedChannels(linger=0)
    opened: list[FakeChannel] = []
    a, b = Holder(), Holder()
    first = shared.acquire("10.0.0.1:50051", "plain", a, opener(opened, "1"))
    second = shared.acquire("10.0.0.1:50051", "plain", b, opener(opened, "2"))
    assert first is second and len(opened) == 1
    # Other security settings: another channel.
    tls = shared.acquire("10.0.0.1:50051", "tls", a, opener(opened, "tls"))
    assert tls is not first and shared.open_count() == 2
    shared.release("10.0.0.1:50051", "plain", a)
    assert not opened[0].closed  # b still holds it
    shared.release("10.0.0.1:50051", "plain", b)
    assert opened[0].closed and shared.open_count() == 1


def test_an_address_registered_again_while_lingering_gets_a_new_channel() -> None:
    # The provider left every directory and came back (a restart on the same port): its old
    # channel may be in reconnect backoff, so the new registration is served by a new one,
    # while the old one lingers for calls still in flight.
    shared = SharedChannels(linger=60)
    opened: list[FakeChannel] = []
    a = Holder()
    channel = shared.acquire("h:1", "plain", a, opener(opened, "1"))
    shared.release("h:1", "plain", a)
    again = shared.acquire("h:1", "plain", a, opener(opened, "2"))
    assert again is not channel and len(opened) == 2
    assert not channel.closed and shared.open_count() == 1
    shared.close()
    assert channel.closed and again.closed


def test_reset_replaces_the_channel_for_every_holder() -> None:
    shared = SharedChannels(linger=0)
    opened: list[FakeChannel] = []
    a, b = Holder(), Holder()
    old = shared.acquire("h:1", "plain", a, opener(opened, "old"))
    shared.acquire("h:1", "plain", b, opener(opened, "unused"))
    assert shared.reset("h:1", "plain", old)
    assert old.closed and a.dropped_addresses == ["h:1"] and b.dropped_addresses == ["h:1"]
    assert not shared.reset("h:1", "plain", old)  # already replaced: nothing to do
    new = shared.acquire("h:1", "plain", b, opener(opened, "new"))
    assert new is not old and not new.closed


@dubbo_py.service(version="1.0.0")
class Greeter(greeter_pb2_grpc.GreeterServicer):
    def SayHello(self, request: Any, context: Any) -> Any:
        return greeter_pb2.HelloReply(message=f"Hello, {request.name}!")


@pytest.fixture(scope="module")
def address() -> Iterator[str]:
    app = dubbo_py.Application("shared-channels-provider", "tri://127.0.0.1:1")
    server = app.start(Greeter(), port=0, host="127.0.0.1")
    yield server.address
    app.close()


def test_references_of_one_application_share_the_provider_channel(address: str) -> None:
    app = dubbo_py.Application("shared-channels-shop", f"tri://{address}")
    try:
        refs = [
            app.reference_handle(
                greeter_pb2_grpc.GreeterStub, version="1.0.0", loadbalance=balancer
            )
            for balancer in ("random", "roundrobin", "leastactive", "p2c")
        ]
        for ref in refs:
            assert ref.stub.SayHello(greeter_pb2.HelloRequest(name="a")).message == "Hello, a!"
        pools = [ref.assembly.pool for ref in refs]  # type: ignore[union-attr]
        channels = {id(pool.current(address)) for pool in pools}
        assert len(channels) == 1 and app.channels.open_count() == 1
        # A reference whose directory no longer lists the provider lets go of it; the others
        # keep calling on the same channel.
        pools[0].retain(())
        assert app.channels.open_count() == 1
        assert refs[1].stub.SayHello(greeter_pb2.HelloRequest(name="b")).message == "Hello, b!"
        # A reset (a quarantined provider coming back) gives everyone a new channel.
        old = pools[1].current(address)
        assert pools[1].reset(address)
        assert all(pool.current(address) is None for pool in pools)
        assert refs[2].stub.SayHello(greeter_pb2.HelloRequest(name="c")).message == "Hello, c!"
        assert pools[2].current(address) is not old
    finally:
        app.close()
    assert app.channels.open_count() == 0


def test_references_share_the_multicallables_on_a_shared_channel(address: str) -> None:
    # A reference per balancer over a fleet would otherwise keep one multicallable (and one
    # copy of the headers) per provider each.
    app = dubbo_py.Application("shared-callables-shop", f"tri://{address}")
    try:
        refs = [
            app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0", loadbalance=b)
            for b in ("random", "leastactive")
        ]
        for ref in refs:
            ref.stub.SayHello(greeter_pb2.HelloRequest(name="a"))
        made = [
            invoker.multicallables[address]
            for ref in refs
            for invoker in ref.assembly._invokers  # type: ignore[union-attr]
            if address in invoker.multicallables
        ]
        assert len(made) == 2 and made[0] is made[1]
    finally:
        app.close()


def test_a_second_application_has_its_own_channels(address: str) -> None:
    apps = [dubbo_py.Application(f"shop-{i}", f"tri://{address}") for i in range(2)]
    try:
        refs = [app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0") for app in apps]
        for ref in refs:
            ref.stub.SayHello(greeter_pb2.HelloRequest(name="a"))
        first, second = (ref.assembly.pool.current(address) for ref in refs)  # type: ignore[union-attr]
        assert first is not None and first is not second
    finally:
        for app in apps:
            app.close()


# ---------------------------------------------------------------------------- asyncio flavour


@pytest.fixture(scope="module")
def second_address() -> Iterator[str]:
    app = dubbo_py.Application("shared-channels-provider-2", "tri://127.0.0.1:1")
    server = app.start(Greeter(), port=0, host="127.0.0.1")
    yield server.address
    app.close()


async def say_hello(stub: Any, name: str) -> str:
    reply = await stub.SayHello(greeter_pb2.HelloRequest(name=name))
    return str(reply.message)


def test_asyncio_references_on_one_loop_share_one_channel_per_provider(
    address: str, second_address: str
) -> None:
    app = dubbo_py.Application("aio-shared-shop", f"tri://{address},{second_address}")

    async def scenario() -> None:
        refs = [
            await app.reference_handle_async(
                greeter_pb2_grpc.GreeterStub, version="1.0.0", loadbalance=balancer
            )
            for balancer in ("roundrobin", "leastactive", "p2c")
        ]
        for ref in refs:
            for i in range(4):  # round robin reaches both providers
                assert await say_hello(ref.stub, f"n{i}") == f"Hello, n{i}!"
        pools = [ref.assembly.pool for ref in refs]  # type: ignore[union-attr]
        # Every reference called both providers, yet the loop has one channel to each.
        assert app.async_channels.open_count() == 2
        for provider in (address, second_address):
            held = {id(pool.current(provider)) for pool in pools if pool.current(provider)}
            assert len(held) == 1
        # A reset (a quarantined provider coming back) replaces it for every reference.
        old = pools[0].current(address)  # round robin called both providers
        pools[0].reset(address)
        await asyncio.sleep(0)  # the replacement runs on the loop, without waiting for a call
        assert all(pool.current(address) is None for pool in pools)
        assert old is not None and old.get_state() is not grpc.ChannelConnectivity.SHUTDOWN
        for ref in refs:  # calls in flight on it would finish (it lingers); new calls:
            for i in range(4):
                assert await say_hello(ref.stub, f"m{i}") == f"Hello, m{i}!"
        now = {id(c) for pool in pools if (c := pool.current(address)) is not None}
        assert len(now) == 1 and id(old) not in now  # round robin called it at least
        # Closing one reference keeps the shared channels for the others...
        await refs[0].channel.close()  # type: ignore[misc]
        assert app.async_channels.open_count() == 2
        assert await say_hello(refs[2].stub, "s") == "Hello, s!"
        # ...and the loop's last reference closes them all.
        channels = [pools[2].current(a) or pools[1].current(a) for a in (address, second_address)]
        for ref in refs[1:]:
            await ref.channel.close()  # type: ignore[misc]
        assert app.async_channels.loops() == 0
        assert all(
            c is not None and c.get_state() is grpc.ChannelConnectivity.SHUTDOWN for c in channels
        )

    try:
        asyncio.run(scenario())
    finally:
        app.close()


def test_a_second_event_loop_gets_its_own_channels(address: str) -> None:
    app = dubbo_py.Application("aio-two-loops-shop", f"tri://{address}")
    seen: dict[str, Any] = {}
    first_loop_ready, second_done = threading.Event(), threading.Event()

    async def on_loop(name: str) -> None:
        ref = await app.reference_handle_async(greeter_pb2_grpc.GreeterStub, version="1.0.0")
        assert await say_hello(ref.stub, name) == f"Hello, {name}!"
        seen[name] = ref.assembly.pool.current(address)  # type: ignore[union-attr]
        seen[name + "-open"] = app.async_channels.open_count()
        if name == "first":
            first_loop_ready.set()
            await asyncio.to_thread(second_done.wait, 30)
        await ref.channel.close()  # type: ignore[misc]

    def second() -> None:
        first_loop_ready.wait(30)
        try:
            asyncio.run(on_loop("second"))
        finally:
            second_done.set()

    thread = threading.Thread(target=second)
    thread.start()
    try:
        asyncio.run(on_loop("first"))
    finally:
        thread.join(30)
        app.close()
    assert seen["first"] is not None and seen["second"] is not None
    assert seen["first"] is not seen["second"]  # a grpc.aio channel belongs to its loop
    assert seen["first-open"] == seen["second-open"] == 1
    assert app.async_channels.loops() == 0


def test_an_asyncio_channel_to_a_provider_that_left_every_directory_is_closed(
    tmp_path: Path,
) -> None:
    registry = f"sqlite://{tmp_path}/registry.db"
    providers = [dubbo_py.Application(f"aio-leaving-{i}", registry) for i in range(2)]
    servers = [app.start(Greeter(), port=0, host="127.0.0.1") for app in providers]
    consumer = dubbo_py.Application("aio-leaving-shop", registry, cache_path=tmp_path / "c.json")
    consumer.async_channels = AsyncSharedChannels(linger=0.05)
    leaving = servers[1].address

    async def scenario() -> None:
        refs = [
            await consumer.reference_handle_async(
                greeter_pb2_grpc.GreeterStub, version="1.0.0", loadbalance="roundrobin", check=10
            )
            for _ in range(2)
        ]
        for ref in refs:
            for i in range(4):
                await say_hello(ref.stub, f"n{i}")
        channel = refs[0].assembly.pool.current(leaving)  # type: ignore[union-attr]
        assert channel is not None and app_channels() == 2
        providers[1].close()  # unregisters: the address leaves both references' directories
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if channel.get_state() is grpc.ChannelConnectivity.SHUTDOWN:
                break
            await asyncio.sleep(0.05)  # no call needed: the release runs on the loop
        assert channel.get_state() is grpc.ChannelConnectivity.SHUTDOWN
        assert app_channels() == 1
        # The call plans forgot the released channel's multicallable with it.
        for ref in refs:
            plan = ref.stub.SayHello._plan
            assert plan is not None and leaving not in plan.multicallables
        assert await say_hello(refs[1].stub, "x") == "Hello, x!"
        await consumer.aclose()

    def app_channels() -> int:
        return consumer.async_channels.open_count()

    try:
        asyncio.run(scenario())
    finally:
        consumer.close()
        for app in providers:
            app.close()
