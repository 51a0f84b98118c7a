"""The immutable, indexed provider snapshot that routing is precomputed against.

Routers speak in *masks*: a Python ``int`` used as a bitset, bit ``i`` standing for
``snapshot.providers[i]``. Intersecting two precomputed masks is one C-level ``&`` whatever the
number of providers, which is what keeps per-call routing cost flat.

Turning the surviving mask back into providers (:meth:`Snapshot.select`) is the one step whose
work grows with the number of survivors, so its results are remembered per mask: a handful of
rule decisions produce a handful of distinct masks, and a repeated mask returns the *same*
tuple object, which is also what lets load balancers reuse their per-tuple precomputation.

Binding is incremental. A snapshot made with :meth:`Snapshot.following` knows how its providers
follow from the previous snapshot's (a :class:`Delta`: which providers left, which arrived).
Routers ask for their masks and groupings by a key (:meth:`Snapshot.mask_by`,
:meth:`Snapshot.partition`); a key the previous snapshot answered is answered here by shifting
its mask to the new indices and testing only the providers that arrived, so a notification
where one provider of ten thousand changed costs a few big-int operations per mask instead of
a pass over the fleet.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import _CacheInfo, _lru_cache_wrapper, partial
from itertools import compress, count
from operator import is_not, lt
from typing import Any, TypeVar

from dubbo_py.url import URL

__all__ = [
    "PARTITION_PATCH_LIMIT",
    "PATCH_LIMIT",
    "SELECT_CACHE_SIZE",
    "Delta",
    "Snapshot",
    "iter_bits",
    "lru",
    "mask_from_flags",
    "mask_of",
]

#: Distinct survivor masks whose provider tuples each snapshot remembers.
SELECT_CACHE_SIZE = 64
#: Most providers arriving plus leaving for which a snapshot is patched from the previous one
#: (each change costs a few operations on every mask); above it, and above an eighth of the
#: providers, every router is bound from scratch.
PATCH_LIMIT = 64
#: Most groups a :meth:`Snapshot.partition` has for it to be patched (each group's mask is
#: shifted); a partition with more groups is computed from scratch.
PARTITION_PATCH_LIMIT = 64

#: What a keyed memo holds (a mask, a column, a partition), and the function of a provider it
#: is made from (see Snapshot._remember).
M = TypeVar("M")
F = TypeVar("F")

# bin() digits '0'/'1' to bytes 0/1, so itertools.compress can walk a mask's bits in C.
_BIT_BYTES = bytes.maketrans(b"01", b"\x00\x01")


_MISSING = object()

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


@dataclass(frozen=True, slots=True)
class Delta:
    """How one provider tuple follows from another: the indices (ascending) of the previous
    providers that left, and of the new providers that arrived; every provider in both keeps
    its order relative to the others."""

    removed: tuple[int, ...]
    added: tuple[int, ...]

    @property
    def size(self) -> int:
        """Providers that left plus providers that arrived."""
        return len(self.removed) + len(self.added)

    def shift(self, mask: int) -> int:
        """``mask`` over the previous providers as a mask over the new ones: the bits of the
        providers that left dropped, those that stayed moved to their new index, those that
        arrived clear."""
        # Highest first, so the indices still to drop have not moved yet.
        for r in reversed(self.removed):
            mask = ((mask >> (r + 1)) << r) | (mask & ((1 << r) - 1))
        # Lowest first: everything below a new index is already where it ends up.
        for a in self.added:
            mask = ((mask >> a) << (a + 1)) | (mask & ((1 << a) - 1))
        return mask

    @classmethod
    def between(
        cls, previous: tuple[URL, ...], providers: tuple[URL, ...], limit: int | None = None
    ) -> Delta | None:
        """The delta from ``previous`` to ``providers`` (by identity: a provider that is an
        equal but new object counts as leaving and arriving), or ``None`` when more than
        ``limit`` providers changed, the providers in both are not in the same order, or an
        object appears twice."""
        old_at = _positions(previous)
        new_at = _positions(providers)
        if len(old_at) != len(previous) or len(new_at) != len(providers):
            return None  # the same object twice: indices by identity would be ambiguous
        left = old_at.keys() - new_at.keys()
        came = new_at.keys() - old_at.keys()
        if limit is not None and len(left) + len(came) > limit:
            return None
        # The providers in both must keep their order (the directory sorts both lists by
        # the same key, but a key can tie): their new indices, in old order, must ascend.
        kept: list[int] = list(filter(partial(is_not, None), map(new_at.get, old_at)))  # type: ignore[arg-type]
        if not all(map(lt, kept, kept[1:])):
            return None
        removed = tuple(sorted(map(old_at.__getitem__, left)))
        return cls(removed, tuple(sorted(map(new_at.__getitem__, came))))


def _positions(providers: tuple[URL, ...]) -> dict[int, int]:
    """id(provider) -> index, in provider order (the tuple keeps the objects alive)."""
    return dict(zip(map(id, providers), count()))


@dataclass(frozen=True, slots=True)
class _Basis:
    """What a snapshot is patched from: the previous snapshot's memos and the delta."""

    masks: dict[Hashable, int]
    partitions: dict[Hashable, dict[Hashable, int]]
    columns: dict[Hashable, tuple[Any, ...]]
    delta: Delta


