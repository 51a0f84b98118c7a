"""The provider side of observability: a gRPC server interceptor that counts every call in the
``dubbo_provider_*`` metrics and, when the application set up OpenTelemetry, runs it inside a
SERVER span whose parent is the consumer's span (from the call's ``traceparent``).

It is the outermost interceptor, so it also sees calls that overload limits shed (counted as
``limit``) and calls that user interceptors reject. Health checks and server reflection are
not counted: they are the framework's traffic, not the application's.

Wrapping happens once per (method, version, group), not per call: the wrapped handler is kept
beside the handler the server gave, as the overload interceptor does. When nothing else has to
run outside the metrics (no user interceptor, no overload limit, every service exported once),
:func:`handler_wrap` wraps each handler once as the server is built instead, and no interceptor
runs at all: a gRPC server interceptor costs Python frames on every call, whatever it does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, cast

import grpc

from dubbo_py.qos import tracing
from dubbo_py.qos.metrics import MethodKey, MethodStats, Metrics, failure_reason
from dubbo_py.server_handlers import (
    AsyncHandlerInterceptor,
    Handler,
    HandlerInterceptor,
    WrappedHandlers,
    awaitable_of,
    behaviour_of,
    rebuild,
    stream_out,
)

__all__ = ["AsyncProviderObserver", "ProviderObserver", "handler_wrap"]

#: gRPC paths of the framework's own services, which are not counted.
_FRAMEWORK_PREFIXES = ("/grpc.health.", "/grpc.reflection.")

_VERSION = "tri-service-version"
_GROUP = "tri-service-group"


def _code(context: Any) -> grpc.StatusCode | None:
    try:
        code = context.code()
    except Exception:  # a context without code(): the status is unknown
        return None
    return code if isinstance(code, grpc.StatusCode) else None


class _LazyStats:
    """A method's statistics, made at its first call (a method never called has no series)."""

    __slots__ = ("key", "metrics", "stats")

    def __init__(self, metrics: Metrics, key: MethodKey, stats: MethodStats | None = None) -> None:
        self.metrics = metrics
        self.key = key
        self.stats = stats

    def load(self) -> MethodStats:
        """The statistics, made now if need be."""
        stats = self.stats = self.metrics.method(self.key)
        return stats


class _Calls:
    """What both flavours share: which statistics a call counts in, and how it ends."""

    def __init__(
        self,
        metrics: Metrics,
        defaults: Mapping[str, tuple[str, str] | None],
        wrap: Callable[[_LazyStats, str, str, Handler], Handler],
    ) -> None:
        self.metrics = metrics
        self.defaults = dict(defaults)
        self._wrap = wrap
        self._wrapped: WrappedHandlers[tuple[str, str, str]] = WrappedHandlers()

    def rewrap(self, details: grpc.HandlerCallDetails, handler: Handler | None) -> Handler | None:
        """The handler that counts (and traces) this call."""
        path = details.method
        if handler is None or path.startswith(_FRAMEWORK_PREFIXES):
            return handler
        service, _, method = path.lstrip("/").partition("/")
        labels = self.defaults.get(service)
        if labels is not None:
            # Exported once: every call reaches that servicer, whatever its headers say.
            version, group = labels
        else:
            version = group = ""
            for key, value in details.invocation_metadata or ():
                if key == _VERSION:
                    version = str(value)
                elif key == _GROUP:
                    group = str(value)
        cache_key = (path, version, group)
        wrapped = self._wrapped.cached(cache_key, handler)
        if wrapped is None:
            labels_key = MethodKey("provider", service, method, group, version)
            stats = _LazyStats(self.metrics, labels_key, self.metrics.method(labels_key))
            wrapped = self._wrapped.keep(
                cache_key, handler, self._wrap(stats, service, method, handler)
            )
        return wrapped


_OK = grpc.StatusCode.OK
_enabled = tracing.enabled


def _start(service: str, method: str, context: Any) -> tuple[Any, object] | None:
    if not tracing.enabled():
        return None
    metadata = cast("Sequence[tuple[str, Any]]", context.invocation_metadata())
    return tracing.server_span(service, method, metadata, context.peer())


