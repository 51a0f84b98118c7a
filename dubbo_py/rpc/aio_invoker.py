"""Calling one provider from the asyncio consumer: ``grpc.aio`` channels by provider address
and the awaitable method invoker (the blocking flavour's :mod:`dubbo_py.rpc.invoker`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

import grpc

from dubbo_py.cluster.mock import stream_of
from dubbo_py.config.tls import ClientTLS
from dubbo_py.invocation import Invocation
from dubbo_py.rpc.attachments import metadata_from_attachments
from dubbo_py.rpc.invoker import ChannelSecurity
from dubbo_py.rpc.method import InvokerBase, StubMethod
from dubbo_py.rpc.triple import CALL_SINK, Metadata, TripleCaller
from dubbo_py.url import URL

__all__ = ["AsyncChannelPool", "AsyncMethodInvoker"]


class AsyncChannelPool:
    """``grpc.aio`` channels by provider address (they belong to the event loop that made them),
    TLS for providers whose URL says ``tls=true``, as in the blocking pool.

    :meth:`reset` and :meth:`retain` may be called from any thread (the quarantine's prober
    and the registry's notify thread call them). The channels are replaced or dropped on the
    loop, at the next call, and closed ``linger`` seconds later so calls in flight finish.
    """

    def __init__(
        self,
        tls: ClientTLS | None = None,
        *,
        linger: float = 30.0,
        interceptors: Sequence[grpc.aio.ClientInterceptor] = (),
    ) -> None:
        self._security = ChannelSecurity(tls)
        #: gRPC client interceptors of every channel (``reference_async(..., interceptors=)``).
        self._interceptors = list(interceptors) or None
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
                channel = grpc.aio.secure_channel(
                    address, credentials, options=options, interceptors=self._interceptors
                )
            else:
                channel = grpc.aio.insecure_channel(
                    address, options=options, interceptors=self._interceptors
                )
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


class AsyncMethodInvoker(InvokerBase):
    """Calls one method on the provider the strategy picked (awaitable). Call statistics are
    not kept here: a reference whose balancer reads them wraps the invoker
    (:class:`~dubbo_py.rpc.filters.AsyncRecordStats`)."""

    def __init__(
        self, pool: AsyncChannelPool, spec: StubMethod, *, caller: TripleCaller | None = None
    ) -> None:
        super().__init__(spec, caller)
        self._pool = pool
        # By TripleCaller.key: the channel a callable was made on, the callable, and the
        # provider's Triple headers.
        self._callables: dict[str, tuple[grpc.aio.Channel, Any, Metadata]] = {}

    def forget(self, addresses: Iterable[str]) -> None:
        """Nothing to drop: a cached callable is used only with the channel that made it."""

    def no_responses(self) -> AsyncIterator[Any]:
        """No responses: what an asyncio caller of a server-streaming method iterates over."""
        return stream_of([])

    def _callable(self, provider: URL) -> tuple[Any, Metadata]:
        # Asked of the pool on every call: the pool may have replaced the channel (a revived
        # provider gets a fresh one), and a callable belongs to the channel that made it.
        channel = self._pool.channel(provider)
        key = self._caller.key(provider)
        found = self._callables.get(key)
        if found is not None and found[0] is channel:
            return found[1], found[2]
        spec = self.spec
        made = getattr(channel, spec.factory_name)(
            spec.path,
            request_serializer=spec.request_serializer,
            response_deserializer=spec.response_deserializer,
        )
        headers = self._caller.headers(provider)
        self._callables[key] = (channel, made, headers)
        return made, headers

    async def __call__(self, provider: URL, invocation: Invocation, timeout: float | None) -> Any:
        call, metadata = self._callable(provider)
        if invocation.attachments:
            metadata = metadata + metadata_from_attachments(invocation.attachments)
        if self.spec.response_streaming:
            return await _primed(call(invocation.request, timeout=timeout, metadata=metadata))
        made = call(invocation.request, timeout=timeout, metadata=metadata)
        response = await made
        sink = CALL_SINK.get()
        if sink is not None:  # a with_call: the caller reads the provider's metadata
            sink.append(made)
        return response
