"""Condition routers, precomputed against a provider snapshot (docs/design.md §1).

``bind(snapshot, consumer)`` does everything that does not depend on the call: it resolves
``$`` references, evaluates the when clauses that read the consumer URL (a rule whose when side
cannot match this consumer binds to a pass-through), and evaluates every then clause that reads
provider URLs against every provider once, keeping the result as a mask. A call then reads only
the invocation values the rule needs (method, ``arguments[N]``, ``attachments[k]``), looks the
decision up in a small LRU cache keyed by exactly those values, and intersects masks: nothing
per call walks the providers.

Three routers live here:

* :class:`ConditionRouter` - one ``when => then`` rule (a registry ``condition://`` URL, or one
  entry of a v3.0 YAML ``conditions:`` list);
* :class:`MultiDestinationRouter` - one v3.1 YAML condition (``from`` / weighted ``to`` list);
* :class:`ConditionRuleSet` - one YAML document: its conditions applied one after another, each
  to the survivors of the previous one (Dubbo's ``ListenableStateRouter``).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from operator import attrgetter
from typing import Any, TypeVar

from dubbo_py.invocation import Invocation
from dubbo_py.router.base import (
    PASS_THROUGH,
    BoundRouter,
    Decision,
    Lookup,
    Router,
    lookups,
    specialize,
)
from dubbo_py.router.condition.matcher import (
    Matcher,
    all_match,
    invocation_reader,
    merge_clauses,
    reads_invocation,
    request_field_reader,
    sample_value,
    url_sample,
)
from dubbo_py.router.condition.rule import Clause, ConditionRule, Key, KeyKind
from dubbo_py.router.snapshot import Snapshot, lru, mask_from_flags
from dubbo_py.url import URL

__all__ = [
    "DEFAULT_CACHE_SIZE",
    "PASS_THROUGH",
    "BoundConditionRouter",
    "BoundMultiDestinationRouter",
    "BoundRuleSet",
    "ConditionRouter",
    "ConditionRuleSet",
    "Destination",
    "MultiDestinationRouter",
]

D = TypeVar("D")

#: Entries in each bound router's per-call decision cache (distinct invocation-value tuples).
DEFAULT_CACHE_SIZE = 512


_lru = lru


@dataclass(frozen=True, slots=True)
class _Split:
    """A side's matchers split into those read from a URL and those read from the call."""

    static: tuple[Matcher, ...]
    dynamic: tuple[Matcher, ...]


def _split(clauses: Sequence[Clause], consumer: dict[str, str], *, when: bool) -> _Split:
    matchers = merge_clauses(clauses, consumer)
    return _Split(
        tuple(m for m in matchers if not reads_invocation(m.key, when=when)),
        tuple(m for m in matchers if reads_invocation(m.key, when=when)),
    )


class _Columns:
    """One snapshot's provider values by key, read once and shared by every condition bound to
    that snapshot: binding a rule then tests each *distinct* value once, not every provider."""

    def __init__(self, providers: tuple[URL, ...]) -> None:
        self._providers = providers  # the snapshot holds this: no cycle back to it
        self._by_key: dict[str, tuple[str | None, ...]] = {}

    def mask(self, matcher: Matcher) -> int:
        """The providers whose value of the matcher's key satisfies it."""
        name = matcher.key.name
        column = self._by_key.get(name)
        if column is None:
            column = _column(self._providers, name)
            self._by_key[name] = column
        verdict = {value: matcher.test(value) for value in set(column)}
        return mask_from_flags(bytes(map(verdict.__getitem__, column)))


#: Keys :func:`sample_value` reads from somewhere else than the parameters.
_SPECIAL_KEYS = frozenset({"protocol", "username", "password", "host", "path", "port", "address"})
_PARAMETERS = attrgetter("parameters")


