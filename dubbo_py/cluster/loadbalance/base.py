"""The load balancer protocol, Dubbo's warmup weight, and the per-candidates caches.

A load balancer maps (candidates, invocation) to one candidate. Every balancer here follows the
Apache Dubbo 3 class of the same name; the weight of a provider is Dubbo's
``AbstractLoadBalance.getWeight``:

* ``weight`` = ``<method>.weight`` or ``weight`` of the provider URL (default 100);
* when ``weight > 0`` and the URL has ``timestamp`` (provider start, epoch ms):
  ``uptime = now - timestamp``; ``uptime < 0`` (clock skew) gives 1; ``0 < uptime < warmup``
  (``warmup``, default 600 000 ms) gives ``calculateWarmupWeight``:
  ``ww = (int) (uptime / ((float) warmup / weight))`` clamped to ``[1, weight]`` -- computed in
  32-bit floats, as Java does, so the values match a Java consumer's bit for bit;
* a negative weight counts as 0.

**One deliberate rule on top of Dubbo:** a provider whose weight is 0 receives no traffic while
any candidate has a positive weight, under every balancer (Dubbo's ``random`` and
``roundrobin`` already behave so; its ``leastactive``, ``shortestresponse`` and
``consistenthash`` could still pick such a provider). ``weight=0`` is how an operator drains a
provider, so it must mean the same thing whichever balancer a consumer uses. When every
candidate weighs 0, all are treated alike.

**Flat selection cost.** Callers pass the *same tuple object* while the candidate set is
unchanged, so everything that depends only on the candidates (weights, cumulative weights, hash
rings, statistics cells) is computed once per tuple and cached under the tuple's identity; the
cache entry holds a strong reference to the tuple and is matched with ``is``, so a recycled
``id`` can never alias. Warmup weights change with time; a cached entry records the earliest
instant at which any of its weights can change and is recomputed then (and only then).
"""

from __future__ import annotations

import math
import random
import struct
import threading
import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate
from typing import Generic, Protocol, TypeVar

from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = [
    "DEFAULT_WARMUP",
    "DEFAULT_WEIGHT",
    "ChoosingLoadBalance",
    "IdentityCache",
    "LoadBalance",
    "Picker",
    "WeightTable",
    "calculate_warmup_weight",
    "check_candidates",
    "current_millis",
    "effective_weight",
    "weight_stable_until",
    "weight_table",
]

#: Weight of a provider that does not say (Dubbo's ``DEFAULT_WEIGHT``).
DEFAULT_WEIGHT = 100
#: Warmup period in ms of a provider that does not say (Dubbo's ``DEFAULT_WARMUP``, 10 minutes).
DEFAULT_WARMUP = 600_000

_F32 = struct.Struct("<f")
#: Up to this many distinct weights, a weighted pick walks the weight classes (O(classes))
#: instead of bisecting the cumulative weights (O(log n)).
_MAX_CLASSES = 8


class LoadBalance(Protocol):
    """Picks one provider for one call. ``candidates`` is non-empty; pass the same tuple object
    while the candidate set is unchanged so that precomputation is reused. ``now_ms`` (epoch ms)
    is the clock warmup weights are read against; ``None`` means the wall clock.

    A balancer subclasses this protocol, so it inherits :meth:`picker` (none) unless it has
    one of its own."""

    name: str

    def select(
        self, candidates: tuple[URL, ...], invocation: Invocation, *, now_ms: int | None = None
    ) -> URL:
        """The provider this invocation goes to."""
        ...

    def picker(self, candidates: tuple[URL, ...], method: str, now_ms: int) -> Picker | None:
        """For a call plan (:mod:`dubbo_py.cluster.plan`): see :data:`Picker`. The default,
        for balancers that read the call or call statistics, is none (the plan then calls
        :meth:`select`)."""
        return None


#: What a balancer's ``picker(candidates, method, now_ms)`` returns for a call plan:
#: ``(pick, valid_until_ms)``. While ``now_ms < valid_until_ms``, ``pick(now_ms)`` chooses among
#: those candidates exactly as ``select`` would for a call of ``method`` that carries nothing
#: else the balancer reads, or returns ``None`` when it cannot (the caller then uses
#: ``select``). Balancers that read the call or call statistics (consistent hash, least
#: active, shortest response) have no picker.
Picker = tuple[Callable[[int], URL | None], float]


def current_millis() -> int:
    """The wall clock in epoch milliseconds (what provider ``timestamp`` parameters use)."""
    return time.time_ns() // 1_000_000


def check_candidates(candidates: tuple[URL, ...]) -> None:
    """Reject an empty candidate tuple with a clear message."""
    if not candidates:
        raise ValueError("load balancer called with no candidates")


