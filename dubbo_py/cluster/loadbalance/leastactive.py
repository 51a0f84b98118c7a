"""Fewest calls in flight, as Dubbo's ``LeastActiveLoadBalance``.

The providers with the smallest number of active calls (from :class:`CallStats`) are the
contenders; a single one wins outright, several are split by weighted random (uniform when
their weights are equal).

Cost: O(n) per call -- the active counts are live, so every candidate's count is read -- but
with a small constant: a handful of C-level passes over cached cell references (no URL parsing,
no dictionary look-ups, no Python-level loop). When every candidate ties, the pick is the
O(log n) bisection of the cached cumulative weights.
"""

from __future__ import annotations

import random
from operator import attrgetter

from dubbo_py.cluster.loadbalance._stats_table import StatsTableCache, pick_lowest
from dubbo_py.cluster.loadbalance.base import check_candidates, current_millis
from dubbo_py.cluster.stats import CallStats, default_stats
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = ["LeastActiveLoadBalance"]

_ACTIVE = attrgetter("active")


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
        return pick_lowest(list(map(_ACTIVE, st.cells)), st, self._rng)