def _column(providers: tuple[URL, ...], name: str) -> tuple[str | None, ...]:
    """``sample_value(p, name)`` of every provider. A fleet of 10 000 providers is read for
    every key a rule names each time a provider comes or goes, so the common keys avoid
    ``mappingproxy.get`` (a method call through the proxy, several times slower than ``in``
    and ``[]``)."""
    if name in _SPECIAL_KEYS:
        return tuple([sample_value(p, name) for p in providers])
    if name == "application":  # the provider's own application (see url_sample)
        remote = "remote.application"
        return tuple(
            [
                (params[remote] if remote in params else None)  # noqa: SIM401 (speed)
                or (params[name] if name in params else None)  # noqa: SIM401 (speed)
                for params in map(_PARAMETERS, providers)
            ]
        )
    return tuple(
        [params[name] if name in params else None for params in map(_PARAMETERS, providers)]  # noqa: SIM401
    )


_COLUMNS_LOCK = threading.Lock()


def _columns(snapshot: Snapshot) -> _Columns:
    # Kept until the snapshot settles (its rules bound): a column is 8 B per provider and key,
    # ~85 B per provider in a consumer of 1 000 services with 20 rules each if kept for the
    # snapshot's life, and masks already patched from snapshot to snapshot do not read it.
    with _COLUMNS_LOCK:
        return snapshot.scratch(_Columns, partial(_Columns, snapshot.providers))


def _holds(matcher: Matcher, provider: URL) -> bool:
    """Does ``provider``'s value of the matcher's key satisfy it (what a column tests)?"""
    return matcher.test(sample_value(provider, matcher.key.name))


def _then_mask(snapshot: Snapshot, matchers: tuple[Matcher, ...]) -> int:
    # Each matcher's mask is remembered by the snapshot under the matcher itself (its ``$``
    # references already resolved), so a snapshot that follows another patches it for the
    # providers that changed, and rules sharing a clause share its mask.
    mask = snapshot.all
    if not matchers or not mask:
        return mask
    for matcher in matchers:
        mask &= snapshot.mask_by(
            ("condition", matcher),
            partial(_holds, matcher),
            partial(_column_mask, snapshot, matcher),
        )
        if not mask:
            break
    return mask


def _column_mask(snapshot: Snapshot, matcher: Matcher) -> int:
    return _columns(snapshot).mask(matcher)


class _Probe:
    """Reads, once per call, the invocation values some matchers need, and evaluates them
    against those values (so decisions can be cached by the values alone)."""

    __slots__ = ("_readers", "_slot", "keys", "read")

    def __init__(self, groups: Sequence[tuple[Matcher, ...]]) -> None:
        keys: list[Key] = []
        for group in groups:
            for matcher in group:
                if matcher.key not in keys:
                    keys.append(matcher.key)
        self.keys: tuple[Key, ...] = tuple(keys)
        self._slot = {key: i for i, key in enumerate(keys)}
        self._readers = tuple(invocation_reader(key) for key in keys)
        #: ``read(invocation)``: the values of :attr:`keys` (``None`` where missing). Chosen
        #: once here: this runs for every rule on every call.
        self.read: Callable[[Invocation], tuple[str | None, ...]]
        readers = self._readers
        if len(readers) == 1:
            (only,) = readers
            self.read = lambda invocation: (only(invocation),)
        elif len(readers) == 2:
            first, second = readers
            self.read = lambda invocation: (first(invocation), second(invocation))
        else:
            self.read = lambda invocation: tuple([r(invocation) for r in readers])

    @property
    def reads_request(self) -> bool:
        """Whether any key reads the request (``arguments[N]``)."""
        return any(key.kind is KeyKind.ARGUMENT for key in self.keys)

    def memoized(
        self, decide: Callable[[tuple[str | None, ...]], D], size: int
    ) -> tuple[Callable[[Invocation], Any], Callable[[Any], D]]:
        """``(read, decide)`` for the call path: ``decide(read(invocation))`` is
        ``decide(self.read(invocation))``, remembering the last ``size`` distinct values.

        A rule that reads one value (the common case) reads it bare, without a tuple around
        it, so that a call costs the reader alone and a C-level cache hit."""
        if len(self._readers) == 1:
            (only,) = self._readers
            return only, _lru(lambda value: decide((value,)), size)
        return self.read, _lru(decide, size)

    def holds(self, matchers: tuple[Matcher, ...], values: tuple[str | None, ...]) -> bool:
        """Do all ``matchers`` hold for the values :meth:`read` returned?"""
        slot = self._slot
        return all(m.test(values[slot[m.key]]) for m in matchers)


