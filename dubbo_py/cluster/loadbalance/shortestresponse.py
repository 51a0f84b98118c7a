"""Shortest expected response, as Dubbo 3's ``ShortestResponseLoadBalance``.

Each provider's estimate is ``average * (active + 1)``: the average elapsed time of its
succeeded calls in the current slide window (whole milliseconds, as Dubbo's ``long``
arithmetic, so sub-millisecond differences tie) times the calls that would be in flight with
this one. The smallest estimate wins; ties are split by weighted random, as ``leastactive``.
A provider with no succeeded call in the window estimates 0, so fresh providers (and everyone
right after a window reset) get tried -- Dubbo behaves the same.

Cost: O(log L) per call, L the number of distinct estimates: candidates are kept in a
:class:`~dubbo_py.cluster.loadbalance._level_index.LevelIndex` bucketed by estimate, updated
by the statistics when a call starts and ends. When the window resets (every 30 s by default)
the index is rebuilt once, O(n).
"""

from __future__ import annotations

import random

from dubbo_py.cluster.loadbalance._level_index import LevelIndexCache
from dubbo_py.cluster.loadbalance.base import LoadBalance, check_candidates, current_millis
from dubbo_py.cluster.stats import CallStats, StatCell, default_stats
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = ["ShortestResponseLoadBalance"]


def _estimate(cell: StatCell) -> int:
    return cell.window_average * (cell.active + 1)


class ShortestResponseLoadBalance(LoadBalance):
    """Dubbo's ``shortestresponse`` balancer, reading ``stats`` (default:
    :func:`default_stats`)."""

    name = "shortestresponse"

    def __init__(self, stats: CallStats | None = None, rng: random.Random | None = None) -> None:
        stats = stats if stats is not None else default_stats()
        self._indexes = LevelIndexCache(stats, _estimate, per_window=True)
        self._rng = rng if rng is not None else random.Random()

    def select(
        self, candidates: tuple[URL, ...], invocation: Invocation, *, now_ms: int | None = None
    ) -> URL:
        """The candidate expected to answer first."""
        check_candidates(candidates)
        if len(candidates) == 1:
            return candidates[0]
        now = current_millis() if now_ms is None else now_ms
        return self._indexes.get(candidates, invocation, now).pick(self._rng)
