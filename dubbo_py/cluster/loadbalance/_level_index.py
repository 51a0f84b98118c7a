"""An index of candidates by a statistics level (in-flight calls, expected response), kept up
to date call by call, so ``leastactive`` and ``shortestresponse`` choose without reading every
candidate.

Each candidate (a *member*) sits in the bucket of its current level; a heap of levels gives the
lowest in O(log L). A bucket groups its members by weight, so a weighted-random pick among the
members of the lowest level -- the tie-break of Dubbo's ``LeastActive`` and
``ShortestResponse`` -- is one random number and a walk over the distinct weights (usually one
or two). The index watches the statistics cells of its members: every call start and end moves
one member between buckets, O(log L) under the index's lock.

An index belongs to one candidate tuple and one method; :class:`LevelIndexCache` keeps a few
(per balancer) and detaches the ones it drops, so cells only call indexes still in use.
"""

from __future__ import annotations

import heapq
import random
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from dubbo_py.cluster.loadbalance.base import ChoosingLoadBalance, WeightTable, weight_table
from dubbo_py.cluster.stats import CallStats, StatCell, default_stats, method_key
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = ["LevelBalancer", "LevelIndex", "LevelIndexCache", "LevelOf"]

#: A member's level from its cell; lower is better.
LevelOf = Callable[[StatCell], int]


class _Bucket:
    """Members at one level, grouped by weight (each group a list with O(1) swap-removal)."""

    __slots__ = ("count", "groups", "total")

    def __init__(self) -> None:
        self.groups: dict[int, list[int]] = {}
        self.total = 0
        self.count = 0