@dataclass(frozen=True, eq=False)
class Snapshot:
    """One immutable view of a service's providers; ``version`` grows with each notification."""

    providers: tuple[URL, ...]
    version: int = 0
    all: int = field(init=False)
    _select: Callable[[int], tuple[URL, ...]] = field(init=False, repr=False)
    #: Masks and partitions by key (see :meth:`mask_by`), kept for the next snapshot.
    _masks: dict[Hashable, int] = field(init=False, repr=False)
    _partitions: dict[Hashable, dict[Hashable, int]] = field(init=False, repr=False)
    _columns: dict[Hashable, tuple[Any, ...]] = field(init=False, repr=False)
    _basis: _Basis | None = field(init=False, repr=False, default=None)
    #: What binding reads and nothing after it (see :meth:`scratch`), dropped by :meth:`settle`.
    _scratch: dict[Hashable, Any] | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        object.__setattr__(self, "all", (1 << len(self.providers)) - 1)
        # The cache closes over the providers, not over self: no reference cycle, so a
        # replaced snapshot is freed at once.
        select = lru(partial(_select, self.providers), SELECT_CACHE_SIZE)
        object.__setattr__(self, "_select", select)
        object.__setattr__(self, "_masks", {})
        object.__setattr__(self, "_partitions", {})
        object.__setattr__(self, "_columns", {})

    @classmethod
    def following(
        cls,
        previous: Snapshot,
        providers: tuple[URL, ...],
        version: int = 0,
        limit: int | None = None,
        delta: Delta | None = None,
    ) -> Snapshot:
        """A snapshot of ``providers`` whose keyed masks are patched from ``previous``'s when
        few providers changed: at most ``limit`` (default: :data:`PATCH_LIMIT` and an eighth
        of the providers). Routing on it is exactly routing on ``Snapshot(providers)``.

        ``delta``: how ``providers`` follows from ``previous.providers``, when the caller
        built it that way (it is then trusted, not computed)."""
        snapshot = cls(providers, version)
        if limit is None:
            limit = min(PATCH_LIMIT, len(providers) // 8)
        if not previous._masks and not previous._partitions and not previous._columns:
            return snapshot
        if delta is None:
            delta = Delta.between(previous.providers, providers, limit)
        elif delta.size > limit:
            delta = None
        if delta is not None:
            basis = _Basis(previous._masks, previous._partitions, previous._columns, delta)
            object.__setattr__(snapshot, "_basis", basis)
        return snapshot

    @property
    def delta(self) -> Delta | None:
        """How the providers follow from the previous snapshot's, while this snapshot is
        patched from it (``None`` otherwise, and after :meth:`settle`)."""
        basis = self._basis
        return None if basis is None else basis.delta

    def settle(self) -> None:
        """Stop patching from the previous snapshot (once the routers are bound): its memos
        are released, and a mask asked for later is computed over every provider. The
        :meth:`scratch` memos are released too."""
        object.__setattr__(self, "_basis", None)
        object.__setattr__(self, "_scratch", None)

    def scratch(self, key: Hashable, make: Callable[[], M]) -> M:
        """What ``make()`` gives, kept under ``key`` until :meth:`settle`: help for binding
        routers to this snapshot (the provider values a condition rule reads, by key) that a
        bound chain does not need. A consumer of 1 000 services keeps one settled snapshot per
        service; what binding read is made again only if a rule changes before the providers
        do (issue 42). Not locked: a router that may bind from several threads locks around
        it."""
        memo = self._scratch
        if memo is None:
            memo = {}
            object.__setattr__(self, "_scratch", memo)
        found = memo.get(key, _MISSING)
        if found is _MISSING:
            found = memo[key] = make()
        return found  # type: ignore[no-any-return]

    def __len__(self) -> int:
        return len(self.providers)

    def mask_where(self, predicate: Callable[[URL], bool]) -> int:
        """The mask of the providers for which ``predicate`` holds (evaluated now, once)."""
        return mask_from_flags(bytes(1 if predicate(p) else 0 for p in self.providers))

    def mask_by(
        self,
        key: Hashable,
        holds: Callable[[URL], bool],
        compute: Callable[[], int] | None = None,
    ) -> int:
        """The mask of the providers for which ``holds`` holds, remembered under ``key``.

        ``key`` must determine ``holds`` (two calls with equal keys test alike), and ``holds``
        must read nothing but the provider it is given: the mask is then patched from the
        previous snapshot's mask of the same key, testing only the providers that arrived.
        ``compute`` (default: :meth:`mask_where`) gives it from scratch."""
        found = self._masks.get(key)
        if found is not None:
            return found
        if compute is None:
            compute = partial(self.mask_where, holds)
        return self._remember(self._masks, key, _patched_mask, holds, compute)

    def column(self, key: Hashable, value: Callable[[URL], Any]) -> tuple[Any, ...]:
        """``value(provider)`` of every provider, in snapshot order, remembered under ``key``
        and patched like :meth:`mask_by` (same contract on ``key`` and ``value``): the previous
        snapshot's values are kept for the providers in both, ``value`` is called for those
        that arrived. The values are shared between snapshots: do not mutate them."""
        found = self._columns.get(key)
        if found is not None:
            return found
        compute = partial(_column, self.providers, value)
        return self._remember(self._columns, key, _patched_column, value, compute)

    def partition(self, key: Hashable, value: Callable[[URL], Hashable]) -> Mapping[Hashable, int]:
        """The providers grouped by ``value(provider)``: each value taken -> the mask of the
        providers taking it (no empty group), remembered under ``key`` and patched like
        :meth:`mask_by` (same contract on ``key`` and ``value``). Read-only."""
        found = self._partitions.get(key)
        if found is not None:
            return found
        compute = partial(_groups, self.providers, value)
        return self._remember(self._partitions, key, _patched_partition, value, compute)

    def _remember(
        self,
        memos: dict[Hashable, M],
        key: Hashable,
        patched: Callable[[_Basis, Hashable, tuple[URL, ...], F], M | None],
        value: F,
        compute: Callable[[], M],
    ) -> M:
        """Make what ``key`` stands for and keep it in ``memos``: patched from the previous
        snapshot's (``patched`` answers None when that has none, or is not worth patching),
        else computed."""
        basis = self._basis
        made = None if basis is None else patched(basis, key, self.providers, value)
        if made is None:
            made = compute()
        memos[key] = made
        return made

    def select(self, mask: int) -> tuple[URL, ...]:
        """The providers of ``mask``, in snapshot order; the same mask gives the same tuple
        object while it stays among the last :data:`SELECT_CACHE_SIZE` masks selected."""
        if mask == self.all:
            return self.providers
        return self._select(mask)


# How each keyed memo follows from the previous snapshot's (see Snapshot.mask_by); None when
# that snapshot has none under the key.


def _patched_mask(
    basis: _Basis, key: Hashable, providers: tuple[URL, ...], holds: Callable[[URL], bool]
) -> int | None:
    old = basis.masks.get(key)
    if old is None:
        return None
    delta = basis.delta
    mask = delta.shift(old)
    for a in delta.added:
        if holds(providers[a]):
            mask |= 1 << a
    return mask


def _patched_column(
    basis: _Basis, key: Hashable, providers: tuple[URL, ...], value: Callable[[URL], Any]
) -> tuple[Any, ...] | None:
    old = basis.columns.get(key)
    if old is None:
        return None
    delta = basis.delta
    values = list(old)
    for r in reversed(delta.removed):
        del values[r]
    for a in delta.added:
        values.insert(a, value(providers[a]))
    return tuple(values)


def _patched_partition(
    basis: _Basis, key: Hashable, providers: tuple[URL, ...], value: Callable[[URL], Hashable]
) -> dict[Hashable, int] | None:
    old = basis.partitions.get(key)
    if old is None or len(old) > PARTITION_PATCH_LIMIT:
        return None  # also when each of too many groups would have to be shifted
    delta = basis.delta
    shift = delta.shift
    groups = {v: shift(m) for v, m in old.items()}
    for a in delta.added:
        v = value(providers[a])
        groups[v] = groups.get(v, 0) | (1 << a)
    return {v: m for v, m in groups.items() if m}


def _column(providers: tuple[URL, ...], value: Callable[[URL], Any]) -> tuple[Any, ...]:
    return tuple([value(p) for p in providers])


def _groups(providers: tuple[URL, ...], value: Callable[[URL], Hashable]) -> dict[Hashable, int]:
    """Each value of ``value`` over ``providers`` -> the mask of the providers taking it,
    in order of first appearance (one pass, then one C-level mask per group)."""
    indices: dict[Hashable, list[int]] = {}
    for i, provider in enumerate(providers):
        v = value(provider)
        found = indices.get(v)
        if found is None:
            indices[v] = [i]
        else:
            found.append(i)
    size = len(providers)
    groups: dict[Hashable, int] = {}
    for v, where in indices.items():
        flags = bytearray(size)
        for i in where:
            flags[i] = 1
        groups[v] = mask_from_flags(bytes(flags))
    return groups


def _select(providers: tuple[URL, ...], mask: int) -> tuple[URL, ...]:
    if mask < 0 or mask.bit_length() > len(providers):
        raise ValueError(f"mask has bits beyond the {len(providers)} providers")
    return tuple(compress(providers, _bit_flags(mask))) if mask else ()


def lru(function: Callable[..., M], size: int) -> Callable[..., M]:
    """``lru_cache(maxsize=size)(function)`` without what the decorator adds for
    introspection (``update_wrapper``'s copied attributes, a ``cache_parameters`` closure:
    ~340 B per cache; a consumer of 1 000 services with 20 rules each keeps ~10 000 bound
    rules' caches and 1 000 snapshots', issue 42). The same C cache, ``cache_info()``
    included."""
    made: Callable[..., M] = _LRU_CACHE(function, size, False, _CacheInfo)
    return made


#: functools' C cache type (what ``lru_cache`` builds; typeshed gives it no constructor).
_LRU_CACHE: Any = _lru_cache_wrapper
