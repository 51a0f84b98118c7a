"""Call plans: failover's first attempt for one method, compiled.

Most calls are *plain*: no call metadata, no channel attachments, a method that is not sticky,
nothing quarantined. While the directory's bound chain, the balancer and the method's settings
stay the same, such a call of one method always does the same things -- fold the routers that
cannot read it, run the ones that read the request, balance over the survivors, call the
provider's multicallable -- and most of their inputs are fixed. A :class:`CallPlan` holds those
inputs, worked out on the first plain call:

* routing: the chain's per-method plan (:meth:`~dubbo_py.router.chain.BoundChain.plan`) -- the
  mask the call-independent routers leave -- and, for each router that reads the request, a
  :data:`~dubbo_py.router.base.Lookup` (a C-level reader and a cached decision);
* balancing: per surviving mask, the candidates and the balancer's
  :data:`~dubbo_py.cluster.loadbalance.base.Picker` (no picker needed for one candidate);
* the call: the method invoker's cached gRPC multicallables, by provider address;
* the attempt: failover's own :func:`~dubbo_py.cluster.strategies.failover.first_attempt`,
  given the provider's cached multicallable (``direct``), so a planned call counts in the retry
  budget, records its outcome and fails over exactly as a call through the strategy does.

The stub's multicallable (``dubbo_py.consumer.channel``) runs the routing and balancing of a plan in
its own frame, without an :class:`~dubbo_py.invocation.Invocation`, then calls
``first_attempt``, which makes an invocation only when the call fails. An *express* plan (no
router reading the request, no filter hooks, and the invoker's bare multicallables,
:attr:`CallPlan.targets`, to call) is run whole in the multicallable's one frame (coroutine, for
the asyncio flavour): its routing, its balancing (:attr:`CallPlan.only` when one provider is
left) and ``first_attempt``'s steps written out there, the provider's gRPC multicallable called
as a method with its headers. Every call first checks
the plan is still current (identity checks against the context); anything a plan cannot
express -- a router without lookups, a sticky method, a balancer without a picker for several
candidates -- means no plan, or a fall back to ``balancer.select`` for that call, and the
strategy runs as usual. ``tests/cluster/test_call_plans.py`` checks plans against the strategy
they stand for.

Filters and plans (:class:`PlanObservers`): a plan is an optimisation of the method's whole
stack, filters included, so a filter that must see every call either turns plans off or says,
with a *plan hook*, what it records for a planned call -- a :class:`CallHook` (start and finish
of the call, with its outcome) for a call filter, an :class:`AttemptHook` (the provider of the
first attempt; retries go through the attempt filters as usual) for an attempt filter. A hook
may decline a call (:meth:`CallHook.declines`, asked before anything is routed), which then
takes the filter stack: the consumer's metrics decline while a tracer is set up, since a traced
call carries its span in the call's metadata.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from dubbo_py.cluster.loadbalance.base import LoadBalance
from dubbo_py.cluster.method_settings import MethodSettings
from dubbo_py.cluster.support.context import ClusterContext, PlainCall
from dubbo_py.invocation import Invocation
from dubbo_py.router.base import Lookup, lookups
from dubbo_py.router.chain import BoundChain
from dubbo_py.url import URL

__all__ = [
    "MAX_PICKS",
    "AttemptHook",
    "CallHook",
    "CallPlan",
    "Pick",
    "PlanObservers",
    "compile_plan",
]

#: Surviving masks a plan keeps a pick for; beyond that, calls with a new mask balance through
#: ``balancer.select`` (rules that split traffic finely produce many masks).
MAX_PICKS = 64


class CallHook(Protocol):
    """What a call filter records of a planned call, instead of wrapping it: ``start`` as the
    call's first attempt starts (its token goes to ``finish``), ``finish`` when the call ends,
    ``error`` None for a success, else what the caller gets raised (after every retry)."""

    def declines(self) -> bool:
        """True when this call must go through the filter instead (asked first, per call)."""
        ...

    def start(self) -> Any:
        """Begin recording a call; returns the token for :meth:`finish`."""
        ...

    def finish(self, token: Any, error: BaseException | None) -> None:
        """Record how the call begun with ``token`` ended."""
        ...


class AttemptHook(Protocol):
    """What an attempt filter records of a planned call's first attempt, made on ``provider``
    without the attempt filters (the attempts after it go through them)."""

    def __call__(self, provider: URL) -> None:
        """Record the attempt."""
        ...


class PlanObservers:
    """The hooks a planned call runs, in the stack's order: the call hooks (outermost first)
    start, the attempt hooks record the first attempt, the call runs, the call hooks finish in
    reverse order. ``start(provider)`` returns the token to give ``finish(token, error)``; both
    are put together once, here, for the hooks at hand (one call hook, the common case, costs
    no frame of its own to finish)."""

    __slots__ = ("attempts", "calls", "declines", "finish", "start")

    def __init__(self, calls: tuple[CallHook, ...], attempts: tuple[AttemptHook, ...]) -> None:
        self.calls = calls
        self.attempts = attempts
        gates = tuple(hook.declines for hook in calls)
        #: Whether one of the call hooks declines this call (asked before routing).
        self.declines: Callable[[], bool] = (
            gates[0] if len(gates) == 1 else lambda: any(gate() for gate in gates)
        )
        #: Start the call hooks and record the first attempt on ``provider``: the token.
        self.start: Callable[[URL], Any]
        #: End the call hooks (innermost first), ``error`` None for a success.
        self.finish: Callable[[Any, BaseException | None], None]
        if len(calls) != 1:
            self.start, self.finish = self._start_all, self._finish_all
            return
        hook = calls[0]
        self.finish = hook.finish
        if not attempts:
            self.start = lambda provider: hook.start()
        elif len(attempts) == 1:
            attempt = attempts[0]

            def start(provider: URL) -> Any:
                token = hook.start()
                attempt(provider)
                return token

            self.start = start
        else:
            self.start = self._start_all
            self.finish = self._finish_all

    def _start_all(self, provider: URL) -> Any:
        tokens = [hook.start() for hook in self.calls]
        for attempt in self.attempts:
            attempt(provider)
        return tokens

    def _finish_all(self, tokens: Any, error: BaseException | None) -> None:
        for hook, token in zip(reversed(self.calls), reversed(tokens), strict=True):
            hook.finish(token, error)


class _NoCall:
    """The call hook of a plan whose filters are all attempt filters: records nothing."""

    @staticmethod
    def declines() -> bool:
        return False

    def start(self) -> Any:
        return None

    def finish(self, token: Any, error: BaseException | None) -> None:
        return None


_NO_CALL = _NoCall()


@dataclass(frozen=True, slots=True)
class Pick:
    """How a plan balances over one surviving mask: ``only`` when one candidate is left, else
    ``pick(now_ms)`` while ``now_ms < valid_until_ms`` (``pick`` None, or returning None: use
    ``balancer.select``)."""

    candidates: tuple[URL, ...]
    only: URL | None
    pick: Callable[[int], URL | None] | None
    valid_until_ms: float


@dataclass(frozen=True, slots=True, eq=False)
class CallPlan:
    """A method's compiled first attempt (see the module docstring). The fields up to
    ``invoker`` are what it was compiled from: the plan is current while they are what the
    context holds and the request is a ``request_type``."""

    chain: BoundChain
    balancer: LoadBalance
    settings: MethodSettings
    invoker: PlainCall
    request_type: type
    method: str
    #: The mask left by the routers folded for this method.
    mask: int
    #: The request-reading routers' lookups, in chain order.
    lookups: tuple[Lookup, ...]
    #: The cached multicallables by provider address (the invoker's own dict).
    multicallables: dict[str, Any]
    #: Deadline in seconds when a call gives none (the method's ``timeout``).
    timeout: float | None
    #: The provider call inside the attempt filters (``invoker`` itself without any).
    plain_call: PlainCall | None = None
    #: The filters' hooks each call runs (None: no filter, nothing to run).
    observers: PlanObservers | None = None
    picks: dict[int, Pick] = field(default_factory=dict)
    #: The provider every call takes when no router reads the request and the folded routers
    #: leave one (its pick never changes), else None.
    only: URL | None = None
    #: The invoker's bare multicallables and the headers they send, by provider address (the
    #: invoker's own dict, see :attr:`~dubbo_py.consumer.invoker.MethodInvoker.targets`),
    #: when a call of one is ``multicallable(request, timeout, headers)``; else None.
    targets: dict[str, tuple[Any, Any]] | None = None
    #: Whether the stub's multicallable runs this plan in its own frame: no router
    #: reads the request, no filter hooks, and :attr:`targets` to call.
    express: bool = False

    def pick_for(self, mask: int, now_ms: int) -> Pick:
        """The :class:`Pick` of ``mask`` at ``now_ms`` (kept for later calls, up to
        :data:`MAX_PICKS` masks)."""
        snapshot = self.chain.snapshot
        candidates = snapshot.providers if mask == snapshot.all else snapshot.select(mask)
        if len(candidates) == 1:
            made = Pick(candidates, candidates[0], None, float("inf"))
        else:
            found = self.balancer.picker(candidates, self.method, now_ms)
            if found is None:
                made = Pick(candidates, None, None, float("inf"))
            else:
                made = Pick(candidates, None, found[0], found[1])
        if mask in self.picks or len(self.picks) < MAX_PICKS:
            self.picks[mask] = made
        return made

    def rebalance(self, mask: int, now_ms: int, invocation: Invocation) -> URL:
        """A provider for ``mask`` when its kept pick could not choose (the balancer's state
        moved on, as when round robin rescheduled for other candidates): a fresh pick, else
        ``balancer.select``."""
        made = self.pick_for(mask, now_ms)
        if made.only is not None:
            return made.only
        chosen = made.pick(now_ms) if made.pick is not None else None
        return chosen if chosen is not None else self.balancer.select(made.candidates, invocation)


def compile_plan(
    ctx: ClusterContext, method: str, request: Any, call_hooks: tuple[CallHook, ...] = ()
) -> CallPlan | None:
    """A plan for plain calls of ``method`` with requests like ``request`` under ``ctx`` as it
    is now, or ``None`` when such calls need more than a plan expresses: a sticky method, a
    provider call that is not a plain
    :class:`~dubbo_py.cluster.support.context.PlainCall`, a router that reads the request
    without lookups, or no provider left by the call-independent routers (the strategy then
    raises the error naming it). ``call_hooks`` are those of the method's call filters; the
    provider call's attempt filters give theirs as its ``attempt_hooks`` (see
    :class:`PlanObservers`)."""
    settings = ctx.settings[method]
    invoker = ctx.call
    if settings.sticky or settings.switched or not isinstance(invoker, PlainCall):
        return None
    if not invoker.plain:
        return None
    chain = ctx.routes.chain
    routing = chain.plan(Invocation(ctx.service, method))
    if routing is None:
        return None
    mask, stages = routing
    found: list[Lookup] = []
    for _name, router in stages:
        own = lookups(router, type(request))
        if own is None:
            return None
        found.extend(own)
    attempt_hooks: tuple[AttemptHook, ...] = getattr(invoker, "attempt_hooks", ())
    observers = None
    if call_hooks or attempt_hooks:
        observers = PlanObservers(call_hooks or (_NO_CALL,), attempt_hooks)
    only = None
    if not found:
        snapshot = chain.snapshot
        candidates = snapshot.providers if mask == snapshot.all else snapshot.select(mask)
        if len(candidates) == 1:
            only = candidates[0]
    targets: dict[str, tuple[Any, Any]] | None = getattr(invoker, "targets", None)
    return CallPlan(
        chain=chain,
        balancer=ctx.balancer,
        settings=settings,
        invoker=invoker,
        request_type=type(request),
        method=method,
        mask=mask,
        lookups=tuple(found),
        multicallables=invoker.multicallables,
        timeout=settings.timeout,
        plain_call=getattr(invoker, "inner", invoker),
        observers=observers,
        only=only,
        targets=targets,
        express=not found and observers is None and targets is not None,
    )
