"""One channel per provider address per application, shared by every reference: opened on
first use, closed when no reference holds it any more, replaced for all on a reset."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.rpc.shared_channels import SharedChannels


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
