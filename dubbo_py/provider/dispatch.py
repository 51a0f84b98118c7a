"""Serving servicers on a gRPC server the way a Dubbo 3.3 Triple provider does.

One server may export several servicers of one gRPC service, told apart by version and group
(``@service(version="1.0.0")`` and ``"2.0.0"``): a call reaches the servicer its
``tri-service-group`` / ``tri-service-version`` headers name. When no servicer matches them,
Dubbo's fallback (``TriplePathResolver.resolve`` with ``resolve-fallback-to-default``, on by
default) applies: the one of that group with version ``1.0.0``, else the service's default --
the servicer exported without version and group, else the first one exported. A service with
one servicer is registered as its generated code would register it, so every call reaches it
whatever the headers say (Dubbo's fallback ends there too).

Every servicer method sees its call through :class:`TripleContext`: the request metadata with
Dubbo's ``tri-header-convert`` undone (a consumer's ``traceId`` reads as ``traceId``), and
metadata it sends converted the same way, so upper-case keys and ``bytes`` values work.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeAlias

import grpc

from dubbo_py.protocol.introspect import handlers_of_servicer
from dubbo_py.protocol.triple import SERVICE_GROUP, SERVICE_VERSION, Metadata, from_wire, to_wire
from dubbo_py.provider.service import ServiceOptions, options_of
from dubbo_py.server_handlers import with_starter

__all__ = ["DEFAULT_VERSION", "Export", "ServiceTable", "TripleContext", "add_servicers"]

log = logging.getLogger(__name__)

#: The version Dubbo falls back to when a call's version is not exported (``DEFAULT_VERSION``).
DEFAULT_VERSION = "1.0.0"

_BEHAVIOURS = ("unary_unary", "unary_stream", "stream_unary", "stream_stream")


class TripleContext:
    """A servicer context (blocking or asyncio) seen through Dubbo's Triple conventions:
    :meth:`invocation_metadata` with the original keys restored, and metadata the servicer
    sends (:meth:`send_initial_metadata`, :meth:`set_trailing_metadata`) lower-cased with
    ``tri-header-convert``, ``bytes`` values under ``-bin`` keys. Everything else is the
    wrapped context's."""

    __slots__ = ("_context", "_metadata")

    def __init__(self, context: Any) -> None:
        self._context = context
        self._metadata: Metadata | None = None

    def invocation_metadata(self) -> Metadata:
        """The request metadata, keys as the consumer wrote them."""
        if self._metadata is None:
            self._metadata = from_wire(self._context.invocation_metadata())
        return self._metadata

    def send_initial_metadata(self, initial_metadata: Iterable[tuple[str, str | bytes]]) -> Any:
        """Send initial metadata (awaitable on an asyncio server, as gRPC's)."""
        return self._context.send_initial_metadata(to_wire(initial_metadata))

    def set_trailing_metadata(self, trailing_metadata: Iterable[tuple[str, str | bytes]]) -> None:
        """Set the trailing metadata: the provider's attachments, which reach a consumer's
        ``with_call``."""
        self._context.set_trailing_metadata(to_wire(trailing_metadata))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


def _adapt(behaviour: Callable[..., Any]) -> Callable[..., Any]:
    """``behaviour`` called with a :class:`TripleContext`, of the same kind (coroutine function,
    async generator function or plain function), which is how grpc.aio tells them apart."""
    if inspect.iscoroutinefunction(behaviour):

        async def coroutine(request: Any, context: Any) -> Any:
            return await behaviour(request, TripleContext(context))

        def start(request: Any, context: Any) -> Any:
            # The servicer's coroutine, not yet run: what the provider's wrappers (metrics,
            # access log) await instead of ``coroutine``, a frame less on every call.
            return behaviour(request, TripleContext(context))

        return with_starter(coroutine, start)
    if inspect.isasyncgenfunction(behaviour):

        async def generator(request: Any, context: Any) -> AsyncIterator[Any]:
            async for response in behaviour(request, TripleContext(context)):
                yield response

        return generator

    def plain(request: Any, context: Any) -> Any:
        return behaviour(request, TripleContext(context))

    return plain


