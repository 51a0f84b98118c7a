"""One call of a service method from JSON, through the same registry, rules, routers and load
balancer as any consumer (``dubbo-py call`` and the console's call form).

The request and response types come from a provider's gRPC server reflection
(:mod:`dubbo_py.admin.reflect`); the call goes through a dubbo-py reference built on a stub
made from those types, so routing rules, override rules, tags and the balancer decide which
provider answers — exactly as for the application's own consumers. The result names the
provider that served it and the route trace the consumer's router chain gave for the call.
"""

from __future__ import annotations

import difflib
import json
import re
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format

from dubbo_py.admin.reflect import (
    MethodShape,
    ReflectionError,
    ServiceShape,
    describe_service,
    fields_of,
)
from dubbo_py.invocation import Invocation
from dubbo_py.registry import layout
from dubbo_py.registry.application import lookup as app_level
from dubbo_py.registry.matching import ProviderFilter, is_usable
from dubbo_py.registry.registry import Registry
from dubbo_py.router.chain import TraceStep
from dubbo_py.url import URL

__all__ = [
    "DEFAULT_APPLICATION",
    "CallError",
    "CallRequest",
    "CallResult",
    "call_method",
    "describe",
    "stub_class_for",
]

#: The consumer application a call is made as, unless told otherwise (rules matching
#: ``application = ...`` treat it as they would any consumer of that name).
DEFAULT_APPLICATION = "dubbo-py-call"


class CallError(Exception):
    """The call could not be made or failed (the message says why)."""


@dataclass(frozen=True)
class CallRequest:
    """What to call, and as which consumer."""

    service: str
    method: str
    #: The request message as JSON text (``{}`` for an empty request).
    request_json: str = "{}"
    version: str = ""
    group: str = ""
    attachments: Mapping[str, str] = field(default_factory=dict)
    application: str = DEFAULT_APPLICATION
    timeout: float = 10.0


@dataclass(frozen=True)
class CallResult:
    """A call's reply (as JSON), the provider that served it and the route trace."""

    reply: dict[str, Any]
    provider: str
    #: Addresses the router chain left for the call, in the consumer's order.
    routed: tuple[str, ...]
    trace: tuple[TraceStep, ...]
    #: Every provider tried (failover retries show as more than one).
    attempts: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """``{"reply", "provider", "attempts", "routed", "trace": [{"router", "in", "out"}]}``."""
        trace = [step.to_json() for step in self.trace]
        return {
            "reply": self.reply,
            "provider": self.provider,
            "attempts": list(self.attempts),
            "routed": list(self.routed),
            "trace": trace,
        }


def stub_class_for(shape: ServiceShape) -> type:
    """A stub class like generated gRPC code makes, for a service described by reflection
    (a dubbo-py reference takes it as it takes a generated one)."""

    def init(self: Any, channel: grpc.Channel) -> None:
        for method in shape.methods:
            factory = {
                (False, False): channel.unary_unary,
                (False, True): channel.unary_stream,
                (True, False): channel.stream_unary,
                (True, True): channel.stream_stream,
            }[(method.client_streaming, method.server_streaming)]
            callable_ = factory(
                method.path,
                request_serializer=method.request_class.SerializeToString,
                response_deserializer=method.response_class.FromString,
            )
            setattr(self, method.name, callable_)

    return type(f"{shape.name.rsplit('.', 1)[-1]}ReflectedStub", (), {"__init__": init})


def _candidates(registry: Registry, request: CallRequest) -> list[URL]:
    """Providers a consumer of this service, version and group would match (to ask for types)."""
    consumer = URL(
        "consumer",
        "127.0.0.1",
        0,
        request.service,
        parameters={
            "interface": request.service,
            "version": request.version,
            "group": request.group,
            "side": "consumer",
        },
    )
    raw = registry.lookup(request.service, layout.PROVIDERS)
    return [p for p in ProviderFilter(consumer, request.service).select(raw) if is_usable(p)]


def describe(registry: Registry, service: str, version: str = "", group: str = "") -> ServiceShape:
    """The methods and types of ``service``, from one of its matching providers."""
    providers = _candidates(registry, CallRequest(service, "", version=version, group=group))
    if not providers:
        known = registry.services()
        if service not in known:
            hint = f" (registered services: {', '.join(known)})"
            raise ReflectionError(f"no usable provider of {service}{hint}")
        raise ReflectionError(_elsewhere(registry, service, version, group))
    return describe_service(providers, service)


def _flags(version: str, group: str) -> str:
    flags = [f"--version {version}" if version else "", f"--group {group}" if group else ""]
    return " ".join(f for f in flags if f) or "no --version and no --group"


def _elsewhere(registry: Registry, service: str, version: str, group: str) -> str:
    """Why no provider matched: the versions and groups the service's providers do have, and
    the flags that pick them (a consumer matches version and group exactly, as in Dubbo)."""
    asked = " and ".join(
        [f"version {version!r}" if version else "no version"]
        + ([f"group {group!r}"] if group else [])
    )
    where = getattr(registry.store, "address", None)
    place = f" in {where}" if where is not None else ""
    urls = [
        *registry.lookup(service, layout.PROVIDERS),
        *app_level.providers(registry.store, service),
    ]
    found: dict[tuple[str, str], set[str]] = {}
    for url in urls:
        if is_usable(url):
            key = (url.get_str("version"), url.get_str("group"))
            found.setdefault(key, set()).add(url.address)
    if not found:
        return f"no usable provider of {service}{place} (none of any version or group)"
    offers = "; ".join(
        f"{_flags(v, g)} ({len(addresses)} provider{'s' if len(addresses) != 1 else ''})"
        for (v, g), addresses in sorted(found.items())
    )
    return (
        f"no provider of {service} with {asked}{place}; it has providers for: {offers}. "
        "A consumer matches version and group exactly: pass the flags of one of these"
    )


