"""Power of two choices, as Dubbo 3.2+'s ``p2c``: two distinct candidates drawn uniformly at
random, the one with fewer calls in flight wins.

Draw: the first position uniformly among the ``n`` eligible candidates, the second uniformly
among the other ``n - 1`` (Dubbo's ``AdaptiveLoadBalance.selectByP2C`` draw); with exactly two
candidates both are compared. A tie (equal in-flight counts) is split by weight between the
two (``offset < w1`` of ``w1 + w2``; uniform when both weigh 0), as Dubbo splits a tie of
equal loads. Providers of weight 0 are left out while any candidate weighs more (dubbo-py's
drain rule, see :mod:`dubbo_py.cluster.loadbalance.base`).

A provider that is slow or stuck keeps calls in flight, so it loses most draws it appears in:
traffic moves away from it within a few calls, yet it keeps being probed.

Cost: O(1) per call (two random numbers, two attribute reads); the eligible candidates and
their statistics cells are built once per candidate tuple.
"""

from __future__ import annotations

import random

from dubbo_py.cluster.loadbalance._stats_table import StatsTableCache
from dubbo_py.cluster.loadbalance.base import ChoosingLoadBalance
from dubbo_py.cluster.stats import CallStats, default_stats
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = ["P2CLoadBalance", "two_positions", "weighted_tie"]


def two_positions(n: int, rng: random.Random) -> tuple[int, int]:
    """Two distinct positions in ``range(n)`` (``n >= 2``), each pair equally likely."""
    if n == 2:
        return 0, 1
    first = rng.randrange(n)
    second = rng.randrange(n - 1)
    if second >= first:
        second += 1
    return first, second


def weighted_tie(first: int, second: int, w1: int, w2: int, rng: random.Random) -> int:
    """``first`` with probability ``w1 / (w1 + w2)``, else ``second`` (even odds when both
    weigh 0)."""
    total = w1 + w2
    if total > 0:
        return first if rng.randrange(total) < w1 else second
    return first if rng.randrange(2) == 0 else second


class P2CLoadBalance(ChoosingLoadBalance):
    """Dubbo's ``p2c`` balancer, reading in-flight counts from ``stats`` (default:
    :func:`default_stats`)."""

    name = "p2c"

    def __init__(self, stats: CallStats | None = None, rng: random.Random | None = None) -> None:
        self._tables = StatsTableCache(stats if stats is not None else default_stats())
        self._rng = rng if rng is not None else random.Random()

    def choose(self, candidates: tuple[URL, ...], invocation: Invocation, now_ms: int) -> URL:
        """The less busy of two random candidates."""
        st = self._tables.get(candidates, invocation, now_ms)
        urls = st.urls
        if len(urls) == 1:
            return urls[0]
        rng = self._rng
        i, j = two_positions(len(urls), rng)
        cells = st.cells
        a, b = cells[i].active, cells[j].active
        if a != b:
            return urls[i] if a < b else urls[j]
        if st.table.uniform:
            return urls[i] if rng.randrange(2) == 0 else urls[j]
        return urls[weighted_tie(i, j, st.weights[i], st.weights[j], rng)]
