"""Cluster strategies: how one invocation becomes a result across many providers.

A strategy is a function ``(ClusterContext, Invocation) -> response``. The context bundles the
stages it composes — the directory's current bound chain (routing), a load balancer, the
provider call, and optionally the dead-provider quarantine and the retry budget — so each
strategy is a small, readable loop over those functions.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc

from dubbo_py.cluster.errors import ClusterError, is_transport_failure
from dubbo_py.invocation import Invocation
from dubbo_py.router.base import NoProviderError
from dubbo_py.router.chain import BoundChain
from dubbo_py.rpc.invoker import ProviderCall
from dubbo_py.url import URL

__all__ = [
    "STRATEGIES",
    "Balancer",
    "Budget",
    "ClusterContext",
    "QuarantineView",
    "Strategy",
    "failfast",
    "failover",
    "failsafe",
    "get_strategy",
]

log = logging.getLogger(__name__)


class Balancer(Protocol):
    """Picks one provider among candidates (see :mod:`dubbo_py.cluster.loadbalance`)."""

    def select(
        self, candidates: tuple[URL, ...], invocation: Invocation, *, now_ms: int | None = None
    ) -> URL:
        """One of ``candidates``."""
        ...


class QuarantineView(Protocol):
    """The part of the quarantine a strategy uses."""

    def partition(self, candidates: tuple[URL, ...]) -> tuple[tuple[URL, ...], tuple[URL, ...]]:
        """(healthy, quarantined) among ``candidates``."""
        ...

    def add(self, url: URL, reason: str) -> object:
        """Quarantine a provider that failed at the transport level."""
        ...


class Budget(Protocol):
    """The retry budget: retries are limited to a fraction of recent requests."""

    def deposit(self) -> None:
        """Count one request."""
        ...

    def try_withdraw(self) -> bool:
        """Take one retry from the budget, if any is left."""
        ...


@dataclass
class ClusterContext:
    """What a strategy needs for one reference (one service on the consumer side)."""

    service: str
    chain: Callable[[], BoundChain]
    balancer: Balancer
    call: ProviderCall
    #: Retries for a method (attempts = retries + 1).
    retries: Callable[[str], int] = lambda _method: 2
    #: Default timeout for a method, in seconds (None: no deadline).
    timeout: Callable[[str], float | None] = lambda _method: None
    #: Methods whose DEADLINE_EXCEEDED may be retried (declared idempotent).
    idempotent: frozenset[str] = frozenset()
    quarantine: QuarantineView | None = None
    budget: Budget | None = None
    #: The method's empty response message (what ``failsafe`` returns on failure).
    empty_response: Callable[[], Any] = lambda: None
    #: Per-method extra options (``forks`` for forking, ...).
    options: Callable[[str, str], Any] = lambda _method, _key: None
    extras: dict[str, Any] = field(default_factory=dict)

    def candidates(self, invocation: Invocation) -> tuple[URL, ...]:
        """Route now (re-read the directory's chain, so a retry sees the latest rules)."""
        return self.chain().route(invocation)

    def pick(
        self, invocation: Invocation, candidates: tuple[URL, ...], tried: Iterable[URL] = ()
    ) -> URL:
        """Balance among untried, unquarantined candidates when there are any, else among the
        quarantined (tried last), else among every candidate."""
        tried_set = set(tried)
        pool = tuple(c for c in candidates if c not in tried_set) if tried_set else candidates
        if not pool:
            pool = candidates
        if self.quarantine is not None:
            healthy, quarantined = self.quarantine.partition(pool)
            pool = healthy or quarantined
        return self.balancer.select(pool, invocation)


Strategy = Callable[[ClusterContext, Invocation], Any]


def _deadline(ctx: ClusterContext, invocation: Invocation) -> float | None:
    timeout = (
        invocation.timeout if invocation.timeout is not None else ctx.timeout(invocation.method)
    )
    return None if timeout is None else time.monotonic() + timeout


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _retryable(ctx: ClusterContext, invocation: Invocation, error: BaseException) -> bool:
    if is_transport_failure(error):
        return True
    return (
        isinstance(error, grpc.RpcError)
        and hasattr(error, "code")
        and error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        and invocation.method in ctx.idempotent
    )


def _route(ctx: ClusterContext, invocation: Invocation, tried: list[URL]) -> tuple[URL, ...]:
    try:
        return ctx.candidates(invocation)
    except NoProviderError as exc:
        raise ClusterError(
            invocation.service, invocation.method, [t.address for t in tried], str(exc)
        ) from None


def failover(ctx: ClusterContext, invocation: Invocation) -> Any:
    """Dubbo's default: on a transport failure, retry on another provider (re-routing first),
    up to ``retries`` times, never on one already tried while others remain; application errors
    are never retried; the retry budget caps retries under a total outage."""
    if ctx.budget is not None:
        ctx.budget.deposit()
    deadline = _deadline(ctx, invocation)
    attempts = max(0, ctx.retries(invocation.method)) + 1
    tried: list[URL] = []
    last: BaseException | None = None
    for attempt in range(attempts):
        if attempt and ctx.budget is not None and not ctx.budget.try_withdraw():
            log.warning("retry budget exhausted for %s; not retrying", ctx.service)
            break
        candidates = _route(ctx, invocation, tried)
        provider = ctx.pick(invocation, candidates, tried)
        try:
            return ctx.call(provider, invocation, _remaining(deadline))
        except grpc.RpcError as error:
            if not _retryable(ctx, invocation, error):
                raise
            last = error
            tried.append(provider)
            if is_transport_failure(error) and ctx.quarantine is not None:
                ctx.quarantine.add(provider, f"{error.code().name}: {error.details()}")
            if deadline is not None and time.monotonic() >= deadline:
                break
    code = last.code() if isinstance(last, grpc.RpcError) else grpc.StatusCode.UNAVAILABLE
    raise ClusterError(
        invocation.service,
        invocation.method,
        [t.address for t in tried],
        f"failed after {len(tried)} attempt(s)",
        code=code,
        last=last,
    )


def failfast(ctx: ClusterContext, invocation: Invocation) -> Any:
    """One attempt; any failure goes straight to the caller (for non-idempotent writes)."""
    candidates = _route(ctx, invocation, [])
    provider = ctx.pick(invocation, candidates)
    try:
        return ctx.call(provider, invocation, _remaining(_deadline(ctx, invocation)))
    except grpc.RpcError as error:
        if is_transport_failure(error) and ctx.quarantine is not None:
            ctx.quarantine.add(provider, f"{error.code().name}: {error.details()}")
        raise


def failsafe(ctx: ClusterContext, invocation: Invocation) -> Any:
    """Never raise: a failure is logged and the method's empty response is returned (for
    calls whose result is optional, such as audit logging)."""
    try:
        return failover(ctx, invocation)
    except grpc.RpcError as error:
        log.error(
            "failsafe: %s.%s failed, returning an empty response: %s",
            invocation.service,
            invocation.method,
            error,
        )
        return ctx.empty_response()


def _lazy_strategies() -> dict[str, Strategy]:
    from dubbo_py.cluster.failback import failback
    from dubbo_py.cluster.parallel import broadcast, forking

    return {"failback": failback, "forking": forking, "broadcast": broadcast}


STRATEGIES: dict[str, Strategy] = {
    "failover": failover,
    "failfast": failfast,
    "failsafe": failsafe,
}


def get_strategy(name: str) -> Strategy:
    """The strategy called ``name``; ValueError listing the known ones otherwise."""
    if len(STRATEGIES) == 3:
        STRATEGIES.update(_lazy_strategies())
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ValueError(
            f"unknown cluster strategy {name!r}; choose one of {', '.join(sorted(STRATEGIES))}"
        ) from None
