"""The channel of a reference subscribed to several registries: zone-aware, in front of one
stack per registry (Dubbo's ``ZoneAwareClusterInvoker`` over one cluster invoker per
registry).

Each registry gets the stack a single-registry reference has -- its own directory, router
chain, rules, quarantine, strategy and balancer, built by a
:class:`~dubbo_py.consumer.assembly.ReferenceAssembly` -- and a channel of its own, whose
multicallables keep their compiled call plans. :class:`RegistryStack` adds what the selector
reads, kept current by events rather than computed per call: whether the stack is
*available* (a provider not in quarantine, the registry session not lost). The zone-aware
multicallables pick a stack per call (:class:`~dubbo_py.cluster.zone.ZoneSelector`: preferred,
then the call's zone, then weighted random among the available) and call its multicallable.
When that call fails because no provider of the registry could be reached (a
:class:`~dubbo_py.errors.ClusterError` with ``UNAVAILABLE``: the call never ran), the next
registry in the same order is tried with what is left of the deadline; a call forced to its
zone (``registry_zone_force=true``) tries only that zone's registries.

Connections are shared across the stacks: every stack's channel pool takes its gRPC channels
from the application's shared channels, one per provider address, so a provider registered in
two registries is one connection.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import InitVar, dataclass, field
from typing import Any, TypeVar

import grpc

from dubbo_py.call_errors import ClusterError
from dubbo_py.cluster.support.pool import LazyPool
from dubbo_py.cluster.zone import REGISTRY_ZONE, REGISTRY_ZONE_FORCE, ZoneForcedError, ZoneSelector
from dubbo_py.config.model import RegistryConfig
from dubbo_py.consumer.assembly import ReferenceAssembly
from dubbo_py.consumer.channel import AsyncCallForms, CallForms
from dubbo_py.consumer.method import MethodFactories, StubMethod
from dubbo_py.invocation import CallOptions
from dubbo_py.registry.registry import Registry
from dubbo_py.registry.store.base import SessionState
from dubbo_py.router.chain import BoundChain

__all__ = ["AsyncZoneAwareChannel", "RegistryStack", "ZoneAwareChannel", "call_zone"]

_UNAVAILABLE = grpc.StatusCode.UNAVAILABLE


def call_zone(metadata: Any) -> tuple[str | None, bool]:
    """The call's ``registry_zone`` and whether ``registry_zone_force`` is ``true``, from its
    metadata (gRPC's sequence of key/value pairs)."""
    zone: str | None = None
    force = False
    for key, value in metadata:
        if key == REGISTRY_ZONE:
            zone = value.decode() if isinstance(value, bytes) else str(value)
        elif key == REGISTRY_ZONE_FORCE:
            text = value.decode() if isinstance(value, bytes) else str(value)
            force = text.strip().lower() == "true"
    return zone or None, force


@dataclass(eq=False, repr=False)
class RegistryStack:
    """One registry's stack of a reference: the assembly, its channel and the registry's
    settings, with :attr:`available` kept current (see the module doc)."""

    name: str
    config: InitVar[RegistryConfig]
    registry: Registry | None
    assembly: ReferenceAssembly[Any]
    #: The stack's own channel (a :class:`~dubbo_py.consumer.channel.ClusterChannel` or its
    #: asyncio flavour).
    channel: Any
    #: Whether the stack has a provider outside the quarantine and a live registry
    #: session; read by the selector on every call, so it is a plain attribute.
    available: bool = field(default=False, init=False)

    def __post_init__(self, config: RegistryConfig) -> None:
        # What the selector reads of the registry's settings, as plain attributes.
        self.zone = config.zone
        self.weight = config.weight
        self.preferred = config.preferred
        self._session_up = self.registry.connected if self.registry is not None else True

    def watch(self) -> None:
        """Keep :attr:`available` current: on each new chain, quarantine change and registry
        session event (before the stack starts, so its first chain is seen)."""
        self.assembly.directory.add_listener(self._on_chain)
        self.assembly.quarantine.on_change(lambda _event: self._refresh())
        if self.registry is not None:
            self.registry.store.add_session_listener(self._on_session)
        self._refresh()

    def _on_chain(self, _bound: BoundChain) -> None:
        self._refresh()

    def _on_session(self, state: SessionState) -> None:
        self._session_up = state is not SessionState.SUSPENDED
        self._refresh()

    def _refresh(self) -> None:
        providers = self.assembly.directory.chain.snapshot.providers
        healthy = self.assembly.quarantine.partition(providers)[0] if providers else ()
        self.available = self._session_up and bool(healthy)

    def __repr__(self) -> str:
        return (
            f"RegistryStack({self.name!r}, zone={self.zone!r}, weight={self.weight}, "
            f"preferred={self.preferred}, available={self.available})"
        )


class _ZoneSite:
    """What both flavours' zone-aware multicallables share: the stacks' multicallables for
    one method, the selector, and whether a failed call may go on to another registry."""

    def __init__(self, method: StubMethod, subs: Sequence[Any], selector: ZoneSelector) -> None:
        self._service = method.service
        self._method = method.name
        self._subs = tuple(subs)
        self._selector = selector
        # A request stream is read once: never replayed on another registry.
        self._fallover = not method.request_streaming

    def _first(self, metadata: Any) -> tuple[int, str | None, bool]:
        zone, force = call_zone(metadata) if metadata else (None, False)
        try:
            return self._selector.choose(zone, force), zone, force
        except ZoneForcedError as exc:
            raise ClusterError(self._service, self._method, (), str(exc)) from None

    def _next(self, error: ClusterError, tried: list[int], zone: str | None, force: bool) -> int:
        """The next stack after a transport failure of the last one (``error`` again when there
        is none, or the failure was not one that never reached a provider)."""
        if not self._fallover or error.code() is not _UNAVAILABLE:
            raise error
        index = self._selector.pick(zone, force, tried)
        if index is None:
            raise error
        return index


def _remaining(timeout: float | None, started: float) -> float | None:
    if timeout is None:
        return None
    return max(0.0, timeout - (time.monotonic() - started))


def _calling(request: Any, metadata: Any, *extra: Any) -> Callable[[Any, float | None], Any]:
    """The call of a registry's blocking multicallable with these arguments and the time
    left (made here, so that ``__call__`` holds no closure: its variables stay plain
    locals)."""
    return lambda sub, left: sub(request, left, metadata, *extra)


class _ZoneMultiCallable(_ZoneSite, CallForms):
    """A stub method of a zone-aware channel: ``stub.Method(request, timeout=...,
    metadata=...)``, ``.with_call`` and ``.future``."""

    _futures = LazyPool(32, "dubbo-zone-future")

    def __call__(
        self,
        request: Any,
        timeout: float | None = None,
        metadata: Any = None,
        credentials: grpc.CallCredentials | None = None,
        wait_for_ready: bool | None = None,
        compression: grpc.Compression | None = None,
    ) -> Any:
        if metadata:
            index, zone, force = self._first(metadata)
        else:
            # The common call: no attachment, so the application's zone decides.
            index, zone, force = self._selector.default(), None, False
        started = time.monotonic() if timeout is not None else 0.0
        try:
            return self._subs[index](
                request, timeout, metadata, credentials, wait_for_ready, compression
            )
        except ClusterError as error:
            # gRPC's per-call arguments go to the registry's multicallable, on a fall-over too.
            again = _calling(request, metadata, credentials, wait_for_ready, compression)
            return self._fall_over(error, index, zone, force, timeout, started, again)

    def _with_call(
        self, request: Any, timeout: float | None, metadata: Any, options: CallOptions | None
    ) -> tuple[Any, Any]:
        return self._tried(  # type: ignore[no-any-return]
            metadata, timeout, lambda sub, left: sub._with_call(request, left, metadata, options)
        )

    def _tried(
        self, metadata: Any, timeout: float | None, call: Callable[[Any, float | None], Any]
    ) -> Any:
        """``call`` (a registry's multicallable, the time left) on the registry the selector
        picks, then on the next after each failure that never reached a provider (what
        ``__call__`` does, written out there)."""
        index, zone, force = self._first(metadata)
        started = time.monotonic()
        try:
            return call(self._subs[index], timeout)
        except ClusterError as error:
            return self._fall_over(error, index, zone, force, timeout, started, call)

    def _fall_over(
        self,
        error: ClusterError,
        index: int,
        zone: str | None,
        force: bool,
        timeout: float | None,
        started: float,
        call: Callable[[Any, float | None], Any],
    ) -> Any:
        tried = [index]
        while True:
            index = self._next(error, tried, zone, force)
            tried.append(index)
            try:
                return call(self._subs[index], _remaining(timeout, started))
            except ClusterError as again:
                error = again


class _AsyncZoneMultiCallable(_ZoneSite, AsyncCallForms):
    """A stub method of an asyncio zone-aware channel: ``await stub.Method(request)``,
    ``async for`` over a server-streaming one, ``await ....with_call``; each form is the
    registry's multicallable's (:class:`~dubbo_py.consumer.channel.AsyncCallForms`)."""

    def __init__(self, method: StubMethod, subs: Sequence[Any], selector: ZoneSelector) -> None:
        super().__init__(method, subs, selector)
        self._streaming = method.response_streaming

    def _unary(
        self, request: Any, timeout: float | None, metadata: Any, options: CallOptions | None
    ) -> Awaitable[Any]:
        return self._tried("_unary", request, timeout, metadata, options)

    async def _stream(
        self, request: Any, timeout: float | None, metadata: Any, options: CallOptions | None
    ) -> AsyncIterator[Any]:
        # A stream that has begun cannot move: the registry is chosen once.
        index = self._first(metadata)[0]
        async for response in self._subs[index]._stream(request, timeout, metadata, options):
            yield response

    def _with_call(
        self, request: Any, timeout: float | None, metadata: Any, options: CallOptions | None
    ) -> Awaitable[tuple[Any, Any]]:
        return self._tried("_with_call", request, timeout, metadata, options)

    async def _tried(
        self,
        form: str,
        request: Any,
        timeout: float | None,
        metadata: Any,
        options: CallOptions | None,
    ) -> Any:
        """The call in ``form`` (``_unary`` or ``_with_call``) of the registry's multicallable
        the selector picks, then of the next after each failure that never reached a
        provider, with what is left of ``timeout``."""
        index, zone, force = self._first(metadata)
        started = time.monotonic()
        tried = [index]
        while True:
            sub = getattr(self._subs[index], form)
            try:
                return await sub(request, _remaining(timeout, started), metadata, options)
            except ClusterError as error:
                index = self._next(error, tried, zone, force)
                tried.append(index)


M = TypeVar("M", _ZoneMultiCallable, _AsyncZoneMultiCallable)


class _ZoneChannel(MethodFactories[M]):
    """What both flavours' zone-aware channels share: the stacks, the selector, and a
    multicallable of the flavour (``_kind``) over the stacks' own for each method."""

    _kind: Callable[[StubMethod, Sequence[Any], ZoneSelector], M]

    def __init__(self, stacks: Sequence[RegistryStack], zone: str | None = None) -> None:
        self.stacks = tuple(stacks)
        self.selector = ZoneSelector(self.stacks, zone)

    def _multicallable(self, method: StubMethod) -> M:
        subs = [s.channel._multicallable(method) for s in self.stacks]
        return self._kind(method, subs, self.selector)


class ZoneAwareChannel(_ZoneChannel[_ZoneMultiCallable], grpc.Channel):
    """A ``grpc.Channel`` look-alike in front of one :class:`RegistryStack` per registry (see
    the module doc); ``zone`` is the application's."""

    _kind = _ZoneMultiCallable

    def subscribe(self, callback: Any, try_to_connect: bool = False) -> None:
        """Connectivity callbacks have no single meaning for a cluster; accepted and ignored."""

    def unsubscribe(self, callback: Any) -> None:
        """See :meth:`subscribe`."""

    def close(self) -> None:
        """Close every stack's provider channels."""
        for stack in self.stacks:
            stack.channel.close()

    def __enter__(self) -> ZoneAwareChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncZoneAwareChannel(_ZoneChannel[_AsyncZoneMultiCallable]):
    """The asyncio flavour of :class:`ZoneAwareChannel` (a ``grpc.aio.Channel``
    look-alike)."""

    _kind = _AsyncZoneMultiCallable

    async def close(self) -> None:
        """Close every stack's provider channels (on the loop that made them)."""
        for stack in self.stacks:
            await stack.channel.close()
