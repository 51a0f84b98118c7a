"""The router chain: routers ordered by priority, bound to a snapshot, applied in turn."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dubbo_py.invocation import Invocation
from dubbo_py.router.base import BoundRouter, ExplainingRouter, NoProviderError, Router
from dubbo_py.router.snapshot import Snapshot
from dubbo_py.url import URL

__all__ = ["BoundChain", "RouterChain", "TraceStep"]


@dataclass(frozen=True, slots=True)
class TraceStep:
    """One router's effect on one call: how many providers went in and came out."""

    router: str
    count_in: int
    count_out: int
    reason: str | None = None


def _explain(router: BoundRouter, candidates: int, invocation: Invocation) -> str | None:
    """The router's own account of an empty result, if it offers one (never raises)."""
    if not isinstance(router, ExplainingRouter):
        return None
    try:
        return router.explain(candidates, invocation)
    except Exception:  # an explanation must never hide the error it explains
        return None


@dataclass(frozen=True, eq=False)
class BoundChain:
    """A chain bound to one snapshot; immutable, so a call in flight keeps the view it started
    with while a notification swaps in a new one."""

    snapshot: Snapshot
    stages: tuple[tuple[str, BoundRouter], ...]

    def route_mask(self, invocation: Invocation) -> int:
        """The surviving mask; raises :class:`NoProviderError` naming the router that emptied it."""
        mask = self.snapshot.all
        if not mask:
            raise NoProviderError(invocation.service, invocation.method, None)
        for name, router in self.stages:
            before = mask
            mask = router.route(mask, invocation)
            if not mask:
                raise NoProviderError(
                    invocation.service,
                    invocation.method,
                    name,
                    _explain(router, before, invocation),
                )
        return mask

    def route(self, invocation: Invocation) -> tuple[URL, ...]:
        """The providers this invocation may reach."""
        return self.snapshot.select(self.route_mask(invocation))

    def trace(self, invocation: Invocation) -> tuple[tuple[URL, ...], list[TraceStep]]:
        """Survivors and a per-router trace; stops (with an empty result) where a router empties
        the list instead of raising, which is what ``route test`` shows an operator."""
        mask = self.snapshot.all
        steps: list[TraceStep] = []
        for name, router in self.stages:
            before = mask.bit_count()
            if not mask:
                break
            candidates = mask
            mask = router.route(mask, invocation)
            reason = None if mask else _explain(router, candidates, invocation)
            steps.append(TraceStep(name, before, mask.bit_count(), reason))
        return self.snapshot.select(mask), steps


class RouterChain:
    """An ordered, immutable list of routers: lower priority first, ties by name (deterministic)."""

    def __init__(self, routers: Iterable[Router] = ()) -> None:
        self.routers: tuple[Router, ...] = tuple(
            sorted(routers, key=lambda r: (r.priority, r.name))
        )

    def bind(self, snapshot: Snapshot, consumer: URL) -> BoundChain:
        """Precompute every router against ``snapshot``."""
        return BoundChain(
            snapshot, tuple((r.name, r.bind(snapshot, consumer)) for r in self.routers)
        )

    def __repr__(self) -> str:
        return f"RouterChain({[r.name for r in self.routers]})"