@dataclass(frozen=True, slots=True)
class _Fixed:
    """A rule that reads nothing from the call, decided at bind time: keep ``mask`` of the
    candidates, or all of them if that leaves none and the rule is not ``final``."""

    mask: int
    final: bool

    def route(self, candidates: int, invocation: Invocation) -> int:
        """Survivors among ``candidates`` (``ConditionStateRouter.doRoute`` semantics)."""
        survivors = candidates & self.mask
        return survivors if survivors or self.final else candidates

    def specialize(self, call: Invocation) -> tuple[BoundRouter, bool]:
        """Reads nothing, for any call."""
        return self, False

    def lookups(self, request_type: type) -> tuple[Lookup, ...]:
        """The same decision for every request: keyed by the request's type, which is
        ``request_type`` for every call the lookup is used for (both callables stay C-level)."""
        return ((type, {request_type: (self.mask, self.final)}.get),)


# --------------------------------------------------------------------------- one rule


def _prepared(rule: ConditionRule, sample: dict[str, str]) -> tuple[_Split, _Split, _Probe]:
    """The rule's sides merged into matchers (``$`` references resolved against the consumer's
    ``sample``) and the probe of what it reads per call. A rule without references gives the
    same for every consumer: made once and kept on the (shared) rule, so the routers of a
    thousand services with the same rule share them."""
    prepared = rule.memo.get("prepared")
    if prepared is not None:
        return prepared  # type: ignore[no-any-return]
    when = _split(rule.when, sample, when=True)
    then = _Split((), ()) if rule.then is None else _split(rule.then, sample, when=False)
    made = (when, then, _Probe((when.dynamic, then.dynamic)))
    if not rule.references:
        rule.memo["prepared"] = made
    return made


# A rule's Decision (dubbo_py.router.base): None = the when side does not match (pass
# through); otherwise the mask to keep and whether an empty result stands (forced or blocking)
# instead of falling back to the input.


@dataclass(frozen=True, eq=False, slots=True)
class BoundConditionRouter:
    """One rule bound to a snapshot. ``route`` reads only the invocation values the rule needs
    and intersects precomputed masks."""

    read: Callable[[Invocation], Any]
    decide: Callable[[Any], Decision]
    #: Whether the rule reads the request (``arguments[N]``), not just the method/attachments.
    reads_request: bool = True
    #: The one key the rule reads per call, when it reads one (``decide`` then takes its bare
    #: value); None when it reads several.
    key: Key | None = None

    def route(self, candidates: int, invocation: Invocation) -> int:
        """Survivors among ``candidates``, Dubbo's ``ConditionStateRouter.doRoute`` semantics."""
        decision = self.decide(self.read(invocation))
        if decision is None:
            return candidates
        mask, final = decision
        survivors = candidates & mask
        if survivors or final:
            return survivors
        return candidates

    def specialize(self, call: Invocation) -> tuple[BoundRouter, bool]:
        """For plain calls of one method a rule that does not read the request is decided
        once: it passes everything through or keeps a fixed mask."""
        if self.reads_request:
            return self, True
        decision = self.decide(self.read(call))
        return (PASS_THROUGH if decision is None else _Fixed(*decision)), False

    def lookups(self, request_type: type) -> tuple[Lookup, ...] | None:
        """A rule reading one request field that is a plain attribute of ``request_type`` is
        ``decide`` of that attribute (see :func:`request_field_reader`)."""
        if self.key is None:
            return None
        reader = request_field_reader(request_type, self.key)
        return None if reader is None else ((reader, self.decide),)


