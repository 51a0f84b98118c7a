"""The immutable, indexed provider snapshot that routing is precomputed against.

Routers speak in *masks*: a Python ``int`` used as a bitset, bit ``i`` standing for
``snapshot.providers[i]``. Intersecting two precomputed masks is one C-level ``&`` whatever the
number of providers, which is what keeps per-call routing cost flat.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from dubbo_py.url import URL

__all__ = ["Snapshot", "iter_bits", "mask_of"]


def mask_of(indices: Iterable[int]) -> int:
    """The mask with exactly these bits set."""
    mask = 0
    for i in indices:
        mask |= 1 << i
    return mask


def iter_bits(mask: int) -> Iterator[int]:
    """The indices of the set bits of ``mask``, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


@dataclass(frozen=True, eq=False)
class Snapshot:
    """One immutable view of a service's providers; ``version`` grows with each notification."""

    providers: tuple[URL, ...]
    version: int = 0
    all: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "all", (1 << len(self.providers)) - 1)

    def __len__(self) -> int:
        return len(self.providers)

    def mask_where(self, predicate: Callable[[URL], bool]) -> int:
        """The mask of the providers for which ``predicate`` holds (evaluated now, once)."""
        mask = 0
        for i, provider in enumerate(self.providers):
            if predicate(provider):
                mask |= 1 << i
        return mask

    def select(self, mask: int) -> tuple[URL, ...]:
        """The providers of ``mask``, in snapshot order."""
        if mask == self.all:
            return self.providers
        providers = self.providers
        return tuple(providers[i] for i in iter_bits(mask))
