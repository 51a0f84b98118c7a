"""Weighted random, as Dubbo's ``RandomLoadBalance``.

Equal weights (or all zero) pick uniformly; otherwise ``offset = random(0, total)`` and the
first provider whose cumulative weight exceeds ``offset`` wins, so a provider of weight ``w``
is chosen with probability ``w / total`` and a weight-0 provider never is.

Cost: O(1) for equal weights, O(log n) (a bisection of the cached cumulative weights)
otherwise; the O(n) weight table is built once per candidate tuple and again only when a
provider in warmup changes weight.

Dubbo 3.x skips weighting when the *first* provider has neither ``weight`` nor ``timestamp``
(``needWeightLoadBalance``); that shortcut ignores the weights of the others, so it is not
reproduced -- the weight table makes the general case as cheap.
"""

from __future__ import annotations

import random

from dubbo_py.cluster.loadbalance.base import (
    IdentityCache,
    WeightTable,
    check_candidates,
    current_millis,
    weight_table,
)
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = ["RandomLoadBalance"]


class RandomLoadBalance:
    """Dubbo's ``random`` balancer. ``rng`` may be seeded for reproducible tests."""

    name = "random"

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng if rng is not None else random.Random()
        self._tables: IdentityCache[WeightTable] = IdentityCache()

    def select(
        self, candidates: tuple[URL, ...], invocation: Invocation, *, now_ms: int | None = None
    ) -> URL:
        """A weighted-random candidate."""
        check_candidates(candidates)
        if len(candidates) == 1:
            return candidates[0]
        now = current_millis() if now_ms is None else now_ms
        method = invocation.method
        table = self._tables.lookup(candidates, method, now)
        if table is None:
            table = weight_table(candidates, method, now)
            self._tables.store(candidates, method, table, now, table.valid_until_ms)
        return table.pick(self._rng)