def _finish(
    stats: MethodStats,
    started: float,
    traced: tuple[Any, object] | None,
    context: Any,
    error: BaseException | None,
) -> None:
    code = _code(context)
    failed = error is not None or (code is not None and code is not grpc.StatusCode.OK)
    stats.end(started, failure_reason(code) if failed else None)
    if traced is not None:
        span, token = traced
        tracing.detach(token)
        tracing.end_span(span, code, error)


def _wrap_sync(lazy: _LazyStats, service: str, method: str, handler: Handler) -> Handler:
    inner = behaviour_of(handler)

    def unary(request: Any, context: grpc.ServicerContext) -> Any:
        stats = lazy.stats or lazy.load()
        started = stats.begin()
        traced = _start(service, method, context) if _enabled() else None
        try:
            response = inner(request, context)
        except BaseException as exc:
            _finish(stats, started, traced, context, exc)
            raise
        if traced is None:  # _finish without a span, written out: this runs on every call
            code = _code(context)
            stats.end(started, None if code is None or code is _OK else failure_reason(code))
        else:
            _finish(stats, started, traced, context, None)
        return response

    def streaming(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        stats = lazy.stats or lazy.load()
        started = stats.begin()
        traced = _start(service, method, context)
        try:
            yield from inner(request, context)
        except BaseException as exc:
            _finish(stats, started, traced, context, exc)
            raise
        _finish(stats, started, traced, context, None)

    return rebuild(handler, streaming if handler.response_streaming else unary)


def _wrap_async(lazy: _LazyStats, service: str, method: str, handler: Handler) -> Handler:
    inner = behaviour_of(handler)
    awaited = awaitable_of(inner)

    async def unary(request: Any, context: Any) -> Any:
        stats = lazy.stats or lazy.load()
        started = stats.begin()
        traced = _start(service, method, context)
        try:
            response = await awaited(request, context)
        except BaseException as exc:
            _finish(stats, started, traced, context, exc)
            raise
        _finish(stats, started, traced, context, None)
        return response

    async def streaming(request: Any, context: Any) -> AsyncIterator[Any]:
        stats = lazy.stats or lazy.load()
        started = stats.begin()
        traced = _start(service, method, context)
        try:
            async for item in stream_out(inner(request, context)):
                yield item
        except BaseException as exc:
            _finish(stats, started, traced, context, exc)
            raise
        _finish(stats, started, traced, context, None)

    return rebuild(handler, streaming if handler.response_streaming else unary)


def handler_wrap(
    metrics: Metrics, *, aio: bool = False
) -> Callable[[str, str, str, str, Handler], Handler]:
    """Wraps a method's handler, once as the server is built, so its calls are counted and
    traced as :class:`ProviderObserver` does, without an interceptor on every call:
    ``(service, method, version, group, handler) -> handler``. Only for a server where nothing
    else must run outside the metrics (no user interceptor, no overload limit) and every
    service is exported once (its labels are then known before any call)."""
    wrap = _wrap_async if aio else _wrap_sync

    def wrap_handler(
        service: str, method: str, version: str, group: str, handler: Handler
    ) -> Handler:
        key = MethodKey("provider", service, method, group, version)
        return wrap(_LazyStats(metrics, key), service, method, handler)

    return wrap_handler


class ProviderObserver(HandlerInterceptor):
    """Counts and traces a blocking server's calls. ``defaults`` maps a service exported once
    to the (version, group) its calls count under; a service exported several times (None, or
    absent) is told apart by each call's ``tri-service-version`` / ``tri-service-group``."""

    def __init__(self, metrics: Metrics, defaults: Mapping[str, tuple[str, str] | None]) -> None:
        super().__init__(_Calls(metrics, defaults, _wrap_sync).rewrap)


class AsyncProviderObserver(AsyncHandlerInterceptor):
    """Counts and traces a ``grpc.aio`` server's calls (see :class:`ProviderObserver`)."""

    def __init__(self, metrics: Metrics, defaults: Mapping[str, tuple[str, str] | None]) -> None:
        super().__init__(_Calls(metrics, defaults, _wrap_async).rewrap)
