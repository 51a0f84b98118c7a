"""Calling one provider: one pooled gRPC channel per provider address, reused by every call.

A provider invoker is a function ``(provider, invocation, timeout) -> result``; the cluster
strategies compose around it. Multicallables are cached per (provider address, method) so the
per-call path is a dict lookup plus the gRPC call itself.

Both flavours live here: the blocking channel pool and invoker first, then the asyncio ones.

Calling one provider from the asyncio consumer: ``grpc.aio`` channels by provider address
and the awaitable method invoker (the blocking flavour's :mod:`dubbo_py.consumer.invoker`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Hashable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from functools import partial
from itertools import chain
from types import MappingProxyType
from typing import Any

import grpc

from dubbo_py.call_errors import is_closed_channel
from dubbo_py.cluster.mock import stream_of
from dubbo_py.config.tls import ClientTLS, use_tls
from dubbo_py.consumer.connections import (
    IDLE_TIMEOUT_S,
    AsyncSharedChannels,
    LoopChannels,
    SharedChannels,
)
from dubbo_py.consumer.method import InvokerBase, StubMethod
from dubbo_py.errors import CallCredentialsError, ProviderUnavailable
from dubbo_py.invocation import COMPRESSIONS, CallOptions, Invocation
from dubbo_py.protocol.attachments import metadata_from_attachments
from dubbo_py.protocol.payload import with_payload_limits
from dubbo_py.protocol.triple import CALL_SINK, Metadata, TripleCaller
from dubbo_py.url import URL

__all__ = [
    "AsyncChannelPool",
    "AsyncMethodInvoker",
    "ChannelPool",
    "ChannelSecurity",
    "MethodInvoker",
]


#: No per-call gRPC arguments (a with_call or streaming call that gave none).
_NO_EXTRA: Mapping[str, Any] = MappingProxyType({})


def _compression_arguments(compression: str | None) -> Mapping[str, Any]:
    """The gRPC arguments of a method's ``compression`` option (none when not set)."""
    if compression is None:
        return _NO_EXTRA
    return MappingProxyType({"compression": grpc.Compression(COMPRESSIONS[compression])})


class ChannelSecurity:
    """How to open a channel to a provider, for the blocking and the asyncio pools alike: TLS
    when :func:`~dubbo_py.config.tls.use_tls` says so (the consumer's ``tls.enabled``, else the
    provider URL's ``tls=true`` / ``ssl-enabled=true``; with ``tls``, or system roots when
    None), else plaintext; and always a channel-local subchannel pool.

    Local subchannels because gRPC's process-wide pool would hand a fresh channel the old one's
    connection, still in reconnect backoff after the provider died, so neither replacing a
    channel nor opening a new one once the provider is back would help.
    """

    def __init__(self, tls: ClientTLS | None = None, options: Iterable[tuple[str, Any]] = ()):
        self._tls = tls
        self._options: list[tuple[str, Any]] = with_payload_limits(
            [("grpc.use_local_subchannel_pool", 1), *options]
        )
        self._credentials: grpc.ChannelCredentials | None = None
        self._lock = threading.Lock()
        #: What channels opened with these settings share (see :mod:`.shared_channels`).
        self.key: Hashable = (tls, tuple(self._options))
        # The two keys key_for gives, made once: a pool keeps one per provider it calls.
        self._keys: dict[bool, Hashable] = {flag: (flag, self.key) for flag in (False, True)}

    def call_arguments(
        self, provider: URL, options: CallOptions, method: StubMethod
    ) -> Mapping[str, Any]:
        """gRPC's per-call arguments of a call to ``provider``. Call credentials travel only
        over TLS (grpcio's rule): to a provider called in plaintext they refuse the call
        (CallCredentialsError naming it) rather than let it go out without them."""
        if options.credentials is not None and not use_tls(provider.parameters, self._tls):
            raise CallCredentialsError(
                f"{method.service}/{method.name}: call credentials need a TLS channel, and "
                f"provider {provider.address} is called in plaintext (give the reference "
                "tls=..., or the provider tls=true); the call was not sent"
            )
        return options.grpc_arguments

    def key_for(self, provider: URL) -> Hashable:
        """The security part of a shared channel's key for ``provider``: TLS or not, and the
        settings it opens with."""
        return self._keys[use_tls(provider.parameters, self._tls)]

    def for_provider(
        self, provider: URL
    ) -> tuple[grpc.ChannelCredentials | None, list[tuple[str, Any]]]:
        """``(credentials, options)`` for a channel to ``provider``; credentials None means a
        plaintext channel. The TLS files are read once, at the first TLS provider."""
        if not use_tls(provider.parameters, self._tls):
            return None, self._options
        tls = self._tls or ClientTLS()
        with self._lock:
            if self._credentials is None:
                self._credentials = tls.credentials()
            credentials = self._credentials
        return credentials, self._options + tls.channel_options()


