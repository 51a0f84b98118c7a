"""What a strategy works with: the :class:`ClusterContext` of one reference's method, and the
protocols of the parts it composes (the provider call, the router chain's source, the
quarantine, the retry budget, the failback queue)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import grpc

from dubbo_py.cluster.loadbalance.base import LoadBalance
from dubbo_py.cluster.method_settings import MethodSettings, SettingsTable
from dubbo_py.cluster.outlier import OutlierDetector
from dubbo_py.cluster.support.outcome import is_transport_failure, status_code
from dubbo_py.invocation import Invocation
from dubbo_py.router.chain import BoundChain
from dubbo_py.url import URL

__all__ = [
    "AsyncStrategy",
    "Budget",
    "ChainSource",
    "ClusterContext",
    "FixedRoutes",
    "PlainCall",
    "ProviderCall",
    "QuarantineView",
    "RetryQueue",
    "Strategy",
]

#: What the cluster strategies call: ``(provider, invocation, timeout in s or None) ->
#: response`` (awaitable for the asyncio flavour). The consumer's method invokers
#: (:mod:`dubbo_py.consumer.invoker`) are these.
ProviderCall = Callable[[URL, Invocation, float | None], Any]


@runtime_checkable
class PlainCall(Protocol):
    """A provider call a call plan may bypass (:mod:`dubbo_py.cluster.plan`): while ``plain``
    (nothing recorded, no metadata to add), a call of a provider is exactly its cached gRPC
    multicallable in ``multicallables`` (by provider address). A provider call inside attempt
    filters that all have plan hooks (:class:`~dubbo_py.consumer.filters.HookedAttempts`) is one
    too: it also has ``attempt_hooks``, which a plan runs for its first attempt, and
    ``inner``, the provider call without the filters."""

    @property
    def plain(self) -> bool:
        """True while calling a multicallable directly is the same as calling this."""
        ...

    @property
    def multicallables(self) -> dict[str, Any]:
        """The cached multicallables by provider address (the call's own dict)."""
        ...

    def __call__(self, provider: URL, invocation: Invocation, timeout: float | None) -> Any:
        """Call ``provider``."""
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
    """The retry budget: retries are limited to a fraction of recent requests.

    Failover's first attempt counts its request without a frame of the budget's own:
    ``if clock() >= next_fold: fold()``, then ``count_request()`` (or
    ``requests.append(None)``) -- what :meth:`deposit`
    does (:class:`~dubbo_py.cluster.budget.RetryBudget`)."""

    #: The clock the budget reads (seconds, monotonic).
    clock: Callable[[], float]
    #: When the current slice ends (on :attr:`clock`): a request counted after it folds first.
    next_fold: float
    #: Counts one request (a C-level call), after :meth:`fold` when ``clock() >= next_fold``.
    count_request: Callable[[], None]
    #: What :attr:`count_request` appends to: ``requests.append(None)`` counts one request
    #: the same way, without a call of its own (the blocking stub's call path does that).
    requests: list[None]

    def deposit(self) -> None:
        """Count one request."""
        ...

    def fold(self) -> None:
        """Credit the requests counted so far and move the window to now."""
        ...

    def try_withdraw(self) -> bool:
        """Take one retry from the budget, if any is left."""
        ...


class RetryQueue(Protocol):
    """Where ``failback`` hands a failed call for background retries
    (:class:`~dubbo_py.cluster.strategies.failback.FailbackQueue`)."""

    def submit(self, ctx: ClusterContext, invocation: Invocation) -> None:
        """Retry ``invocation`` later under ``ctx``."""
        ...


@dataclass
class ClusterContext:
    """What a strategy needs for one reference (one service on the consumer side).

    The per-call path reads plain attributes and one dict lookup here (``settings[method]``),
    no callbacks: whoever owns the context swaps ``balancer`` and updates ``settings`` in place
    when consumer overrides arrive."""

    service: str
    routes: ChainSource
    balancer: LoadBalance
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
    #: Where ``failback`` queues failed calls (None: the process-wide queue).
    failback: RetryQueue | None = None
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

    def note(self, provider: URL, error: BaseException | None) -> None:
        """Record how a call of ``provider`` ended: ``error`` None for a success."""
        if error is None:
            self.note_success(provider)
        else:
            self.note_failure(provider, error)


#: A blocking strategy: ``strategy(ctx, invocation)`` -> the response.
Strategy = Callable[[ClusterContext, Invocation], Any]
#: An awaited strategy: ``await strategy(ctx, invocation)`` -> the response.
AsyncStrategy = Callable[[ClusterContext, Invocation], Awaitable[Any]]
