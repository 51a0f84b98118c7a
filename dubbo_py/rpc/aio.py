"""The asyncio flavour (``grpc.aio``) of both sides.

Provider: ``await app.start_async(AsyncServicer())`` serves ``async def`` servicer methods on a
``grpc.aio`` server and registers them like the blocking flavour. Consumer:
``await app.reference_async(GreeterStub)`` returns the generated stub bound to an
:class:`AsyncClusterChannel`: ``await stub.SayHello(req)`` and ``async for r in
stub.SayHelloStream(req)`` are routed, balanced and retried exactly as in the blocking flavour —
the same directory, router chain, load balancer, quarantine and retry budget; only the provider
call and the retry loop are awaited.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2

from dubbo_py.cluster.aio_strategy import (
    AsyncStrategy,
    failfast_async,
    failover_async,
    stream_of,
)
from dubbo_py.cluster.stats import CallStats, method_key
from dubbo_py.cluster.strategy import ClusterContext
from dubbo_py.config.tls import ClientTLS
from dubbo_py.invocation import Invocation
from dubbo_py.registry.registry import Registry
from dubbo_py.rpc.attachments import attachments_from_metadata, metadata_from_attachments
from dubbo_py.rpc.invoker import ChannelSecurity
from dubbo_py.rpc.limits import aio_interceptor, servicer_guards
from dubbo_py.rpc.provider import bind_servicers, provider_urls, register_all
from dubbo_py.rpc.service import ServiceOptions
from dubbo_py.rpc.triple import CALL_SINK, Metadata, TripleCaller, from_wire
from dubbo_py.url import URL

__all__ = [
    "AsyncChannelPool",
    "AsyncClusterChannel",
    "AsyncExportedServer",
    "AsyncMethodInvoker",
    "CallResult",
    "export_async",
]

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------- provider side


@dataclass
class AsyncExportedServer:
    """A running ``grpc.aio`` server with its registered provider URLs."""

    server: grpc.aio.Server
    urls: list[URL]
    registry: Registry | None
    health: Any
    port: int
    host: str
    unregister_wait: float = 0.5

    @property
    def address(self) -> str:
        """``host:port`` consumers use."""
        return f"{self.host}:{self.port}"

    async def stop(self, grace: float = 5.0) -> None:
        """Unregister, wait for consumers to notice, then drain in-flight calls."""
        if self.registry is not None:
            for url in self.urls:
                try:
                    await asyncio.to_thread(self.registry.unregister, url)
                except Exception as exc:  # keep shutting down whatever the registry says
                    log.warning("could not unregister %s: %s", url, exc)
            await asyncio.sleep(self.unregister_wait)
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)


async def export_async(
    servicers: Sequence[object],
    *,
    application: str,
    registry: Registry | None,
    host: str = "127.0.0.1",
    port: int = 0,
    bind_host: str | None = None,
    credentials: grpc.ServerCredentials | None = None,
    url_parameters: dict[str, str] | None = None,
    service_options: Mapping[str, ServiceOptions] | None = None,
) -> AsyncExportedServer:
    """Serve async servicers on one ``grpc.aio`` server and register their provider URLs."""
    shedder = aio_interceptor(servicer_guards(servicers, service_options))
    server = grpc.aio.server(interceptors=[shedder] if shedder is not None else None)
    health_servicer = health.aio.HealthServicer()
    bound = bind_servicers(
        server,
        servicers,
        health_servicer,
        bind_host or host,
        port,
        credentials,
        service_options,
    )
    await server.start()
    urls = provider_urls(
        servicers, application, host, bound, credentials, url_parameters, service_options
    )
    for name in ["", *(u.path for u in urls)]:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    try:
        await asyncio.to_thread(register_all, registry, urls)
    except BaseException:
        await server.stop(0)  # a provider nobody can find must not keep a port
        raise
    return AsyncExportedServer(server, urls, registry, health_servicer, bound, host)


# ---------------------------------------------------------------------------- consumer side


class AsyncChannelPool:
    """``grpc.aio`` channels by provider address (they belong to the event loop that made them),
    TLS for providers whose URL says ``tls=true``, as in the blocking pool.

    :meth:`reset` and :meth:`retain` may be called from any thread (the quarantine's prober
    and the registry's notify thread call them). The channels are replaced or dropped on the
    loop, at the next call, and closed ``linger`` seconds later so calls in flight finish.
    """

    def __init__(self, tls: ClientTLS | None = None, *, linger: float = 30.0) -> None:
        self._security = ChannelSecurity(tls)
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._linger = linger
        # Addresses whose channel is to be replaced; written by other threads.
        self._stale: set[str] = set()
        self._stale_lock = threading.Lock()
        self._retired: dict[grpc.aio.Channel, asyncio.TimerHandle] = {}
        self._closing: set[asyncio.Task[None]] = set()
        # (version, addresses still registered), swapped whole by retain(); the loop sweeps
        # when the version moves past the one it last swept.
        self._keep: tuple[int, frozenset[str] | None] = (0, None)
        self._swept = 0

    def channel(self, provider: URL) -> grpc.aio.Channel:
        """The channel to this provider."""
        keep = self._keep
        if keep[0] != self._swept:
            self._sweep(keep)
        address = provider.address
        channel = self._channels.get(address)
        if self._stale and address in self._stale:
            with self._stale_lock:
                self._stale.discard(address)
            if channel is not None:
                self._retire(channel)
                channel = None
        if channel is None:
            credentials, options = self._security.for_provider(provider)
            if credentials is not None:
                channel = grpc.aio.secure_channel(address, credentials, options=options)
            else:
                channel = grpc.aio.insecure_channel(address, options=options)
            self._channels[address] = channel
        return channel

    def reset(self, address: str) -> None:
        """Replace the channel to ``address`` at its next use (thread-safe)."""
        with self._stale_lock:
            self._stale.add(address)

    def retain(self, providers: Iterable[URL]) -> None:
        """Drop the channels to addresses not among ``providers`` (they left the registry) at
        the next call (thread-safe)."""
        addresses = frozenset(p.address for p in providers)
        with self._stale_lock:
            self._keep = (self._keep[0] + 1, addresses)

    def _sweep(self, keep: tuple[int, frozenset[str] | None]) -> None:
        self._swept, addresses = keep
        if addresses is None:
            return
        for address in [a for a in self._channels if a not in addresses]:
            self._retire(self._channels.pop(address))

    def __len__(self) -> int:
        return len(self._channels)

    def _retire(self, channel: grpc.aio.Channel) -> None:
        loop = asyncio.get_running_loop()

        def close() -> None:
            if self._retired.pop(channel, None) is not None:
                task = loop.create_task(channel.close())
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)

        self._retired[channel] = loop.call_later(self._linger, close)

    async def close(self) -> None:
        """Close every channel, including those replaced but not closed yet."""
        channels, self._channels = list(self._channels.values()), {}
        retired, self._retired = self._retired, {}
        for timer in retired.values():
            timer.cancel()
        for channel in [*channels, *retired]:
            await channel.close()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)


async def _primed(stream: Any) -> AsyncIterator[Any]:
    # Read the first response before handing the stream back, so that a dead provider fails
    # inside the strategy, where it can still fail over.
    iterator = stream.__aiter__()
    try:
        first = await iterator.__anext__()
    except StopAsyncIteration:
        return stream_of([])
    return _chain(first, iterator)


async def _chain(first: Any, rest: AsyncIterator[Any]) -> AsyncIterator[Any]:
    yield first
    async for item in rest:
        yield item


class AsyncMethodInvoker:
    """Calls one method on the provider the strategy picked (awaitable)."""

    def __init__(
        self,
        pool: AsyncChannelPool,
        path: str,
        request_serializer: Callable[[Any], bytes] | None,
        response_deserializer: Callable[[bytes], Any] | None,
        response_streaming: bool,
        *,
        request_streaming: bool = False,
        caller: TripleCaller | None = None,
    ) -> None:
        self._pool = pool
        self.request_streaming = request_streaming
        self._path = path
        self._serializer = request_serializer
        self._deserializer = response_deserializer
        self._streaming = response_streaming
        self._caller = caller or TripleCaller()
        # By TripleCaller.key: the channel a callable was made on, the callable, and the
        # provider's Triple headers.
        self._callables: dict[str, tuple[grpc.aio.Channel, Any, Metadata]] = {}
        self._stats: CallStats | None = None
        self._stats_key = ""

    @property
    def stats(self) -> CallStats | None:
        """Where calls are recorded (None: not recorded); set, as for the blocking invoker,
        when the reference's balancer reads statistics (leastactive, shortestresponse)."""
        return self._stats

    @stats.setter
    def stats(self, stats: CallStats | None) -> None:
        self._stats_key = method_key(*self._path.lstrip("/").split("/", 1)) if stats else ""
        self._stats = stats

    def forget(self, addresses: Iterable[str]) -> None:
        """Nothing to drop: a cached callable is used only with the channel that made it."""

    def _callable(self, provider: URL) -> tuple[Any, Metadata]:
        # Asked of the pool on every call: the pool may have replaced the channel (a revived
        # provider gets a fresh one), and a callable belongs to the channel that made it.
        channel = self._pool.channel(provider)
        key = self._caller.key(provider)
        found = self._callables.get(key)
        if found is not None and found[0] is channel:
            return found[1], found[2]
        factory: Callable[..., Any]
        if self.request_streaming:
            factory = channel.stream_stream if self._streaming else channel.stream_unary
        else:
            factory = channel.unary_stream if self._streaming else channel.unary_unary
        made = factory(
            self._path,
            request_serializer=self._serializer,
            response_deserializer=self._deserializer,
        )
        headers = self._caller.headers(provider)
        self._callables[key] = (channel, made, headers)
        return made, headers

    def empty_response(self) -> Any:
        """The method's empty response message."""
        return self._deserializer(b"") if self._deserializer is not None else None

    @property
    def response_streaming(self) -> bool:
        """Whether the method answers with a stream of responses."""
        return self._streaming

    def failsafe_response(self) -> Any:
        """What ``failsafe`` answers a failed call with: the empty response message, or an
        empty stream for a server-streaming method."""
        return stream_of([]) if self._streaming else self.empty_response()

    async def __call__(self, provider: URL, invocation: Invocation, timeout: float | None) -> Any:
        call, metadata = self._callable(provider)
        if invocation.attachments:
            metadata = metadata + metadata_from_attachments(invocation.attachments)
        if self._stats is None:
            return await self._send(call, invocation.request, timeout, metadata)
        # Counted in flight across the await, as leastactive reads it.
        with self._stats.track(provider.address, self._stats_key):
            return await self._send(call, invocation.request, timeout, metadata)

    async def _send(self, call: Any, request: Any, timeout: float | None, metadata: Any) -> Any:
        if self._streaming:
            return await _primed(call(request, timeout=timeout, metadata=metadata))
        made = call(request, timeout=timeout, metadata=metadata)
        response = await made
        sink = CALL_SINK.get()
        if sink is not None:  # a with_call: the caller reads the provider's metadata
            sink.append(made)
        return response


class _AsyncMultiCallable:
    def __init__(self, channel: AsyncClusterChannel, path: str, invoker: AsyncMethodInvoker):
        self._channel = channel
        self._service, _, self._method = path.lstrip("/").partition("/")
        self._context = channel.context_for(invoker)
        self._streaming = invoker._streaming
        empty = invoker.empty_response()
        # A request stream can be consumed only once, so it is never replayed on another
        # provider: client-streaming calls are fail-fast whatever the reference says (as in
        # the blocking flavour).
        self._strategy = (
            failfast_async
            if invoker.request_streaming
            else channel.strategy_for(
                self._method, None if empty is None else type(empty), self._streaming
            )
        )

    def _invocation(self, request: Any, timeout: float | None, metadata: Any) -> Invocation:
        # Decoded as the blocking flavour does, so -bin values reach the provider unchanged.
        attachments = {**self._channel.attachments, **attachments_from_metadata(metadata)}
        return Invocation(self._service, self._method, request, attachments, timeout)

    def __call__(
        self, request: Any, *, timeout: float | None = None, metadata: Any = None, **_: Any
    ) -> Any:
        invocation = self._invocation(request, timeout, metadata)
        if self._streaming:
            return self._stream(invocation)
        return self._strategy(self._context, invocation)

    async def _stream(self, invocation: Invocation) -> AsyncIterator[Any]:
        responses = await self._strategy(self._context, invocation)
        async for response in responses:
            yield response

    async def with_call(
        self, request: Any, *, timeout: float | None = None, metadata: Any = None, **_: Any
    ) -> tuple[Any, CallResult]:
        """``await stub.Method.with_call(request)``: the response and what the provider call
        that answered sent besides it (:class:`CallResult`: its trailing metadata carries the
        provider's attachments). For unary-response methods, as in blocking gRPC."""
        if self._streaming:
            raise TypeError("with_call is for methods answering with one response")
        sink: list[Any] = []
        token = CALL_SINK.set(sink)
        try:
            response = await self._strategy(
                self._context, self._invocation(request, timeout, metadata)
            )
        finally:
            CALL_SINK.reset(token)
        if not sink:
            return response, CallResult()
        made = sink[-1]
        return response, CallResult(
            await made.code(),
            str(await made.details() or ""),
            from_wire(await made.initial_metadata()),
            from_wire(await made.trailing_metadata()),
        )


@dataclass(frozen=True, slots=True)
class CallResult:
    """What an asyncio ``with_call`` gives besides the response, read like ``grpc.Call``:
    status and metadata of the provider call that answered (Dubbo's ``tri-header-convert``
    undone); OK and empty when no provider answered (a mock)."""

    _code: grpc.StatusCode = grpc.StatusCode.OK
    _details: str = ""
    _initial: Metadata = ()
    _trailing: Metadata = ()

    def code(self) -> grpc.StatusCode:
        """The call's status code."""
        return self._code

    def details(self) -> str:
        """The call's status details."""
        return self._details

    def initial_metadata(self) -> Metadata:
        """The provider's initial metadata."""
        return self._initial

    def trailing_metadata(self) -> Metadata:
        """The provider's trailing metadata (its attachments)."""
        return self._trailing


class AsyncClusterChannel:
    """A ``grpc.aio.Channel`` look-alike: generated stubs work unchanged, for all four kinds of
    method (client-streaming ones fail fast, as in the blocking flavour)."""

    def __init__(
        self,
        pool: AsyncChannelPool,
        context_for: Callable[[Any], ClusterContext],
        strategy_for: Callable[[str, Any, bool], AsyncStrategy] = lambda *_: failover_async,
        attachments: Mapping[str, str] | None = None,
        caller: TripleCaller | None = None,
    ) -> None:
        self.pool = pool
        #: Who calls (the Triple headers every call carries).
        self.caller = caller or TripleCaller()
        #: The awaited strategy of a method, given its name, response type and whether it
        #: answers with a stream.
        self.strategy_for = strategy_for
        #: Builds a method's cluster context, registering its invoker with the reference (the
        #: blocking channel's ``context_for``), so consumer overrides reach it.
        self.context_for = context_for
        self.attachments = dict(attachments or {})

    def _multicallable(
        self,
        method: str,
        serializer: Any,
        deserializer: Any,
        streaming: bool,
        request_streaming: bool = False,
    ) -> _AsyncMultiCallable:
        invoker = AsyncMethodInvoker(
            self.pool,
            method,
            serializer,
            deserializer,
            streaming,
            request_streaming=request_streaming,
            caller=self.caller,
        )
        return _AsyncMultiCallable(self, method, invoker)

    def unary_unary(
        self,
        method: str,
        request_serializer: Any = None,
        response_deserializer: Any = None,
        _registered_method: bool | None = False,
    ) -> Any:
        return self._multicallable(method, request_serializer, response_deserializer, False)

    def unary_stream(
        self,
        method: str,
        request_serializer: Any = None,
        response_deserializer: Any = None,
        _registered_method: bool | None = False,
    ) -> Any:
        return self._multicallable(method, request_serializer, response_deserializer, True)

    def stream_unary(
        self,
        method: str,
        request_serializer: Any = None,
        response_deserializer: Any = None,
        _registered_method: bool | None = False,
    ) -> Any:
        return self._multicallable(method, request_serializer, response_deserializer, False, True)

    def stream_stream(
        self,
        method: str,
        request_serializer: Any = None,
        response_deserializer: Any = None,
        _registered_method: bool | None = False,
    ) -> Any:
        return self._multicallable(method, request_serializer, response_deserializer, True, True)

    async def close(self) -> None:
        """Close every provider channel."""
        await self.pool.close()
