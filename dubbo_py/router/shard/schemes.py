"""Which shard owns a key: the Elasticsearch and Solr routing functions, as pure functions.

* ``elasticsearch`` — the split-compatible function of indices created before 9.4
  (``IndexRouting.hashToShardId``): ``floorMod(hash, routing_num_shards) / routing_factor`` with
  ``routing_factor = routing_num_shards / shards``. With ``partition_size`` P > 1 a document goes
  to ``hash(routing) + floorMod(hash(id), P)`` (Java ``int`` addition, so it wraps), and a
  routing value without an id can be on any of the P shards (``collectSearchShards``).
* ``elasticsearch-modulo`` — ``floorMod(hash, shards)``, what Elasticsearch uses for indices
  created from 9.4 on (``IndexVersions.MOD_ROUTING_FUNCTION``); it is the function above with
  ``routing_num_shards == shards``.
* ``solr`` — ``CompositeIdRouter``: the 32-bit space is cut into contiguous ranges, one per shard,
  in ascending signed order (shard 0 is Solr's ``shard1``, starting at ``0x80000000``); a document
  lives on the shard whose range holds its composite-id hash, a route prefix ``tenant!`` on every
  shard its range overlaps.
"""

from __future__ import annotations

import enum
from bisect import bisect_right
from dataclasses import dataclass, field

from dubbo_py.router.shard.hashing import (
    FULL_RANGE,
    INT_MAX,
    SEPARATOR,
    HashRange,
    es_murmur3,
    solr_hash,
    solr_route_range,
    to_int32,
)

__all__ = [
    "MAX_SHARDS",
    "Layout",
    "LayoutError",
    "Location",
    "Scheme",
    "es_default_routing_num_shards",
    "es_shard",
    "locate",
    "make_layout",
    "solr_composite_partition",
    "solr_plain_partition",
    "solr_shard_ranges",
]

#: The largest shard count a layout accepts; keeps a typo from building a million-range table.
MAX_SHARDS = 1 << 16


class Scheme(enum.StrEnum):
    """The routing function a shard rule follows."""

    ELASTICSEARCH = "elasticsearch"
    ELASTICSEARCH_MODULO = "elasticsearch-modulo"
    SOLR = "solr"


class LayoutError(ValueError):
    """Shard-layout parameters that no index or collection can have; ``field`` names the
    parameter at fault (``shards``, ``routing_num_shards``, ``partition_size``,
    ``initial_shards``) so a rule parser can point at it."""

    def __init__(self, field_name: str, message: str) -> None:
        self.field = field_name
        self.reason = message
        super().__init__(f"{field_name}: {message}")


# ---------------------------------------------------------------- Elasticsearch


def es_default_routing_num_shards(shards: int) -> int:
    """The ``routing_num_shards`` Elasticsearch gives a new index of ``shards`` shards.

    ``MetadataCreateIndexService.calculateNumRoutingShards`` (indices created from 7.0): the
    largest ``shards * 2^k`` not above 1024, with ``k >= 1`` so every index can split once.
    """
    if shards < 1:
        raise LayoutError("shards", f"must be at least 1, got {shards}")
    log2_shards = (shards - 1).bit_length()  # ceil(log2(shards)), 0 for one shard
    splits = max(1, 10 - log2_shards)
    return shards << splits


def es_shard(routing_hash: int, routing_num_shards: int, shards: int) -> int:
    """``IndexRouting.hashToShardId``: ``floorMod(hash, routing_num_shards) / routing_factor``.

    Python's ``%`` with a positive modulus is Java's ``Math.floorMod``.
    """
    return (routing_hash % routing_num_shards) // (routing_num_shards // shards)


# ---------------------------------------------------------------- Solr


