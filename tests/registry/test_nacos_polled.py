"""PolledNode (the poller a ``nacos://`` store shares between the watches of one node): one read
serves every watch, each watch hears each state once, a joining watch hears the current state,
and the last watch leaving stops the poller and runs its cleanup. A pushed state is reported
without a read, and a read answered before the push cannot put its older state back."""

from __future__ import annotations

import threading

import pytest

from dubbo_py.errors import StoreError
from dubbo_py.registry.store.nacos.polled import PolledNode
from tests.support.waiting import Recorder, wait_until


class Node:
    """A node whose state the test sets; counts reads."""

    def __init__(self) -> None:
        self.state = "v0"
        self.reads = 0
        self.lock = threading.Lock()

    def read(self) -> str:
        with self.lock:
            self.reads += 1
            return self.state


def test_watches_of_one_node_share_its_reads_and_hear_each_state_once() -> None:
    node = Node()
    polled = PolledNode("test", node.read, interval=60.0, alive=lambda: True)
    first, second = Recorder(), Recorder()
    cancel_first = polled.add(first)
    first.wait_last("v0")
    cancel_second = polled.add(second)  # joins: hears the current state, first hears nothing new
    second.wait_last("v0")
    node.state = "v1"
    reads = node.reads
    polled.wake.set()  # what a push does
    first.wait_last("v1")
    second.wait_last("v1")
    wait_until(lambda: node.reads >= reads + 1)
    assert first.calls == ["v0", "v1"] and second.calls == ["v0", "v1"]
    cancel_first()
    node.state = "v2"
    polled.wake.set()
    second.wait_last("v2")
    assert first.calls == ["v0", "v1"]
    cancel_second()


def test_the_last_watch_leaving_stops_the_poller_and_runs_its_cleanup() -> None:
    node = Node()
    polled = PolledNode("test", node.read, interval=0.01, alive=lambda: True)
    cleaned = threading.Event()
    polled.at_idle(cleaned.set)
    seen = Recorder()
    cancel = polled.add(seen)
    seen.wait_last("v0")
    cancel()
    assert cleaned.is_set() and polled.finished
    with pytest.raises(StoreError, match="finished"):
        polled.add(Recorder())
    reads = node.reads
    threading.Event().wait(0.2)  # twenty poll intervals
    assert node.reads <= reads + 1  # at most the read that was under way


def test_a_failing_read_keeps_the_last_state_and_a_failing_callback_spares_the_others() -> None:
    node = Node()
    failing = {"on": False}

    def read() -> str:
        if failing["on"]:
            raise StoreError("server down")
        return node.read()

    def broken(_state: object) -> None:
        raise RuntimeError("callback bug")

    polled = PolledNode("test", read, interval=60.0, alive=lambda: True)
    polled.add(broken)
    seen = Recorder()
    cancel = polled.add(seen)
    seen.wait_last("v0")
    failing["on"] = True
    polled.wake.set()
    threading.Event().wait(0.1)
    assert seen.calls == ["v0"]
    failing["on"] = False
    node.state = "v1"
    polled.wake.set()
    seen.wait_last("v1")
    cancel()


def test_an_offered_state_is_reported_without_reading_the_node() -> None:
    node = Node()
    polled = PolledNode("test", node.read, interval=60.0, alive=lambda: True)
    first, second = Recorder(), Recorder()
    cancel_first, cancel_second = polled.add(first), polled.add(second)
    first.wait_last("v0")
    second.wait_last("v0")
    reads = node.reads
    polled.offer("v1")  # what a config push carrying its content does
    first.wait_last("v1")
    second.wait_last("v1")
    polled.offer(None)  # the node removed
    first.wait_last(None)
    assert node.reads == reads
    assert first.calls == ["v0", "v1", None] and second.calls == ["v0", "v1", None]
    cancel_first()
    cancel_second()


def test_a_read_in_flight_when_a_state_is_offered_does_not_overwrite_it() -> None:
    node = Node()
    reading, release = threading.Event(), threading.Event()
    slow = {"on": False}

    def read() -> str:
        state = node.read()
        if slow["on"]:  # answered now, returned after the push
            slow["on"] = False
            reading.set()
            release.wait(10)
        return state

    polled = PolledNode("test", read, interval=60.0, alive=lambda: True)
    seen = Recorder()
    cancel = polled.add(seen)
    seen.wait_last("v0")
    node.state = "v0-stale"
    slow["on"] = True
    polled.wake.set()  # a poll: its answer is the state before the push
    assert reading.wait(10)
    node.state = "v1"
    polled.offer("v1")
    release.set()
    seen.wait_last("v1")  # after the late read came back: the poller is one thread
    assert seen.calls == ["v0", "v1"]  # not v0-stale in between (a rule flipping back)
    cancel()
