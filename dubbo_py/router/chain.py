"""The router chain: routers ordered by priority, bound to a snapshot, applied in turn."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from dubbo_py.errors import NoProviderError
from dubbo_py.invocation import Invocation
from dubbo_py.router.base import PASS_THROUGH, BoundRouter, ExplainingRouter, Router, specialize
from dubbo_py.router.rule_budget import RuleBudgetError, budget_clock, elapsed_check, within_budget
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
    #: The providers that went in and came out, as masks of the chain's snapshot (what a
    #: router snapshot of a live call lists by address).
    mask_in: int = field(default=0, compare=False)
    mask_out: int = field(default=0, compare=False)

    def to_json(self) -> dict[str, Any]:
        """``{"router", "in", "out"}``, and ``"reason"`` when the router said why it left none."""
        entry: dict[str, Any] = {"router": self.router, "in": self.count_in, "out": self.count_out}
        if self.reason:
            entry["reason"] = self.reason
        return entry


def _explain(router: BoundRouter, candidates: int, invocation: Invocation) -> str | None:
    """The router's own account of an empty result, if it offers one (never raises)."""
    if not isinstance(router, ExplainingRouter):
        return None
    try:
        return router.explain(candidates, invocation)
    except Exception:  # an explanation must never hide the error it explains
        return None


Stages = tuple[tuple[str, BoundRouter], ...]


@dataclass(frozen=True, eq=False)
class BoundChain:
    """A chain bound to one snapshot; immutable, so a call in flight keeps the view it started
    with while a notification swaps in a new one.

    Plain calls (no attachments) of one method take a shortcut planned on the method's first
    such call: the leading routers whose result cannot depend on such a call -- the mock and
    tag routers, a condition rule that reads only the method -- are folded into one mask, and
    the routers after them are replaced by what they amount to for that method (a rule about
    another method passes everything through and drops out). Only what reads the request is
    left to run per call."""

    snapshot: Snapshot
    stages: Stages
    #: Why there is no provider at all, when the directory can tell (the registry is
    #: unreachable, providers exist only under other versions or groups).
    empty_reason: str | None = None
    #: The stages a call walks: pass-through routers left out (they keep every candidate).
    active: Stages = field(init=False, repr=False)
    #: Per method, for plain calls: (mask after the folded routers, the routers left), or None
    #: when the folded routers leave no provider (the full walk then says which one did).
    _plans: dict[str, tuple[int, Stages] | None] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        active = tuple((n, r) for n, r in self.stages if r is not PASS_THROUGH)
        object.__setattr__(self, "active", active)
        object.__setattr__(self, "_plans", {})

    def plan(self, call: Invocation) -> tuple[int, Stages] | None:
        """The shortcut for plain calls of ``call.method`` (see the class docstring); computed
        once per method and kept."""
        plans = self._plans
        method = call.method
        if method in plans:
            return plans[method]
        plain = Invocation(call.service, method)
        mask = self.snapshot.all
        left: list[tuple[str, BoundRouter]] = []
        for name, router in self.active:
            special, reads_call = specialize(router, plain)
            if special is PASS_THROUGH:
                continue
            if left or reads_call:
                left.append((name, special))
            else:
                mask = special.route(mask, plain)
        plan = (mask, tuple(left)) if mask else None
        plans[method] = plan
        return plan

    def route(self, invocation: Invocation) -> tuple[URL, ...]:
        """The providers this invocation may reach; raises :class:`NoProviderError` naming the
        router that left none."""
        snapshot = self.snapshot
        everything = snapshot.all
        plan = None
        if not invocation.attachments:
            plan = self._plans.get(invocation.method) or self.plan(invocation)
        if plan is None:
            mask, stages = everything, self.active
            if not mask:
                raise NoProviderError(
                    invocation.service, invocation.method, None, self.empty_reason
                )
        else:
            mask, stages = plan
        for name, router in stages:
            before = mask
            mask = router.route(mask, invocation)
            if not mask:
                raise NoProviderError(
                    invocation.service,
                    invocation.method,
                    name,
                    _explain(router, before, invocation),
                )
        # Snapshot.select's full-mask shortcut written out: this runs on every call.
        return snapshot.providers if mask == everything else snapshot.select(mask)

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
            steps.append(TraceStep(name, before, mask.bit_count(), reason, candidates, mask))
        return self.snapshot.select(mask), steps


class RouterChain:
    """An ordered, immutable list of routers: lower priority first, ties by name (deterministic)."""

    def __init__(self, routers: Iterable[Router] = ()) -> None:
        self.routers: tuple[Router, ...] = tuple(
            sorted(routers, key=lambda r: (r.priority, r.name))
        )

    def bind(
        self,
        snapshot: Snapshot,
        consumer: URL,
        budget: float | None = None,
        budgeted: Iterable[Router] | None = None,
    ) -> BoundChain:
        """Precompute every router against ``snapshot``. With a ``budget`` (seconds of CPU per
        router), a router of ``budgeted`` (default: every router) over it raises
        :class:`RuleBudgetError` naming it (``.router``)."""
        if budget is None:
            return BoundChain(
                snapshot, tuple((r.name, r.bind(snapshot, consumer)) for r in self.routers)
            )
        ruled = None if budgeted is None else {id(r) for r in budgeted}
        stages: list[tuple[str, BoundRouter]] = []
        for router in self.routers:
            if ruled is not None and id(router) not in ruled:
                stages.append((router.name, router.bind(snapshot, consumer)))
                continue
            started = budget_clock()
            try:
                with within_budget(budget):
                    bound = router.bind(snapshot, consumer)
                elapsed_check(f"binding {router.name}", started, budget)
            except RuleBudgetError as exc:
                reason = exc.reason
                if not reason.startswith("binding "):
                    reason = f"binding {router.name}: {reason}"
                raise RuleBudgetError(reason, source=exc.source, router=router) from None
            stages.append((router.name, bound))
        return BoundChain(snapshot, tuple(stages))

    def __repr__(self) -> str:
        return f"RouterChain({[r.name for r in self.routers]})"