def solr_composite_partition(partitions: int, rng: HashRange = FULL_RANGE) -> list[HashRange]:
    """Cut ``rng`` into ``partitions`` ranges as ``CompositeIdRouter.partitionRange`` does
    when a collection is created.

    Each boundary is rounded to a multiple of 2^16 (so one tenant's ``tenant!`` range is not cut)
    when the step is at least 16 * 2^16; the ideal boundaries are tracked apart from the rounded
    ones so that rounding errors do not add up; the last range ends exactly on ``rng.max``.
    """
    lo, hi = rng.min, rng.max
    if partitions <= 0:
        return []
    step = max(1, (hi - lo) // partitions)
    mask = 0xFFFF
    increment = 1 << 16
    rounding = step >= increment * 16
    ranges: list[HashRange] = []
    start = end = target_start = lo
    while end < hi:
        target_end = target_start + step
        end = target_end
        if rounding and (end & mask) != mask:
            round_down = (end | mask) - increment
            round_up = (end | mask) + increment
            end = (
                round_down if end - round_down < round_up - end and round_down > start else round_up
            )
        if len(ranges) == partitions - 1:
            end = hi
        ranges.append(HashRange(to_int32(start), to_int32(end)))
        start = end + 1
        target_start = target_end + 1
    return ranges


def solr_plain_partition(partitions: int, rng: HashRange) -> list[HashRange]:
    """Cut ``rng`` into ``partitions`` equal ranges without rounding: ``DocRouter.partitionRange``
    with ``fuzz`` 0, which is what Solr's SPLITSHARD uses to cut a parent shard's range."""
    lo, hi = rng.min, rng.max
    if partitions <= 0:
        return []
    step = max(1, (hi - lo) // partitions)
    ranges: list[HashRange] = []
    start = end = lo
    while end < hi:
        end = start + step
        if len(ranges) == partitions - 1:
            end = hi
        ranges.append(HashRange(start, end))
        start = end + 1
    return ranges


def solr_shard_ranges(shards: int, initial_shards: int | None = None) -> tuple[HashRange, ...]:
    """The ranges of a Solr collection of ``shards`` shards, in shard order.

    A collection created with ``initial_shards`` shards (default: ``shards``) and split by
    SPLITSHARD's default halving until it has ``shards``: every range of the created layout,
    halved ``log2(shards / initial_shards)`` times. For a power-of-two count the halved layout
    and the created one are the same.
    """
    initial = shards if initial_shards is None else initial_shards
    factor = shards // initial if initial else 0
    if initial < 1 or factor * initial != shards or factor & (factor - 1):
        raise LayoutError(
            "initial_shards",
            f"{shards} shards cannot come from {initial} by halving splits "
            "(shards must be initial_shards * 2^k)",
        )
    ranges = solr_composite_partition(initial)
    while len(ranges) < shards:
        ranges = [half for rng in ranges for half in solr_plain_partition(2, rng)]
    return tuple(ranges)


# ---------------------------------------------------------------- layouts


@dataclass(frozen=True, slots=True)
class Location:
    """Where a key lives: its hash (``None`` for a Solr route prefix, which names a range) and
    the 0-based shards that may hold it, ascending."""

    key: str
    hash: int | None
    shards: tuple[int, ...]
    range: HashRange | None = None


@dataclass(frozen=True, eq=False)
class Layout:
    """One index's or collection's shard layout; build it with :func:`make_layout`, which checks
    the parameters. ``routing_num_shards`` is the effective value (equal to ``shards`` for
    ``elasticsearch-modulo`` and unused for ``solr``); ``ranges`` is filled for ``solr``."""

    scheme: Scheme
    shards: int
    routing_num_shards: int
    partition_size: int = 1
    initial_shards: int | None = None
    ranges: tuple[HashRange, ...] = ()
    _starts: tuple[int, ...] = field(default=(), repr=False)

    def shard_of_hash(self, value: int) -> int:
        """The shard owning hash ``value``."""
        if self.scheme is Scheme.SOLR:
            return bisect_right(self._starts, value) - 1
        return es_shard(value, self.routing_num_shards, self.shards)

    def shards_of_range(self, rng: HashRange) -> tuple[int, ...]:
        """The Solr shards whose ranges overlap ``rng`` (ranges are contiguous, so a span)."""
        if rng.min > rng.max:
            return ()
        first = self.shard_of_hash(rng.min)
        last = self.shard_of_hash(rng.max)
        return tuple(range(first, last + 1))

    def locate(self, key: str, doc_id: str | None = None) -> Location:
        """Where ``key`` lives.

        Elasticsearch: ``key`` is the routing value; with ``partition_size`` > 1, ``doc_id``
        picks one shard of the routing value's partition and without it every shard of the
        partition is returned (``doc_id`` is ignored when unpartitioned, as Elasticsearch
        ignores the id when a routing value is given). Solr: a key ending in ``!`` is a route
        prefix (its hash is ``None``, its shards those its range overlaps); any other key is a
        document id (``doc_id`` is not used).
        """
        if self.scheme is Scheme.SOLR:
            if key.endswith(SEPARATOR):
                rng = solr_route_range(key)
                return Location(key, None, self.shards_of_range(rng), rng)
            value = solr_hash(key)
            return Location(key, value, (self.shard_of_hash(value),))
        value = es_murmur3(key)
        size = self.partition_size
        if size == 1:
            return Location(key, value, (self.shard_of_hash(value),))
        if doc_id is not None:
            offset = es_murmur3(doc_id) % size
            return Location(key, value, (self.shard_of_hash(to_int32(value + offset)),))
        found = {self.shard_of_hash(to_int32(value + i)) for i in range(size)}
        return Location(key, value, tuple(sorted(found)))


def _check_count(name: str, value: int, *, low: int = 1, high: int = MAX_SHARDS) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise LayoutError(name, f"must be an integer, got {value!r}")
    if not low <= value <= high:
        raise LayoutError(name, f"must be between {low} and {high}, got {value}")


def make_layout(
    scheme: Scheme | str,
    shards: int,
    *,
    routing_num_shards: int | None = None,
    partition_size: int = 1,
    initial_shards: int | None = None,
) -> Layout:
    """A checked :class:`Layout`; raises :class:`LayoutError` naming the parameter at fault.

    ``routing_num_shards`` applies to ``elasticsearch`` only; when ``None`` it is the default
    Elasticsearch computes for a new index of ``shards`` shards. ``partition_size`` applies to
    both Elasticsearch schemes (Elasticsearch requires it below the number of routing shards).
    ``initial_shards`` applies to ``solr`` only (see :func:`solr_shard_ranges`).
    """
    try:
        scheme = Scheme(scheme)
    except ValueError:
        choices = ", ".join(s.value for s in Scheme)
        raise LayoutError("scheme", f"unknown scheme {scheme!r} (one of {choices})") from None
    _check_count("shards", shards)
    _check_count("partition_size", partition_size, high=INT_MAX)
    if scheme is Scheme.SOLR:
        if routing_num_shards is not None:
            raise LayoutError("routing_num_shards", "applies to the elasticsearch scheme only")
        if partition_size != 1:
            raise LayoutError("partition_size", "applies to the elasticsearch schemes only")
        if initial_shards is not None:
            _check_count("initial_shards", initial_shards)
        ranges = solr_shard_ranges(shards, initial_shards)
        return Layout(
            scheme,
            shards,
            shards,
            1,
            shards if initial_shards is None else initial_shards,
            ranges,
            tuple(r.min for r in ranges),
        )
    if initial_shards is not None:
        raise LayoutError("initial_shards", "applies to the solr scheme only")
    if scheme is Scheme.ELASTICSEARCH_MODULO:
        if routing_num_shards is not None:
            raise LayoutError(
                "routing_num_shards",
                "has no effect with elasticsearch-modulo (it routes by floorMod(hash, shards))",
            )
        effective = shards
    elif routing_num_shards is None:
        effective = es_default_routing_num_shards(shards)
    else:
        _check_count("routing_num_shards", routing_num_shards, high=INT_MAX)
        if routing_num_shards % shards:
            raise LayoutError(
                "routing_num_shards",
                f"must be a multiple of shards ({shards}), got {routing_num_shards}",
            )
        effective = routing_num_shards
    if partition_size != 1 and partition_size >= effective:
        # IndexMetadata.Builder.build(): "routing partition size [P] should be a positive number
        # less than the number of routing shards [R]".
        raise LayoutError(
            "partition_size",
            f"must be less than the number of routing shards ({effective}), got {partition_size}",
        )
    return Layout(scheme, shards, effective, partition_size)


def locate(
    scheme: Scheme | str,
    shards: int,
    key: str,
    *,
    routing_num_shards: int | None = None,
    partition_size: int = 1,
    doc_id: str | None = None,
    initial_shards: int | None = None,
) -> Location:
    """Where ``key`` lives in a layout given by its parameters (see :meth:`Layout.locate`)."""
    layout = make_layout(
        scheme,
        shards,
        routing_num_shards=routing_num_shards,
        partition_size=partition_size,
        initial_shards=initial_shards,
    )
    return layout.locate(key, doc_id)
