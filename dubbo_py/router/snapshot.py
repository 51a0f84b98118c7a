"""The immutable, indexed provider snapshot that routing is precomputed against.

Routers speak in *masks*: a Python ``int`` used as a bitset, bit ``i`` standing for
``snapshot.providers[i]``. Intersecting two precomputed masks is one C-level ``&`` whatever the
number of providers, which is what keeps per-call routing cost flat.

Turning the surviving mask back into providers (:meth:`Snapshot.select`) is the one step whose
work grows with the number of survivors, so its results are remembered per mask: a handful of
rule decisions produce a handful of distinct masks, and a repeated mask returns the *same*
tuple object, which is also what lets load balancers reuse their per-tuple precomputation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import compress, count

from dubbo_py.url import URL

__all__ = ["SELECT_CACHE_SIZE", "Snapshot", "iter_bits", "mask_from_flags", "mask_of"]

#: Distinct survivor masks whose provider tuples each snapshot remembers.
SELECT_CACHE_SIZE = 64

# bin() digits '0'/'1' to bytes 0/1, so itertools.compress can walk a mask's bits in C.
_BIT_BYTES = bytes.maketrans(b"01", b"\x00\x01")


_DIGITS = bytes.maketrans(b"\x00\x01", b"01")


def _bit_flags(mask: int) -> bytes:
    """One byte per bit of ``mask`` (0 or 1), lowest bit first."""
    return bin(mask)[:1:-1].encode("ascii").translate(_BIT_BYTES)


def mask_from_flags(flags: bytes) -> int:
    """The mask whose bit ``i`` is set when ``flags[i]`` is 1 (every byte is 0 or 1); linear
    in C, where OR-ing ``1 << i`` bit by bit into a big int is quadratic."""
    if not flags:
        return 0
    return int(flags[::-1].translate(_DIGITS), 2)


def mask_of(indices: Iterable[int]) -> int:
    """The mask with exactly these bits set."""
    mask = 0
    for i in indices:
        mask |= 1 << i
    return mask


def iter_bits(mask: int) -> Iterator[int]:
    """The indices of the set bits of ``mask`` (non-negative), lowest first; linear in the
    mask's bit length (peeling the lowest bit off a big int would be quadratic)."""
    if mask < 0:
        raise ValueError("a mask is a non-negative int")
    if not mask:
        return iter(())
    return compress(count(), _bit_flags(mask))


@dataclass(frozen=True, eq=False)
class Snapshot:
    """One immutable view of a service's providers; ``version`` grows with each notification."""

    providers: tuple[URL, ...]
    version: int = 0
    all: int = field(init=False)
    _select: Callable[[int], tuple[URL, ...]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "all", (1 << len(self.providers)) - 1)
        # The cache closes over the providers, not over self: no reference cycle, so a
        # replaced snapshot is freed at once.
        select = lru_cache(maxsize=SELECT_CACHE_SIZE)(_selector(self.providers))
        object.__setattr__(self, "_select", select)

    def __len__(self) -> int:
        return len(self.providers)

    def mask_where(self, predicate: Callable[[URL], bool]) -> int:
        """The mask of the providers for which ``predicate`` holds (evaluated now, once)."""
        return mask_from_flags(bytes(1 if predicate(p) else 0 for p in self.providers))

    def select(self, mask: int) -> tuple[URL, ...]:
        """The providers of ``mask``, in snapshot order; the same mask gives the same tuple
        object while it stays among the last :data:`SELECT_CACHE_SIZE` masks selected."""
        if mask == self.all:
            return self.providers
        return self._select(mask)


def _selector(providers: tuple[URL, ...]) -> Callable[[int], tuple[URL, ...]]:
    def select(mask: int) -> tuple[URL, ...]:
        if mask < 0 or mask.bit_length() > len(providers):
            raise ValueError(f"mask has bits beyond the {len(providers)} providers")
        return tuple(compress(providers, _bit_flags(mask))) if mask else ()

    return select
