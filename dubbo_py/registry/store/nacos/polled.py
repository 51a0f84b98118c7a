"""One poller per watched node of a ``nacos://`` store, its state fanned out to every watch.

Nacos gives no tree watches, so the store polls (and a config-change push wakes the poll). The
applications of a process share one store (:mod:`dubbo_py.registry.store.shared`), and each of
them watches the same rules and provider folders: a poller per watch made ten applications
read the same node ten times per poll and per push. A :class:`PolledNode` reads once and offers
each watch the state it has not seen yet; a watch that joins gets the current state at the next
read, which is asked for at once.

A config node's state also comes pushed (:meth:`PolledNode.offer`: the content the Nacos client
just queried after the server's change notice), and is then handed to the watches as it is: a
read of the server right after it would ask for what the push already carries.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from dubbo_py.errors import StoreError

__all__ = ["PolledNode"]

_log = logging.getLogger(__name__)
_UNSEEN = object()


class _Entry:
    """One watch: its callback, the state it was offered last, and a lock held while it is
    called (so that cancelling waits for a call in progress)."""

    __slots__ = ("cancelled", "lock", "report", "seen")

    def __init__(self, report: Callable[[Any], None]) -> None:
        self.report = report
        self.seen: Any = _UNSEEN
        self.cancelled = False
        self.lock = threading.Lock()


class PolledNode:
    """Reads ``read()`` every ``interval`` seconds, or at once when :attr:`wake` is set, on a
    thread of its own (so a callback may call the store), and calls each watch on change.

    What was given to :meth:`at_idle` runs once when the last watch leaves; the node is then
    finished and refuses new watches (the store makes a fresh one).

    A state given to :meth:`offer` is reported at once, in place of a read; a read that was in
    flight when a state was offered is dropped (it may have been answered before the change the
    offer carries), so a late read never puts an older state back over a pushed one."""

    def __init__(
        self, name: str, read: Callable[[], Any], interval: float, alive: Callable[[], bool]
    ) -> None:
        self.wake = threading.Event()
        self._name = name
        self._read = read
        self._interval = interval
        self._at_idle: list[Callable[[], None]] = []
        self._alive = alive
        self._lock = threading.Lock()
        self._entries: list[_Entry] = []
        self._finished = False
        self._thread = threading.Thread(target=self._run, name=f"{name}-watch", daemon=True)
        self._started = False
        # The latest pushed state not reported yet (in a 1-tuple: None is a state), and how
        # many were offered (a read that began before the count moved is stale).
        self._offered: tuple[Any] | None = None
        self._offers = 0

    @property
    def finished(self) -> bool:
        """Whether its last watch left (it polls no more)."""
        return self._finished

    def at_idle(self, step: Callable[[], None]) -> None:
        """Run ``step`` when the last watch leaves (a push listener's removal, say)."""
        self._at_idle.append(step)

    def offer(self, state: Any) -> None:
        """Report ``state`` (what a push carried) to the watches now, without reading; safe from
        any thread (the watches are called on the node's own)."""
        with self._lock:
            self._offered = (state,)
            self._offers += 1
        self.wake.set()

    def add(self, report: Callable[[Any], None]) -> Callable[[], None]:
        """Add a watch; returns its cancel. Raises :class:`StoreError` once finished."""
        entry = _Entry(report)
        with self._lock:
            if self._finished:
                raise StoreError(f"{self._name}: watch finished")
            self._entries.append(entry)
            if not self._started:
                self._started = True
                self._thread.start()
        self.wake.set()  # the new watch hears the current state now, not at the next poll

        def cancel() -> None:
            entry.cancelled = True
            idle = False
            with self._lock:
                if entry in self._entries:
                    self._entries.remove(entry)
                    if not self._entries and not self._finished:
                        self._finished = idle = True
            if idle:
                self.wake.set()
                for step in self._at_idle:
                    try:
                        step()
                    except Exception:
                        _log.exception("%s: cleanup of a finished watch failed", self._name)
            if threading.current_thread() is not self._thread:
                with entry.lock:  # a call in progress ends before cancel returns
                    pass

        return cancel

    def _run(self) -> None:
        while not self._finished and self._alive():
            self.wake.clear()
            with self._lock:
                offered, self._offered = self._offered, None
                offers = self._offers
            if offered is not None:
                self._report(offered[0])
            else:
                try:
                    state = self._read()
                except StoreError as exc:  # keep watching: the last good state stays
                    if self._alive():
                        _log.warning("%s: watch read failed: %s", self._name, exc)
                else:
                    with self._lock:
                        stale = self._offers != offers
                    if stale:
                        continue  # the offered state is reported next (wake is set)
                    self._report(state)
            self.wake.wait(self._interval)

    def _report(self, state: Any) -> None:
        with self._lock:
            entries = list(self._entries)
        for entry in entries:
            if entry.seen is not _UNSEEN and entry.seen == state:
                continue
            with entry.lock:
                if entry.cancelled:
                    continue
                entry.seen = state
                try:
                    entry.report(state)
                except Exception:
                    _log.exception("%s: watch callback failed", self._name)