class ChoosingLoadBalance(LoadBalance):
    """A balancer whose :meth:`select` settles the cases every balancer settles alike -- no
    candidate is an error, a single one is the answer, ``now_ms`` defaults to the wall clock --
    and leaves the real choice among two or more to :meth:`choose`.

    The hot path makes no more calls than a hand-written ``select`` did: the candidate check
    runs only when fewer than two are left and the clock is read inline, so :meth:`choose` is
    the one call added."""

    def select(
        self, candidates: tuple[URL, ...], invocation: Invocation, *, now_ms: int | None = None
    ) -> URL:
        """The provider this invocation goes to."""
        if len(candidates) < 2:
            check_candidates(candidates)
            return candidates[0]
        # current_millis written out: this runs on every call to most balancers.
        now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        return self.choose(candidates, invocation, now)

    def choose(self, candidates: tuple[URL, ...], invocation: Invocation, now_ms: int) -> URL:
        """The provider among two or more ``candidates``, at epoch-ms ``now_ms``."""
        raise NotImplementedError


def _f32(value: float) -> float:
    # Round a double to the nearest 32-bit float, as a Java (float) cast does.
    return float(_F32.unpack(_F32.pack(value))[0])


def calculate_warmup_weight(uptime: int, warmup: int, weight: int) -> int:
    """Dubbo's ``calculateWarmupWeight``: ``(int) (uptime / ((float) warmup / weight))`` in
    32-bit float arithmetic, clamped to ``[1, weight]``.

    Rounding each step of a double computation to float32 gives exactly the float32 result,
    because a double carries more than twice float32's precision (no double-rounding error for
    one division).
    """
    if warmup <= 0 or weight <= 0:
        return max(weight, 0)
    divisor = _f32(_f32(float(warmup)) / _f32(float(weight)))
    quotient = _f32(_f32(float(uptime)) / divisor)
    ww = int(quotient)
    return 1 if ww < 1 else min(ww, weight)


def _int_param(value: str | None, default: int) -> int:
    if not value:
        return default
    try:
        return int(value.strip())
    except ValueError:
        try:
            return int(float(value))
        except (ValueError, OverflowError):
            return default


def _weight_params(url: URL, method: str) -> tuple[int, int, int]:
    # weight and warmup are Java ints in Dubbo; clamping keeps absurd values from overflowing
    # the float32 arithmetic instead of failing the call.
    weight = _clamp_int(_int_param(url.get_method_parameter(method, "weight"), DEFAULT_WEIGHT))
    timestamp = _int_param(url.parameters.get("timestamp"), 0)
    warmup = _clamp_int(_int_param(url.parameters.get("warmup"), DEFAULT_WARMUP))
    return weight, timestamp, warmup


def _clamp_int(value: int) -> int:
    return max(-(2**31), min(value, 2**31 - 1))


def _weight_at(weight: int, timestamp: int, warmup: int, now_ms: int) -> int:
    if weight > 0 and timestamp > 0:
        uptime = now_ms - timestamp
        if uptime < 0:
            return 1
        if 0 < uptime < warmup:
            return calculate_warmup_weight(uptime, warmup, weight)
    return max(weight, 0)


def effective_weight(url: URL, method: str, now_ms: int) -> int:
    """The weight of ``url`` for ``method`` at ``now_ms`` with warmup applied (Dubbo's
    ``getWeight``): always 0 for a configured weight <= 0, else in ``[1, weight]``."""
    weight, timestamp, warmup = _weight_params(url, method)
    return _weight_at(weight, timestamp, warmup, now_ms)


