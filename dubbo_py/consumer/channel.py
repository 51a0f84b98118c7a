"""ClusterChannel: a ``grpc.Channel`` look-alike that routes every call through the cluster.

Users keep their generated stubs — ``GreeterStub(channel)`` — because a stub only asks its
channel for multicallables. The channel asks its reference's stack
(:class:`~dubbo_py.consumer.assembly.ReferenceAssembly`) to bind each method; the multicallable
builds an :class:`~dubbo_py.invocation.Invocation` per call and hands it to the method's call --
the cluster strategy, which routes, balances, calls and retries, inside the method's filters.
Plain failover calls run a compiled call plan in the multicallable's own frame instead, with
the plan hooks of the method's filters (metrics) around the call when every filter has one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent import futures
from typing import Any

import grpc

from dubbo_py.cluster.strategies.failover import first_attempt
from dubbo_py.cluster.support.pool import LazyPool
from dubbo_py.consumer.filters import Call
from dubbo_py.consumer.method import BoundMethod, StubChannel, StubMethod
from dubbo_py.consumer.planned import PlannedSite
from dubbo_py.protocol.triple import CALL_SINK, from_wire
from dubbo_py.protocol.triple import Metadata as Metadata_

__all__ = ["ClusterChannel"]

Metadata = Sequence[tuple[str, str | bytes]] | None

_futures = LazyPool(32, "dubbo-future")


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

    def initial_metadata(self) -> Metadata_:
        return () if self._call is None else from_wire(self._call.initial_metadata())

    def trailing_metadata(self) -> Metadata_:
        return () if self._call is None else from_wire(self._call.trailing_metadata())


class _MultiCallable(PlannedSite):
    """What a stub calls for one method: ``stub.Method(request, timeout=..., metadata=...)``,
    ``.with_call`` and ``.future``."""

    def __init__(self, bound: BoundMethod[Call], attachments: Mapping[str, str]) -> None:
        super().__init__(bound, attachments)
        self._invoke = bound.call
        self._in_flight = bound.in_flight

    def __call__(
        self,
        request: Any,
        timeout: float | None = None,
        metadata: Metadata = None,
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
            # The attempt is failover's first_attempt: calling it rather than writing it out
            # here measured within noise (bench/bench_client_overhead.py, 3 interleaved runs:
            # roundrobin over 3 providers 5.1-6.2 us against 5.9-7.3 us written out, random
            # over one 2.9-3.3 us against 2.3-3.1 us).
            plan = self._plan
            provider = self._provider(plan, request, metadata)
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
        finally:
            running.pop()

    def _call(self, request: Any, timeout: float | None, metadata: Metadata) -> Any:
        """A call the plan does not cover: compile a plan first when the call is plain and
        none is current, then run the call through the method's stack."""
        self._replan(request, metadata)
        return self._invoke(self._invocation(request, timeout, metadata))

    def with_call(
        self,
        request: Any,
        timeout: float | None = None,
        metadata: Metadata = None,
        credentials: grpc.CallCredentials | None = None,
        wait_for_ready: bool | None = None,
        compression: grpc.Compression | None = None,
    ) -> tuple[Any, _Call]:
        """The call, and a ``grpc.Call``-like view of the provider call that answered (its
        trailing metadata carries the provider's attachments)."""
        in_flight = self._in_flight
        if not in_flight.enter():
            raise in_flight.refused(self._service, self._method)
        sink: list[Any] = []
        token = CALL_SINK.set(sink)
        try:
            response = self._call(request, timeout, metadata)
        finally:
            CALL_SINK.reset(token)
            in_flight.leave()
        return response, _Call(sink[-1] if sink else None)

    def future(
        self,
        request: Any,
        timeout: float | None = None,
        metadata: Metadata = None,
        credentials: grpc.CallCredentials | None = None,
        wait_for_ready: bool | None = None,
        compression: grpc.Compression | None = None,
    ) -> futures.Future[Any]:
        """Run the call on a shared thread pool (a ``concurrent.futures.Future``)."""
        return _futures.get().submit(self, request, timeout, metadata)


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
