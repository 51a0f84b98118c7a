"""``failover``, Dubbo's default: on a transport failure, retry on another provider (re-routing
first), up to ``retries`` times, never on one already tried while others remain; application
errors are never retried; the retry budget caps retries under a total outage. Blocking and
asyncio forms.

:func:`first_attempt` is the first attempt of every blocking failover call, whether it comes
through :func:`failover` or through a call plan (:mod:`dubbo_py.cluster.plan`, run by the
stub's multicallable): it counts the request in the retry budget, calls the provider and
records the outcome; on a failure, :func:`continue_failover` goes on. The asyncio flavour has
the same three steps, awaited: :func:`failover_async`, :func:`first_attempt_async` (which an
asyncio call plan runs too) and :func:`continue_failover_async`.
"""

from __future__ import annotations

from collections.abc import Callable
from time import monotonic
from typing import Any

import grpc

from dubbo_py.call_errors import is_closed_channel
from dubbo_py.cluster.support.context import ClusterContext, ProviderCall
from dubbo_py.cluster.support.deadline import Deadline
from dubbo_py.cluster.support.routing import Attempts, route
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = [
    "continue_failover",
    "continue_failover_async",
    "failover",
    "failover_async",
    "first_attempt",
    "first_attempt_async",
    "first_attempt_failed",
    "first_attempt_failed_async",
]


def failover(ctx: ClusterContext, invocation: Invocation) -> Any:
    """Route, pick, and make the first attempt (:func:`first_attempt`)."""
    provider, timeout = _first_provider(ctx, invocation)
    return first_attempt(
        ctx, provider, invocation.method, invocation.request, timeout, invocation=invocation
    )


def _first_provider(ctx: ClusterContext, invocation: Invocation) -> tuple[URL, float | None]:
    """The provider of the call's first attempt, routed and picked now, and the call's
    timeout (its own, else the method's)."""
    settings = ctx.settings[invocation.method]
    timeout = invocation.timeout
    if timeout is None:
        timeout = settings.timeout
    candidates = route(ctx, invocation, [])
    quarantine = ctx.quarantine
    if not settings.sticky and (quarantine is None or not quarantine.addresses):
        # ctx.pick's common case (nothing quarantined, not sticky, nothing tried yet).
        return ctx.balancer.select(candidates, invocation), timeout
    return ctx.pick(invocation, candidates), timeout


def _after_first(
    ctx: ClusterContext,
    invocation: Invocation | None,
    call: tuple[str, Any, float | None, float],
    provider: URL,
    error: grpc.RpcError,
) -> Attempts:
    """The rest of a call whose first attempt on ``provider`` failed with ``error``: its
    bookkeeping, that failure recorded (raises what the caller must see when it must not be
    retried). ``call`` is what the first attempt knew: method, request, timeout, and when it
    started (monotonic)."""
    method, request, timeout, started = call
    if invocation is None:
        invocation = Invocation(ctx.service, method, request, timeout=timeout)
    attempts = Attempts(ctx, invocation, Deadline(None if timeout is None else started + timeout))
    attempts.failed(provider, error)
    return attempts


def first_attempt(
    ctx: ClusterContext,
    provider: URL,
    method: str,
    request: Any,
    timeout: float | None,
    *,
    invocation: Invocation | None = None,
    direct: Callable[..., Any] | None = None,
    call: ProviderCall | None = None,
) -> Any:
    """Failover's first attempt: a call of ``method`` with ``request`` on ``provider``, with
    ``timeout`` seconds (None: unbounded). Counts the request in the retry budget, calls, and
    on a success forgets the provider's run of failures; a failure goes on as
    :func:`continue_failover`.

    ``invocation`` is the call's, when the caller has one (else it is made only when needed:
    a call plan makes none for a call that succeeds). ``direct`` is the provider's cached
    multicallable when the provider call is plain (a call plan has it): the call is then
    ``direct(request, timeout=timeout)``, with no frame of the provider call's own; ``call``
    is the provider call to make this attempt with when there is no ``direct`` (default
    ``ctx.call``): a plan whose hooks recorded the attempt passes the one inside the attempt
    filters (:attr:`~dubbo_py.cluster.plan.CallPlan.plain_call`), so it is not recorded twice."""
    budget = ctx.budget
    if budget is not None:
        # budget.deposit() written out (the Budget protocol's requests): one Python frame
        # less on every call; the clock read, then called (a method look-up of an instance
        # attribute is not specialised).
        clock = budget.clock
        if clock() >= budget.next_fold:
            budget.fold()
        budget.requests.append(None)
    started = 0.0 if timeout is None else monotonic()
    try:
        if direct is not None:
            try:
                response = direct(request, timeout=timeout)
            except ValueError as exc:
                if not is_closed_channel(exc):
                    raise
                # The provider's channel was closed after this call picked it (it left): the
                # provider call below makes that a transport failure.
                direct = None
        if direct is None:
            if invocation is None:
                invocation = Invocation(ctx.service, method, request, timeout=timeout)
            response = (ctx.call if call is None else call)(provider, invocation, timeout)
    except grpc.RpcError as error:
        # Everything past the first attempt lives apart, off the path of calls that succeed.
        return first_attempt_failed(
            ctx, invocation, (method, request, timeout, started), provider, error
        )
    outliers = ctx.outliers
    if outliers is not None and outliers.failing:
        outliers.succeeded(provider.address)
    return response


