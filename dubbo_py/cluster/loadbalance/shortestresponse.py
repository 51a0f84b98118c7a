"""Shortest expected response, as Dubbo 3's ``ShortestResponseLoadBalance``.

Each provider's estimate is ``average * (active + 1)``: the average elapsed time of its
succeeded calls in the current slide window (whole milliseconds, as Dubbo's ``long``
arithmetic, so sub-millisecond differences tie) times the calls that would be in flight with
this one. The smallest estimate wins; ties are split by weighted random, as ``leastactive``.
A provider with no succeeded call in the window estimates 0, so fresh providers (and everyone
right after a window reset) get tried -- Dubbo behaves the same.

Cost: O(n) per call (the live statistics of every candidate are read, through cached cell
references, in C-level passes); the pick among a full tie is O(log n).
"""

from __future__ import annotations

import random
from operator import attrgetter, mul

from dubbo_py.cluster.loadbalance._stats_table import StatsTableCache, pick_lowest
from dubbo_py.cluster.loadbalance.base import check_candidates, current_millis
from dubbo_py.cluster.stats import CallStats, default_stats
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = ["ShortestResponseLoadBalance"]

_ACTIVE = attrgetter("active")
_AVERAGE = attrgetter("window_average")
_PLUS_ONE = (1).__add__


class ShortestResponseLoadBalance:
    """Dubbo's ``shortestresponse`` balancer, reading ``stats`` (default:
    :func:`default_stats`)."""

    name = "shortestresponse"

    def __init__(self, stats: CallStats | None = None, rng: random.Random | None = None) -> None:
        self._tables = StatsTableCache(stats if stats is not None else default_stats())
        self._rng = rng if rng is not None else random.Random()

    def select(
        self, candidates: tuple[URL, ...], invocation: Invocation, *, now_ms: int | None = None
    ) -> URL:
        """The candidate expected to answer first."""
        check_candidates(candidates)
        if len(candidates) == 1:
            return candidates[0]
        now = current_millis() if now_ms is None else now_ms
        st = self._tables.get(candidates, invocation, now)
        self._tables.stats.refresh_window()
        cells = st.cells
        # average x (active + 1), all in C-level passes
        estimates = list(map(mul, map(_AVERAGE, cells), map(_PLUS_ONE, map(_ACTIVE, cells))))
        return pick_lowest(estimates, st, self._rng)
