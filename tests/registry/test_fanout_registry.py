"""A provider of an application with several registries registers in each, unregisters from
each, and survives the loss of any one: it registers where it can and catches up with the
others when they connect."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from dubbo_py.errors import StoreError
from dubbo_py.registry.fanout import FanOutRegistry
from dubbo_py.registry.registry import Registry
from dubbo_py.registry.store.base import SessionState
from dubbo_py.url import URL
from tests.support.memory_store import MemoryStore

GREETER = URL.parse("tri://10.0.0.1:50051/demo.Greeter?side=provider&application=g")
AUDIT = URL.parse("tri://10.0.0.1:50051/demo.Audit?side=provider&application=g")


class DownStore(MemoryStore):
    """A store that is unreachable until :meth:`come_up`, which tells its listeners."""

    def __init__(self) -> None:
        super().__init__()
        self.down = True
        self.listeners: list[Callable[[SessionState], None]] = []

    def _alive(self) -> None:
        if self.down:
            raise StoreError("not connected to zookeeper://down:2181")
        super()._alive()

    def add_session_listener(self, listener: Callable[[SessionState], None]) -> None:
        self.listeners.append(listener)

    def come_up(self) -> None:
        self.down = False
        for listener in self.listeners:
            listener(SessionState.CONNECTED)


def names(registry: Registry, service: str = "demo.Greeter") -> set[str]:
    return {u.address for u in registry.lookup(service)}


def test_registers_and_unregisters_in_every_member() -> None:
    a, b = Registry(MemoryStore()), Registry(MemoryStore())
    fan = FanOutRegistry([("a", a), ("b", b)])
    fan.register(GREETER)
    assert names(a) == names(b) == {"10.0.0.1:50051"}
    fan.unregister(GREETER)
    assert names(a) == names(b) == set()


def test_a_service_registers_only_in_the_registries_it_names() -> None:
    a, b = Registry(MemoryStore()), Registry(MemoryStore())
    fan = FanOutRegistry(
        [("a", a), ("b", b)], lambda url: ("b",) if url.path == "demo.Audit" else None
    )
    fan.register(GREETER)
    fan.register(AUDIT)
    assert names(a, "demo.Audit") == set()
    assert names(b, "demo.Audit") == {"10.0.0.1:50051"}
    assert names(a) == names(b) == {"10.0.0.1:50051"}


def test_a_member_down_does_not_stop_the_others_and_catches_up() -> None:
    up, down_store = Registry(MemoryStore()), DownStore()
    down = Registry(down_store)
    fan = FanOutRegistry([("up", up), ("down", down)])
    fan.register(GREETER)
    assert names(up) == {"10.0.0.1:50051"}
    down_store.come_up()
    deadline = time.monotonic() + 5
    while not names(down) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert names(down) == {"10.0.0.1:50051"}
    # Losing a member at unregister time still unregisters from the others.
    down_store.down = True
    fan.unregister(GREETER)
    assert names(up) == set()


def test_every_member_down_is_an_error() -> None:
    fan = FanOutRegistry([("x", Registry(DownStore())), ("y", Registry(DownStore()))])
    with pytest.raises(StoreError, match="not connected"):
        fan.register(GREETER)
