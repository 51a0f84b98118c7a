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

from dubbo_py.cluster.loadbalance._level_index import LevelBalancer
from dubbo_py.cluster.stats import CallStats, StatCell

__all__ = ["LeastActiveLoadBalance"]


def _active(cell: StatCell) -> int:
    return cell.active


class LeastActiveLoadBalance(LevelBalancer):
    """Dubbo's ``leastactive`` balancer, reading ``stats`` (default: :func:`default_stats`)."""

    name = "leastactive"

    def __init__(self, stats: CallStats | None = None, rng: random.Random | None = None) -> None:
        super().__init__(_active, per_window=False, stats=stats, rng=rng)
