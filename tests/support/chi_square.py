"""Pearson's chi-square statistic, for tests of weighted distributions."""

from __future__ import annotations

from collections.abc import Hashable, Mapping

# Upper 0.1 % points of the chi-square distribution (degrees of freedom -> critical value), from
# the standard tables: a correct sampler fails one of these with probability 0.001 per test.
CHI2_999 = {1: 10.828, 2: 13.816, 3: 16.266, 4: 18.467, 5: 20.515}


def chi_square(observed: Mapping[Hashable, int], expected: Mapping[Hashable, float]) -> float:
    """Pearson's statistic of ``observed`` counts against ``expected`` ones (same keys; a key
    missing from ``observed`` counts 0)."""
    return sum((observed.get(k, 0) - e) ** 2 / e for k, e in expected.items())
