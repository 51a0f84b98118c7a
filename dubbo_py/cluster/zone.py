"""Choosing a registry for a call: Apache Dubbo's ``ZoneAwareClusterInvoker``.

A consumer subscribed to several registries has one stack per registry (directory, router
chain, strategy, balancer). Before the usual strategy runs, one of them is chosen, in Dubbo's
order:

1. a registry marked ``preferred`` that is available;
2. the registry whose ``zone`` is the call's zone (the ``registry_zone`` attachment, else the
   application's zone) and is available; with ``registry_zone_force=true`` and none such, the
   call fails rather than leave its zone;
3. a weighted random pick (each registry's ``weight``, default 100) among the available ones;
4. when none is available, the first registry (whose stack then says why it has no provider).

*Available* is each member's to say (the consumer's stacks: a provider left after the
quarantine, the registry session not lost). :meth:`ZoneSelector.pick` returns the index of the
member to call; ``exclude`` leaves out members already tried by this call, so a caller can go
on to the next registry after a transport failure (which Dubbo does not; see docs/registry.md).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Sequence
from typing import Protocol

__all__ = [
    "REGISTRY_ZONE",
    "REGISTRY_ZONE_FORCE",
    "ZoneForcedError",
    "ZoneMember",
    "ZoneSelector",
]

#: The call attachment naming the call's zone (Dubbo's ``RegistryConstants.REGISTRY_ZONE``).
REGISTRY_ZONE = "registry_zone"
#: ``true``: fail the call rather than leave its zone (``REGISTRY_ZONE_FORCE``).
REGISTRY_ZONE_FORCE = "registry_zone_force"


class ZoneMember(Protocol):
    """One registry's stack as the selector sees it."""

    @property
    def name(self) -> str:
        """The registry's id, for errors."""
        ...

    @property
    def zone(self) -> str | None:
        """The zone the registry serves."""
        ...

    @property
    def weight(self) -> int:
        """Its share in the weighted pick."""
        ...

    @property
    def preferred(self) -> bool:
        """Whether it takes every call while available."""
        ...

    @property
    def available(self) -> bool:
        """Whether it has a usable provider and its registry session is not lost."""
        ...


class ZoneForcedError(LookupError):
    """``registry_zone_force=true`` and no available registry in the call's zone."""

    def __init__(self, zone: str, registries: Sequence[str]) -> None:
        self.zone = zone
        self.registries = tuple(registries)
        super().__init__(
            f"no available registry in zone {zone!r} and {REGISTRY_ZONE_FORCE}=true "
            f"(registries: {', '.join(self.registries)})"
        )


class ZoneSelector:
    """Picks one of ``members`` per call (see the module doc); ``zone`` is the application's,
    used when a call names none. ``draw`` returns a float in [0, 1) (a seeded one in tests)."""

    def __init__(
        self,
        members: Sequence[ZoneMember],
        zone: str | None = None,
        draw: Callable[[], float] = random.random,
    ) -> None:
        if not members:
            raise ValueError("a zone selector needs at least one member")
        self.members = tuple(members)
        self.zone = zone
        self._draw = draw
        self._preferred = tuple(i for i, m in enumerate(self.members) if m.preferred)
        # What a call without a zone of its own tries first, in order: the preferred members,
        # then those of the application's zone.
        self._first = tuple((i, self.members[i]) for i in self._preferred) + tuple(
            (i, m) for i, m in enumerate(self.members) if zone and m.zone == zone
        )
        self._weighted = tuple((i, m, max(0, m.weight)) for i, m in enumerate(self.members))

    def default(self) -> int:
        """:meth:`choose` for a call without a zone of its own (most calls), without building
        anything: a preferred or application-zone member available, else the weighted pick
        over the available ones (two passes over the members, no list made)."""
        for index, member in self._first:
            if member.available:
                return index
        total = 0
        for _i, member, weight in self._weighted:
            if member.available:
                total += weight
        if total > 0:
            offset = self._draw() * total
            for index, member, weight in self._weighted:
                if member.available:
                    offset -= weight
                    if offset < 0:
                        return index
        return self.choose()

    def choose(self, zone: str | None = None, force: bool = False) -> int:
        """The member a call goes to first (:meth:`pick` with nothing tried yet, which always
        finds one or raises :class:`ZoneForcedError`)."""
        index = self.pick(zone, force)
        assert index is not None  # nothing excluded: the first member is the last resort
        return index

    def pick(
        self,
        zone: str | None = None,
        force: bool = False,
        exclude: Collection[int] = (),
    ) -> int | None:
        """The index of the member to call; None when every member is excluded (or, forced,
        every member of the zone); :class:`ZoneForcedError` when forced and the zone has no
        available member and none was tried yet."""
        members = self.members
        for i in self._preferred:
            if i not in exclude and members[i].available:
                return i
        zone = zone or self.zone
        if zone:
            for i, member in enumerate(members):
                if i not in exclude and member.zone == zone and member.available:
                    return i
            if force:
                if exclude:
                    return None
                raise ZoneForcedError(zone, [m.name for m in members])
        return self._balanced(exclude)

    def _balanced(self, exclude: Collection[int]) -> int | None:
        members = self.members
        candidates = [i for i, m in enumerate(members) if m.available and i not in exclude]
        if not candidates:
            # Nothing available: the first not tried, whose stack says why it has no provider.
            return next((i for i in range(len(members)) if i not in exclude), None)
        if len(candidates) == 1:
            return candidates[0]
        weights = [max(0, members[i].weight) for i in candidates]
        total = sum(weights)
        if total <= 0:
            return candidates[int(self._draw() * len(candidates))]
        offset = self._draw() * total
        for i, weight in zip(candidates, weights, strict=True):
            offset -= weight
            if offset < 0:
                return i
        return candidates[-1]