def first_attempt_failed(
    ctx: ClusterContext,
    invocation: Invocation | None,
    call: tuple[str, Any, float | None, float],
    provider: URL,
    error: grpc.RpcError,
) -> Any:
    """Failover after a blocking first attempt on ``provider`` failed with ``error`` (the
    request already counted in the retry budget): the failure recorded, then the retries.
    ``invocation`` and ``call`` as :func:`_after_first` takes them (the blocking stub's
    multicallable makes the first attempt of a plain call itself, then comes here)."""
    return continue_failover(_after_first(ctx, invocation, call, provider, error))


def continue_failover(attempts: Attempts) -> Any:
    """Failover after its first attempt failed (recorded in ``attempts``; the request already
    counted in the retry budget)."""
    ctx, invocation = attempts.ctx, attempts.invocation
    for provider in attempts:
        try:
            response = ctx.call(provider, invocation, attempts.remaining())
        except grpc.RpcError as retry_error:
            attempts.failed(provider, retry_error)
        else:
            return attempts.answered(provider, response)
    raise attempts.error() from None


async def failover_async(ctx: ClusterContext, invocation: Invocation) -> Any:
    """:func:`failover`, each provider call awaited."""
    provider, timeout = _first_provider(ctx, invocation)
    return await first_attempt_async(
        ctx, provider, invocation.method, invocation.request, timeout, invocation=invocation
    )


async def first_attempt_async(
    ctx: ClusterContext,
    provider: URL,
    method: str,
    request: Any,
    timeout: float | None,
    *,
    invocation: Invocation | None = None,
    direct: Callable[..., Any] | None = None,
    call: ProviderCall | None = None,
) -> Any:
    """:func:`first_attempt`, the provider call awaited: ``direct`` is then a ``grpc.aio``
    multicallable with the provider's headers bound, and ``call`` an awaitable provider
    call."""
    budget = ctx.budget
    if budget is not None:
        clock = budget.clock
        if clock() >= budget.next_fold:  # budget.deposit(), written out
            budget.fold()
        budget.requests.append(None)
    started = 0.0 if timeout is None else monotonic()
    try:
        if direct is not None:
            try:
                response = await direct(request, timeout=timeout)
            except grpc.aio.UsageError:
                # The provider's channel was closed after this call picked it (grpc.aio says
                # so before sending anything): the provider call below gets a fresh one.
                direct = None
        if direct is None:
            if invocation is None:
                invocation = Invocation(ctx.service, method, request, timeout=timeout)
            response = await (ctx.call if call is None else call)(provider, invocation, timeout)
    except grpc.RpcError as error:
        first = (method, request, timeout, started)
        return await first_attempt_failed_async(ctx, invocation, first, provider, error)
    outliers = ctx.outliers
    if outliers is not None and outliers.failing:
        outliers.succeeded(provider.address)
    return response


async def first_attempt_failed_async(
    ctx: ClusterContext,
    invocation: Invocation | None,
    call: tuple[str, Any, float | None, float],
    provider: URL,
    error: grpc.RpcError,
) -> Any:
    """:func:`first_attempt_failed`, each retry awaited (the asyncio stub's multicallable
    comes here when its own first attempt failed)."""
    return await continue_failover_async(_after_first(ctx, invocation, call, provider, error))


async def continue_failover_async(attempts: Attempts) -> Any:
    """:func:`continue_failover`, each provider call awaited."""
    ctx, invocation = attempts.ctx, attempts.invocation
    for provider in attempts:
        try:
            response = await ctx.call(provider, invocation, attempts.remaining())
        except grpc.RpcError as retry_error:
            attempts.failed(provider, retry_error)
        else:
            return attempts.answered(provider, response)
    raise attempts.error() from None
