"""The per-candidates view the two-choice balancers (``p2c``, ``adaptive``) draw from: eligible
providers, their weights and their statistics cells, cached per candidate tuple."""

from __future__ import annotations

from dataclasses import dataclass

from dubbo_py.cluster.loadbalance.base import IdentityCache, WeightTable, weight_table
from dubbo_py.cluster.stats import CallStats, StatCell, method_key
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = ["StatsTable", "StatsTableCache"]


@dataclass(frozen=True, slots=True, eq=False)
class StatsTable:
    """Eligible candidates (see :class:`WeightTable`), their weights and cells, in order."""

    table: WeightTable
    urls: tuple[URL, ...]
    weights: tuple[int, ...]
    cells: tuple[StatCell, ...]
    generation: int


class StatsTableCache:
    """:class:`StatsTable` per candidate tuple, rebuilt when weights may change or the
    statistics dropped cells."""

    def __init__(self, stats: CallStats) -> None:
        self.stats = stats
        self._cache: IdentityCache[StatsTable] = IdentityCache()

    def get(self, candidates: tuple[URL, ...], invocation: Invocation, now_ms: int) -> StatsTable:
        """The table for ``candidates`` at ``now_ms``: O(1) on a hit, O(n) to build."""
        method = invocation.method
        found = self._cache.lookup(candidates, method, now_ms)
        stats = self.stats
        if found is not None and found.generation == stats.generation:
            return found
        generation = stats.generation
        table = weight_table(candidates, method, now_ms)
        key = method_key(invocation.service, method)
        urls = tuple(candidates[i] for i in table.eligible)
        built = StatsTable(
            table=table,
            urls=urls,
            weights=tuple(table.weights[i] for i in table.eligible),
            cells=tuple(stats.cell(url.address, key) for url in urls),
            generation=generation,
        )
        self._cache.store(candidates, method, built, now_ms, table.valid_until_ms)
        return built
