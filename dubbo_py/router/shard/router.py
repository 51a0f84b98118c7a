"""The shard router (priority 160): sends a call to the providers of the shard owning its key.

Bind time indexes providers by their ``shard`` URL parameter (0-based) into one mask per shard;
a call reads its routing key, locates it (hash and shard set, cached per key) and intersects the
candidates with the union of those shards' masks — no per-provider work per call.

Providers and layouts. A provider may also advertise ``shards=<count>``, the layout its ``shard``
number belongs to. Without it, a provider belongs to the rule's ``shards`` layout, except while a
split is in progress (``split_from`` set), when it belongs to the old ``split_from`` layout: the
providers that were there before the split advertise no count, and new ones are started with
``shards=<new count>``. Providers with no valid ``shard`` number, or one outside their layout, or
a ``shards`` count that is neither layout's, are left out of every shard (logged once per bind):
they are only reached when a call has no routing key and ``force`` is false.

Live split ``split_from: N`` -> ``shards: M``: a key goes to the providers of its new shard; while
that shard has none yet, to the providers of the old shard it comes from (which still hold its
data). Keys of other shards never change owner. For ``elasticsearch-modulo``, where resharding
keeps old shard ``i`` as new shard ``i``, old-layout providers of shard ``i`` also serve new
shard ``i``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from dubbo_py.invocation import Invocation
from dubbo_py.router.base import BoundRouter, Router
from dubbo_py.router.shard.rule import ShardRule, parse_shard_rule
from dubbo_py.router.shard.schemes import Location, Scheme
from dubbo_py.router.snapshot import Snapshot, iter_bits
from dubbo_py.url import URL

__all__ = [
    "SHARDS_PARAM",
    "SHARD_PARAM",
    "SHARD_ROUTER_PRIORITY",
    "BoundShardRouter",
    "ShardRouter",
    "compile_shard_document",
]

_log = logging.getLogger(__name__)

#: The provider URL parameter naming its 0-based shard.
SHARD_PARAM = "shard"
#: The optional provider URL parameter naming the shard count its ``shard`` refers to.
SHARDS_PARAM = "shards"
#: Where the shard router runs in the chain (after tag 100 and condition 140/150).
SHARD_ROUTER_PRIORITY = 160
#: How many distinct (key, id) pairs each bound router remembers the mask of.
KEY_CACHE_SIZE = 4096


@dataclass(frozen=True, slots=True)
class _Index:
    """Providers per shard of the new layout (``new``) and of the old one (``old``)."""

    new: tuple[int, ...]
    old: tuple[int, ...]
    ignored: tuple[str, ...]


def _shard_params(url: URL) -> tuple[str | None, str | None]:
    """What indexing reads of a provider: its ``shard`` and ``shards`` parameters."""
    params = url.parameters
    return params.get(SHARD_PARAM), params.get(SHARDS_PARAM)


def _int_text(text: str | None) -> int | None:
    if text is None:
        return None
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() else -1


def _index_providers(rule: ShardRule, snapshot: Snapshot) -> _Index:
    # Providers are grouped by their two parameters (patched from the previous snapshot's
    # grouping when few providers changed); each group then goes to one shard or none.
    new = [0] * rule.shards
    old = [0] * (rule.split_from or 0)
    ignored: list[tuple[int, str]] = []
    groups = snapshot.partition("shard.params", _shard_params)
    for params, mask in groups.items():
        assert isinstance(params, tuple)
        shard_text, count_text = params
        shard = _int_text(shard_text)
        count = _int_text(count_text)
        if count is None:
            count = rule.split_from if rule.split_from is not None else rule.shards
        if count == rule.shards:
            table = new
        elif count == rule.split_from:
            table = old
        else:
            ignored.extend(
                (i, f"{snapshot.providers[i].address} (shards={count_text})")
                for i in iter_bits(mask)
            )
            continue
        if shard is None or not 0 <= shard < len(table):
            ignored.extend(
                (i, f"{snapshot.providers[i].address} (shard={shard_text}, of {count})")
                for i in iter_bits(mask)
            )
            continue
        table[shard] |= mask
    return _Index(tuple(new), tuple(old), tuple(text for _, text in sorted(ignored)))


def _effective_masks(rule: ShardRule, index: _Index) -> tuple[int, ...]:
    """The providers serving each shard of the rule's layout, split fallback included."""
    plan = rule.split_plan
    if plan is None:
        return index.new
    masks = []
    for j, source in enumerate(plan.sources):
        own = index.new[j]
        if rule.scheme is Scheme.ELASTICSEARCH_MODULO and j < plan.from_shards:
            own |= index.old[j]
        masks.append(own if own else index.old[source])
    return tuple(masks)