class ChannelPool:
    """gRPC channels keyed by provider address, created on first use. A provider whose URL says
    ``tls=true`` gets a TLS channel (``tls``, or system roots when no ClientTLS is given).

    A channel that is dropped (its provider left the registry) or replaced (:meth:`reset`) is
    closed only after ``linger`` seconds, so calls still in flight on it -- such as those a
    provider drains while it shuts down gracefully -- finish instead of being cancelled.

    With ``shared`` (the application's :class:`~dubbo_py.consumer.connections.SharedChannels`),
    the pool holds channels the application's other references share: one per provider
    address and security settings. Dropping a provider then releases the pool's hold (the
    channel closes when no reference holds it), and ``on_dropped`` is told about addresses
    whose channel another reference replaced.
    """

    def __init__(
        self,
        tls: ClientTLS | None = None,
        options: Iterable[tuple[str, Any]] = (),
        *,
        linger: float = 30.0,
        shared: SharedChannels | None = None,
    ) -> None:
        if shared is not None:
            options = [*options, ("grpc.client_idle_timeout_ms", int(IDLE_TIMEOUT_S * 1000))]
        self._security = ChannelSecurity(tls, options)
        #: How channels to each provider are secured (and so which call arguments they carry).
        self.security = self._security
        self._linger = linger
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._closing: list[threading.Timer] = []
        self._shared = shared
        #: The security key each shared channel was acquired under, by address.
        self._keys: dict[str, Hashable] = {}
        #: Called with the addresses whose channel was replaced from elsewhere.
        self.on_dropped: Callable[[list[str]], None] | None = None

    def channel(self, provider: URL) -> grpc.Channel:
        """The channel to this provider (created once, then shared)."""
        key = provider.address
        channel = self._channels.get(key)
        if channel is not None:
            return channel
        with self._lock:
            channel = self._channels.get(key)
            if channel is None:
                shared = self._shared
                if shared is None:
                    channel = self._open(provider)
                else:
                    security = self._security.key_for(provider)
                    channel = shared.acquire(key, security, self, partial(self._open, provider))
                    self._keys[key] = security
                self._channels[key] = channel
            return channel

    def dropped(self, address: str) -> None:
        """The shared channel to ``address`` was replaced by another reference: forget it (the
        next call takes the new one)."""
        with self._lock:
            self._channels.pop(address, None)
            self._keys.pop(address, None)
        if self.on_dropped is not None:
            self.on_dropped([address])

    def current(self, address: str) -> grpc.Channel | None:
        """The channel the pool holds for ``address`` now (None: none open)."""
        return self._channels.get(address)

    def made_on(
        self, provider: URL, channel: grpc.Channel, key: Hashable, make: Callable[[], Any]
    ) -> Any:
        """What ``make`` makes on ``channel`` (the pool's channel to ``provider``), shared by
        the application's references when the channel is (see
        :meth:`SharedChannels.made_on`), else made now."""
        shared = self._shared
        security = self._keys.get(provider.address)
        if shared is None or security is None:
            return make()
        return shared.made_on(provider.address, security, channel, key, make)

    def _open(self, provider: URL) -> grpc.Channel:
        credentials, options = self._security.for_provider(provider)
        if credentials is not None:
            return grpc.secure_channel(provider.address, credentials, options=options)
        return grpc.insecure_channel(provider.address, options=options)

    def _close_later(self, channels: list[grpc.Channel]) -> None:
        if not channels:
            return
        if self._linger <= 0:
            for channel in channels:
                channel.close()
            return

        def close() -> None:
            for channel in channels:
                channel.close()

        timer = threading.Timer(self._linger, close)
        timer.daemon = True
        with self._lock:
            self._closing = [t for t in self._closing if t.is_alive()]
            self._closing.append(timer)
        timer.start()

    def retain(self, providers: Iterable[URL]) -> list[str]:
        """Drop channels to addresses no longer among ``providers`` (closed after ``linger``,
        or released to the application's shared channels); returns those addresses."""
        keep = {p.address for p in providers}
        with self._lock:
            gone = [a for a in self._channels if a not in keep]
            closing = [self._channels.pop(a) for a in gone]
            keys = [self._keys.pop(a, None) for a in gone]
        if self._shared is not None:
            for address, security in zip(gone, keys, strict=True):
                self._shared.release(address, security, self)
        else:
            self._close_later(closing)
        return gone

    def reset(self, address: str) -> bool:
        """Forget the channel to ``address`` so the next call opens a fresh one (the old one is
        closed after ``linger``). Used when a quarantined provider is revived: its old channel
        may sit in gRPC's reconnect backoff (up to two minutes) although the server is back.
        A shared channel is replaced for every reference holding it."""
        with self._lock:
            channel = self._channels.pop(address, None)
            security = self._keys.pop(address, None)
        if channel is None:
            return False
        if self._shared is not None:
            self._shared.reset(address, security, channel)
            return True
        self._close_later([channel])
        return True

    def close(self) -> None:
        """Close every channel now, including those lingering (shared ones are released: they
        close when no reference holds them)."""
        if self._shared is not None:
            with self._lock:
                held, self._channels = list(self._channels), {}
                keys, self._keys = self._keys, {}
            for address in held:
                self._shared.release(address, keys.get(address), self)
            return
        with self._lock:
            channels, self._channels = list(self._channels.values()), {}
            timers, self._closing = self._closing, []
        for timer in timers:
            timer.cancel()
            if not timer.finished.is_set():
                timer.function(*timer.args, **timer.kwargs)
        for channel in channels:
            channel.close()

    def __len__(self) -> int:
        return len(self._channels)