#: protobuf's message for an unknown JSON field (its own wording is replaced, see below).
_NO_FIELD = re.compile(r'Message type "([\w.]+)" has no field named "([^"]+)"')


def _parse_request(method: MethodShape, text: str) -> Any:
    try:
        return json_format.Parse(text or "{}", method.request_class())
    except json_format.ParseError as exc:
        unknown = _NO_FIELD.search(str(exc))
        if unknown is not None:
            raise CallError(_unknown_field(method, unknown.group(1), unknown.group(2))) from None
        raise CallError(f"the request is not a {method.request_type} in JSON: {exc}") from None


def _unknown_field(method: MethodShape, message_name: str, name: str) -> str:
    """``stock.CheckRequest has no field 'itme'; its fields: item (string); did you mean
    'item'?`` -- in place of protobuf's ``Available Fields(except extensions): "['item']"``."""
    descriptor = _find_message(method.request_class.DESCRIPTOR, message_name)
    shapes = fields_of(descriptor) if descriptor is not None else ()
    listed = ", ".join(
        f"{f.json_name} ({'repeated ' if f.repeated else ''}{f.type_name})" for f in shapes
    )
    names = [f.json_name for f in shapes] + [f.name for f in shapes]
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return (
        f"the request has a field {name!r} that {message_name} does not have; its fields: "
        f"{listed or 'none'}{hint}"
    )


def _find_message(root: Any, full_name: str) -> Any:
    """The descriptor of ``full_name`` among ``root`` and the messages its fields use."""
    seen: set[str] = set()
    todo = [root]
    while todo:
        descriptor = todo.pop()
        if descriptor.full_name == full_name:
            return descriptor
        if descriptor.full_name in seen:
            continue
        seen.add(descriptor.full_name)
        todo.extend(f.message_type for f in descriptor.fields if f.message_type is not None)
    return None


class _Recorder:
    """An attempt filter (:mod:`dubbo_py.consumer.filters`) noting every provider an attempt went
    to."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.providers: list[str] = []

    def __call__(
        self, provider: URL, invocation: Invocation, timeout: float | None, proceed: Any
    ) -> Any:
        with self._lock:
            self.providers.append(provider.address)
        return proceed(provider, invocation, timeout)


def call_method(
    registry_address: str,
    request: CallRequest,
    *,
    auth: str | None = None,
    check: float = 15.0,
) -> CallResult:
    """Make one unary call as a consumer application on ``registry_address`` would.

    The consumer registers itself for the call (so rules that name consumers apply to it as
    to any other), and unregisters when done. ``check`` bounds the wait for the providers and
    every rule the consumer watches, so the call obeys the rules in force. CallError or
    ReflectionError say what failed."""
    # Imported here: the application layer sits above the admin tools that import this module.
    from dubbo_py.app.application import Application
    from dubbo_py.consumer.filters import ConsumerFilters

    with tempfile.TemporaryDirectory(prefix="dubbo-py-call-") as folder:
        recorder = _Recorder()
        app = Application(
            request.application,
            registry_address,
            auth=auth,
            cache_path=Path(folder) / "cache.json",
        )
        try:
            registry = app.registry
            if registry is None:
                raise CallError(f"{registry_address} is not a registry")
            shape = describe(registry, request.service, request.version, request.group)
            method = shape.method(request.method)
            if not method.unary:
                raise CallError(f"{request.service}.{request.method} streams; only unary calls")
            message = _parse_request(method, request.request_json)
            ref: Any = app.reference_handle(
                stub_class_for(shape),
                filters=ConsumerFilters(attempts=(recorder,)),
                interface=request.service,
                version=request.version,
                group=request.group,
                attachments=dict(request.attachments),
                timeout=request.timeout,
                check=check,
            )
            invocation = Invocation(
                method.service, method.name, message, attachments=dict(request.attachments)
            )
            routed, steps = ref.directory.chain.trace(invocation)
            stub_call = getattr(ref.stub, method.name)
            try:
                reply = stub_call(message, timeout=request.timeout)
            except grpc.RpcError as exc:
                raise CallError(_rpc_error(exc, recorder)) from None
            except Exception as exc:  # a cluster error (no provider, budget, ...) says why
                raise CallError(str(exc) or type(exc).__name__) from None
        finally:
            app.close()
    attempts = tuple(recorder.providers)
    return CallResult(
        reply=json.loads(json_format.MessageToJson(reply, preserving_proto_field_name=False)),
        provider=attempts[-1] if attempts else "",
        routed=tuple(p.address for p in routed),
        trace=tuple(steps),
        attempts=attempts,
    )


def _rpc_error(exc: grpc.RpcError, recorder: _Recorder | None) -> str:
    code = exc.code() if isinstance(exc, grpc.Call) else None
    details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
    where = f" (from {recorder.providers[-1]})" if recorder and recorder.providers else ""
    name = code.name if code is not None else "error"
    return f"call failed{where}: {name}: {details}"
