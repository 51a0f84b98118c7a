"""Smooth weighted round robin, as Dubbo's ``RoundRobinLoadBalance`` (after nginx).

Each provider keeps a ``current`` value. On every call each provider adds its weight to
``current``; the provider with the largest ``current`` (the first one in candidate order on a
tie) is chosen and has the total weight subtracted. Weights 5/1/1 give ``A A B A C A A`` and
then repeat. The state lives per (service key, method), keyed by the provider's identity
(``protocol://host:port/path``) so it survives a change of the candidate set; a provider whose
weight changes restarts at ``current = 0``, and one that left the candidate set is forgotten
once it has been gone for the recycle period (60 s, Dubbo's ``RECYCLE_PERIOD``).

Cost: Dubbo walks all n providers per call. Here ``current_i = c_i + w_i * t`` is kept lazily
(``t`` counts the calls), so within a group of equal weights the largest ``current`` is the
largest ``c_i`` -- a heap. A call compares the heap tops of the k distinct weights and updates
one heap: O(k + log n) (k is 1 to 3 in practice). A heap entry is one int,
``-c_i * 2**32 + i``, which orders as the pair ``(-c_i, i)`` (largest ``current`` first, the
first candidate on a tie) but compares and moves as a single machine-friendly object, so the
O(log n) part stays small next to the call's fixed cost at 10 000 providers. Rebuilding the
heaps is O(n) and happens when the candidate tuple changes or a provider in warmup changes
weight.

Two deliberate differences from Dubbo: weight-0 providers are left out of the rotation (in
Dubbo they can win when the other providers' ``current`` values are all negative after a
provider with a large ``current`` left), and when every provider weighs 0 they rotate evenly
(Dubbo would send every call to the first).
"""

from __future__ import annotations

import heapq
import math
import threading
from dataclasses import dataclass

from dubbo_py.cluster.loadbalance.base import (
    ChoosingLoadBalance,
    IdentityCache,
    Picker,
    WeightTable,
    current_millis,
    weight_table,
)
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = ["RECYCLE_PERIOD_MS", "RoundRobinLoadBalance", "identity_string"]

#: How long (ms) the state of a provider that left the candidates is kept (Dubbo's value).
RECYCLE_PERIOD_MS = 60_000

_SHIFT = 32
_INDEX = (1 << _SHIFT) - 1


def identity_string(url: URL) -> str:
    """Dubbo's ``URL.toIdentityString``: the URL without its parameters."""
    return url.to_string(parameters=False)


@dataclass(slots=True)
class _Slot:
    current: int
    weight: int
    last_update_ms: int


class _Schedule:
    """The rotation over one candidate tuple with fixed weights; mutated under its state's
    lock."""

    __slots__ = (
        "c",
        "candidates",
        "classes",
        "idents",
        "last_select_ms",
        "state",
        "t",
        "total",
        "valid_until_ms",
        "weight_of",
    )

    def __init__(
        self,
        state: _State,
        candidates: tuple[URL, ...],
        scheduled: list[tuple[int, str, int, int]],
        now_ms: int,
    ) -> None:
        # scheduled: (candidate index, identity, weight, starting current)
        self.state = state
        self.candidates = candidates
        self.t = 0
        self.total = sum(w for _, _, w, _ in scheduled)
        self.c: dict[int, int] = {}
        self.idents: dict[int, str] = {}
        self.weight_of: dict[int, int] = {}
        groups: dict[int, list[int]] = {}
        for index, ident, weight, current in scheduled:
            self.c[index] = current
            self.idents[index] = ident
            self.weight_of[index] = weight
            groups.setdefault(weight, []).append((-current << _SHIFT) + index)
        self.classes: list[tuple[int, list[int]]] = []
        for weight, heap in groups.items():
            heapq.heapify(heap)
            self.classes.append((weight, heap))
        self.last_select_ms = now_ms
        #: Until when (epoch ms) the weights it was built with hold (warmup changes them).
        self.valid_until_ms = math.inf

    def pick(self, now_ms: int) -> URL | None:
        """One step of smooth weighted round robin: the chosen candidate; ``None`` when this
        schedule is no longer its state's (rebound meanwhile for another candidate tuple)."""
        state = self.state
        with state.lock:
            if state.schedule is not self:
                return None
            if now_ms > state.next_purge_ms:
                state.purge(now_ms)
            self.t += 1
            t = self.t
            best_index = -1
            best_value = 0
            best_heap: list[int] = []
            for weight, heap in self.classes:
                top = heap[0]
                index = top & _INDEX
                value = weight * t + (-(top >> _SHIFT))
                if (
                    best_index < 0
                    or value > best_value
                    or (value == best_value and index < best_index)
                ):
                    best_index, best_value, best_heap = index, value, heap
            new_c = self.c[best_index] - self.total
            self.c[best_index] = new_c
            heapq.heapreplace(best_heap, (-new_c << _SHIFT) + best_index)
            self.last_select_ms = now_ms
            return self.candidates[best_index]

    def slots(self) -> dict[str, _Slot]:
        """The materialised ``current`` of every scheduled provider."""
        t = self.t
        return {
            self.idents[i]: _Slot(c + self.weight_of[i] * t, self.weight_of[i], self.last_select_ms)
            for i, c in self.c.items()
        }


