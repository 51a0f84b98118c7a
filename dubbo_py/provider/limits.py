"""Provider overload protection: a provider over its limit sheds a call at once.

Three limits, read from a service's options (``@service(executes=2)``, ``methods=...`` per
method, or ``dubbo.yaml``'s ``services.<name>``), as Apache Dubbo reads them from the provider
URL:

``executes`` (Dubbo's ``ExecuteLimitFilter``)
    calls of one method running at once on this provider; ``<method>.executes`` for one method,
    else ``executes`` for each method of the service.
``tps`` with ``tps.interval`` (Dubbo's ``TpsLimitFilter``)
    calls of the whole service per interval (milliseconds, default 60 000), counted in fixed
    windows as Dubbo's ``StatItem`` does.
``flowcontrol: gradient`` (beyond Dubbo, whose documented ``flowcontrol`` values never shipped)
    an adaptive limit on each method's calls at once, after Netflix concurrency-limits'
    ``Gradient2Limit``: it grows while latency stays near its long-term average and shrinks as
    latency climbs, between ``flowcontrol.min`` and ``flowcontrol.max``.

A call over a limit never reaches the servicer: it ends with ``RESOURCE_EXHAUSTED`` and the
trailing metadata ``dubbo-shed: <limit>`` (:data:`~dubbo_py.cluster.support.outcome.SHED_KEY`). The
marker tells dubbo-py consumers the call did not run, so they retry it on another provider even
for a method that is not idempotent, without quarantining this one (see
``docs/cluster.md``). The limits are a gRPC server interceptor (:func:`interceptor` for the
blocking server, :func:`interceptor_async` for ``grpc.aio``), installed only when a service has a
limit, so a provider without limits pays nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import grpc

from dubbo_py.cluster.support.outcome import SHED_KEY
from dubbo_py.config.limits import DEFAULT_TPS_INTERVAL_MS, parse_limits
from dubbo_py.protocol.introspect import service_of_servicer
from dubbo_py.provider.service import ServiceOptions, options_of
from dubbo_py.server_handlers import (
    AsyncHandlerInterceptor,
    Handler,
    HandlerInterceptor,
    WrappedHandlers,
    behaviour_of,
    rebuild,
    stream_out,
)

__all__ = [
    "DEFAULT_TPS_INTERVAL_MS",
    "ConcurrencyLimit",
    "GradientLimit",
    "MethodGuard",
    "RateLimit",
    "guards_for",
    "interceptor",
    "interceptor_async",
    "servicer_guards",
]


class ConcurrencyLimit:
    """At most ``limit`` holders at once; :meth:`try_acquire` never waits."""

    name = "executes"

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"executes must be >= 1, got {limit}")
        self.limit = limit
        self.active = 0
        self._lock = threading.Lock()

    def try_acquire(self) -> bool:
        """Take a slot if one is free."""
        with self._lock:
            if self.active >= self.limit:
                return False
            self.active += 1
            return True

    def release(self, elapsed: float) -> None:
        """Give the slot back (``elapsed``: the call's seconds, unused here)."""
        with self._lock:
            self.active -= 1


class RateLimit:
    """``rate`` calls per ``interval`` seconds in fixed windows (Dubbo's ``StatItem``: the
    window restarts with a full allowance at the first call after it ended)."""

    name = "tps"

    def __init__(
        self, rate: int, interval: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if rate < 0:
            raise ValueError(f"tps must be >= 0, got {rate}")
        if not interval > 0:
            raise ValueError(f"tps.interval must be > 0 ms, got {interval * 1000:g}")
        self.rate = rate
        self.interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._window_start = clock()
        self._left = rate

    def try_acquire(self) -> bool:
        """Count one call if the window's allowance is not spent."""
        with self._lock:
            now = self._clock()
            if now >= self._window_start + self.interval:
                self._window_start = now
                self._left = self.rate
            if self._left <= 0:
                return False
            self._left -= 1
            return True

    def release(self, elapsed: float) -> None:
        """Nothing to give back: a call spends its share of the window."""


class GradientLimit:
    """An adaptive concurrency limit after Netflix concurrency-limits' ``Gradient2Limit``.

    Every finished call is a sample of its latency. ``long_rtt`` is an exponential average over
    about ``long_window`` samples; the limit moves towards ``limit * gradient + queue`` where
    ``gradient = clamp(tolerance * long_rtt / rtt, 0.5, 1.0)``: at the usual latency it grows by
    ``queue`` per sample (smoothed), and when latency climbs above ``tolerance`` times its
    average -- requests queueing for CPU, a lock, a database -- it shrinks, down to ``minimum``.
    While fewer than half the limit are in flight the limit is not what holds calls back, and it
    stays where it is."""

    name = "flowcontrol"

    def __init__(
        self,
        *,
        initial: int = 20,
        minimum: int = 4,
        maximum: int = 200,
        tolerance: float = 1.5,
        smoothing: float = 0.2,
        long_window: int = 600,
        queue: int = 4,
    ) -> None:
        if not 1 <= minimum <= maximum:
            raise ValueError(
                f"flowcontrol.min must be >= 1 and <= flowcontrol.max, got {minimum}, {maximum}"
            )
        self.minimum = minimum
        self.maximum = maximum
        self.tolerance = tolerance
        self.smoothing = smoothing
        self.queue = queue
        self.estimate = float(min(max(initial, minimum), maximum))
        self.active = 0
        self.long_rtt = 0.0
        self._samples = 0
        self._long_window = long_window
        self._lock = threading.Lock()

    @property
    def limit(self) -> int:
        """Calls admitted at once now."""
        return int(self.estimate)

    def try_acquire(self) -> bool:
        """Take a slot if fewer than :attr:`limit` calls are in flight."""
        with self._lock:
            if self.active >= int(self.estimate):
                return False
            self.active += 1
            return True

    def release(self, elapsed: float) -> None:
        """A call ended after ``elapsed`` seconds: give its slot back and learn from it."""
        with self._lock:
            inflight = self.active
            self.active -= 1
            self._sample(max(elapsed, 1e-6), inflight)

    def _sample(self, rtt: float, inflight: int) -> None:
        self._samples += 1
        if self._samples <= 10:  # warm up: a plain average of the first samples
            self.long_rtt += (rtt - self.long_rtt) / self._samples
        else:
            factor = 2.0 / (self._long_window + 1)
            self.long_rtt = self.long_rtt * (1 - factor) + rtt * factor
        if self.long_rtt / rtt > 2.0:
            # Latency fell well below its average (load went away): let the average catch up
            # faster, as Gradient2 does, so the limit can grow again.
            self.long_rtt *= 0.95
        if inflight < self.estimate / 2:
            return
        gradient = max(0.5, min(1.0, self.tolerance * self.long_rtt / rtt))
        target = self.estimate * gradient + self.queue
        smoothed = self.estimate * (1 - self.smoothing) + target * self.smoothing
        self.estimate = max(float(self.minimum), min(float(self.maximum), smoothed))


Limit = ConcurrencyLimit | RateLimit | GradientLimit


@dataclass(frozen=True, slots=True)
class MethodGuard:
    """The limits one method's calls pass, in order (a call shed by one takes no slot of the
    ones after it)."""

    path: str
    limits: tuple[Limit, ...]

    def enter(self) -> Limit | None:
        """Admit a call (None) or name the limit that sheds it."""
        taken: list[Limit] = []
        for limit in self.limits:
            if not limit.try_acquire():
                for held in taken:
                    held.release(0.0)
                return limit
            taken.append(limit)
        return None

    def exit(self, elapsed: float) -> None:
        """An admitted call ended after ``elapsed`` seconds."""
        for limit in self.limits:
            limit.release(elapsed)

    def describe(self, limit: Limit) -> str:
        """What a shed caller reads in the status details."""
        if isinstance(limit, ConcurrencyLimit):
            what = f"executes={limit.limit} calls at once"
        elif isinstance(limit, RateLimit):
            what = f"tps={limit.rate} per {limit.interval * 1000:g} ms"
        else:
            what = f"flowcontrol=gradient, {limit.limit} calls at once now"
        return f"{self.path}: provider over its limit ({what}); shed without running"


def guards_for(
    service: str, methods: Iterable[str], params: Mapping[str, str]
) -> dict[str, MethodGuard]:
    """The guards of a service's methods by gRPC path, from its provider URL parameters;
    methods without any limit are left out. ValueError naming the parameter for a bad value."""
    settings = parse_limits(methods, params)
    service_limits: list[Limit] = []
    if settings.tps is not None:
        service_limits.append(RateLimit(settings.tps, settings.tps_interval_ms / 1000.0))
    guards = {}
    for method, own in settings.methods:
        limits: list[Limit] = []
        if own.executes is not None:
            limits.append(ConcurrencyLimit(own.executes))
        limits.extend(service_limits)
        if own.flowcontrol is not None:
            gradient = own.flowcontrol
            limits.append(
                GradientLimit(
                    initial=gradient.initial, minimum=gradient.minimum, maximum=gradient.maximum
                )
            )
        if limits:
            path = f"/{service}/{method}"
            guards[path] = MethodGuard(path, tuple(limits))
    return guards


# ------------------------------------------------------------------------ the interceptors


def _shed_metadata(limit: Limit) -> tuple[tuple[str, str], ...]:
    return ((SHED_KEY, limit.name),)


def _wrap_sync(guard: MethodGuard, handler: Handler) -> Handler:
    clock = time.monotonic

    def admit(context: grpc.ServicerContext) -> float:
        shed = guard.enter()
        if shed is not None:
            context.set_trailing_metadata(_shed_metadata(shed))
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, guard.describe(shed))
        return clock()

    def unary(inner: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        def behaviour(request: Any, context: grpc.ServicerContext) -> Any:
            started = admit(context)
            try:
                return inner(request, context)
            finally:
                guard.exit(clock() - started)

        return behaviour

    def streaming(inner: Callable[[Any, Any], Iterator[Any]]) -> Callable[[Any, Any], Any]:
        def behaviour(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            started = admit(context)
            try:
                yield from inner(request, context)
            finally:
                guard.exit(clock() - started)

        return behaviour

    inner = behaviour_of(handler)
    return rebuild(handler, streaming(inner) if handler.response_streaming else unary(inner))


def _wrap_async(guard: MethodGuard, handler: Handler) -> Handler:
    clock = time.monotonic

    async def admit(context: Any) -> float:
        shed = guard.enter()
        if shed is not None:
            context.set_trailing_metadata(_shed_metadata(shed))
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, guard.describe(shed))
        return clock()

    def unary(inner: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        async def behaviour(request: Any, context: Any) -> Any:
            started = await admit(context)
            try:
                return await inner(request, context)
            finally:
                guard.exit(clock() - started)

        return behaviour

    def streaming(inner: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        async def behaviour(request: Any, context: Any) -> AsyncIterator[Any]:
            started = await admit(context)
            try:
                async for item in stream_out(inner(request, context)):
                    yield item
            finally:
                guard.exit(clock() - started)

        return behaviour

    inner = behaviour_of(handler)
    return rebuild(handler, streaming(inner) if handler.response_streaming else unary(inner))


class _GuardedHandlers:
    """The guarded handler for each method path, shared by both server flavours."""

    def __init__(
        self,
        guards: Mapping[str, MethodGuard],
        wrap: Callable[[MethodGuard, Handler], Handler],
    ) -> None:
        self._guards = dict(guards)
        self._wrap = wrap
        self._wrapped: WrappedHandlers[str] = WrappedHandlers()

    def rewrap(self, details: grpc.HandlerCallDetails, handler: Handler | None) -> Handler | None:
        """``handler`` wrapped with the guard of the call's path, or unchanged when it has none."""
        path = details.method
        guard = self._guards.get(path)
        if guard is None or handler is None:
            return handler
        wrapped = self._wrapped.cached(path, handler)
        if wrapped is None:
            wrapped = self._wrapped.keep(path, handler, self._wrap(guard, handler))
        return wrapped


def interceptor(guards: Mapping[str, MethodGuard]) -> grpc.ServerInterceptor | None:
    """The blocking server's interceptor for these guards (None when there are none): it sheds
    calls of guarded methods over their limits."""
    return HandlerInterceptor(_GuardedHandlers(guards, _wrap_sync).rewrap) if guards else None


def interceptor_async(guards: Mapping[str, MethodGuard]) -> grpc.aio.ServerInterceptor | None:
    """The ``grpc.aio`` server's interceptor for these guards (None when there are none)."""
    return AsyncHandlerInterceptor(_GuardedHandlers(guards, _wrap_async).rewrap) if guards else None


def servicer_guards(
    servicers: Iterable[object], service_options: Mapping[str, ServiceOptions] | None = None
) -> dict[str, MethodGuard]:
    """The guards of every method of ``servicers``, from each service's options (those named in
    ``service_options`` -- the configuration file's -- else its ``@service`` decorator's).
    ValueError naming the service and parameter for a bad limit."""
    guards: dict[str, MethodGuard] = {}
    for servicer in servicers:
        spec = service_of_servicer(servicer)
        options = (service_options or {}).get(spec.name) or options_of(servicer)
        try:
            found = guards_for(spec.name, spec.method_names, options.url_parameters())
        except ValueError as exc:
            raise ValueError(f"service {spec.name}: {exc}") from None
        for path, guard in found.items():
            # Several servicers of one service (versions, groups) share its gRPC paths: a call
            # passes the limits of all of them.
            held = guards.get(path)
            guards[path] = guard if held is None else MethodGuard(path, held.limits + guard.limits)
    return guards
