"""ClusterChannel: a ``grpc.Channel`` look-alike that routes every call through the cluster.

Users keep their generated stubs — ``GreeterStub(channel)`` — because a stub only asks its
channel for multicallables. The channel asks its reference's stack
(:class:`~dubbo_py.consumer.assembly.ReferenceAssembly`) to bind each method; the multicallable
builds an :class:`~dubbo_py.invocation.Invocation` per call and hands it to the method's call --
the cluster strategy, which routes, balances, calls and retries, inside the method's filters.
Plain failover calls run a compiled call plan in the multicallable's own frame instead, with
the plan hooks of the method's filters (metrics) around the call when every filter has one.
gRPC's per-call arguments (``credentials=``, ``wait_for_ready=``, ``compression=``) go with the
invocation (:class:`~dubbo_py.invocation.CallOptions`) through the method's stack to every
provider call; a call giving any of them does not take the plan.

Both flavours live here: the blocking ClusterChannel first, then the asyncio one. What gRPC
offers besides the blocking call (``with_call``, ``future``) and the asyncio forms are
:class:`CallForms` and :class:`AsyncCallForms`, which the zone-aware channels
(:mod:`dubbo_py.consumer.zone_channel`) share.

AsyncClusterChannel: the asyncio flavour of :mod:`dubbo_py.consumer.channel`.

``await app.reference_async(GreeterStub)`` returns the generated stub bound to an
:class:`AsyncClusterChannel`: ``await stub.SayHello(req)`` and ``async for r in
stub.SayHelloStream(req)`` are routed, balanced and retried exactly as in the blocking flavour
-- the same directory, router chain, load balancer, quarantine and retry budget, wired by the
same :class:`~dubbo_py.consumer.assembly.ReferenceAssembly`; only the provider call, the strategy
and the filters are awaited. Plain failover calls of unary methods run the method's compiled call
plan, as in the blocking flavour (:mod:`dubbo_py.consumer.planned`), and await failover's first
attempt on the provider it picks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass
from time import monotonic, time_ns
from typing import Any, ClassVar

import grpc

from dubbo_py.call_errors import is_closed_channel
from dubbo_py.cluster.plan import CallPlan
from dubbo_py.cluster.strategies.failover import (
    first_attempt,
    first_attempt_async,
    first_attempt_failed,
    first_attempt_failed_async,
)
from dubbo_py.cluster.support.pool import LazyPool
from dubbo_py.consumer.filters import AsyncCall, Call
from dubbo_py.consumer.method import BoundMethod, StubChannel, StubMethod
from dubbo_py.consumer.planned import PlannedSite
from dubbo_py.invocation import CallOptions, Invocation
from dubbo_py.protocol.triple import CALL_SINK, Metadata, from_wire
from dubbo_py.router.offloop import settle_scripts
from dubbo_py.url import URL

__all__ = ["AsyncCallForms", "AsyncClusterChannel", "CallForms", "CallResult", "ClusterChannel"]


class _Call:
    """The bits of ``grpc.Call`` that ``with_call`` users read, from the provider call that
    answered (its metadata with Dubbo's ``tri-header-convert`` undone, so a provider's
    ``traceId`` reads as ``traceId``); OK and empty when no provider answered (a mock)."""

    def __init__(self, call: Any = None) -> None:
        self._call = call

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.OK if self._call is None else self._call.code()

    def details(self) -> str:
        return "" if self._call is None else str(self._call.details() or "")

    def initial_metadata(self) -> Metadata:
        return () if self._call is None else from_wire(self._call.initial_metadata())

    def trailing_metadata(self) -> Metadata:
        return () if self._call is None else from_wire(self._call.trailing_metadata())


class CallForms:
    """The forms of a blocking gRPC call besides the call itself, ``.with_call`` and
    ``.future``, for both blocking channels (this module's and the zone-aware one,
    :mod:`dubbo_py.consumer.zone_channel`). Each multicallable writes its own ``__call__`` (one
    frame: it runs on every call) and ``_with_call``, which takes gRPC's per-call arguments
    checked (a :class:`~dubbo_py.invocation.CallOptions`, None when none is given)."""

    #: Where ``future`` runs the calls.
    _futures: ClassVar[LazyPool]
    #: The call itself (``stub.Method(request, ...)``), which ``future`` runs.
    __call__: Callable[..., Any]

    def with_call(
        self,
        request: Any,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        credentials: grpc.CallCredentials | None = None,
        wait_for_ready: bool | None = None,
        compression: grpc.Compression | None = None,
    ) -> tuple[Any, Any]:
        """The call, and a ``grpc.Call``-like view of the provider call that answered (its
        trailing metadata carries the provider's attachments)."""
        options = CallOptions.of(credentials, wait_for_ready, compression)
        return self._with_call(request, timeout, metadata, options)

    def _with_call(
        self, request: Any, timeout: float | None, metadata: Any, options: CallOptions | None
    ) -> tuple[Any, Any]:
        raise NotImplementedError

    def future(
        self,
        request: Any,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        credentials: grpc.CallCredentials | None = None,
        wait_for_ready: bool | None = None,
        compression: grpc.Compression | None = None,
    ) -> futures.Future[Any]:
        """Run the call on a shared thread pool (a ``concurrent.futures.Future``)."""
        # The arguments are checked now, in the caller's frame.
        CallOptions.of(credentials, wait_for_ready, compression)
        return self._futures.get().submit(
            self, request, timeout, metadata, credentials, wait_for_ready, compression
        )


@contextmanager
def _recording(site: _MultiCallable | _AsyncMultiCallable) -> Iterator[list[Any]]:
    """Around a ``with_call`` of ``site``: the call counted in flight (see
    dubbo_py/consumer/in_flight.py), and the provider calls it makes collected (the last one
    answered)."""
    with site._in_flight.counted(site._service, site._method):
        made: list[Any] = []
        token = CALL_SINK.set(made)
        try:
            yield made
        finally:
            CALL_SINK.reset(token)


class _MultiCallable(PlannedSite, CallForms):
    """What a stub calls for one method: ``stub.Method(request, timeout=..., metadata=...,
    credentials=..., wait_for_ready=..., compression=...)``, ``.with_call`` and ``.future``."""

    _futures = LazyPool(32, "dubbo-future")

    def __init__(self, bound: BoundMethod[Call], attachments: Mapping[str, str]) -> None:
        super().__init__(bound, attachments)
        self._invoke = bound.call
        self._in_flight = bound.in_flight

    def __call__(
        self,
        request: Any,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        credentials: grpc.CallCredentials | None = None,
        wait_for_ready: bool | None = None,
        compression: grpc.Compression | None = None,
    ) -> Any:
        # Counted while it runs, so that closing the application lets it finish
        # (dubbo_py/consumer/in_flight.py); written out (no enter/leave calls): it runs on every
        # call.
        in_flight = self._in_flight
        running = in_flight.running
        running.append(None)
        try:
            if in_flight.closing:
                raise in_flight.refused(self._service, self._method)
            # The common call, in this one frame: plain, under a current express plan (no
            # router reading the request, no filter hooks; dubbo_py/cluster/plan.py), nothing
            # quarantined. The checks are PlannedSite._provider's; routing, balancing and
            # failover's first attempt (first_attempt) are written out, since each frame of
            # theirs cost about 700 instructions per call (bench/bench_instructions.py).
            # Anything else takes _general, which is this method as it was before.
            plan = self._plan
            ctx = self._context
            quarantine = ctx.quarantine
            if (
                plan is None
                or not plan.express
                or metadata
                or credentials is not None
                or wait_for_ready is not None
                or compression is not None
                or plan.chain is not ctx.routes.chain
                or plan.balancer is not ctx.balancer
                or plan.settings is not ctx.settings[self._method]
                or plan.invoker is not ctx.call
                or type(request) is not plan.request_type
                or (quarantine is not None and quarantine.addresses)
            ):
                return self._general(
                    request, timeout, metadata, credentials, wait_for_ready, compression
                )
            provider = plan.only
            if provider is None:  # several candidates: balance (PlannedSite._provider's way)
                mask = plan.mask
                pick = plan.picks.get(mask)
                now_ms = time_ns() // 1_000_000
                if pick is None or now_ms >= pick.valid_until_ms:
                    pick = plan.pick_for(mask, now_ms)
                provider = pick.only
                if provider is None:
                    if pick.pick is None:  # a balancer without a picker
                        provider = ctx.balancer.select(
                            pick.candidates, Invocation(self._service, self._method, request)
                        )
                    else:
                        provider = pick.pick(now_ms)
                        if provider is None:
                            balanced = Invocation(self._service, self._method, request)
                            provider = plan.rebalance(mask, now_ms, balanced)
            if timeout is None:
                timeout = plan.timeout
            # Failover's first attempt (first_attempt, written out): the request counted in
            # the retry budget, the provider's multicallable called as gRPC's stub would,
            # with its headers; a failure goes on as failover does.
            budget = ctx.budget
            if budget is not None:
                # The clock read as an attribute, then called: `budget.clock()` is a method
                # look-up CPython cannot specialise for an instance attribute.
                clock = budget.clock
                if clock() >= budget.next_fold:
                    budget.fold()
                budget.requests.append(None)
            started = 0.0 if timeout is None else monotonic()
            targets = plan.targets
            assert targets is not None
            try:
                made, headers = targets[provider.address]
            except KeyError:  # not called yet, or its channel dropped: the invoker makes it
                made = headers = None
            invocation: Invocation | None = None
            try:
                if made is not None:
                    try:
                        # As the invoker calls it (made(request, timeout=..., metadata=...)),
                        # as a method: no tuple and dict of arguments, no type call slot.
                        response = made.__call__(request, timeout, headers)
                    except ValueError as exc:
                        if not is_closed_channel(exc):
                            raise
                        # The provider's channel was closed after this call picked it (it
                        # left): the provider call below makes that a transport failure.
                        made = None
                if made is None:
                    invocation = Invocation(ctx.service, self._method, request, timeout=timeout)
                    response = ctx.call(provider, invocation, timeout)
            except grpc.RpcError as error:
                first = (self._method, request, timeout, started)
                return first_attempt_failed(ctx, invocation, first, provider, error)
            outliers = ctx.outliers
            if outliers is not None and outliers.failing:
                outliers.succeeded(provider.address)
            return response
        finally:
            running.pop()

    def _general(
        self,
        request: Any,
        timeout: float | None,
        metadata: Metadata | None,
        credentials: grpc.CallCredentials | None,
        wait_for_ready: bool | None,
        compression: grpc.Compression | None,
    ) -> Any:
        """A call :meth:`__call__` does not make in its own frame (counted in flight there):
        a plan's routing and balancing (:meth:`_provider`) and failover's first attempt, or
        the method's stack."""
        plan = self._plan
        if credentials is None and wait_for_ready is None and compression is None:
            provider = self._provider(plan, request, metadata)
        else:  # gRPC's per-call arguments go with the invocation, through the stack
            options = CallOptions(credentials, wait_for_ready, compression)
            return self._call(request, timeout, metadata, options)
        if provider is None:
            return self._call(request, timeout, metadata)
        assert plan is not None
        if timeout is None:
            timeout = plan.timeout
        ctx = self._context
        direct = plan.multicallables.get(provider.address)
        observers = plan.observers
        if observers is None:
            return first_attempt(ctx, provider, self._method, request, timeout, direct=direct)
        # The filters' plan hooks record what the filters would (dubbo_py/cluster/plan.py).
        token = observers.start(provider)
        try:
            response = first_attempt(
                ctx,
                provider,
                self._method,
                request,
                timeout,
                direct=direct,
                call=plan.plain_call,
            )
        except BaseException as error:
            observers.finish(token, error)
            raise
        observers.finish(token, None)
        return response

    def _call(
        self,
        request: Any,
        timeout: float | None,
        metadata: Metadata | None,
        options: CallOptions | None = None,
    ) -> Any:
        """A call the plan does not cover: compile a plan first when the call is plain and
        none is current, then run the call through the method's stack."""
        if options is None:
            self._replan(request, metadata)
        return self._invoke(self._invocation(request, timeout, metadata, options))

    def _with_call(
        self, request: Any, timeout: float | None, metadata: Any, options: CallOptions | None
    ) -> tuple[Any, _Call]:
        with _recording(self) as made:
            response = self._call(request, timeout, metadata, options)
        return response, _Call(made[-1] if made else None)


class ClusterChannel(StubChannel[Call, _MultiCallable], grpc.Channel):
    """A channel whose calls go through a reference's stack instead of one connection:
    ``binder`` wires each method a stub asks for (see :class:`~dubbo_py.consumer.method.
    MethodBinder`); ``attachments`` go with every call; ``on_close`` closes the provider
    channels."""

    def _multicallable(self, method: StubMethod) -> _MultiCallable:
        return _MultiCallable(self._binder.bind(method), self.attachments)

    def subscribe(self, callback: Callable[..., None], try_to_connect: bool = False) -> None:
        """Connectivity callbacks have no single meaning for a cluster; accepted and ignored."""

    def unsubscribe(self, callback: Callable[..., None]) -> None:
        """See :meth:`subscribe`."""

    def close(self) -> None:
        """Close the provider channels behind this channel (its reference's pool)."""
        if self._on_close is not None:
            self._on_close()

    def __enter__(self) -> ClusterChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ----------------------------- the asyncio flavour -----------------------------


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


class AsyncCallForms:
    """The forms of an asyncio gRPC call (``grpc.aio``), ``await stub.Method(request)``,
    ``async for`` over a server-streaming one and ``await ....with_call``, for both asyncio
    channels (this module's and the zone-aware one). Each multicallable writes ``_unary``,
    ``_stream`` and ``_with_call``, which take gRPC's per-call arguments checked (a
    :class:`~dubbo_py.invocation.CallOptions`, None when none is given)."""

    _streaming: bool

    def __call__(
        self,
        request: Any,
        *,
        timeout: float | None = None,
        metadata: Any = None,
        credentials: grpc.CallCredentials | None = None,
        wait_for_ready: bool | None = None,
        compression: grpc.Compression | None = None,
    ) -> Any:
        if credentials is None and wait_for_ready is None and compression is None:
            options = None
        else:  # checked here, when the call is made, as grpc.aio does
            options = CallOptions(credentials, wait_for_ready, compression)
        if self._streaming:
            return self._stream(request, timeout, metadata, options)
        return self._unary(request, timeout, metadata, options)

    async def with_call(
        self,
        request: Any,
        *,
        timeout: float | None = None,
        metadata: Any = None,
        credentials: grpc.CallCredentials | None = None,
        wait_for_ready: bool | None = None,
        compression: grpc.Compression | None = None,
    ) -> tuple[Any, CallResult]:
        """``await stub.Method.with_call(request)``: the response and what the provider call
        that answered sent besides it (:class:`CallResult`: its trailing metadata carries the
        provider's attachments). For unary-response methods, as in blocking gRPC."""
        if self._streaming:
            raise TypeError("with_call is for methods answering with one response")
        options = CallOptions.of(credentials, wait_for_ready, compression)
        return await self._with_call(request, timeout, metadata, options)

    def _unary(
        self, request: Any, timeout: float | None, metadata: Any, options: CallOptions | None
    ) -> Awaitable[Any]:
        raise NotImplementedError

    def _stream(
        self, request: Any, timeout: float | None, metadata: Any, options: CallOptions | None
    ) -> AsyncIterator[Any]:
        raise NotImplementedError

    def _with_call(
        self, request: Any, timeout: float | None, metadata: Any, options: CallOptions | None
    ) -> Awaitable[tuple[Any, CallResult]]:
        raise NotImplementedError


class _AsyncMultiCallable(PlannedSite, AsyncCallForms):
    """What a stub calls for one method: ``await stub.Method(request, timeout=...,
    metadata=...)``, ``async for`` over a server-streaming one, ``await ....with_call``."""

    def __init__(self, bound: BoundMethod[AsyncCall], attachments: Mapping[str, str]) -> None:
        super().__init__(bound, attachments)
        self._in_flight = bound.in_flight
        call, context = bound.call, self._context

        async def invoke(invocation: Invocation) -> Any:
            # A script rule's run waits for the sandbox: never on the loop (see settle_scripts).
            await settle_scripts(context.routes.chain, invocation)
            return await call(invocation)

        self._invoke = invoke

    async def _unary(
        self, request: Any, timeout: float | None, metadata: Any, options: CallOptions | None
    ) -> Any:
        # Counted while it runs, so that closing the application lets it finish
        # (dubbo_py/consumer/in_flight.py), from when it is awaited (a coroutine starts then);
        # written out, routing by the plan included: it runs on every call.
        in_flight = self._in_flight
        running = in_flight.running
        running.append(None)
        try:
            if in_flight.closing:
                raise in_flight.refused(self._service, self._method)
            if options is not None:  # gRPC's per-call arguments: through the stack
                return await self._invoke(self._invocation(request, timeout, metadata, options))
            # The common call in this one coroutine, as the blocking flavour's __call__ makes
            # it (the same checks, the same routing and balancing, failover's first attempt,
            # first_attempt_async, written out); anything else takes _general.
            plan = self._plan
            ctx = self._context
            quarantine = ctx.quarantine
            if (
                plan is None
                or not plan.express
                or metadata
                or plan.chain is not ctx.routes.chain
                or plan.balancer is not ctx.balancer
                or plan.settings is not ctx.settings[self._method]
                or plan.invoker is not ctx.call
                or type(request) is not plan.request_type
                or (quarantine is not None and quarantine.addresses)
            ):
                return await self._general(plan, request, timeout, metadata)
            provider = plan.only
            if provider is None:  # several candidates: balance (PlannedSite._provider's way)
                mask = plan.mask
                pick = plan.picks.get(mask)
                now_ms = time_ns() // 1_000_000
                if pick is None or now_ms >= pick.valid_until_ms:
                    pick = plan.pick_for(mask, now_ms)
                provider = pick.only
                if provider is None:
                    if pick.pick is None:  # a balancer without a picker
                        provider = ctx.balancer.select(
                            pick.candidates, Invocation(self._service, self._method, request)
                        )
                    else:
                        provider = pick.pick(now_ms)
                        if provider is None:
                            balanced = Invocation(self._service, self._method, request)
                            provider = plan.rebalance(mask, now_ms, balanced)
            if timeout is None:
                timeout = plan.timeout
            budget = ctx.budget
            if budget is not None:
                clock = budget.clock  # read, then called: see the blocking __call__
                if clock() >= budget.next_fold:
                    budget.fold()
                budget.requests.append(None)
            started = 0.0 if timeout is None else monotonic()
            targets = plan.targets
            assert targets is not None
            try:
                made, headers = targets[provider.address]
            except KeyError:  # not called yet, or forgotten: the invoker makes it
                made = headers = None
            invocation: Invocation | None = None
            try:
                if made is not None:
                    try:
                        response = await made.__call__(request, timeout=timeout, metadata=headers)
                    except grpc.aio.UsageError:
                        # The provider's channel was closed after this call picked it
                        # (grpc.aio says so before sending anything): the provider call
                        # below gets a fresh one.
                        made = None
                if made is None:
                    invocation = Invocation(ctx.service, self._method, request, timeout=timeout)
                    response = await ctx.call(provider, invocation, timeout)
            except grpc.RpcError as error:
                first = (self._method, request, timeout, started)
                return await first_attempt_failed_async(ctx, invocation, first, provider, error)
            outliers = ctx.outliers
            if outliers is not None and outliers.failing:
                outliers.succeeded(provider.address)
            return response
        finally:
            running.pop()

    async def _general(
        self, plan: CallPlan | None, request: Any, timeout: float | None, metadata: Any
    ) -> Any:
        """A plain call :meth:`_unary` does not make itself (counted in flight there): a
        plan's routing and balancing (:meth:`_provider`) and failover's first attempt, or the
        method's stack."""
        provider = self._provider(plan, request, metadata)
        if provider is None:
            self._replan(request, metadata)
            return await self._invoke(self._invocation(request, timeout, metadata))
        assert plan is not None
        if timeout is None:
            timeout = plan.timeout
        direct = plan.multicallables.get(provider.address)
        if plan.observers is None:
            return await first_attempt_async(
                self._context, provider, self._method, request, timeout, direct=direct
            )
        return await self._observed(plan, provider, request, timeout, direct)

    async def _observed(
        self, plan: CallPlan, provider: URL, request: Any, timeout: float | None, direct: Any
    ) -> Any:
        # The filters' plan hooks record what the filters would (dubbo_py/cluster/plan.py),
        # from when the call is awaited, as the filters do.
        observers = plan.observers
        assert observers is not None
        token = observers.start(provider)
        try:
            response = await first_attempt_async(
                self._context,
                provider,
                self._method,
                request,
                timeout,
                direct=direct,
                call=plan.plain_call,
            )
        except BaseException as error:
            observers.finish(token, error)
            raise
        observers.finish(token, None)
        return response

    def _stream(
        self, request: Any, timeout: float | None, metadata: Any, options: CallOptions | None
    ) -> AsyncIterator[Any]:
        return _OpeningStream(self, self._invocation(request, timeout, metadata, options))

    async def _with_call(
        self, request: Any, timeout: float | None, metadata: Any, options: CallOptions | None
    ) -> tuple[Any, CallResult]:
        with _recording(self) as made:
            response = await self._invoke(self._invocation(request, timeout, metadata, options))
        if not made:
            return response, CallResult()
        answered = made[-1]
        return response, CallResult(
            await answered.code(),
            str(await answered.details() or ""),
            from_wire(await answered.initial_metadata()),
            from_wire(await answered.trailing_metadata()),
        )


class _OpeningStream:
    """A server-streaming call's replies (``async for``): the call is made when the first
    reply is awaited, counted in flight until its stream is open (see
    dubbo_py/consumer/in_flight.py); after that each ``__anext__`` is the stream's own, so a
    reply costs no coroutine of ours (an async generator re-yielding each reply did). Once
    the call failed or the replies ended, it is over, as an async generator is."""

    __slots__ = ("_invocation", "_replies", "_site")

    def __init__(self, site: _AsyncMultiCallable, invocation: Invocation) -> None:
        self._site: _AsyncMultiCallable | None = site
        self._invocation = invocation
        self._replies: AsyncIterator[Any] | None = None

    def __aiter__(self) -> _OpeningStream:
        return self

    def __anext__(self) -> Awaitable[Any]:
        replies = self._replies
        if replies is not None:
            return replies.__anext__()
        return self._open()

    async def _open(self) -> Any:
        site, self._site = self._site, None
        if site is None:  # failed to open, closed, or another __anext__ is opening it
            raise StopAsyncIteration
        # Counted until the stream is open (see dubbo_py/consumer/in_flight.py).
        with site._in_flight.counted(site._service, site._method):
            responses = await site._invoke(self._invocation)
        replies = responses.__aiter__()
        self._replies = replies
        return await replies.__anext__()

    async def aclose(self) -> None:
        """Stop: later ``__anext__`` calls end the iteration (as an async generator's)."""
        self._site = None
        self._replies = None


class AsyncClusterChannel(StubChannel[AsyncCall, _AsyncMultiCallable]):
    """A ``grpc.aio.Channel`` look-alike: generated stubs work unchanged, for all four kinds of
    method (client-streaming ones fail fast, as in the blocking flavour). Built like
    :class:`~dubbo_py.consumer.channel.ClusterChannel`: ``binder`` wires each method,
    ``attachments`` go with every call, ``on_close`` closes the provider channels (awaited)."""

    def _multicallable(self, method: StubMethod) -> _AsyncMultiCallable:
        return _AsyncMultiCallable(self._binder.bind(method), self.attachments)

    async def close(self) -> None:
        """Close the provider channels behind this channel (its reference's pool)."""
        if self._on_close is not None:
            await self._on_close()
