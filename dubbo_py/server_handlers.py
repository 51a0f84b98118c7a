"""Wrapping a gRPC server's method handlers, as the provider interceptors do (overload limits in
``provider/limits.py``, metrics and tracing in ``qos/provider.py``).

An interceptor here is a function from (call details, the handler the server found) to the
handler to use, wrapped in the blocking or ``grpc.aio`` interceptor class. Wrapping a handler
happens once per key (a method path, or a path with its version and group), not per call:
:class:`WrappedHandlers` keeps the wrapped handler beside the handler the server gave, and makes
it again only if the server hands out a different one (an allocation-free lookup: this runs
on every call).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Hashable
from typing import Any, Generic, TypeAlias, TypeVar, cast

import grpc

__all__ = [
    "AsyncHandlerInterceptor",
    "Handler",
    "HandlerInterceptor",
    "Rewrap",
    "WrappedHandlers",
    "awaitable_of",
    "behaviour_of",
    "rebuild",
    "stream_out",
    "with_starter",
]

#: A gRPC method handler (generic only to type checkers).
Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"
#: (call details, the server's handler or None for an unknown method) -> the handler to use.
Rewrap: TypeAlias = Callable[[grpc.HandlerCallDetails, "Handler | None"], "Handler | None"]

K = TypeVar("K", bound=Hashable)


def _kind(handler: Handler) -> str:
    request = "stream" if handler.request_streaming else "unary"
    response = "stream" if handler.response_streaming else "unary"
    return f"{request}_{response}"


def behaviour_of(handler: Handler) -> Callable[..., Any]:
    """The servicer function ``handler`` calls (whichever of its four kinds it is)."""
    behaviour: Callable[..., Any] = getattr(handler, _kind(handler))
    return behaviour


#: The attribute of a coroutine function that holds its plain twin (see :func:`with_starter`).
_STARTER = "_dubbo_starter"


def with_starter(coroutine: Callable[..., Any], starter: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``coroutine`` (a coroutine function, as grpc.aio needs of a handler it awaits)
    with ``starter``: a plain function taking the same arguments and returning the awaitable
    that ``coroutine`` would await and return. Returns ``coroutine``."""
    setattr(coroutine, _STARTER, starter)
    return coroutine


def awaitable_of(behaviour: Callable[..., Any]) -> Callable[..., Any]:
    """What a wrapper awaits to run ``behaviour``: its plain twin when it has one (one
    coroutine frame less per call: the twin hands over the inner awaitable itself, which
    the wrapper awaits directly), else ``behaviour``; awaiting either's result is the same."""
    starter: Callable[..., Any] = getattr(behaviour, _STARTER, behaviour)
    return starter


def rebuild(handler: Handler, behaviour: Callable[..., Any]) -> Handler:
    """A handler of ``handler``'s kind and serializers that calls ``behaviour`` instead."""
    factory = getattr(grpc, f"{_kind(handler)}_rpc_method_handler")
    made: Handler = factory(
        behaviour,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )
    return made


class WrappedHandlers(Generic[K]):
    """The wrapped handler of each key, made once per handler the server hands out."""

    def __init__(self) -> None:
        self._wrapped: dict[K, tuple[Handler, Handler]] = {}

    def cached(self, key: K, handler: Handler) -> Handler | None:
        """The wrapped handler kept for ``key``, if it wraps this very ``handler``."""
        cached = self._wrapped.get(key)
        return cached[1] if cached is not None and cached[0] is handler else None

    def keep(self, key: K, handler: Handler, wrapped: Handler) -> Handler:
        """Keep ``wrapped`` as ``key``'s wrapping of ``handler``; returns ``wrapped``."""
        self._wrapped[key] = (handler, wrapped)
        return wrapped


class HandlerInterceptor(grpc.ServerInterceptor):
    """A blocking server's interceptor that hands every call's handler through ``rewrap``."""

    def __init__(self, rewrap: Rewrap) -> None:
        self._rewrap = rewrap

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Handler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        return self._rewrap(handler_call_details, continuation(handler_call_details))


class AsyncHandlerInterceptor(grpc.aio.ServerInterceptor):
    """A ``grpc.aio`` server's interceptor that hands every call's handler through ``rewrap``."""

    def __init__(self, rewrap: Rewrap) -> None:
        self._rewrap = rewrap

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Any],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler:
        handler: Handler | None = await continuation(handler_call_details)
        # An unknown method's None passes through unchanged, for the server to answer UNIMPLEMENTED.
        return cast("Handler", self._rewrap(handler_call_details, handler))


async def stream_out(result: Any) -> AsyncIterator[Any]:
    """The items a ``grpc.aio`` server-streaming behaviour sends: ``result`` is what it returned,
    an async iterator of responses, or an awaitable for a servicer that writes with
    ``context.write`` and returns (nothing to relay then)."""
    if hasattr(result, "__aiter__"):
        async for item in result:
            yield item
    else:
        await result
