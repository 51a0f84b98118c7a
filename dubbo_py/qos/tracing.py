"""OpenTelemetry tracing through the API only: the application sets up the SDK, or nothing.

A consumer call gets a CLIENT span, a provider call a SERVER span, named ``<service>/<method>``
with the RPC semantic conventions (``rpc.system``, ``rpc.service``, ``rpc.method``,
``rpc.grpc.status_code``, ``server.address``/``server.port``). The W3C ``traceparent``,
``tracestate`` and ``baggage`` travel in the call's metadata (the global propagator, W3C by
default), so one trace spans both processes.

Until the application installs a tracer provider (``trace.set_tracer_provider``), the API's
proxy provider is in place and :func:`enabled` says so: callers skip tracing altogether, so a
process without the SDK pays one function call per call, not a no-op span. A provider, once
set, cannot be replaced (the API refuses a second one), so the answer is kept once it is yes;
until then it is asked again at most once a second (asking reads the environment, ~1 µs), so a
tracer provider set while calls run is seen within a second.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import grpc
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import NonRecordingSpan, ProxyTracerProvider, Span, SpanKind
from opentelemetry.trace.status import Status, StatusCode

__all__ = [
    "client_span",
    "enabled",
    "end_span",
    "inject",
    "server_span",
]

_INSTRUMENTATION = "dubbo_py"
_RPC_SYSTEM = "grpc"
_on = False
_next_check = 0.0
_clock = time.monotonic


def enabled() -> bool:
    """True once the application has set a real tracer provider (the SDK, or another)."""
    global _on, _next_check
    if _on:
        return True
    now = _clock()
    if now < _next_check:
        return False
    _next_check = now + 1.0
    provider = trace.get_tracer_provider()
    if isinstance(provider, ProxyTracerProvider | trace.NoOpTracerProvider):
        return False
    _on = True
    return True


def _tracer() -> trace.Tracer:
    # No version: the qos layer sits below the package's top, where the version is read.
    return trace.get_tracer(_INSTRUMENTATION)


def _split(path_or_service: str, method: str | None) -> tuple[str, str]:
    if method is not None:
        return path_or_service, method
    service, _, name = path_or_service.lstrip("/").partition("/")
    return service, name


class _Getter:
    """Reads W3C headers from gRPC metadata (a sequence of key/value pairs)."""

    def get(self, carrier: Sequence[tuple[str, Any]], key: str) -> list[str] | None:
        found = [v for k, v in carrier if k == key and isinstance(v, str)]
        return found or None

    def keys(self, carrier: Sequence[tuple[str, Any]]) -> list[str]:
        return [k for k, _ in carrier]


_GETTER = _Getter()


def server_span(
    service: str, method: str, metadata: Sequence[tuple[str, Any]] | None, peer: str = ""
) -> tuple[Span, object]:
    """Start the SERVER span of a provider call, child of the caller's span when the metadata
    carries one, and make it current; returns the span and the token to detach with."""
    parent = propagate.extract(list(metadata or ()), getter=_GETTER)  # type: ignore[arg-type]
    attributes: dict[str, str] = {
        "rpc.system": _RPC_SYSTEM,
        "rpc.service": service,
        "rpc.method": method,
    }
    if peer:
        attributes["network.peer.address"] = peer
    span = _tracer().start_span(
        f"{service}/{method}", context=parent, kind=SpanKind.SERVER, attributes=attributes
    )
    token = otel_context.attach(trace.set_span_in_context(span, parent))
    return span, token


def client_span(service: str, method: str, attributes: dict[str, Any] | None = None) -> Span:
    """Start the CLIENT span of a consumer call (child of the current span, if any)."""
    base: dict[str, Any] = {"rpc.system": _RPC_SYSTEM, "rpc.service": service, "rpc.method": method}
    if attributes:
        base.update(attributes)
    return _tracer().start_span(f"{service}/{method}", kind=SpanKind.CLIENT, attributes=base)


def inject(span: Span, metadata: Iterable[tuple[str, Any]] | None) -> tuple[tuple[str, Any], ...]:
    """``metadata`` plus the W3C headers that make ``span`` the remote parent."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    return (*(metadata or ()), *carrier.items())


def end_span(span: Span, code: grpc.StatusCode | None, error: BaseException | None = None) -> None:
    """Record the call's gRPC status on ``span`` and end it (an error status for anything but
    OK, as the RPC conventions say for clients; servers too, since gRPC has no HTTP 4xx)."""
    if isinstance(span, NonRecordingSpan):
        span.end()
        return
    status = grpc.StatusCode.OK if code is None and error is None else code
    span.set_attribute("rpc.grpc.status_code", (status or grpc.StatusCode.UNKNOWN).value[0])
    if error is not None or (status is not None and status is not grpc.StatusCode.OK):
        description = _describe(error) if error is not None else str(status)
        span.set_status(Status(StatusCode.ERROR, description))
        if error is not None and not isinstance(error, grpc.RpcError):
            span.record_exception(error)
    span.end()


def detach(token: object) -> None:
    """Undo :func:`server_span`'s attach."""
    otel_context.detach(token)  # type: ignore[arg-type]


def _describe(error: BaseException) -> str:
    details = getattr(error, "details", None)
    if callable(details):
        try:
            return str(details())
        except Exception:  # details of a broken error: the type says enough
            return type(error).__name__
    return str(error) or type(error).__name__
