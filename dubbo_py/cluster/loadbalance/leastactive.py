"""Fewest calls in flight, as Dubbo's ``LeastActiveLoadBalance``.

The providers with the smallest number of active calls (from :class:`CallStats`) are the
contenders; a single one wins outright, several are split by weighted random (uniform when
their weights are equal).

Cost: O(n) per call -- the active counts are live, so every candidate's count is read (a list
comprehension over cached cell references; no URL parsing, no dictionary look-ups). When every
candidate ties, the pick itself is the O(log n) bisection of the cached cumulative weights.
"""

from __future__ import annotations

import random

from dubbo_py.cluster.loadbalance._stats_table import StatsTableCache
from dubbo_py.cluster.loadbalance.base import check_candidates, current_millis, pick_among
from dubbo_py.cluster.stats import CallStats, default_stats
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = ["LeastActiveLoadBalance"]


class LeastActiveLoadBalance:
    """Dubbo's ``leastactive`` balancer, reading ``stats`` (default: :func:`default_stats`)."""

    name = "leastactive"

    def __init__(self, stats: CallStats | None = None, rng: random.Random | None = None) -> None:
        self._tables = StatsTableCache(stats if stats is not None else default_stats())
        self._rng = rng if rng is not None else random.Random()

    def select(
        self, candidates: tuple[URL, ...], invocation: Invocation, *, now_ms: int | None = None
    ) -> URL:
        """A least-active candidate."""
        check_candidates(candidates)
        if len(candidates) == 1:
            return candidates[0]
        now = current_millis() if now_ms is None else now_ms
        st = self._tables.get(candidates, invocation, now)
        actives = [cell.active for cell in st.cells]
        least = min(actives)
        count = actives.count(least)
        if count == 1:
            return st.urls[actives.index(least)]
        if count == len(actives):
            return st.table.pick(self._rng)
        ties = [i for i, active in enumerate(actives) if active == least]
        return pick_among(st.urls, ties, st.weights, self._rng)