def _stable_until(weight: int, timestamp: int, warmup: int, now_ms: int) -> float:
    if weight <= 0 or timestamp <= 0:
        return math.inf
    uptime = now_ms - timestamp
    if uptime < 0:
        return float(timestamp)  # at uptime 0 Dubbo switches to the full weight
    if uptime == 0:
        return float(timestamp + 1) if warmup > 1 else math.inf
    if uptime >= warmup:
        return math.inf
    current = calculate_warmup_weight(uptime, warmup, weight)
    if current >= weight:
        return math.inf  # monotone and clamped: stays at weight, then is weight after warmup
    # In exact arithmetic the weight reaches current + 1 at uptime (current+1)*warmup/weight;
    # float32 rounding can move that point by at most ~uptime * 2**-22 ms, so stop short of it.
    threshold = -(-(current + 1) * warmup // weight)
    margin = (threshold >> 21) + 2
    until = min(warmup, threshold - margin)
    return float(timestamp + max(until, uptime + 1))


def weight_stable_until(url: URL, method: str, now_ms: int) -> float:
    """An instant (epoch ms, possibly ``inf``) before which :func:`effective_weight` of ``url``
    cannot differ from its value at ``now_ms``: ``effective_weight(url, method, t)`` is the same
    for every ``now_ms <= t < weight_stable_until(url, method, now_ms)``. Conservative (may be
    earlier than the real change) but never later."""
    weight, timestamp, warmup = _weight_params(url, method)
    return _stable_until(weight, timestamp, warmup, now_ms)


@dataclass(frozen=True, slots=True, eq=False)
class WeightTable:
    """The weights of one candidate tuple for one method, valid on ``[computed_ms,
    valid_until_ms)``.

    ``eligible`` are the indices that may be chosen: those with a positive weight, or all of
    them when none has one. ``cumulative`` holds the running sums of the eligible weights, for a
    weighted pick by bisection; ``uniform`` says every eligible weight is equal (a plain uniform
    pick is then exact, and cheaper). ``classes`` groups the eligible candidates by weight,
    ``(weight, weight x count, candidates)``, when there are few distinct weights (else it is
    empty): a weighted pick is then one walk over the classes and one index, whatever the
    number of providers.
    """

    candidates: tuple[URL, ...]
    method: str
    weights: tuple[int, ...]
    eligible: tuple[int, ...]
    cumulative: tuple[int, ...]
    total: int
    uniform: bool
    computed_ms: int
    valid_until_ms: float
    classes: tuple[tuple[int, int, tuple[URL, ...]], ...] = ()

    def pick(self, rng: random.Random) -> URL:
        """A weighted-random eligible candidate (Dubbo's ``RandomLoadBalance`` choice)."""
        eligible = self.eligible
        if self.uniform:
            return self.candidates[eligible[rng.randrange(len(eligible))]]
        offset = rng.randrange(self.total)
        if self.classes:
            # P(i) = w_i / total as with the bisection: the offset falls in class c's span with
            # probability w_c * n_c / total, then on each of its members alike.
            for weight, span, members in self.classes:
                if offset < span:
                    return members[offset // weight]
                offset -= span
        return self.candidates[eligible[bisect_right(self.cumulative, offset)]]


def weight_table(candidates: tuple[URL, ...], method: str, now_ms: int) -> WeightTable:
    """Compute the :class:`WeightTable` of ``candidates`` at ``now_ms`` -- O(n)."""
    weights: list[int] = []
    until = math.inf
    for url in candidates:
        weight, timestamp, warmup = _weight_params(url, method)
        weights.append(_weight_at(weight, timestamp, warmup, now_ms))
        if timestamp > 0 and weight > 0:
            stable = _stable_until(weight, timestamp, warmup, now_ms)
            if stable < until:
                until = stable
    eligible = tuple(i for i, w in enumerate(weights) if w > 0) or tuple(range(len(weights)))
    eligible_weights = [weights[i] for i in eligible]
    total = sum(eligible_weights)
    first = eligible_weights[0] if eligible_weights else 0
    uniform = total == 0 or all(w == first for w in eligible_weights)
    # The candidates themselves, not their indices: a pick then reads one tuple slot.
    by_weight: dict[int, list[URL]] = {}
    for i in eligible:
        by_weight.setdefault(weights[i], []).append(candidates[i])
    classes = (
        tuple((w, w * len(members), tuple(members)) for w, members in by_weight.items())
        if not uniform and len(by_weight) <= _MAX_CLASSES
        else ()
    )
    return WeightTable(
        candidates=candidates,
        method=method,
        weights=tuple(weights),
        eligible=eligible,
        cumulative=tuple(accumulate(eligible_weights)),
        total=total,
        uniform=uniform,
        computed_ms=now_ms,
        valid_until_ms=until,
        classes=classes,
    )


T = TypeVar("T")


@dataclass(frozen=True, slots=True, eq=False)
class _Entry(Generic[T]):
    candidates: tuple[URL, ...]
    value: T
    computed_ms: int
    valid_until_ms: float


class IdentityCache(Generic[T]):
    """Per-candidates precomputation keyed by (tuple identity, method).

    An entry keeps the tuple alive and is matched with ``is``, so an ``id`` recycled by a new
    tuple can't return a wrong entry. An entry is used on ``[computed_ms, valid_until_ms)``.
    The oldest entries are dropped beyond ``max_entries`` (one per live candidate set and
    method is what a steady state needs; a router that filters per call produces fresh tuples,
    which simply miss).
    """

    def __init__(self, max_entries: int = 64) -> None:
        self._entries: dict[tuple[int, str], _Entry[T]] = {}
        self._max_entries = max_entries
        self._lock = threading.Lock()

    def lookup(self, candidates: tuple[URL, ...], method: str, now_ms: int) -> T | None:
        """The cached value, or ``None`` when absent or out of its validity window -- O(1)."""
        entry = self._entries.get((id(candidates), method))
        if (
            entry is not None
            and entry.candidates is candidates
            and entry.computed_ms <= now_ms < entry.valid_until_ms
        ):
            return entry.value
        return None

    def store(
        self,
        candidates: tuple[URL, ...],
        method: str,
        value: T,
        computed_ms: int,
        valid_until_ms: float,
    ) -> None:
        """Remember ``value`` for ``candidates`` and ``method``."""
        key = (id(candidates), method)
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = _Entry(candidates, value, computed_ms, valid_until_ms)
            while len(self._entries) > self._max_entries:
                del self._entries[next(iter(self._entries))]

    def forget(self, candidates: tuple[URL, ...], method: str) -> None:
        """Drop the entry of ``candidates`` and ``method``, if it is theirs."""
        key = (id(candidates), method)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.candidates is candidates:
                del self._entries[key]

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._entries.clear()
