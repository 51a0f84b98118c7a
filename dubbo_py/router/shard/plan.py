"""Split plans: for a split from N to M shards, which old shard each new shard takes its keys from.

A split never moves a key out of its old shard's descendants; the plan names them, and refuses a
split the scheme cannot make without moving keys between unrelated shards:

* ``elasticsearch`` (the ``_split`` API): M must be a multiple of N and a factor of
  ``routing_num_shards``; new shard ``j`` comes from old shard ``j // (M / N)``
  (``IndexMetadata.selectSplitShard``). A one-shard index splits into any number of shards, and
  Elasticsearch then computes a new ``routing_num_shards`` for the target.
* ``elasticsearch-modulo`` (in-place resharding of indices created from 9.4): M must be a
  multiple of N; new shard ``j`` comes from old shard ``j % N`` (``IndexReshardingMetadata``:
  old 2 / new 6 makes shard 0 the source of 2 and 4), so old shard ``i`` stays shard ``i``.
* ``solr`` (SPLITSHARD): a split halves a shard's range (``numSubShards`` defaults to 2) with
  ``DocRouter.partitionRange``; we follow layouts made by repeated halving, so M must be
  ``N * 2^k``, and new shard ``j`` (in range order: ``shard1_0``, ``shard1_1``, ``shard2_0``, ...)
  comes from old shard ``j >> k``. Splits into 3..8 sub-shards, by ``split.key`` or by explicit
  ``ranges`` give layouts a shard count alone cannot describe, and are not supported.
"""

from __future__ import annotations

from dataclasses import dataclass

from dubbo_py.router.shard.hashing import HashRange
from dubbo_py.router.shard.schemes import (
    LayoutError,
    Scheme,
    es_default_routing_num_shards,
    make_layout,
)

__all__ = ["SplitPlan", "plan_split"]


@dataclass(frozen=True, slots=True)
class SplitPlan:
    """The outcome of :func:`plan_split`.

    ``sources[j]`` is the old shard whose keys new shard ``j`` takes (empty when refused).
    ``routing_num_shards`` is the value both layouts use for ``elasticsearch`` (for a split of a
    one-shard index, the value Elasticsearch computes for the target); ``initial_shards``,
    ``old_ranges`` and ``new_ranges`` describe ``solr`` layouts. ``refusal`` says why the split
    cannot be made, ``None`` when it can.
    """

    scheme: Scheme
    from_shards: int
    to_shards: int
    sources: tuple[int, ...] = ()
    routing_num_shards: int | None = None
    initial_shards: int | None = None
    old_ranges: tuple[HashRange, ...] = ()
    new_ranges: tuple[HashRange, ...] = ()
    refusal: str | None = None

    @property
    def ok(self) -> bool:
        """True when the split can be made."""
        return self.refusal is None

    def children(self, old_shard: int) -> tuple[int, ...]:
        """The new shards that take the keys of ``old_shard``."""
        return tuple(j for j, source in enumerate(self.sources) if source == old_shard)

    def rule_fields(self, *, during: bool) -> dict[str, object]:
        """The layout fields of the shard rule to push while the split runs (``during``) and
        once it is done; empty for a refused plan."""
        if not self.ok:
            return {}
        fields: dict[str, object] = {"scheme": self.scheme.value, "shards": self.to_shards}
        if during:
            fields["split_from"] = self.from_shards
        if self.scheme is Scheme.ELASTICSEARCH:
            fields["routing_num_shards"] = self.routing_num_shards
        if self.scheme is Scheme.SOLR and self.initial_shards != self.to_shards:
            fields["initial_shards"] = self.initial_shards
        return fields


def _refused(
    scheme: Scheme, old: int, new: int, reason: str, routing_num_shards: int | None = None
) -> SplitPlan:
    return SplitPlan(scheme, old, new, routing_num_shards=routing_num_shards, refusal=reason)


def plan_split(
    scheme: Scheme | str,
    from_shards: int,
    to_shards: int,
    routing_num_shards: int | None = None,
    initial_shards: int | None = None,
) -> SplitPlan:
    """Plan a split from ``from_shards`` to ``to_shards`` shards.

    ``routing_num_shards`` is the ``elasticsearch`` index's value (default: what Elasticsearch
    computes for a new index of ``from_shards`` shards); ``initial_shards`` is the shard count a
    ``solr`` collection was created with (default: ``from_shards``). Parameters that describe no
    valid layout raise :class:`LayoutError`; a valid layout the scheme cannot split that way gives
    a plan whose ``refusal`` says why.
    """
    # Checks the old layout's own parameters (and the scheme name) before planning.
    old_layout = make_layout(
        scheme, from_shards, routing_num_shards=routing_num_shards, initial_shards=initial_shards
    )
    scheme = old_layout.scheme
    if isinstance(to_shards, bool) or not isinstance(to_shards, int) or to_shards < 1:
        raise LayoutError("to_shards", f"must be a positive integer, got {to_shards!r}")
    old, new = from_shards, to_shards
    if new <= old:
        return _refused(
            scheme,
            old,
            new,
            f"not a split: the new shard count ({new}) must be greater than the current one "
            f"({old}); merging shards moves keys between shards",
        )
    if scheme is Scheme.ELASTICSEARCH:
        if old == 1:
            # MetadataCreateIndexService.getIndexNumberOfRoutingShards: splitting a one-shard
            # index recomputes routing_num_shards for the target.
            target_r = es_default_routing_num_shards(new)
        else:
            target_r = old_layout.routing_num_shards
            if new % old:
                return _refused(
                    scheme,
                    old,
                    new,
                    f"the number of source shards [{old}] must be a factor of [{new}]",
                    routing_num_shards=target_r,
                )
            if target_r % new:
                return _refused(
                    scheme,
                    old,
                    new,
                    f"the number of routing shards [{target_r}] must be a multiple of the "
                    f"target shards [{new}]; an index can only split by factors of "
                    "routing_num_shards / shards",
                    routing_num_shards=target_r,
                )
        factor = new // old
        return SplitPlan(
            scheme, old, new, tuple(j // factor for j in range(new)), routing_num_shards=target_r
        )
    if scheme is Scheme.ELASTICSEARCH_MODULO:
        if new % old:
            return _refused(
                scheme,
                old,
                new,
                f"the new shard count [{new}] must be a multiple of the current shard count "
                f"[{old}]: floorMod(hash, {new}) only refines floorMod(hash, {old}) then",
            )
        return SplitPlan(scheme, old, new, tuple(j % old for j in range(new)))
    ratio = new // old
    if ratio * old != new or ratio & (ratio - 1):
        return _refused(
            scheme,
            old,
            new,
            f"Solr's SPLITSHARD halves a shard's hash range; {new} shards cannot come from "
            f"{old} by halving (the new count must be {old} * 2^k)",
        )
    initial = old_layout.initial_shards
    new_layout = make_layout(scheme, new, initial_shards=initial)
    shift = ratio.bit_length() - 1
    return SplitPlan(
        scheme,
        old,
        new,
        tuple(j >> shift for j in range(new)),
        initial_shards=initial,
        old_ranges=old_layout.ranges,
        new_ranges=new_layout.ranges,
    )
