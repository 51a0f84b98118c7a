"""Adaptive, as Dubbo 3.2+'s ``adaptive``: power of two choices (see :mod:`.p2c`) on a load
that combines latency, calls in flight and success rate.

For a provider of (warmup) weight ``w`` and timeout ``T`` (the provider URL's
``<method>.timeout`` or ``timeout`` in ms, Dubbo's default 1 000 ms), the load is Dubbo's
``AdaptiveMetrics.getLoad``::

    load = (sqrt(ewma) + 1) * (inflight + 1) / (success_rate * w + 1)

- ``ewma``: moving average (beta 0.5) of the elapsed ms of this consumer's calls to the
  provider; it decays by half for each further ``T`` without a call ending, so a provider that
  was slow once is tried again;
- ``inflight``: this consumer's calls to it not yet ended;
- ``success_rate``: succeeded calls / (started calls + 1).

A provider not picked for ``2 T`` has load 0 (Dubbo's forced pick, so none starves). The lower
load of the two drawn candidates wins; equal loads are split by weight.

**Differs from Dubbo:** Dubbo multiplies the load by the CPU load the provider reports in every
response, and takes the latency from the provider's report; dubbo-py providers report neither,
so the consumer measures latency itself (elapsed time, including the network) and the CPU
factor is left out. (Without those reports, Dubbo's load is always 0 and its ``adaptive``
degrades to weighted random between two.)

Cost: O(1) per call; eligible candidates, cells and timeouts are built once per candidate tuple.
"""

from __future__ import annotations

import math
import random

from dubbo_py.cluster.loadbalance._stats_table import StatsTable, StatsTableCache
from dubbo_py.cluster.loadbalance.base import ChoosingLoadBalance, IdentityCache
from dubbo_py.cluster.loadbalance.p2c import two_positions, weighted_tie
from dubbo_py.cluster.stats import CallStats, StatCell, default_stats
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = ["DEFAULT_TIMEOUT_MS", "AdaptiveLoadBalance", "adaptive_load"]

#: Timeout of a provider URL that says none (Dubbo's ``DEFAULT_TIMEOUT``), in ms.
DEFAULT_TIMEOUT_MS = 1000


def _timeout_s(url: URL, method: str) -> float:
    raw = url.get_method_parameter(method, "timeout")
    try:
        value = float(raw) if raw else DEFAULT_TIMEOUT_MS
    except ValueError:
        value = DEFAULT_TIMEOUT_MS
    return (value if value > 0 and math.isfinite(value) else DEFAULT_TIMEOUT_MS) / 1000.0


def adaptive_load(cell: StatCell, weight: int, timeout_s: float, now: float) -> float:
    """The load of ``cell``'s provider at stats-clock instant ``now`` (seconds); see the module
    docstring."""
    if now - cell.last_pick > 2.0 * timeout_s:
        return 0.0
    ewma = cell.ewma_ms
    idle = now - cell.last_end
    if idle > timeout_s and ewma > 0.0:
        ewma = ewma / 2.0 ** min(int(idle / timeout_s), 64)
    inflight = cell.active
    started = cell.total + inflight
    success_rate = (started - inflight - cell.failed) / (started + 1)
    return (math.sqrt(ewma) + 1.0) * (inflight + 1) / (success_rate * weight + 1.0)


class AdaptiveLoadBalance(ChoosingLoadBalance):
    """Dubbo's ``adaptive`` balancer, reading ``stats`` (default: :func:`default_stats`)."""

    name = "adaptive"

    def __init__(self, stats: CallStats | None = None, rng: random.Random | None = None) -> None:
        self._stats = stats if stats is not None else default_stats()
        self._tables = StatsTableCache(self._stats)
        self._members: IdentityCache[tuple[StatsTable, tuple[_Member, ...]]] = IdentityCache()
        self._rng = rng if rng is not None else random.Random()

    def choose(self, candidates: tuple[URL, ...], invocation: Invocation, now_ms: int) -> URL:
        """The less loaded of two random candidates."""
        st = self._tables.get(candidates, invocation, now_ms)
        members = self._members_of(candidates, st, invocation.method, now_ms)
        if len(members) == 1:
            return members[0][0]
        rng = self._rng
        i, j = two_positions(len(members), rng)
        url_i, cell_i, weight_i, timeout_i = members[i]
        url_j, cell_j, weight_j, timeout_j = members[j]
        now = self._stats.now()
        load_i = adaptive_load(cell_i, weight_i, timeout_i, now)
        load_j = adaptive_load(cell_j, weight_j, timeout_j, now)
        if load_i < load_j or (
            load_i == load_j and weighted_tie(0, 1, weight_i, weight_j, rng) == 0
        ):
            cell_i.last_pick = now
            return url_i
        cell_j.last_pick = now
        return url_j

    def _members_of(
        self, candidates: tuple[URL, ...], st: StatsTable, method: str, now_ms: int
    ) -> tuple[_Member, ...]:
        found = self._members.lookup(candidates, method, now_ms)
        if found is not None and found[0] is st:
            return found[1]
        # One tuple per provider (and one float object per distinct timeout) keeps the two
        # reads of a selection on few memory lines, whatever the fleet's size.
        distinct: dict[float, float] = {}
        members = tuple(
            (url, cell, weight, distinct.setdefault(t, t))
            for url, cell, weight, t in zip(
                st.urls,
                st.cells,
                st.weights,
                (_timeout_s(url, method) for url in st.urls),
                strict=True,
            )
        )
        self._members.store(candidates, method, (st, members), now_ms, st.table.valid_until_ms)
        return members


#: (url, statistics cell, weight, timeout in seconds) of one eligible provider.
_Member = tuple[URL, StatCell, int, float]