def _adapted_handlers(handlers: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for method, handler in handlers.items():
        changes = {
            name: _adapt(getattr(handler, name))
            for name in _BEHAVIOURS
            if getattr(handler, name, None) is not None
        }
        out[method] = handler._replace(**changes)
    return out


@dataclass(frozen=True, slots=True)
class Export:
    """One servicer on the server: its service, version and group, and its method handlers
    (by method name)."""

    service: str
    version: str
    group: str
    handlers: Mapping[str, Any]
    name: str

    @property
    def label(self) -> str:
        """``group/service:version`` as Dubbo writes a service key."""
        key = f"{self.group}/{self.service}" if self.group else self.service
        return f"{key}:{self.version}" if self.version else key


class ServiceTable:
    """The servicers of one gRPC service on a server, and which one a call reaches."""

    def __init__(self, exports: Sequence[Export]) -> None:
        if not exports:
            raise ValueError("a service table needs at least one servicer")
        self.service = exports[0].service
        self.exports = tuple(exports)
        self._by_key: dict[tuple[str, str], Export] = {}
        for export in exports:
            key = (export.group, export.version)
            previous = self._by_key.get(key)
            if previous is not None:
                raise ValueError(
                    f"{export.name} and {previous.name} both export {export.label}: give them "
                    "different versions or groups (@service(version=..., group=...))"
                )
            self._by_key[key] = export
        #: Where calls go whose group and version match no servicer (nor version 1.0.0).
        self.default = self._by_key.get(("", ""), exports[0])

    def resolve(self, group: str, version: str) -> Export:
        """The servicer a call with these ``tri-service-group`` / ``tri-service-version``
        headers reaches (empty: header absent)."""
        by_key = self._by_key
        found = by_key.get((group, version))
        if found is None:
            found = by_key.get((group, DEFAULT_VERSION))
        return found if found is not None else self.default


class _Dispatcher(grpc.GenericRpcHandler):
    """A generic handler for one service exported several times: picks the servicer by the
    call's Triple headers."""

    def __init__(self, table: ServiceTable) -> None:
        self._table = table
        self._prefix = f"/{table.service}/"

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        method: str = handler_call_details.method
        if not method.startswith(self._prefix):
            return None
        group = version = ""
        for key, value in handler_call_details.invocation_metadata or ():
            if key == SERVICE_VERSION:
                version = value if isinstance(value, str) else value.decode("utf-8", "replace")
            elif key == SERVICE_GROUP:
                group = value if isinstance(value, str) else value.decode("utf-8", "replace")
        return self._table.resolve(group, version).handlers.get(method[len(self._prefix) :])


def tables_of(
    servicers: Sequence[object], service_options: Mapping[str, ServiceOptions] | None = None
) -> list[ServiceTable]:
    """The servicers grouped by service, in export order, each with the version and group it
    registers (``service_options`` by service name replace the decorator's, as for the
    provider URLs)."""
    grouped: dict[str, list[Export]] = {}
    for servicer in servicers:
        name, handlers = handlers_of_servicer(servicer)
        options = (service_options or {}).get(name) or options_of(servicer)
        grouped.setdefault(name, []).append(
            Export(
                name,
                options.version,
                options.group,
                _adapted_handlers(handlers),
                type(servicer).__name__,
            )
        )
    return [ServiceTable(exports) for exports in grouped.values()]


#: Wraps one method's handler once, when it is added to the server:
#: ``(service, method, version, group, handler) -> handler``.
HandlerWrap: TypeAlias = Callable[[str, str, str, str, Any], Any]


def _wrapped(export: Export, wrap: HandlerWrap) -> Export:
    handlers = {
        method: wrap(export.service, method, export.version, export.group, handler)
        for method, handler in export.handlers.items()
    }
    return replace(export, handlers=handlers)


def add_servicers(
    server: Any,
    servicers: Sequence[object],
    service_options: Mapping[str, ServiceOptions] | None = None,
    wrap: HandlerWrap | None = None,
) -> list[ServiceTable]:
    """Add ``servicers`` to a blocking or asyncio gRPC server: a service exported once as its
    generated code would add it, one exported several times (versions, groups) behind a
    dispatcher on the Triple headers. Two servicers of one service with the same version and
    group are refused (ValueError), as Dubbo refuses a second invoker on one path. ``wrap``
    (when given) wraps every method handler once, here, instead of an interceptor on every
    call."""
    tables = tables_of(servicers, service_options)
    if wrap is not None:
        tables = [ServiceTable([_wrapped(e, wrap) for e in t.exports]) for t in tables]
    for table in tables:
        if len(table.exports) == 1:
            handlers = table.exports[0].handlers
            generic = grpc.method_handlers_generic_handler(table.service, dict(handlers))
            server.add_generic_rpc_handlers((generic,))
            register = getattr(server, "add_registered_method_handlers", None)
            if register is not None:
                register(table.service, dict(handlers))
            continue
        server.add_generic_rpc_handlers((_Dispatcher(table),))
        log.info(
            "%s is exported %d times on one server (%s); calls are dispatched by their "
            "tri-service-group/tri-service-version headers, else to %s",
            table.service,
            len(table.exports),
            ", ".join(e.label for e in table.exports),
            table.default.label,
        )
    return tables
