"""Weighted random, as Dubbo's ``RandomLoadBalance``.

Equal weights (or all zero) pick uniformly; otherwise ``offset = random(0, total)`` and the
first provider whose cumulative weight exceeds ``offset`` wins, so a provider of weight ``w``
is chosen with probability ``w / total`` and a weight-0 provider never is.

Cost: O(1) for equal weights; with a few distinct weights (up to 8) a walk over the weight
classes (pick a class by its share of the total weight, then a member uniformly: the same
``w / total``); else O(log n), a bisection of the cached cumulative weights. The O(n) weight
table is built once per candidate tuple and again only when a provider in warmup changes
weight.

Dubbo 3.x skips weighting when the *first* provider has neither ``weight`` nor ``timestamp``
(``needWeightLoadBalance``); that shortcut ignores the weights of the others, so it is not
reproduced -- the weight table makes the general case as cheap.
"""

from __future__ import annotations

import random

from dubbo_py.cluster.loadbalance.base import (
    ChoosingLoadBalance,
    IdentityCache,
    Picker,
    WeightTable,
    weight_table,
)
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = ["RandomLoadBalance"]


class RandomLoadBalance(ChoosingLoadBalance):
    """Dubbo's ``random`` balancer. ``rng`` may be seeded for reproducible tests."""

    name = "random"

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng if rng is not None else random.Random()
        self._tables: IdentityCache[WeightTable] = IdentityCache()

    def choose(self, candidates: tuple[URL, ...], invocation: Invocation, now_ms: int) -> URL:
        """A weighted-random candidate."""
        return self._table(candidates, invocation.method, now_ms).pick(self._rng)

    def picker(self, candidates: tuple[URL, ...], method: str, now_ms: int) -> Picker | None:
        """For a call plan: ``(pick, valid_until_ms)``, ``pick(now_ms)`` choosing as
        :meth:`select` does while ``now_ms < valid_until_ms``."""
        if len(candidates) < 2:
            return None
        table = self._table(candidates, method, now_ms)
        rng = self._rng
        return (lambda _now_ms: table.pick(rng)), table.valid_until_ms

    def _table(self, candidates: tuple[URL, ...], method: str, now: int) -> WeightTable:
        table = self._tables.lookup(candidates, method, now)
        if table is None:
            table = weight_table(candidates, method, now)
            self._tables.store(candidates, method, table, now, table.valid_until_ms)
        return table
