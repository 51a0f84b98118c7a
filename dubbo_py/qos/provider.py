"""The provider side of observability: a gRPC server interceptor that counts every call in the
``dubbo_provider_*`` metrics and, when the application set up OpenTelemetry, runs it inside a
SERVER span whose parent is the consumer's span (from the call's ``traceparent``).

It is the outermost interceptor, so it also sees calls that overload limits shed (counted as
``limit``) and calls that user interceptors reject. Health checks and server reflection are
not counted: they are the framework's traffic, not the application's.

Wrapping happens once per (method, version, group), not per call: the wrapped handler is kept
beside the handler the server gave, as the overload interceptor does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, TypeAlias, cast

import grpc

from dubbo_py.qos import tracing
from dubbo_py.qos.metrics import MethodKey, MethodStats, Metrics, failure_reason

__all__ = ["AsyncProviderObserver", "ProviderObserver"]

_Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"

#: gRPC paths of the framework's own services, which are not counted.
_FRAMEWORK_PREFIXES = ("/grpc.health.", "/grpc.reflection.")

_VERSION = "tri-service-version"
_GROUP = "tri-service-group"


def _kind(handler: _Handler) -> str:
    request = "stream" if handler.request_streaming else "unary"
    response = "stream" if handler.response_streaming else "unary"
    return f"{request}_{response}"


def _rebuild(handler: _Handler, behaviour: Callable[..., Any]) -> _Handler:
    factory = getattr(grpc, f"{_kind(handler)}_rpc_method_handler")
    made: _Handler = factory(
        behaviour,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )
    return made


def _code(context: Any) -> grpc.StatusCode | None:
    try:
        code = context.code()
    except Exception:  # a context without code(): the status is unknown
        return None
    return code if isinstance(code, grpc.StatusCode) else None


class _Calls:
    """What both flavours share: which statistics a call counts in, and how it ends."""

    def __init__(self, metrics: Metrics, defaults: Mapping[str, tuple[str, str] | None]) -> None:
        self.metrics = metrics
        self.defaults = dict(defaults)
        self._wrapped: dict[tuple[str, str, str], tuple[_Handler, _Handler]] = {}

    def handler(
        self,
        details: grpc.HandlerCallDetails,
        handler: _Handler | None,
        wrap: Callable[[MethodStats, str, str, _Handler], _Handler],
    ) -> _Handler | None:
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
        cached = self._wrapped.get(cache_key)
        if cached is not None and cached[0] is handler:
            return cached[1]
        stats = self.metrics.method(MethodKey("provider", service, method, group, version))
        wrapped = wrap(stats, service, method, handler)
        self._wrapped[cache_key] = (handler, wrapped)
        return wrapped


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


def _wrap_sync(stats: MethodStats, service: str, method: str, handler: _Handler) -> _Handler:
    inner = getattr(handler, _kind(handler))

    def unary(request: Any, context: grpc.ServicerContext) -> Any:
        started = stats.begin()
        traced = _start(service, method, context)
        try:
            response = inner(request, context)
        except BaseException as exc:
            _finish(stats, started, traced, context, exc)
            raise
        _finish(stats, started, traced, context, None)
        return response

    def streaming(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        started = stats.begin()
        traced = _start(service, method, context)
        try:
            yield from inner(request, context)
        except BaseException as exc:
            _finish(stats, started, traced, context, exc)
            raise
        _finish(stats, started, traced, context, None)

    return _rebuild(handler, streaming if handler.response_streaming else unary)


def _wrap_aio(stats: MethodStats, service: str, method: str, handler: _Handler) -> _Handler:
    inner = getattr(handler, _kind(handler))

    async def unary(request: Any, context: Any) -> Any:
        started = stats.begin()
        traced = _start(service, method, context)
        try:
            response = await inner(request, context)
        except BaseException as exc:
            _finish(stats, started, traced, context, exc)
            raise
        _finish(stats, started, traced, context, None)
        return response

    async def streaming(request: Any, context: Any) -> AsyncIterator[Any]:
        started = stats.begin()
        traced = _start(service, method, context)
        try:
            result = inner(request, context)
            if hasattr(result, "__aiter__"):
                async for item in result:
                    yield item
            else:  # a servicer that writes with context.write and returns
                await result
        except BaseException as exc:
            _finish(stats, started, traced, context, exc)
            raise
        _finish(stats, started, traced, context, None)

    return _rebuild(handler, streaming if handler.response_streaming else unary)


class ProviderObserver(grpc.ServerInterceptor):
    """Counts and traces a blocking server's calls. ``defaults`` maps a service exported once
    to the (version, group) its calls count under; a service exported several times (None, or
    absent) is told apart by each call's ``tri-service-version`` / ``tri-service-group``."""

    def __init__(self, metrics: Metrics, defaults: Mapping[str, tuple[str, str] | None]) -> None:
        self._calls = _Calls(metrics, defaults)

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], _Handler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> _Handler | None:
        handler = continuation(handler_call_details)
        return self._calls.handler(handler_call_details, handler, _wrap_sync)


class AsyncProviderObserver(grpc.aio.ServerInterceptor):
    """Counts and traces a ``grpc.aio`` server's calls (see :class:`ProviderObserver`)."""

    def __init__(self, metrics: Metrics, defaults: Mapping[str, tuple[str, str] | None]) -> None:
        self._calls = _Calls(metrics, defaults)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Any],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> _Handler:
        handler: _Handler | None = await continuation(handler_call_details)
        return cast("_Handler", self._calls.handler(handler_call_details, handler, _wrap_aio))