def _primed(stream: Iterator[Any]) -> Iterator[Any]:
    """Read the first response now so a dead provider fails here (where the cluster strategy
    can still fail over), then hand back an iterator over every response."""
    try:
        first = next(stream)
    except StopIteration:
        return iter(())
    # A C-level chain, not a generator: no Python frame per response (a generator's
    # ``yield from`` resumed one per response, 11 per call of 10 replies).
    return chain((first,), stream)


class MethodInvoker(InvokerBase):
    """Calls one method on whichever provider the cluster strategy picked.

    Every call carries the Triple headers of the chosen provider (``tri-service-version``,
    ``tri-service-group``, ``tri-consumer-appname``; see :mod:`dubbo_py.protocol.triple`): they are
    bound into the cached callable of each provider, so a call plan calling it directly sends
    them too. Call statistics are not kept here: a reference whose balancer reads them wraps
    the invoker (:class:`~dubbo_py.consumer.filters.RecordStats`).
    """

    def __init__(
        self,
        pool: ChannelPool,
        spec: StubMethod,
        *,
        caller: TripleCaller | None = None,
        metadata: Iterable[tuple[str, str | bytes]] = (),
        interceptors: Sequence[Any] = (),
        compression: str | None = None,
    ) -> None:
        super().__init__(spec, caller)
        self._pool = pool
        #: gRPC arguments of every call of the method (its ``compression`` option), bound
        #: into the callables a call plan calls and merged under a call's own arguments.
        self._defaults = _compression_arguments(compression)
        #: gRPC client interceptors around every call on a provider's channel (``reference(...,
        #: interceptors=)``), applied where the multicallable is made, once per provider.
        self._interceptors = tuple(interceptors)
        self._unary_response = not spec.response_streaming
        self._metadata = tuple(metadata)
        self._by_address = not self._caller.several_targets
        #: What a call plan calls: the multicallable with the provider's headers bound.
        self._callables: dict[str, Any] = {}
        #: The bare multicallable and the provider's headers, by the same keys.
        self._targets: dict[str, tuple[Any, Metadata]] = {}

    @property
    def multicallables(self) -> dict[str, Any]:
        """The callables made so far (each with its provider's headers bound), by provider
        address (read-only for callers: entries appear on a provider's first call and go when
        its channel is dropped)."""
        return self._callables

    @property
    def targets(self) -> dict[str, tuple[Any, Metadata]] | None:
        """The bare multicallables and the headers each sends, by the keys of
        :attr:`multicallables` (entries come and go with theirs), when calling one is
        ``multicallable.__call__(request, timeout, headers)``: a method without gRPC
        arguments of its own (``compression``); else None. A call plan calls them so, which
        costs less than the bound callable (gRPC's multicallable is called as a method, not
        through ``partial`` and the type's call slot)."""
        return None if self._defaults else self._targets

    def no_responses(self) -> Iterator[Any]:
        """No responses: what a blocking caller of a server-streaming method iterates over."""
        return iter(())

    def _target(self, provider: URL, key: str) -> tuple[Any, Metadata]:
        address = provider.address
        pooled = self._pool.channel(provider)
        headers = self._caller.headers(provider) + self._metadata
        if self._interceptors:
            # The interceptors wrap this reference's calls only: nothing to share.
            target, bound = self._make(grpc.intercept_channel(pooled, *self._interceptors), headers)
        else:
            # Every reference to the service calls a provider with the same multicallable and
            # the same headers: made once per shared channel, not once per reference.
            target, bound = self._pool.made_on(
                provider,
                pooled,
                (self.spec, headers, tuple(self._defaults.items())),
                partial(self._make, pooled, headers),
            )
        self._targets[key] = target
        self._callables[key] = bound
        if self._pool.current(address) is not pooled:
            # The pool dropped or replaced this channel while the callable was being made, and
            # may have forgotten the cached callables before this one went in: use it for this
            # call only, or every later call would go to the stale channel.
            self._callables.pop(key, None)
            self._targets.pop(key, None)
        return target

    def _make(self, channel: Any, headers: Metadata) -> tuple[tuple[Any, Metadata], Any]:
        """``((multicallable, headers), bound)``: the method's multicallable on ``channel``
        with the headers it sends, and the multicallable with the headers bound (what a call
        plan calls)."""
        made = self.spec.multicallable(channel)
        return (made, headers), partial(made, metadata=headers, **self._defaults)

    def forget(self, addresses: Iterable[str]) -> None:
        """Drop cached callables for providers whose channels were closed."""
        for address in addresses:
            if self._by_address:
                self._callables.pop(address, None)
                self._targets.pop(address, None)
                continue
            prefix = address + "|"
            for key in [k for k in self._targets if k.startswith(prefix)]:
                self._callables.pop(key, None)
                self._targets.pop(key, None)

    def metadata_for(self, provider: URL, invocation: Invocation) -> Metadata:
        """gRPC metadata of a call to ``provider``: its Triple headers, then the invocation's
        attachments as Dubbo writes them (keys lower-cased with ``tri-header-convert``, ``-bin``
        values as the bytes the caller sent; consumer-side controls such as ``dubbo.retries``
        are not sent)."""
        headers = self._caller.headers(provider) + self._metadata
        if not invocation.attachments:
            return headers
        return headers + metadata_from_attachments(invocation.attachments)

    def __call__(self, provider: URL, invocation: Invocation, timeout: float | None) -> Any:
        key = provider.address if self._by_address else self._caller.key(provider)
        call, metadata = self._targets.get(key) or self._target(provider, key)
        if invocation.attachments:
            metadata = metadata + metadata_from_attachments(invocation.attachments)
        options = invocation.options
        try:
            if options is not None:
                extra = self._pool.security.call_arguments(provider, options, self.spec)
                extra = {**self._defaults, **extra}
                return self._send(call, invocation.request, timeout, metadata, extra)
            if self._unary_response and CALL_SINK.get() is None and not self._defaults:
                return call(invocation.request, timeout=timeout, metadata=metadata)
            return self._send(call, invocation.request, timeout, metadata, self._defaults)
        except ValueError as exc:
            # grpc raises a bare ValueError for a call on a closed channel: the provider was
            # dropped (or its channel replaced) after this call picked it. Nothing was sent, so
            # it is a transport failure the strategy may retry elsewhere.
            if not is_closed_channel(exc):
                raise
            self._callables.pop(key, None)
            self._targets.pop(key, None)
            raise ProviderUnavailable(provider.address, "channel closed") from exc

    def _send(
        self,
        call: Any,
        request: Any,
        timeout: float | None,
        metadata: Metadata,
        extra: Mapping[str, Any],
    ) -> Any:
        sink = CALL_SINK.get()
        if not self._unary_response:
            stream = call(request, timeout=timeout, metadata=metadata, **extra)
            if sink is not None and getattr(sink, "cancellable", False):
                sink.append(stream)  # a hedged attempt that loses cancels it
            return _primed(stream)
        if sink is None:
            return call(request, timeout=timeout, metadata=metadata, **extra)
        if getattr(sink, "cancellable", False):
            # A hedged attempt, which is cancelled if it loses: the grpc.Call is handed over
            # before the answer comes. (gRPC's future API costs more than a blocking call --
            # 276-323 against 120-156 µs CPU per call here -- so only hedged attempts use it.)
            made = call.future(request, timeout=timeout, metadata=metadata, **extra)
            sink.append(made)
            return made.result()
        # A with_call: keep the grpc.Call so the caller can read the provider's metadata.
        response, done = call.with_call(request, timeout=timeout, metadata=metadata, **extra)
        sink.append(done)
        return response


