"""The consumer side of observability, as wrappers around a reference's calls (the consumer
stack's filters: a *call* filter around the whole cluster strategy, an *attempt* filter around
each provider tried).

:class:`CallObserver` counts each stub call in the ``dubbo_consumer_*`` metrics -- what the
caller saw, after routing, balancing and every retry -- and, when the application set up
OpenTelemetry, runs it in a CLIENT span whose W3C ``traceparent``/``tracestate``/``baggage`` go
to the provider in the call's metadata. :class:`AttemptObserver` counts each provider tried
(``dubbo_py_consumer_attempts_total``; attempts beyond one per call are retries) and notes the
chosen provider and the attempt count on the CLIENT span.

Both flavours have the same shape: ``(invocation, proceed)`` for a call,
``(provider, invocation, timeout, proceed)`` for an attempt; the asyncio ones await ``proceed``.

The observers of both flavours also have plan hooks (``plan_hook``, the shapes of
``dubbo_py.cluster.plan``'s ``CallHook`` and ``AttemptHook``, a layer above this one):
a plain failover call then keeps its compiled plan, which counts it exactly as the filters
would -- requests, outcome by reason, processing, latency, the first attempt -- and retries go
through the attempt filter as usual. While a tracer provider is set up the call hook declines
every call, which then takes the filters (a traced call carries its span in its metadata).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import grpc
from opentelemetry import context as otel_context
from opentelemetry import trace

from dubbo_py.errors import NoProviderError
from dubbo_py.invocation import Invocation
from dubbo_py.qos import tracing
from dubbo_py.qos.metrics import MethodKey, MethodStats, Metrics, failure_reason
from dubbo_py.url import URL

__all__ = [
    "AsyncAttemptObserver",
    "AsyncCallObserver",
    "AttemptCounts",
    "AttemptObserver",
    "CallObserver",
    "call_failure_reason",
]


#: The attempts of the traced call in progress (set only while a CLIENT span is current).
_ATTEMPTS: ContextVar[list[int] | None] = ContextVar("dubbo_py_attempts", default=None)


def call_failure_reason(error: BaseException) -> str:
    """The Dubbo failure counter of a consumer call that raised ``error``: a call that found no
    provider to try is ``service_unavailable`` (Dubbo's "No provider available")."""
    code = error.code() if isinstance(error, grpc.RpcError) else None
    no_provider = getattr(error, "tried", None) == ()
    if code is None and not no_provider:
        # A generic call's errors carry no gRPC status: a timeout, a connection lost, or the
        # Java service's own exception (Dubbo counts that one as a business failure).
        if isinstance(error, NoProviderError):
            return "service_unavailable"
        if isinstance(error, TimeoutError):
            return "timeout"
        # The protocols' own errors name their counter (JavaException: business,
        # DubboConnectionError: network), so this layer needs no protocol import.
        named = getattr(type(error), "metrics_failure_reason", None)
        if isinstance(named, str):
            return named
    return failure_reason(
        code if isinstance(code, grpc.StatusCode) else None, no_provider=no_provider
    )


@dataclass(slots=True)
class _Traced:
    """A call's CLIENT span, the invocation carrying its context, and what to undo after."""

    span: Any
    invocation: Invocation
    token: object
    attempts_token: Any
    attempts: list[int]


class _Observer:
    """What both call observers share: the statistics of each method of one reference."""

    def __init__(self, metrics: Metrics | None, interface: str, version: str, group: str) -> None:
        self.metrics = metrics
        self.interface = interface
        self.version = version
        self.group = group
        self._stats: dict[str, MethodStats] = {}

    def stats(self, method: str) -> MethodStats | None:
        if self.metrics is None:
            return None
        stats = self._stats.get(method)
        if stats is None:
            key = MethodKey("consumer", self.interface, method, self.group, self.version)
            stats = self._stats[method] = self.metrics.method(key)
        return stats

    def plan_hook(self, method: str) -> _CallHook | _TracedOnly:
        """What a call plan records of a call of ``method`` in place of the filter."""
        if self.metrics is None:
            return _TracedOnly()
        return _CallHook(self, method)

    def start_span(self, invocation: Invocation) -> _Traced | None:
        """The CLIENT span (current from now on) and the invocation that carries it."""
        if not tracing.enabled():
            return None
        span = tracing.client_span(
            invocation.service,
            invocation.method,
            {"dubbo.interface": self.interface, "dubbo.version": self.version},
        )
        headers = tracing.inject(span, ())
        carried = Invocation(
            invocation.service,
            invocation.method,
            invocation.request,
            {**invocation.attachments, **dict(headers)},
            invocation.timeout,
            invocation.explicit_arguments,
            invocation.options,
        )
        token = otel_context.attach(trace.set_span_in_context(span))
        attempts: list[int] = [0]
        return _Traced(span, carried, token, _ATTEMPTS.set(attempts), attempts)

    @staticmethod
    def end(
        stats: MethodStats | None,
        started: float,
        traced: _Traced | None,
        error: BaseException | None,
    ) -> None:
        if stats is not None:
            stats.end(started, None if error is None else call_failure_reason(error))
        if traced is not None:
            _ATTEMPTS.reset(traced.attempts_token)
            otel_context.detach(traced.token)  # type: ignore[arg-type]
            span = traced.span
            span.set_attribute("dubbo.attempts", traced.attempts[0])
            span.set_attribute("dubbo.retries", max(0, traced.attempts[0] - 1))
            code = error.code() if isinstance(error, grpc.RpcError) else None
            tracing.end_span(span, code if isinstance(code, grpc.StatusCode) else None, error)


class CallObserver(_Observer):
    """A call filter: metrics and a CLIENT span around each blocking stub call."""

    def __call__(self, invocation: Invocation, proceed: Callable[[Invocation], Any]) -> Any:
        stats = self.stats(invocation.method)
        started = stats.begin() if stats is not None else 0.0
        traced = self.start_span(invocation)
        try:
            response = proceed(invocation if traced is None else traced.invocation)
        except BaseException as error:
            self.end(stats, started, traced, error)
            raise
        self.end(stats, started, traced, None)
        return response


class _CallHook:
    """:class:`CallObserver`'s plan hook for one method. Its statistics are looked up at the
    method's first call (a method never called has no series); from then on ``start`` is the
    statistics' own ``begin``, with no frame of the hook's."""

    __slots__ = ("_method", "_observer", "_stats", "start")

    #: A traced call takes the filter (tracing.enabled is one check while no tracer is set).
    declines = staticmethod(tracing.enabled)

    def __init__(self, observer: _Observer, method: str) -> None:
        self._observer = observer
        self._method = method
        self._stats: MethodStats | None = None
        #: Count a call that starts now; the token is its start time.
        self.start: Callable[[], float] = self._first_start

    def _first_start(self) -> float:
        stats = self._stats = self._observer.stats(self._method)
        assert stats is not None  # the observer has metrics (see plan_hook)
        self.start = stats.begin
        return stats.begin()

    def finish(self, token: float, error: BaseException | None) -> None:
        stats = self._stats
        assert stats is not None
        stats.end(token, None if error is None else call_failure_reason(error))


class _TracedOnly:
    """The plan hook of an observer without metrics (there only to trace): it declines every
    call while a tracer is set up and records nothing otherwise."""

    __slots__ = ()

    declines = staticmethod(tracing.enabled)

    def start(self) -> None:
        return None

    def finish(self, token: object, error: BaseException | None) -> None:
        return None


class AsyncCallObserver(_Observer):
    """A call filter: metrics and a CLIENT span around each awaited stub call."""

    async def __call__(
        self, invocation: Invocation, proceed: Callable[[Invocation], Awaitable[Any]]
    ) -> Any:
        stats = self.stats(invocation.method)
        started = stats.begin() if stats is not None else 0.0
        traced = self.start_span(invocation)
        try:
            response = await proceed(invocation if traced is None else traced.invocation)
        except BaseException as error:
            self.end(stats, started, traced, error)
            raise
        self.end(stats, started, traced, None)
        return response


class AttemptCounts:
    """Attempts per method of one reference, and the span notes of each attempt."""

    def __init__(self, metrics: Metrics | None, interface: str) -> None:
        self.metrics = metrics
        self.interface = interface
        self.lock = threading.Lock()
        #: Attempts per method (read at a scrape, under :attr:`lock`).
        self.counts: dict[str, int] = {}

    def plan_hook(self, method: str) -> Callable[[URL], None]:
        """What a call plan records of a first attempt of ``method`` in place of the filter
        (the count; a planned call is never traced, see :class:`CallObserver`)."""
        lock, counts = self.lock, self.counts

        def attempted(provider: URL) -> None:
            with lock:
                counts[method] = counts.get(method, 0) + 1

        return attempted

    def note(self, provider: URL, invocation: Invocation) -> None:
        with self.lock:
            self.counts[invocation.method] = self.counts.get(invocation.method, 0) + 1
        attempts = _ATTEMPTS.get()
        if attempts is not None:
            attempts[0] += 1
            span = trace.get_current_span()
            where: dict[str, str | int] = {
                "server.address": provider.host,
                "server.port": provider.port,
            }
            span.add_event("attempt", where)
            span.set_attributes(where)


class AttemptObserver(AttemptCounts):
    """An attempt filter: counts each blocking attempt and notes its provider on the span."""

    def __call__(
        self,
        provider: URL,
        invocation: Invocation,
        timeout: float | None,
        proceed: Callable[[URL, Invocation, float | None], Any],
    ) -> Any:
        self.note(provider, invocation)
        return proceed(provider, invocation, timeout)


class AsyncAttemptObserver(AttemptCounts):
    """An attempt filter: counts each awaited attempt and notes its provider on the span."""

    async def __call__(
        self,
        provider: URL,
        invocation: Invocation,
        timeout: float | None,
        proceed: Callable[[URL, Invocation, float | None], Awaitable[Any]],
    ) -> Any:
        self.note(provider, invocation)
        return await proceed(provider, invocation, timeout)