class LevelIndex:
    """Members of one candidate tuple bucketed by level; see the module docstring."""

    def __init__(
        self,
        urls: tuple[URL, ...],
        weights: tuple[int, ...],
        cells: tuple[StatCell, ...],
        level_of: LevelOf,
    ) -> None:
        self.urls = urls
        self._weights = weights
        self._cells = cells
        self._level_of = level_of
        self._lock = threading.Lock()
        self._levels = [0] * len(urls)
        self._slots = [0] * len(urls)
        self._buckets: dict[int, _Bucket] = {}
        self._heap: list[int] = []
        self._in_heap: set[int] = set()
        self._closed = False
        self._built = False
        # Watch first, then read every level under the lock: a change racing the build either
        # happened before the read (and is read) or calls moved() after it (and is applied);
        # a moved() that takes the lock before the build has nothing to move yet.
        for member, cell in enumerate(cells):
            cell.watch(self, member)
        with self._lock:
            for member, cell in enumerate(cells):
                level = level_of(cell)
                self._levels[member] = level
                self._insert(member, level)
            self._built = True

    def close(self) -> None:
        """Stop following the cells (the index is no longer used)."""
        self._closed = True
        for cell in set(self._cells):
            cell.unwatch(self)

    def _insert(self, member: int, level: int) -> None:
        bucket = self._buckets.get(level)
        if bucket is None:
            bucket = self._buckets[level] = _Bucket()
            if level not in self._in_heap:
                self._in_heap.add(level)
                heapq.heappush(self._heap, level)
        weight = self._weights[member]
        group = bucket.groups.get(weight)
        if group is None:
            group = bucket.groups[weight] = []
        self._slots[member] = len(group)
        group.append(member)
        bucket.total += weight
        bucket.count += 1

    def _remove(self, member: int, level: int) -> None:
        bucket = self._buckets[level]
        weight = self._weights[member]
        group = bucket.groups[weight]
        slot = self._slots[member]
        last = group.pop()
        if last != member:
            group[slot] = last
            self._slots[last] = slot
        if not group:
            del bucket.groups[weight]
        bucket.total -= weight
        bucket.count -= 1
        if bucket.count == 0:
            del self._buckets[level]
            # Empty levels stay in the heap until they reach its top; rebuild it when they
            # outnumber the live ones, so it stays O(live levels).
            if len(self._heap) > 2 * len(self._buckets) + 64:
                self._heap = list(self._buckets)
                heapq.heapify(self._heap)
                self._in_heap = set(self._heap)

    def moved(self, member: int) -> None:
        """Re-read ``member``'s cell and move it to its new level (called by the cell)."""
        with self._lock:
            if self._closed or not self._built:
                return
            level = self._level_of(self._cells[member])
            old = self._levels[member]
            if level != old:
                self._remove(member, old)
                self._insert(member, level)
                self._levels[member] = level

    def pick(self, rng: random.Random) -> URL:
        """A member of the lowest level, weighted-random among several (uniform when their
        weights are equal or all zero)."""
        with self._lock:
            heap, buckets = self._heap, self._buckets
            while heap[0] not in buckets:
                self._in_heap.discard(heapq.heappop(heap))
            bucket = buckets[heap[0]]
            groups = bucket.groups
            if bucket.count == 1 or len(groups) == 1:
                (group,) = groups.values()
                if len(group) == 1:
                    return self.urls[group[0]]
                return self.urls[group[rng.randrange(len(group))]]
            total = bucket.total
            if total <= 0:  # every tied member weighs 0: all alike
                offset = rng.randrange(bucket.count)
                for group in groups.values():
                    if offset < len(group):
                        return self.urls[group[offset]]
                    offset -= len(group)
                raise AssertionError("bucket count out of step")  # pragma: no cover
            offset = rng.randrange(total)
            for weight, group in groups.items():
                span = weight * len(group)
                if offset < span:
                    return self.urls[group[offset // weight]]
                offset -= span
            raise AssertionError("bucket total out of step")  # pragma: no cover


@dataclass(frozen=True, slots=True, eq=False)
class _Entry:
    candidates: tuple[URL, ...]
    index: LevelIndex
    table: WeightTable
    generation: int
    window: int


class LevelIndexCache:
    """The :class:`LevelIndex` of each recent (candidate tuple, method), matched by the tuple's
    identity, rebuilt when weights may change (warmup), when the statistics dropped cells or
    (``per_window``) when the response-time window reset every cell."""

    def __init__(
        self, stats: CallStats, level_of: LevelOf, *, per_window: bool, max_entries: int = 8
    ) -> None:
        self.stats = stats
        self._level_of = level_of
        self._per_window = per_window
        self._max_entries = max_entries
        self._entries: dict[tuple[int, str], _Entry] = {}
        self._lock = threading.Lock()
        # A balancer replaced (a consumer override switching balancers) must not leave its
        # indexes behind in the cells, still updated on every call.
        weakref.finalize(self, _close_all, self._entries)

    def get(self, candidates: tuple[URL, ...], invocation: Invocation, now_ms: int) -> LevelIndex:
        """The index of ``candidates`` for this call's method: O(1) when current, O(n) to build."""
        method = invocation.method
        stats = self.stats
        window = stats.refresh_window() if self._per_window else 0
        key = (id(candidates), method)
        entry = self._entries.get(key)
        if (
            entry is not None
            and entry.candidates is candidates
            and entry.generation == stats.generation
            and entry.window == window
            and entry.table.computed_ms <= now_ms < entry.table.valid_until_ms
        ):
            return entry.index
        generation = stats.generation
        table = weight_table(candidates, method, now_ms)
        stat_key = method_key(invocation.service, method)
        urls = tuple(candidates[i] for i in table.eligible)
        index = LevelIndex(
            urls,
            tuple(table.weights[i] for i in table.eligible),
            tuple(stats.cell(url.address, stat_key) for url in urls),
            self._level_of,
        )
        fresh = _Entry(candidates, index, table, generation, window)
        dropped: list[_Entry] = []
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                dropped.append(old)
            self._entries[key] = fresh
            while len(self._entries) > self._max_entries:
                dropped.append(self._entries.pop(next(iter(self._entries))))
        for gone in dropped:
            gone.index.close()
        return index

    def clear(self) -> None:
        """Drop every index (and stop them following their cells)."""
        with self._lock:
            dropped = list(self._entries.values())
            self._entries.clear()
        for gone in dropped:
            gone.index.close()


def _close_all(entries: dict[tuple[int, str], _Entry]) -> None:
    for entry in list(entries.values()):
        entry.index.close()


class LevelBalancer(ChoosingLoadBalance):
    """A balancer choosing among the candidates at the lowest ``level_of`` by weighted random
    (``leastactive``, ``shortestresponse``), reading ``stats`` (default:
    :func:`~dubbo_py.cluster.stats.default_stats`); ``per_window`` when the level resets with
    the statistics' response-time window."""

    def __init__(
        self,
        level_of: LevelOf,
        *,
        per_window: bool,
        stats: CallStats | None = None,
        rng: random.Random | None = None,
    ) -> None:
        stats = stats if stats is not None else default_stats()
        self._indexes = LevelIndexCache(stats, level_of, per_window=per_window)
        self._rng = rng if rng is not None else random.Random()

    def choose(self, candidates: tuple[URL, ...], invocation: Invocation, now_ms: int) -> URL:
        """A candidate at the lowest level, weighted random among those tied there."""
        return self._indexes.get(candidates, invocation, now_ms).pick(self._rng)