@dataclass(frozen=True, eq=False)
class BoundShardRouter:
    """A :class:`ShardRouter` bound to one snapshot; ``masks[j]`` serves shard ``j``."""

    rule: ShardRule
    masks: tuple[int, ...]
    _mask_of: Callable[[str, str | None], int] = field(repr=False)

    def route(self, candidates: int, invocation: Invocation) -> int:
        """The candidates serving the shard(s) of the call's key; 0 (forced) or ``candidates``
        when the key is missing."""
        rule = self.rule
        if not rule.enabled:
            return candidates
        key = rule.key.read(invocation)
        if key is None:
            return 0 if rule.force else candidates
        doc_id = rule.id.read(invocation) if rule.id is not None else None
        return candidates & self._mask_of(key, doc_id)

    def locate(self, invocation: Invocation) -> Location | None:
        """Where the call's key lives, or ``None`` when the call has no key."""
        key = self.rule.key.read(invocation)
        if key is None:
            return None
        doc_id = self.rule.id.read(invocation) if self.rule.id is not None else None
        return self.rule.layout.locate(key, doc_id)

    def explain(self, candidates: int, invocation: Invocation) -> str | None:
        """Why :meth:`route` leaves no provider for this call (``None`` if it leaves some)."""
        if not self.rule.enabled or self.route(candidates, invocation):
            return None
        location = self.locate(invocation)
        if location is None:
            return f"missing routing key {self.rule.key}"
        shards = ", ".join(str(s) for s in location.shards)
        served = 0
        for shard in location.shards:
            served |= self.masks[shard]
        where = "no provider serves" if not served else "earlier routers removed every provider of"
        return f"routing key {location.key!r} -> shard {shards}: {where} that shard"


class ShardRouter:
    """The shard router for one rule; ``source`` (the rule's registry path or file) names it."""

    def __init__(self, rule: ShardRule, source: str = "") -> None:
        self.rule = rule
        self.source = source

    @property
    def name(self) -> str:
        """``shard`` plus the rule's source, as shown in traces and errors."""
        return f"shard:{self.source}" if self.source else "shard"

    @property
    def priority(self) -> int:
        """160: after the tag and condition routers, before the script router."""
        return SHARD_ROUTER_PRIORITY

    def bind(self, snapshot: Snapshot, consumer: URL) -> BoundRouter:
        """Index the snapshot's providers by shard."""
        rule = self.rule
        index = _index_providers(rule, snapshot)
        if index.ignored and rule.enabled:
            _log.warning(
                "%s: %d provider(s) not serving any shard of the %d-shard layout%s: %s",
                self.name,
                len(index.ignored),
                rule.shards,
                f" (split from {rule.split_from})" if rule.split_from is not None else "",
                "; ".join(index.ignored),
            )
        masks = _effective_masks(rule, index)
        layout = rule.layout

        @lru_cache(maxsize=KEY_CACHE_SIZE)
        def mask_of(key: str, doc_id: str | None) -> int:
            mask = 0
            for shard in layout.locate(key, doc_id).shards:
                mask |= masks[shard]
            return mask

        return BoundShardRouter(rule, masks, mask_of)

    def __repr__(self) -> str:
        return f"ShardRouter({self.name!r}, {self.rule.scheme.value}, shards={self.rule.shards})"


def compile_shard_document(text: str, source: str) -> list[Router]:
    """The ``shard-router`` document compiler: one :class:`ShardRouter` for the rule in
    ``text``; raises :class:`~dubbo_py.router.base.RuleError` when the rule is invalid."""
    return [ShardRouter(parse_shard_rule(text, source), source)]