class _State:
    """Round-robin state of one (service key, method)."""

    __slots__ = ("detached", "lock", "next_purge_ms", "recycle_ms", "schedule")

    def __init__(self, recycle_ms: int) -> None:
        self.lock = threading.Lock()
        self.schedule: _Schedule | None = None
        self.detached: dict[str, _Slot] = {}
        self.next_purge_ms = math.inf
        self.recycle_ms = recycle_ms

    def rebind(self, candidates: tuple[URL, ...], table: WeightTable, now_ms: int) -> _Schedule:
        """Move the rotation onto ``candidates`` (O(n)); caller holds ``lock``."""
        slots = dict(self.detached)
        if self.schedule is not None:
            slots.update(self.schedule.slots())
        all_zero = table.total == 0
        scheduled: list[tuple[int, str, int, int]] = []
        seen: set[str] = set()
        for index in table.eligible:
            ident = identity_string(candidates[index])
            weight = 1 if all_zero else table.weights[index]
            slot = slots.pop(ident, None)
            current = 0
            if slot is not None and slot.weight == weight and ident not in seen:
                current = slot.current
            seen.add(ident)
            scheduled.append((index, ident, weight, current))
        # What is left belongs to providers not in rotation now: keep it for the recycle period.
        self.detached = {
            ident: slot
            for ident, slot in slots.items()
            if ident not in seen and now_ms - slot.last_update_ms <= self.recycle_ms
        }
        self._reschedule_purge()
        self.schedule = _Schedule(self, candidates, scheduled, now_ms)
        return self.schedule

    def purge(self, now_ms: int) -> None:
        """Forget detached providers gone for longer than the recycle period."""
        if now_ms > self.next_purge_ms:
            self.detached = {
                ident: slot
                for ident, slot in self.detached.items()
                if now_ms - slot.last_update_ms <= self.recycle_ms
            }
            self._reschedule_purge()

    def _reschedule_purge(self) -> None:
        self.next_purge_ms = (
            min(s.last_update_ms for s in self.detached.values()) + self.recycle_ms
            if self.detached
            else math.inf
        )


class RoundRobinLoadBalance(ChoosingLoadBalance):
    """Dubbo's ``roundrobin`` balancer (smooth weighted round robin)."""

    name = "roundrobin"

    def __init__(self, *, recycle_period_ms: int = RECYCLE_PERIOD_MS) -> None:
        self._recycle_ms = recycle_period_ms
        self._states: dict[tuple[str, str], _State] = {}
        self._states_lock = threading.Lock()
        self._schedules: IdentityCache[_Schedule] = IdentityCache()

    def choose(self, candidates: tuple[URL, ...], invocation: Invocation, now_ms: int) -> URL:
        """The next candidate in the smooth weighted rotation."""
        # A steady state (same candidates, weights settled) costs this frame, the cache lookup
        # and one pick.
        method = invocation.method
        while True:
            schedule = self._schedules.lookup(candidates, method, now_ms)
            if schedule is None:
                schedule = self._rebind(candidates, method, now_ms)
            chosen = schedule.pick(now_ms)
            if chosen is not None:
                return chosen
            # Another candidate tuple of this method was scheduled meanwhile: bind again.
            self._schedules.forget(candidates, method)

    def picker(self, candidates: tuple[URL, ...], method: str, now_ms: int) -> Picker | None:
        """For a call plan: ``(pick, valid_until_ms)`` where ``pick(now_ms)`` is
        ``select(candidates, <a call of method>, now_ms=now_ms)`` -- or ``None`` once another
        candidate tuple took the rotation over -- while ``now_ms < valid_until_ms``."""
        if len(candidates) < 2:
            return None
        schedule = self._schedules.lookup(candidates, method, now_ms)
        if schedule is None or schedule.state.schedule is not schedule:
            schedule = self._rebind(candidates, method, now_ms)
        return schedule.pick, schedule.valid_until_ms

    def _rebind(self, candidates: tuple[URL, ...], method: str, now: int) -> _Schedule:
        table = weight_table(candidates, method, now)
        state = self._state(candidates[0].service_key, method)
        with state.lock:
            schedule = state.rebind(candidates, table, now)
            schedule.valid_until_ms = table.valid_until_ms
        self._schedules.store(candidates, method, schedule, now, table.valid_until_ms)
        return schedule

    def tracked(
        self, service_key: str, method: str, *, now_ms: int | None = None
    ) -> frozenset[str]:
        """Identities whose rotation state is kept for (service key, method) at ``now_ms``:
        those in rotation and those gone for at most the recycle period (what Dubbo's
        ``getInvokerAddrList`` shows)."""
        state = self._states.get((service_key, method))
        if state is None:
            return frozenset()
        now = current_millis() if now_ms is None else now_ms
        with state.lock:
            state.purge(now)
            idents = set(state.detached)
            if state.schedule is not None:
                idents.update(state.schedule.idents.values())
        return frozenset(idents)

    def _state(self, service_key: str, method: str) -> _State:
        key = (service_key, method)
        state = self._states.get(key)
        if state is None:
            with self._states_lock:
                state = self._states.setdefault(key, _State(self._recycle_ms))
        return state