@dataclass(frozen=True, slots=True)
class ConditionRouter:
    """One ``when => then`` rule at a priority.

    ``force``: when the then side leaves no provider, return none (True) or give the input back
    (False, the default, as in Dubbo). ``enabled=False`` passes every call through.
    """

    rule: ConditionRule
    name: str
    priority: int = 0
    force: bool = False
    enabled: bool = True
    cache_size: int = DEFAULT_CACHE_SIZE

    def bind(self, snapshot: Snapshot, consumer: URL) -> BoundRouter:
        """Precompute this rule for ``snapshot`` and the consumer's URL."""
        if not self.enabled:
            return PASS_THROUGH
        sample = url_sample(consumer)
        when, then, probe = _prepared(self.rule, sample)
        if not all_match(when.static, sample):
            return PASS_THROUGH
        if self.rule.then is None:  # blocking: no provider whatever the then side reads
            decide = _Decide(probe, when.dynamic, (), _BLOCKED, _BLOCKED)
        else:
            mask, force = _then_mask(snapshot, then.static), self.force
            decide = _Decide(probe, when.dynamic, then.dynamic, (mask, force), _NONE[bool(force)])
        if not probe.keys:  # nothing to read per call: decide now
            decision = decide(())
            return PASS_THROUGH if decision is None else _Fixed(*decision)
        if len(probe.keys) == 1:
            # A rule that reads one value (the common case) reads it bare, without a tuple
            # around it, so that a call costs the reader alone and a C-level cache hit.
            only = probe.keys[0]
            (read,) = probe._readers  # the rule's own: shared by its bindings
            cached = _lru(_DecideOne(decide), self.cache_size)
            return BoundConditionRouter(read, cached, probe.reads_request, only)
        cached = _lru(decide, self.cache_size)
        return BoundConditionRouter(probe.read, cached, probe.reads_request, None)


#: The decisions of a rule that blocks (``=> false``) and of one whose then side keeps no
#: provider for a call, forced or not: shared by every binding.
_BLOCKED: Decision = (0, True)
_NONE: dict[bool, Decision] = {True: (0, True), False: (0, False)}


class _Decide:
    """A bound rule's decision for the values its probe read (what its cache remembers): an
    object of five slots rather than a closure over them (~500 B less per bound rule with its
    cells; a consumer of 1 000 services with 20 rules each binds 20 000, issue 42)."""

    __slots__ = ("_kept", "_none", "_probe", "_then", "_when")

    def __init__(
        self,
        probe: _Probe,
        when: tuple[Matcher, ...],
        then: tuple[Matcher, ...],
        kept: Decision,
        none: Decision,
    ) -> None:
        self._probe = probe
        self._when = when
        self._then = then
        self._kept = kept
        self._none = none

    def __call__(self, values: tuple[str | None, ...]) -> Decision:
        holds = self._probe.holds
        if not holds(self._when, values):
            return None
        # A then clause that reads the call holds for all providers or for none.
        return self._kept if holds(self._then, values) else self._none


class _DecideOne:
    """:class:`_Decide` of a rule that reads one value, given bare."""

    __slots__ = ("_decide",)

    def __init__(self, decide: _Decide) -> None:
        self._decide = decide

    def __call__(self, value: str | None) -> Decision:
        return self._decide((value,))


# --------------------------------------------------------------------------- v3.1 multi-destination


@dataclass(frozen=True, slots=True)
class Destination:
    """One ``to`` entry of a v3.1 condition: a then side and its weight.

    ``then == ()`` selects every provider (an empty ``match``, as in Dubbo); ``None`` selects
    none (``match: false``).
    """

    then: tuple[Clause, ...] | None
    weight: int = 100


# A v3.1 decision: None = pass through; () = no provider at all (traffic disabled or no `to`);
# otherwise (mask, weight) per destination whose call-reading clauses hold.
_MultiDecision = tuple[tuple[int, int], ...] | None


@dataclass(frozen=True, eq=False)
class BoundMultiDestinationRouter:
    """One v3.1 condition bound to a snapshot."""

    read: Callable[[Invocation], Any]
    decide: Callable[[Any], _MultiDecision]
    force: bool
    ratio: int
    rng: Callable[[], float]

    def route(self, candidates: int, invocation: Invocation) -> int:
        """Dubbo's ``MultiDestConditionRouter.doRoute``: among the destinations with survivors
        pick one by weight; keep it if it holds more than ``ratio`` percent of the candidates."""
        decision = self.decide(self.read(invocation))
        if decision is None:
            return candidates
        if not decision:
            return 0
        subsets = [(candidates & mask, weight) for mask, weight in decision]
        subsets = [(mask, weight) for mask, weight in subsets if mask]
        if not subsets:
            return 0 if self.force else candidates
        chosen = subsets[0][0] if len(subsets) == 1 else _pick(subsets, self.rng())
        if chosen.bit_count() * 100 // candidates.bit_count() > self.ratio:
            return chosen
        return 0


