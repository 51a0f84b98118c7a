"""The call-plan half of a stub's multicallable, shared by both flavours.

A plain failover call (no call metadata, nothing quarantined, a plan current for the method's
stack) is routed and balanced by its method's compiled :class:`~dubbo_py.cluster.plan.CallPlan`
instead of the strategy: :meth:`PlannedSite._provider` does that and names the provider, and the
flavour's multicallable then makes failover's first attempt on it -- blocking
(:func:`~dubbo_py.cluster.strategies.failover.first_attempt`, :mod:`dubbo_py.consumer.channel`) or
awaited (:func:`~dubbo_py.cluster.strategies.failover.first_attempt_async`,
:mod:`dubbo_py.consumer.channel`). Any other call takes the method's stack, compiling a plan
first when the call is plain and none is current (:meth:`PlannedSite._replan`). The common
call, under an express plan (see :mod:`dubbo_py.cluster.plan`), is made by the multicallable in
its own frame instead, with the same checks as :meth:`PlannedSite._provider`.
"""

from __future__ import annotations

from collections.abc import Mapping
from time import time_ns
from typing import Any

from dubbo_py.cluster.plan import CallPlan, compile_plan
from dubbo_py.consumer.method import BoundMethod, CallSite
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = ["PlannedSite"]


class PlannedSite(CallSite):
    """A multicallable that may run its method's call plan (see the module docstring)."""

    def __init__(self, bound: BoundMethod[Any], attachments: Mapping[str, str]) -> None:
        super().__init__(bound, attachments)
        #: Plain calls under failover run a compiled plan when one is current.
        self._plannable = bound.plannable and not attachments
        #: The call filters' plan hooks (a plan runs them in place of the filters).
        self._call_hooks = bound.hooks
        self._plan: CallPlan | None = None
        #: What the last failed compile was tried against (not retried until it changes).
        self._unplanned: tuple[object, ...] | None = None

    def _provider(self, plan: CallPlan | None, request: Any, metadata: Any) -> URL | None:
        """The provider ``plan`` (the multicallable's plan, read once by the caller) picks for
        this call, or None when the call takes the method's stack: no plan, or not current,
        call metadata, something quarantined, a filter's hook declining, or no provider left
        by a rule reading the request (the strategy raises the error naming it)."""
        # A plan's routing and balancing (dubbo_py/cluster/plan.py), written out in this one
        # frame: it runs on every call. The checks say the plan is still current.
        ctx = self._context
        quarantine = ctx.quarantine
        if (
            plan is None
            or metadata
            or plan.chain is not ctx.routes.chain
            or plan.balancer is not ctx.balancer
            or plan.settings is not ctx.settings[self._method]
            or plan.invoker is not ctx.call
            or type(request) is not plan.request_type
            or (quarantine is not None and quarantine.addresses)
            or (plan.observers is not None and plan.observers.declines())
        ):
            return None
        mask = plan.mask
        for read, decide in plan.lookups:
            decision = decide(read(request))
            if decision is not None:
                survivors = mask & decision[0]
                if survivors or decision[1]:
                    mask = survivors
                    if not mask:
                        return None
        pick = plan.picks.get(mask)
        if pick is not None:
            provider = pick.only
            if provider is not None:
                # One candidate: its pick never expires (valid_until_ms is infinite), so the
                # clock is not read (the common case of one provider left by the routers).
                return provider
        now_ms = time_ns() // 1_000_000
        if pick is None or now_ms >= pick.valid_until_ms:
            pick = plan.pick_for(mask, now_ms)
        provider = pick.only
        if provider is not None:
            return provider
        if pick.pick is None:  # a balancer without a picker
            return ctx.balancer.select(
                pick.candidates, Invocation(self._service, self._method, request)
            )
        provider = pick.pick(now_ms)
        if provider is None:
            invocation = Invocation(self._service, self._method, request)
            provider = plan.rebalance(mask, now_ms, invocation)
        return provider

    def _replan(self, request: Any, metadata: Any) -> None:
        """Before a call the plan does not cover: compile a plan when the call is plain and
        none was compiled against the method's stack as it is now."""
        if not self._plannable or metadata:
            return
        ctx = self._context
        now = (
            ctx.routes.chain,
            ctx.balancer,
            ctx.settings[self._method],
            ctx.call,
            type(request),
        )
        plan = self._plan
        tried = self._unplanned
        if plan is not None:
            tried = (plan.chain, plan.balancer, plan.settings, plan.invoker, plan.request_type)
        # Written out, not all(... zip ...): every call of a method without a plan (a
        # server-streaming one, say) comes here, and a generator costs six frames per call.
        if (
            tried is not None
            and tried[0] is now[0]
            and tried[1] is now[1]
            and tried[2] is now[2]
            and tried[3] is now[3]
            and tried[4] is now[4]
        ):
            return  # compiled against this already (the call is here for another reason)
        plan = compile_plan(ctx, self._method, request, self._call_hooks)
        self._plan = plan
        self._unplanned = now if plan is None else None
