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

from dubbo_py.cluster.loadbalance._level_index import LevelBalancer
from dubbo_py.cluster.stats import CallStats, StatCell

__all__ = ["ShortestResponseLoadBalance"]


def _estimate(cell: StatCell) -> int:
    return cell.window_average * (cell.active + 1)


class ShortestResponseLoadBalance(LevelBalancer):
    """Dubbo's ``shortestresponse`` balancer, reading ``stats`` (default:
    :func:`default_stats`)."""

    name = "shortestresponse"

    def __init__(self, stats: CallStats | None = None, rng: random.Random | None = None) -> None:
        super().__init__(_estimate, per_window=True, stats=stats, rng=rng)
