"""Machinery both stores share: persistent watches, session listeners and the store-owned thread
that calls them."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from dubbo_py.registry.store.base import SessionState

__all__ = ["ChildrenState", "DataState", "Dispatcher", "SessionListeners", "Watch", "WatchSet"]

log = logging.getLogger(__name__)

S = TypeVar("S")

#: What a children watch tracks: whether the node exists, and its sorted child names (it reports
#: the names; existence is kept so that the node's creation or deletion is reported even when
#: the names stay empty).
ChildrenState = tuple[bool, list[str]]
#: What a data watch reports: ``(data, version)``, ``(None, -1)`` while the node is absent.
DataState = tuple[bytes | None, int]

_UNSET = object()


class Watch(Generic[S]):
    """One persistent watch: reports a state only when it differs from the last one reported,
    and never after :meth:`cancel` has returned."""

    def __init__(self, path: str, report: Callable[[S], None]) -> None:
        self.path = path
        self._report = report
        # Re-entrant so that a callback may cancel its own watch.
        self._lock = threading.RLock()
        self._cancelled = False
        self._last: object = _UNSET

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._cancelled

    def offer(self, state: S) -> None:
        """Report ``state`` unless it is the one reported last or the watch is cancelled."""
        with self._lock:
            if self._cancelled or self._last == state:
                return
            self._last = state
            try:
                self._report(state)
            except Exception:
                log.exception("watch callback for %s failed", self.path)

    def cancel(self) -> None:
        """Stop the watch. If its callback is running on another thread, wait for it to end, so
        that no callback runs once this returns (a callback must therefore never wait for a
        thread that is cancelling its watch)."""
        with self._lock:
            self._cancelled = True


class WatchSet(Generic[S]):
    """The watches of one node and kind in a store, which reads the node once per change for
    all of them and offers each of them the state (a watch reports only what differs from its
    last). :meth:`add` and :meth:`remove` are called under the store's lock; the set is
    replaced whole on every change, so the store's thread iterates it without a lock."""

    def __init__(self) -> None:
        self._watches: tuple[Watch[S], ...] = ()
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called: events and reads still in flight are ignored."""
        return self._closed

    def add(self, watch: Watch[S]) -> None:
        """Add a watch."""
        self._watches = (*self._watches, watch)

    def remove(self, watch: Watch[S]) -> bool:
        """Remove a watch; True when none is left."""
        self._watches = tuple(w for w in self._watches if w is not watch)
        return not self._watches

    def offer(self, state: S) -> None:
        """Offer ``state`` to every watch."""
        for watch in self._watches:
            watch.offer(state)

    def close(self) -> None:
        """Cancel every watch and stop offering."""
        self._closed = True
        for watch in self._watches:
            watch.cancel()


class SessionListeners:
    """The session listeners of one store. :meth:`add` and :meth:`emit` are called on the
    store-owned thread only, so a listener added while connected is told ``CONNECTED`` exactly
    once, however its registration interleaves with connection events."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[Callable[[SessionState], None]] = []
        self._connected = False

    def add(self, listener: Callable[[SessionState], None]) -> None:
        """Register a listener; tell it ``CONNECTED`` at once if the store is connected."""
        with self._lock:
            self._listeners.append(listener)
        if self._connected:
            self._call(listener, SessionState.CONNECTED)

    def clear(self) -> None:
        """Forget all listeners."""
        with self._lock:
            self._listeners.clear()

    def emit(self, state: SessionState) -> None:
        """Tell every listener; one failing listener does not stop the others."""
        self._connected = state is not SessionState.SUSPENDED
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            self._call(listener, state)

    @staticmethod
    def _call(listener: Callable[[SessionState], None], state: SessionState) -> None:
        try:
            listener(state)
        except Exception:
            log.exception("session listener %r failed on %s", listener, state)


class Dispatcher:
    """A daemon thread that runs submitted tasks one at a time, in order.

    With ``tick`` it also calls ``tick()`` about every ``tick_interval`` seconds, between tasks
    (the embedded store polls its change counter this way). A failing task is logged and skipped.
    """

    def __init__(
        self,
        name: str,
        *,
        tick: Callable[[], None] | None = None,
        tick_interval: float = 1.0,
    ) -> None:
        self._name = name
        self._tick = tick
        self._tick_interval = tick_interval
        self._tasks: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def start(self) -> None:
        """Start the thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def submit(self, task: Callable[[], None]) -> None:
        """Queue a task; ignored once the dispatcher is closing."""
        if not self._stopping:
            self._tasks.put(task)

    def on_thread(self) -> bool:
        """Whether the caller is the dispatcher thread."""
        return threading.current_thread() is self._thread

    def close(self, timeout: float = 5.0) -> None:
        """Stop after the task in progress; queued tasks are dropped. Joins the thread unless
        called from it."""
        self._stopping = True
        self._tasks.put(None)
        thread = self._thread
        if thread is not None and not self.on_thread():
            thread.join(timeout)

    def _run(self) -> None:
        next_tick = time.monotonic() + self._tick_interval
        while not self._stopping:
            wait = max(0.0, next_tick - time.monotonic()) if self._tick else None
            try:
                task = self._tasks.get(timeout=wait)
            except queue.Empty:
                task = None
            else:
                if task is None:
                    return
            if task is not None:
                self._call(task)
            if self._tick is not None and time.monotonic() >= next_tick and not self._stopping:
                self._call(self._tick)
                next_tick = time.monotonic() + self._tick_interval

    def _call(self, task: Callable[[], None]) -> None:
        try:
            task()
        except Exception:
            log.exception("%s: task failed", self._name)