# ----------------------------- the asyncio flavour -----------------------------


class AsyncChannelPool:
    """``grpc.aio`` channels by provider address (they belong to the event loop that made them),
    TLS for providers whose URL says ``tls=true``, as in the blocking pool.

    The channels come from ``shared`` (the application's
    :class:`~dubbo_py.consumer.connections.AsyncSharedChannels`): one per (event loop,
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
        #: How channels to each provider are secured (and so which call arguments they carry).
        self.security = self._security
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


async def _primed_async(stream: Any) -> AsyncIterator[Any]:
    # Read the first response before handing the stream back, so that a dead provider fails
    # inside the strategy, where it can still fail over.
    iterator = stream.__aiter__()
    try:
        first = await iterator.__anext__()
    except StopAsyncIteration:
        return stream_of([])
    return _Primed(first, iterator)


class _Primed:
    """The first response, then the rest of the stream's: after the first, ``__anext__`` hands
    back the stream's own awaitable, so a response costs no coroutine of ours (an async
    generator re-yielding each one did)."""

    __slots__ = ("_first", "_rest")

    def __init__(self, first: Any, rest: AsyncIterator[Any]) -> None:
        self._first: _Ready | None = _Ready(first)
        self._rest = rest

    def __aiter__(self) -> _Primed:
        return self

    def __anext__(self) -> Awaitable[Any]:
        first = self._first
        if first is not None:
            self._first = None
            return first
        return self._rest.__anext__()


class _Ready:
    """An awaitable that is done: awaiting it gives ``value`` without suspending."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __await__(self) -> Generator[Any, None, Any]:
        return self.value
        yield  # a generator function: awaiting it returns at once


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
        self,
        pool: AsyncChannelPool,
        spec: StubMethod,
        *,
        caller: TripleCaller | None = None,
        compression: str | None = None,
    ) -> None:
        super().__init__(spec, caller)
        self._pool = pool
        #: gRPC arguments of every call of the method (its ``compression`` option).
        self._defaults = _compression_arguments(compression)
        # By TripleCaller.key: the channel a callable was made on, the callable, the
        # provider's Triple headers, and those headers as the callable takes them.
        self._callables: dict[str, tuple[grpc.aio.Channel, Any, Metadata, Any]] = {}
        #: What a call plan awaits: the multicallable with the provider's headers bound.
        self._direct: dict[str, Any] = {}
        #: The same multicallables bare, with the headers they take, by the same keys (each
        #: entry comes and goes with ``_direct``'s): see :attr:`targets`.
        self._bare: dict[str, tuple[Any, Any]] = {}
        # Whether calls keep callables for a plan (read on every call of the general path).
        self._plain = self.plain

    @property
    def multicallables(self) -> dict[str, Any]:
        """The callables made so far (each with its provider's headers bound), by provider
        address (read-only for callers: entries appear on a provider's first call and go when
        the pool lets its channel go)."""
        return self._direct

    @property
    def targets(self) -> dict[str, tuple[Any, Any]] | None:
        """The bare multicallables and the headers each takes, by the keys of
        :attr:`multicallables` (entries come and go with theirs), when awaiting one is
        ``multicallable.__call__(request, timeout=timeout, metadata=headers)``: a method
        without gRPC arguments of its own (``compression``); else None. A call plan calls them
        so, which costs less than the bound callable (no ``partial`` and type call slot)."""
        return None if self._defaults else self._bare

    def forget(self, addresses: Iterable[str]) -> None:
        """Drop the plan's callables of these addresses (thread-safe: each is one dict pop);
        a callable of the general path is used only with the channel that made it."""
        for address in addresses:
            self._direct.pop(address, None)
            self._bare.pop(address, None)

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
                self._bare[key] = (made, sent)
                self._direct[key] = partial(made, metadata=sent, **self._defaults)
            return made, headers, sent
        headers = self._caller.headers(provider)
        # The loop's references calling this method with the same headers share one
        # multicallable per channel (and one copy of the headers).
        made, headers, sent = self._pool.made_on(
            provider, channel, (self.spec, headers), partial(self._make, channel, headers)
        )
        self._callables[key] = (channel, made, headers, sent)
        if self._plain:
            self._bare[key] = (made, sent)
            self._direct[key] = partial(made, metadata=sent, **self._defaults)
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
        options = invocation.options
        if options is not None:
            extra = self._pool.security.call_arguments(provider, options, self.spec)
            call = partial(call, **{**self._defaults, **extra})
        elif self._defaults:
            call = partial(call, **self._defaults)
        if self.spec.response_streaming:
            return await _primed_async(call(invocation.request, timeout=timeout, metadata=metadata))
        made = call(invocation.request, timeout=timeout, metadata=metadata)
        response = await made
        sink = CALL_SINK.get()
        if sink is not None:  # a with_call: the caller reads the provider's metadata
            sink.append(made)
        return response