def _pick(subsets: Sequence[tuple[int, int]], draw: float) -> int:
    total = sum(weight for _, weight in subsets)
    if total <= 0:
        return subsets[0][0]
    point = draw * total
    for mask, weight in subsets:
        if point < weight:
            return mask
        point -= weight
    return subsets[-1][0]


@dataclass(frozen=True)
class MultiDestinationRouter:
    """One v3.1 condition: ``from`` (a when side) and weighted ``to`` destinations.

    ``force`` is true when either the condition or its document says ``force: true``;
    ``traffic_disable`` blocks every matching call; ``ratio`` (0-100) is the share of the
    candidates the chosen destination must exceed, else the call gets no provider.
    """

    when: tuple[Clause, ...]
    destinations: tuple[Destination, ...]
    name: str
    priority: int = 0
    force: bool = False
    ratio: int = 0
    traffic_disable: bool = False
    enabled: bool = True
    rng: Callable[[], float] = field(default=random.random, compare=False)
    cache_size: int = DEFAULT_CACHE_SIZE

    def bind(self, snapshot: Snapshot, consumer: URL) -> BoundRouter:
        """Precompute the condition for ``snapshot`` and the consumer's URL."""
        if not self.enabled:
            return PASS_THROUGH
        sample = url_sample(consumer)
        when = _split(self.when, sample, when=True)
        if not all_match(when.static, sample):
            return PASS_THROUGH
        targets: list[tuple[_Split, int, int]] = []
        for destination in self.destinations:
            if destination.then is None:
                targets.append((_Split((), ()), 0, destination.weight))
            else:
                split = _split(destination.then, sample, when=False)
                targets.append((split, _then_mask(snapshot, split.static), destination.weight))
        probe = _Probe((when.dynamic, *(split.dynamic for split, _, _ in targets)))
        blocked = self.traffic_disable or not targets

        def decide(values: tuple[str | None, ...]) -> _MultiDecision:
            if not probe.holds(when.dynamic, values):
                return None
            if blocked:
                return ()
            return tuple(
                (mask if probe.holds(split.dynamic, values) else 0, weight)
                for split, mask, weight in targets
            )

        read, cached = probe.memoized(decide, self.cache_size)
        return BoundMultiDestinationRouter(read, cached, self.force, self.ratio, self.rng)


# --------------------------------------------------------------------------- a YAML document


@dataclass(frozen=True, eq=False)
class BoundRuleSet:
    """A document's conditions bound to one snapshot, applied in order."""

    members: tuple[BoundRouter, ...]

    def route(self, candidates: int, invocation: Invocation) -> int:
        """Each condition routes the survivors of the one before (Dubbo's
        ``ListenableStateRouter``); an empty result ends the walk."""
        for member in self.members:
            candidates = member.route(candidates, invocation)
            if not candidates:
                break
        return candidates

    def specialize(self, call: Invocation) -> tuple[BoundRouter, bool]:
        """The members that still do something for plain calls of ``call.method``; a single one
        stands for the set."""
        members: list[BoundRouter] = []
        reads_call = False
        for member in self.members:
            special, reads = specialize(member, call)
            if special is not PASS_THROUGH:
                members.append(special)
                reads_call = reads_call or reads
        if not members:
            return PASS_THROUGH, False
        if len(members) == 1:
            return members[0], reads_call
        return BoundRuleSet(tuple(members)), reads_call

    def lookups(self, request_type: type) -> tuple[Lookup, ...] | None:
        """The members' lookups in order (an empty result ends the walk either way)."""
        found: list[Lookup] = []
        for member in self.members:
            own = lookups(member, request_type)
            if own is None:
                return None
            found.extend(own)
        return tuple(found)


@dataclass(frozen=True)
class ConditionRuleSet:
    """The routers of one config-center document, as one stage of the chain."""

    name: str
    priority: int
    members: tuple[Router, ...]

    def bind(self, snapshot: Snapshot, consumer: URL) -> BoundRouter:
        """Bind every member; a set whose members all pass through binds to a pass-through."""
        bound = tuple(m.bind(snapshot, consumer) for m in self.members)
        active = tuple(b for b in bound if b is not PASS_THROUGH)
        if not active:
            return PASS_THROUGH
        return BoundRuleSet(active)
