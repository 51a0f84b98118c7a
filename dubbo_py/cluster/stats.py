"""Per (provider address, method) call statistics: in-flight count and windowed response time.

This is dubbo-py's counterpart of Dubbo's ``RpcStatus`` (``active``, succeeded calls and their
elapsed time) together with the slide window of Dubbo 3's ``ShortestResponseLoadBalance``
(``SlideWindowData``): the average response time is taken over the succeeded calls since the
window last reset, and every window resets after ``slide_period`` seconds (Dubbo's
``shortestresponse.slidePeriod``, 30 s by default). Right after a reset a provider with no call
in the new window averages 0, exactly as in Dubbo.

The invoker wraps each call::

    stats = default_stats()
    key = method_key(invocation.service, invocation.method)     # "/demo.Greeter/SayHello"
    with stats.track(url.address, key):
        ...                                                      # the gRPC call

and the ``leastactive`` / ``shortestresponse`` balancers read :meth:`CallStats.active` and the
window average. Methods are keyed by the gRPC full method name so that two services on one
server with a method of the same name (``Get``) keep separate statistics.

Reads are lock-free (an attribute read is atomic); updates take a per-cell lock, so the cost of
a call is two uncontended lock round trips whatever the number of providers. A balancer that
keeps an index over cells (``leastactive``, ``shortestresponse``) registers a watcher on each
cell it indexes; every change of the cell then calls it, so the index follows the statistics
call by call and a selection never has to read every candidate.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "DEFAULT_IDLE_DROP",
    "DEFAULT_SLIDE_PERIOD",
    "EWMA_BETA",
    "CallStats",
    "CallToken",
    "CellWatcher",
    "StatCell",
    "StatsView",
    "default_stats",
    "method_key",
]

#: Seconds after which the response-time window resets (Dubbo's default slide period, 30 s).
DEFAULT_SLIDE_PERIOD = 30.0
#: Seconds after which the cell of a provider nothing called, picked or indexed is dropped.
DEFAULT_IDLE_DROP = 600.0


def method_key(service: str, method: str) -> str:
    """The key statistics are kept under for a method: the gRPC full method name
    ``/<service>/<method>``."""
    return f"/{service}/{method}"


@dataclass(frozen=True, slots=True)
class StatsView:
    """A consistent-enough copy of one cell for display (API, CLI). Times are milliseconds."""

    address: str
    method: str
    active: int
    total: int
    failed: int
    succeeded: int
    max_elapsed_ms: float
    window_succeeded: int
    window_average_ms: float


class CellWatcher(Protocol):
    """What a cell calls after every change: ``moved(member)`` with the number the watcher
    registered the cell under (an index over many cells uses it as the member's position)."""

    def moved(self, member: int) -> None:
        """The cell registered as ``member`` changed; read it again."""
        ...


#: Weight of the newest latency in the ``adaptive`` balancer's moving average (Dubbo's beta).
EWMA_BETA = 0.5

_WATCHERS_LOCK = threading.Lock()


class StatCell:
    """The counters of one (address, method). Balancers cache references to cells and read
    ``active`` and ``window_average`` directly; only :class:`CallStats` mutates them."""

    __slots__ = (
        "_lock",
        "active",
        "address",
        "ewma_ms",
        "failed",
        "failed_elapsed",
        "last_end",
        "last_pick",
        "max_elapsed",
        "method",
        "total",
        "total_elapsed",
        "watchers",
        "window_average",
        "window_elapsed",
        "window_succeeded",
    )

    def __init__(self, address: str, method: str, created: float = 0.0) -> None:
        self._lock = threading.Lock()
        self.address = address
        self.method = method
        self.active = 0
        self.total = 0
        self.failed = 0
        self.total_elapsed = 0.0
        self.failed_elapsed = 0.0
        self.max_elapsed = 0.0
        self.window_succeeded = 0
        self.window_elapsed = 0.0
        #: Whole ms (Dubbo's ``long`` division) of the window's succeeded average, kept up to
        #: date by every call so that a balancer reads one attribute.
        self.window_average = 0
        #: Moving average (beta 0.5) of every ended call's elapsed ms, for ``adaptive``.
        self.ewma_ms = 0.0
        #: Stats-clock instants (seconds) of the last call ended and the last time a balancer
        #: picked this provider (``adaptive`` forces a pick of one left alone too long).
        self.last_end = created
        self.last_pick = created
        #: ``(watcher, member)`` pairs told about every change; replaced, never mutated, so
        #: a recording thread iterates it without a lock.
        self.watchers: tuple[tuple[CellWatcher, int], ...] = ()

    def watch(self, watcher: CellWatcher, member: int) -> None:
        """Call ``watcher.moved(member)`` after every change of this cell."""
        with _WATCHERS_LOCK:
            self.watchers = (*self.watchers, (watcher, member))

    def unwatch(self, watcher: CellWatcher) -> None:
        """Stop telling ``watcher`` (every member it registered)."""
        with _WATCHERS_LOCK:
            self.watchers = tuple(pair for pair in self.watchers if pair[0] is not watcher)

    def _notify(self) -> None:
        for watcher, member in self.watchers:
            watcher.moved(member)

    @property
    def succeeded(self) -> int:
        """Calls that ended successfully (Dubbo's ``getSucceeded``)."""
        return self.total - self.failed

    def window_average_ms(self) -> float:
        """Average elapsed ms of the succeeded calls in the current window (0.0 when none)."""
        count = self.window_succeeded
        return self.window_elapsed / count if count > 0 else 0.0

    def _reset_window(self) -> None:
        with self._lock:
            self.window_succeeded = 0
            self.window_elapsed = 0.0
            self.window_average = 0


@dataclass(frozen=True, slots=True)
class CallToken:
    """What :meth:`CallStats.begin` hands out and :meth:`CallStats.end` takes back."""

    cell: StatCell
    started: float


class CallStats:
    """Thread-safe call statistics per (address, method).

    ``clock`` (seconds, monotonic) measures elapsed time and drives the response-time window;
    inject a fake one in tests. When a window ends, the first caller to notice resets every
    cell (as Dubbo resets every ``SlideWindowData`` together): O(cells) once per window, so
    reading a cell never has to check which window it belongs to. At the same time it drops the
    cells of providers nothing called, picked or indexed for ``idle_drop`` seconds (a provider
    that left the fleet for good), so the cells stay bounded by the providers in use; a
    provider called again starts a fresh cell.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        slide_period: float = DEFAULT_SLIDE_PERIOD,
        idle_drop: float = DEFAULT_IDLE_DROP,
    ) -> None:
        if not slide_period > 0:
            raise ValueError(f"slide_period must be > 0 seconds, got {slide_period!r}")
        self._clock = clock
        self._idle_drop = idle_drop
        self._slide_period = slide_period
        self._origin = clock()
        self._cells: dict[tuple[str, str], StatCell] = {}
        self._lock = threading.Lock()
        self._generation = 0
        self._window = 0

    # ------------------------------------------------------------------ cells and window

    @property
    def window(self) -> int:
        """The index of the current response-time window (grows when every window resets)."""
        return self._window

    def now(self) -> float:
        """The statistics clock, in seconds."""
        return self._clock()

    @property
    def generation(self) -> int:
        """Grows whenever cells are dropped (:meth:`forget`), so cached cell references can be
        recognised as stale."""
        return self._generation

    def refresh_window(self) -> int:
        """Start a new response-time window if the slide period has passed; the window index."""
        return self._roll_to(int((self._clock() - self._origin) // self._slide_period))

    def _roll_to(self, window: int) -> int:
        if window > self._window:
            with self._lock:
                if window > self._window:
                    for cell in self._cells.values():
                        cell._reset_window()
                    self._window = window
                    self._drop_idle()
        return self._window

    def _drop_idle(self) -> None:
        # Caller holds the lock. A fleet that churns (providers replaced under new addresses)
        # would otherwise leave a cell per address it ever called: drop the cells nothing has
        # called, picked or watched for ``idle_drop`` seconds, once per window.
        horizon = self._clock() - self._idle_drop
        doomed = [
            key
            for key, cell in self._cells.items()
            if cell.active == 0
            and not cell.watchers
            and cell.last_end < horizon
            and cell.last_pick < horizon
        ]
        for key in doomed:
            del self._cells[key]
        if doomed:
            self._generation += 1

    def cell(self, address: str, method: str) -> StatCell:
        """The cell of (address, method), created on first use."""
        key = (address, method)
        found = self._cells.get(key)
        if found is not None:
            return found
        with self._lock:
            found = self._cells.get(key)
            if found is None:
                found = StatCell(address, method, self._clock())
                self._cells[key] = found
            return found

    def forget(self, address: str) -> None:
        """Drop every cell of ``address`` (a provider that left for good)."""
        with self._lock:
            doomed = [key for key in self._cells if key[0] == address]
            for key in doomed:
                del self._cells[key]
            if doomed:
                self._generation += 1

    # ------------------------------------------------------------------ recording

    def begin(self, address: str, method: str) -> CallToken:
        """A call to ``address`` starts: one more in flight."""
        cell = self.cell(address, method)
        with cell._lock:
            cell.active += 1
        if cell.watchers:
            cell._notify()
        return CallToken(cell, self._clock())

    def end(self, token: CallToken, ok: bool, *, elapsed_ms: float | None = None) -> None:
        """The call of ``token`` ended (``ok`` = it succeeded). ``elapsed_ms`` overrides the
        measured duration (for callers that time the call themselves)."""
        now = self._clock()
        elapsed = (now - token.started) * 1000.0 if elapsed_ms is None else float(elapsed_ms)
        elapsed = max(elapsed, 0.0)
        self._roll_to(int((now - self._origin) // self._slide_period))
        cell = token.cell
        with cell._lock:
            cell.active -= 1
            cell.total += 1
            cell.total_elapsed += elapsed
            if elapsed > cell.max_elapsed:
                cell.max_elapsed = elapsed
            if ok:
                cell.window_succeeded += 1
                cell.window_elapsed += elapsed
                cell.window_average = int(cell.window_elapsed // cell.window_succeeded)
            else:
                cell.failed += 1
                cell.failed_elapsed += elapsed
            cell.ewma_ms = EWMA_BETA * cell.ewma_ms + (1.0 - EWMA_BETA) * elapsed
            cell.last_end = now
        if cell.watchers:
            cell._notify()

    @contextmanager
    def track(self, address: str, method: str) -> Iterator[CallToken]:
        """Count the ``with`` body as one call; it fails when the body raises."""
        token = self.begin(address, method)
        ok = False
        try:
            yield token
            ok = True
        finally:
            self.end(token, ok)

    # ------------------------------------------------------------------ reading

    def active(self, address: str, method: str) -> int:
        """Calls to (address, method) in flight now."""
        found = self._cells.get((address, method))
        return found.active if found is not None else 0

    def average_elapsed(self, address: str, method: str) -> float:
        """Average elapsed ms of the succeeded calls in the current window (0.0 when none)."""
        self.refresh_window()
        found = self._cells.get((address, method))
        return found.window_average_ms() if found is not None else 0.0

    def view(self, address: str, method: str) -> StatsView:
        """A copy of the counters of (address, method)."""
        self.refresh_window()
        cell = self._cells.get((address, method))
        if cell is None:
            return StatsView(address, method, 0, 0, 0, 0, 0.0, 0, 0.0)
        return self._view(cell)

    def views(self) -> tuple[StatsView, ...]:
        """Copies of every cell, sorted by (address, method)."""
        self.refresh_window()
        with self._lock:
            cells = sorted(self._cells.items())
        return tuple(self._view(cell) for _, cell in cells)

    @staticmethod
    def _view(cell: StatCell) -> StatsView:
        return StatsView(
            address=cell.address,
            method=cell.method,
            active=cell.active,
            total=cell.total,
            failed=cell.failed,
            succeeded=cell.succeeded,
            max_elapsed_ms=cell.max_elapsed,
            window_succeeded=cell.window_succeeded,
            window_average_ms=cell.window_average_ms(),
        )


_DEFAULT: CallStats | None = None
_DEFAULT_LOCK = threading.Lock()


def default_stats() -> CallStats:
    """The process-wide statistics the invokers record into and balancers read by default."""
    global _DEFAULT
    if _DEFAULT is None:
        with _DEFAULT_LOCK:
            if _DEFAULT is None:
                _DEFAULT = CallStats()
    return _DEFAULT
