"""Cluster strategies: how one invocation becomes a result across many providers.

A strategy is a function ``(ClusterContext, Invocation) -> response``. The context bundles the
stages it composes — the directory's current bound chain (routing), a load balancer, the
provider call, and optionally the dead-provider quarantine and the retry budget — so each
strategy is a small, readable loop over those functions.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc

from dubbo_py.cluster.errors import (
    TRANSPORT_CODES,
    ClusterError,
    is_call_failure,
    is_shed,
    is_transport_failure,
    status_code,
)
from dubbo_py.cluster.method_settings import MethodSettings, SettingsTable
from dubbo_py.cluster.outlier import OutlierDetector
from dubbo_py.invocation import RETRIES_ATTACHMENT, Invocation
from dubbo_py.router.base import NoProviderError
from dubbo_py.router.chain import BoundChain
from dubbo_py.rpc.invoker import ProviderCall
from dubbo_py.url import URL

__all__ = [
    "STRATEGIES",
    "Attempts",
    "Balancer",
    "Budget",
    "ChainSource",
    "ClusterContext",
    "FixedRoutes",
    "QuarantineView",
    "Strategy",
    "continue_failover",
    "failfast",
    "failover",
    "failsafe",
    "failsafe_answer",
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

    @property
    def addresses(self) -> Mapping[str, object]:
        """The quarantined providers by address (empty, hence falsy, when none is)."""
        ...

    def partition(self, candidates: tuple[URL, ...]) -> tuple[tuple[URL, ...], tuple[URL, ...]]:
        """(healthy, quarantined) among ``candidates``."""
        ...

    def add(self, url: URL, reason: str) -> object:
        """Quarantine a provider that failed at the transport level."""
        ...


class ChainSource(Protocol):
    """Where a strategy reads the current bound router chain (a registry directory); read again
    before every attempt, so a retry sees the latest providers and rules."""

    @property
    def chain(self) -> BoundChain:
        """The chain bound to the current provider snapshot."""
        ...


@dataclass(frozen=True)
class FixedRoutes:
    """A :class:`ChainSource` that never changes (tests, one-off tools)."""

    chain: BoundChain


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
    """What a strategy needs for one reference (one service on the consumer side).

    The per-call path reads plain attributes and one dict lookup here (``settings[method]``),
    no callbacks: whoever owns the context swaps ``balancer`` and updates ``settings`` in place
    when consumer overrides arrive."""

    service: str
    routes: ChainSource
    balancer: Balancer
    call: ProviderCall
    #: Settings per method (retries, default timeout, forks, sticky). One call may override
    #: retries with the ``dubbo.retries`` attachment
    #: (:data:`~dubbo_py.invocation.RETRIES_ATTACHMENT`).
    settings: Mapping[str, MethodSettings] = field(default_factory=SettingsTable)
    #: Methods whose DEADLINE_EXCEEDED may be retried (declared idempotent).
    idempotent: frozenset[str] = frozenset()
    quarantine: QuarantineView | None = None
    #: Ejects providers that keep timing out into the quarantine (None: no ejection).
    outliers: OutlierDetector | None = None
    budget: Budget | None = None
    #: What ``failsafe`` returns on failure: the method's empty response message, or an empty
    #: stream for a server-streaming method.
    empty_response: Callable[[], Any] = lambda: None
    extras: dict[str, Any] = field(default_factory=dict)
    _sticky: URL | None = field(default=None, init=False, repr=False)

    def candidates(self, invocation: Invocation) -> tuple[URL, ...]:
        """Route now (re-read the directory's chain, so a retry sees the latest rules)."""
        return self.routes.chain.route(invocation)

    def pick(
        self, invocation: Invocation, candidates: tuple[URL, ...], tried: Iterable[URL] = ()
    ) -> URL:
        """Balance among untried, unquarantined candidates when there are any, else among the
        quarantined (tried last), else among every candidate. A sticky method keeps the
        provider it used last while that one is in the pool."""
        pool = candidates
        if tried:
            tried_set = set(tried)
            pool = tuple(c for c in candidates if c not in tried_set) or candidates
        quarantine = self.quarantine
        if quarantine is not None and quarantine.addresses:
            healthy, quarantined = quarantine.partition(pool)
            pool = healthy or quarantined
        if not self.settings[invocation.method].sticky:
            return self.balancer.select(pool, invocation)
        # As Dubbo's AbstractClusterInvoker.select: the sticky provider wins while it is among
        # the candidates and was not tried in this call; otherwise balance and stick to that.
        held = self._sticky
        if held is not None and held in pool:
            return held
        chosen = self.balancer.select(pool, invocation)
        self._sticky = chosen
        return chosen

    def note_failure(self, provider: URL, error: BaseException) -> None:
        """Quarantine a provider that failed at the transport level; count any other failure
        towards its outlier ejection (an answer such as an application error resets it)."""
        if is_transport_failure(error):
            if self.quarantine is not None:
                details = error.details() if isinstance(error, grpc.RpcError) else str(error)
                code = status_code(error)
                self.quarantine.add(provider, f"{code.name if code else 'ERROR'}: {details}")
            return
        if self.outliers is not None:
            self.outliers.failed(provider, error)

    def note_success(self, provider: URL) -> None:
        """``provider`` answered: its consecutive failures, if any, are forgotten."""
        outliers = self.outliers
        if outliers is not None and outliers.failing:
            outliers.succeeded(provider.address)


Strategy = Callable[[ClusterContext, Invocation], Any]


def _deadline(ctx: ClusterContext, invocation: Invocation) -> float | None:
    timeout = invocation.timeout
    if timeout is None:
        timeout = ctx.settings[invocation.method].timeout
    return None if timeout is None else time.monotonic() + timeout


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _retryable(ctx: ClusterContext, invocation: Invocation, error: BaseException) -> bool:
    """Transport failures always; a call a provider shed over its limit (RESOURCE_EXHAUSTED
    with the shed marker: it did not run) always; DEADLINE_EXCEEDED only for methods declared
    idempotent (the call may have run); application errors never (they are answers)."""
    code = status_code(error)
    if code in TRANSPORT_CODES:
        return True
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        return is_shed(error)
    return code == grpc.StatusCode.DEADLINE_EXCEEDED and invocation.method in ctx.idempotent


def _attempts(ctx: ClusterContext, invocation: Invocation) -> int:
    text = invocation.attachments.get(RETRIES_ATTACHMENT) if invocation.attachments else None
    if text is None:
        return max(0, ctx.settings[invocation.method].retries) + 1
    try:
        return max(0, int(text)) + 1
    except ValueError:
        log.warning(
            "ignoring %s=%r on %s.%s: not an integer",
            RETRIES_ATTACHMENT,
            text,
            invocation.service,
            invocation.method,
        )
        return max(0, ctx.settings[invocation.method].retries) + 1


def _route(ctx: ClusterContext, invocation: Invocation, tried: list[URL]) -> tuple[URL, ...]:
    try:
        return ctx.candidates(invocation)
    except NoProviderError as exc:
        raise ClusterError(
            invocation.service, invocation.method, [t.address for t in tried], str(exc)
        ) from None


def _failure(
    invocation: Invocation, tried: list[URL], error: BaseException, reason: str
) -> BaseException:
    """What the caller sees for ``error``: a call failure becomes a :class:`ClusterError` naming
    the service, method and every provider tried (keeping the status code); an application
    error is the provider's answer and stays as it is."""
    if not is_call_failure(error):
        return error
    code = status_code(error) or grpc.StatusCode.UNAVAILABLE
    return ClusterError(
        invocation.service,
        invocation.method,
        [t.address for t in tried],
        reason,
        code=code,
        last=error,
    )


def failover(ctx: ClusterContext, invocation: Invocation) -> Any:
    """Dubbo's default: on a transport failure, retry on another provider (re-routing first),
    up to ``retries`` times, never on one already tried while others remain; application errors
    are never retried; the retry budget caps retries under a total outage."""
    # The first attempt is spelled out (no helper calls): it is the path of every call.
    budget = ctx.budget
    if budget is not None:
        budget.deposit()
    settings = ctx.settings[invocation.method]
    timeout = invocation.timeout
    if timeout is None:
        timeout = settings.timeout
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        candidates = ctx.routes.chain.route(invocation)
    except NoProviderError as exc:
        raise ClusterError(invocation.service, invocation.method, [], str(exc)) from None
    quarantine = ctx.quarantine
    if not settings.sticky and (quarantine is None or not quarantine.addresses):
        # ctx.pick's common case (nothing quarantined, not sticky, nothing tried yet).
        provider = ctx.balancer.select(candidates, invocation)
    else:
        provider = ctx.pick(invocation, candidates)
    try:
        response = ctx.call(provider, invocation, timeout)
    except grpc.RpcError as error:
        # Everything past the first attempt lives apart, off the path of calls that succeed.
        return continue_failover(ctx, invocation, deadline, provider, error)
    outliers = ctx.outliers
    if outliers is not None and outliers.failing:
        outliers.succeeded(provider.address)
    return response


class Attempts:
    """One retrying call's bookkeeping, shared by the blocking and the asyncio failover:
    ``for provider in attempts: try: call; except grpc.RpcError as e: attempts.failed(...)``,
    then ``raise attempts.error()``.

    Each iteration re-routes, skips providers already tried while others remain, and before
    every retry checks the deadline and asks the retry budget. ``failed`` records a failure
    (quarantining transport failures) and raises what the caller must see when the error must
    not be retried."""

    def __init__(self, ctx: ClusterContext, invocation: Invocation, deadline: float | None) -> None:
        self.ctx = ctx
        self.invocation = invocation
        self.deadline = deadline
        self.total = _attempts(ctx, invocation)
        self.tried: list[URL] = []
        self.last: BaseException | None = None
        self.reason = "failed"

    @classmethod
    def start(cls, ctx: ClusterContext, invocation: Invocation) -> Attempts:
        """A call about to make its first attempt (counts it in the retry budget)."""
        if ctx.budget is not None:
            ctx.budget.deposit()
        return cls(ctx, invocation, _deadline(ctx, invocation))

    def __iter__(self) -> Iterator[URL]:
        for _ in range(len(self.tried), self.total):
            if self.tried:
                if self.deadline is not None and time.monotonic() >= self.deadline:
                    self.reason = "deadline reached"
                    return
                if self.ctx.budget is not None and not self.ctx.budget.try_withdraw():
                    log.warning("retry budget exhausted for %s; not retrying", self.ctx.service)
                    self.reason = "retry budget exhausted"
                    return
            candidates = _route(self.ctx, self.invocation, self.tried)
            yield self.ctx.pick(self.invocation, candidates, self.tried)

    def remaining(self) -> float | None:
        """Seconds left of the call's deadline (None: no deadline)."""
        return _remaining(self.deadline)

    def failed(self, provider: URL, error: grpc.RpcError) -> None:
        """Record a failed attempt; raises what the caller must see when ``error`` must not be
        retried."""
        self.tried.append(provider)
        self.ctx.note_failure(provider, error)
        if not _retryable(self.ctx, self.invocation, error):
            raise _failure(self.invocation, self.tried, error, "failed, not retryable") from None
        self.last = error

    def error(self) -> BaseException:
        """The error to raise once no attempt is left: a ClusterError naming the service,
        method and every provider tried."""
        assert self.last is not None, "error() before any failed attempt"
        reason = f"{self.reason} after {len(self.tried)} attempt(s)"
        return _failure(self.invocation, self.tried, self.last, reason)


def continue_failover(
    ctx: ClusterContext,
    invocation: Invocation,
    deadline: float | None,
    provider: URL,
    error: grpc.RpcError,
) -> Any:
    """Failover after its first attempt, on ``provider``, failed with ``error`` (the request
    already counted in the retry budget; ``deadline`` on ``time.monotonic``, or None)."""
    attempts = Attempts(ctx, invocation, deadline)
    attempts.failed(provider, error)
    for provider in attempts:
        try:
            response = ctx.call(provider, invocation, attempts.remaining())
        except grpc.RpcError as retry_error:
            attempts.failed(provider, retry_error)
            continue
        ctx.note_success(provider)
        return response
    raise attempts.error() from None


def failfast(ctx: ClusterContext, invocation: Invocation) -> Any:
    """One attempt; any failure goes straight to the caller (for non-idempotent writes)."""
    candidates = _route(ctx, invocation, [])
    provider = ctx.pick(invocation, candidates)
    try:
        response = ctx.call(provider, invocation, _remaining(_deadline(ctx, invocation)))
    except grpc.RpcError as error:
        ctx.note_failure(provider, error)
        raise _failure(invocation, [provider], error, "failed (failfast)") from None
    ctx.note_success(provider)
    return response


def failsafe(ctx: ClusterContext, invocation: Invocation) -> Any:
    """Never raise: one attempt (as Apache Dubbo's ``FailsafeClusterInvoker``); a failure, of
    any kind, is logged and the method's empty response is returned (for calls whose result is
    optional, such as audit logging)."""
    try:
        return failfast(ctx, invocation)
    except grpc.RpcError as error:
        return failsafe_answer(ctx, invocation, error)


def failsafe_answer(ctx: ClusterContext, invocation: Invocation, error: grpc.RpcError) -> Any:
    """What ``failsafe`` returns for a failed call: the method's empty response (logged)."""
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
