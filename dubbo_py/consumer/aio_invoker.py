"""Calling one provider from the asyncio consumer: ``grpc.aio`` channels by provider address
and the awaitable method invoker (the blocking flavour's :mod:`dubbo_py.consumer.invoker`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Hashable, Iterable, Sequence
from functools import partial
from typing import Any

import grpc

from dubbo_py.cluster.mock import stream_of
from dubbo_py.config.tls import ClientTLS
from dubbo_py.consumer.aio_connections import AsyncSharedChannels, LoopChannels
from dubbo_py.consumer.connections import IDLE_TIMEOUT_S
from dubbo_py.consumer.invoker import ChannelSecurity
from dubbo_py.consumer.method import InvokerBase, StubMethod
from dubbo_py.invocation import Invocation
from dubbo_py.protocol.attachments import metadata_from_attachments
from dubbo_py.protocol.triple import CALL_SINK, Metadata, TripleCaller
from dubbo_py.url import URL

__all__ = ["AsyncChannelPool", "AsyncMethodInvoker"]


class AsyncChannelPool:
    """``grpc.aio`` channels by provider address (they belong to the event loop that made them),
    TLS for providers whose URL says ``tls=true``, as in the blocking pool.

    The channels come from ``shared`` (the application's
    :class:`~dubbo_py.consumer.aio_connections.AsyncSharedChannels`): one per (event loop,
    provider address, security settings), shared by the application's asyncio references on
    that loop. Without ``shared`` the pool has channels of its own (a private set).

    :meth:`reset` and :meth:`retain` may be called from any thread (the quarantine's prober
    and the registry's notify thread call them). The channels are replaced or released on the
    loop -- at once when the pool has called on a loop, else at the next call -- and closed
    ``linger`` seconds later, once no reference holds them, so calls in flight finish.
    ``on_dropped`` is told (on the loop) of every address whose channel the pool lets go of.
    """

    def __init__(
        self,
        tls: ClientTLS | None = None,
        *,
        linger: float = 30.0,
        interceptors: Sequence[grpc.aio.ClientInterceptor] = (),
        shared: AsyncSharedChannels | None = None,
    ) -> None:
        options: list[tuple[str, Any]] = []
        if shared is not None:
            options.append(("grpc.client_idle_timeout_ms", int(IDLE_TIMEOUT_S * 1000)))
        self._security = ChannelSecurity(tls, options)
        #: gRPC client interceptors of every channel (``reference_async(..., interceptors=)``).
        self._interceptors = list(interceptors) or None
        # Interceptors are part of an aio channel: references share a channel only with the
        # same ones (the pool keeps them alive, so their ids are theirs while it holds any).
        self._interceptor_key = tuple(id(i) for i in interceptors)
        self._shared = shared if shared is not None else AsyncSharedChannels(linger=linger)
        self._loop_channels: LoopChannels | None = None
        self._channels: dict[str, grpc.aio.Channel] = {}
        #: The security key each channel was acquired under, by address.
        self._keys: dict[str, Hashable] = {}
        # Addresses whose channel is to be replaced; written by other threads.
        self._stale: set[str] = set()
        self._stale_lock = threading.Lock()
        # (version, addresses still registered), swapped whole by retain(); the loop sweeps
        # when the version moves past the one it last swept.
        self._keep: tuple[int, frozenset[str] | None] = (0, None)
        self._swept = 0
        self._closed = False
        #: Called on the loop with the addresses whose channel the pool let go of.
        self.on_dropped: Callable[[list[str]], None] | None = None

    def channel(self, provider: URL) -> grpc.aio.Channel:
        """The channel to this provider (on the event loop making the call)."""
        keep = self._keep
        if keep[0] != self._swept:
            self._sweep(keep)
        address = provider.address
        channel = self._channels.get(address)
        if self._stale and address in self._stale:
            with self._stale_lock:
                self._stale.discard(address)
            if channel is not None:
                self._replace(address, channel)
                channel = None
        if channel is None:
            shared = self._loop_channels
            if shared is None:
                shared = self._loop_channels = self._shared.join(self)
            key = (self._security.key_for(provider), self._interceptor_key)
            channel = shared.acquire(address, key, self, lambda: self._open(provider))
            self._channels[address] = channel
            self._keys[address] = key
        return channel

    def _open(self, provider: URL) -> grpc.aio.Channel:
        credentials, options = self._security.for_provider(provider)
        if credentials is not None:
            return grpc.aio.secure_channel(
                provider.address, credentials, options=options, interceptors=self._interceptors
            )
        return grpc.aio.insecure_channel(
            provider.address, options=options, interceptors=self._interceptors
        )

    def _replace(self, address: str, channel: grpc.aio.Channel) -> None:
        key = self._keys[address]
        assert self._loop_channels is not None
        self._loop_channels.reset(address, key, channel)
        # reset() told every holder, this pool included (dropped), unless another reference
        # had replaced the channel already: forget it either way.
        self.dropped(address)

    def dropped(self, address: str) -> None:
        """The shared channel to ``address`` was replaced by another reference (on the loop):
        forget it, the next call takes the new one."""
        self._channels.pop(address, None)
        self._keys.pop(address, None)
        if self.on_dropped is not None:
            self.on_dropped([address])

    @property
    def intercepted(self) -> bool:
        """True when the pool's channels have client interceptors."""
        return self._interceptors is not None

    def current(self, address: str) -> grpc.aio.Channel | None:
        """The channel the pool holds for ``address`` now (None: none)."""
        return self._channels.get(address)

    def made_on(
        self, provider: URL, channel: grpc.aio.Channel, key: Hashable, make: Callable[[], Any]
    ) -> Any:
        """What ``make`` makes on ``channel`` (the pool's channel to ``provider``), shared
        with the loop's other references holding it (on the loop)."""
        shared = self._loop_channels
        security = self._keys.get(provider.address)
        if shared is None or security is None:
            return make()
        return shared.made_on(provider.address, security, channel, key, make)

    def reset(self, address: str) -> None:
        """Replace the channel to ``address`` for every reference on the loop: on the loop,
        soon after, when the pool has called on one, else at the next use (thread-safe)."""
        with self._stale_lock:
            self._stale.add(address)
        self._on_loop(self._replace_stale)

    def _replace_stale(self) -> None:
        if self._closed:
            return
        with self._stale_lock:
            stale = [a for a in self._stale if a in self._channels]
            self._stale.difference_update(stale)
        for address in stale:
            channel = self._channels.get(address)
            if channel is not None:
                self._replace(address, channel)

    def _on_loop(self, work: Callable[[], None]) -> None:
        shared = self._loop_channels
        if shared is not None and not self._closed:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to do
                shared.loop.call_soon_threadsafe(work)

    def retain(self, providers: Iterable[URL]) -> None:
        """Release the channels to addresses not among ``providers`` (they left the registry):
        on the loop, soon after, when the pool has called on one, else at the next call
        (thread-safe)."""
        addresses = frozenset(p.address for p in providers)
        with self._stale_lock:
            self._keep = (self._keep[0] + 1, addresses)
        # Promptly, so a channel to a provider that left every directory closes even when no
        # call comes to sweep it.
        self._on_loop(self._sweep_now)

    def _sweep_now(self) -> None:
        keep = self._keep
        if keep[0] != self._swept and not self._closed:
            self._sweep(keep)

    def _sweep(self, keep: tuple[int, frozenset[str] | None]) -> None:
        self._swept, addresses = keep
        if addresses is None:
            return
        shared = self._loop_channels
        gone = [a for a in self._channels if a not in addresses]
        for address in gone:
            del self._channels[address]
            key = self._keys.pop(address)
            if shared is not None:
                shared.release(address, key, self)
        if gone and self.on_dropped is not None:
            self.on_dropped(gone)

    def __len__(self) -> int:
        return len(self._channels)

    async def close(self) -> None:
        """Release every channel; the loop's last reference to close closes every channel of
        the loop, lingering ones included."""
        self._closed = True
        shared = self._loop_channels
        channels, self._channels = self._channels, {}
        keys, self._keys = self._keys, {}
        if channels and self.on_dropped is not None:
            self.on_dropped(list(channels))
        if shared is None:
            return
        for address in channels:
            shared.release(address, keys[address], self)
        await shared.leave(self)
        self._loop_channels = None


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
    (:class:`~dubbo_py.consumer.filters.AsyncRecordStats`).

    Like the blocking invoker it is a :class:`~dubbo_py.cluster.support.context.PlainCall`
    for unary methods: :attr:`multicallables` holds each provider's multicallable with its
    headers bound, which an asyncio call plan awaits directly. An entry lives as long as the
    pool holds the channel it was made on: the reference forgets it (:meth:`forget`) when the
    pool lets the channel go or is told to replace it."""

    def __init__(
        self, pool: AsyncChannelPool, spec: StubMethod, *, caller: TripleCaller | None = None
    ) -> None:
        super().__init__(spec, caller)
        self._pool = pool
        # By TripleCaller.key: the channel a callable was made on, the callable, the
        # provider's Triple headers, and those headers as the callable takes them.
        self._callables: dict[str, tuple[grpc.aio.Channel, Any, Metadata, Any]] = {}
        #: What a call plan awaits: the multicallable with the provider's headers bound.
        self._direct: dict[str, Any] = {}
        # Whether calls keep callables for a plan (read on every call of the general path).
        self._plain = self.plain

    @property
    def multicallables(self) -> dict[str, Any]:
        """The callables made so far (each with its provider's headers bound), by provider
        address (read-only for callers: entries appear on a provider's first call and go when
        the pool lets its channel go)."""
        return self._direct

    def forget(self, addresses: Iterable[str]) -> None:
        """Drop the plan's callables of these addresses (thread-safe: each is one dict pop);
        a callable of the general path is used only with the channel that made it."""
        for address in addresses:
            self._direct.pop(address, None)

    def no_responses(self) -> AsyncIterator[Any]:
        """No responses: what an asyncio caller of a server-streaming method iterates over."""
        return stream_of([])

    def _callable(self, provider: URL) -> tuple[Any, Metadata, Any]:
        """The method's multicallable on the pool's channel to ``provider``, the provider's
        headers, and the same headers as the multicallable takes them (see :meth:`_make`)."""
        # Asked of the pool on every call: the pool may have replaced the channel (a revived
        # provider gets a fresh one), and a callable belongs to the channel that made it.
        channel = self._pool.channel(provider)
        key = self._caller.key(provider)
        found = self._callables.get(key)
        if found is not None and found[0] is channel:
            _, made, headers, sent = found
            if self._plain and key not in self._direct:  # forgotten, the channel kept
                self._direct[key] = partial(made, metadata=sent)
            return made, headers, sent
        headers = self._caller.headers(provider)
        # The loop's references calling this method with the same headers share one
        # multicallable per channel (and one copy of the headers).
        made, headers, sent = self._pool.made_on(
            provider, channel, (self.spec, headers), partial(self._make, channel, headers)
        )
        self._callables[key] = (channel, made, headers, sent)
        if self._plain:
            self._direct[key] = partial(made, metadata=sent)
        return made, headers, sent

    def _make(self, channel: grpc.aio.Channel, headers: Metadata) -> tuple[Any, Metadata, Any]:
        made = self.spec.multicallable(channel)
        # grpc.aio turns call metadata given as tuples into a grpc.aio.Metadata on every call
        # (an ABC check and a dict per call); one made here is taken as it is, and a call only
        # reads it. Interceptors get it to change, though, so theirs stay tuples.
        sent = headers if self._pool.intercepted else grpc.aio.Metadata(*headers)
        return made, headers, sent

    async def __call__(self, provider: URL, invocation: Invocation, timeout: float | None) -> Any:
        call, headers, metadata = self._callable(provider)
        if invocation.attachments:
            metadata = headers + metadata_from_attachments(invocation.attachments)
        if self.spec.response_streaming:
            return await _primed(call(invocation.request, timeout=timeout, metadata=metadata))
        made = call(invocation.request, timeout=timeout, metadata=metadata)
        response = await made
        sink = CALL_SINK.get()
        if sink is not None:  # a with_call: the caller reads the provider's metadata
            sink.append(made)
        return response
