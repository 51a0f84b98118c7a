"""Fewest calls in flight, as Dubbo's ``LeastActiveLoadBalance``.

The providers with the smallest number of active calls (from :class:`CallStats`) are the
contenders; a single one wins outright, several are split by weighted random (uniform when
their weights are equal).

Cost: O(log L) per call, L the number of distinct in-flight counts -- not O(n). Candidates are
kept in a :class:`~dubbo_py.cluster.loadbalance._level_index.LevelIndex` bucketed by their
in-flight count and updated by the statistics when a call starts and ends; a selection reads
the lowest bucket only. Building the index for a new candidate tuple is O(n), once.
"""

from __future__ import annotations

import random

from dubbo_py.cluster.loadbalance._level_index import LevelIndexCache
from dubbo_py.cluster.loadbalance.base import LoadBalance, check_candidates, current_millis
from dubbo_py.cluster.stats import CallStats, StatCell, default_stats
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = ["LeastActiveLoadBalance"]


def _active(cell: StatCell) -> int:
    return cell.active


class LeastActiveLoadBalance(LoadBalance):
    """Dubbo's ``leastactive`` balancer, reading ``stats`` (default: :func:`default_stats`)."""

    name = "leastactive"

    def __init__(self, stats: CallStats | None = None, rng: random.Random | None = None) -> None:
        stats = stats if stats is not None else default_stats()
        self._indexes = LevelIndexCache(stats, _active, per_window=False)
        self._rng = rng if rng is not None else random.Random()

    def select(
        self, candidates: tuple[URL, ...], invocation: Invocation, *, now_ms: int | None = None
    ) -> URL:
        """A least-active candidate."""
        check_candidates(candidates)
        if len(candidates) == 1:
            return candidates[0]
        now = current_millis() if now_ms is None else now_ms
        return self._indexes.get(candidates, invocation, now).pick(self._rng)
