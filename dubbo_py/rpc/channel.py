"""ClusterChannel: a ``grpc.Channel`` look-alike that routes every call through the cluster.

Users keep their generated stubs — ``GreeterStub(channel)`` — because a stub only asks its
channel for multicallables. Ours build an :class:`~dubbo_py.invocation.Invocation` per call and
hand it to the reference's cluster strategy, which routes, balances, calls and retries.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent import futures
from time import monotonic, time_ns
from types import MappingProxyType
from typing import Any

import grpc

from dubbo_py.cluster.plan import CallPlan, compile_plan
from dubbo_py.cluster.stats import CallStats
from dubbo_py.cluster.strategy import (
    ClusterContext,
    Strategy,
    continue_failover,
    failfast,
    failover,
)
from dubbo_py.invocation import Invocation
from dubbo_py.rpc.attachments import attachments_from_metadata
from dubbo_py.rpc.invoker import ChannelPool, MethodInvoker, RecordingInvoker
from dubbo_py.rpc.triple import CALL_SINK, TripleCaller, from_wire
from dubbo_py.rpc.triple import Metadata as Metadata_

__all__ = ["ClusterChannel"]

Metadata = Sequence[tuple[str, str | bytes]] | None

_executor_lock = threading.Lock()
_executor: futures.ThreadPoolExecutor | None = None


def _shared_executor() -> futures.ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = futures.ThreadPoolExecutor(32, thread_name_prefix="dubbo-future")
        return _executor


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


class _MultiCallable:
    def __init__(
        self,
        channel: ClusterChannel,
        path: str,
        invoker: MethodInvoker,
        request_streaming: bool,
    ) -> None:
        self._service, _, self._method = path.lstrip("/").partition("/")
        # A request stream can be consumed only once, so it is never replayed on another
        # provider: client-streaming calls are fail-fast whatever the reference says.
        self._strategy = (
            failfast if request_streaming else channel.strategy_for(self._method, invoker)
        )
        self._context = channel.context_for(invoker, self._method)
        self._attachments = channel.attachments
        #: Plain calls under failover run a compiled plan when one is current.
        self._plannable = self._strategy is failover and not self._attachments
        self._plan: CallPlan | None = None
        #: What the last failed compile was tried against (not retried until it changes).
        self._unplanned: tuple[object, ...] | None = None

    def __call__(
        self,
        request: Any,
        timeout: float | None = None,
        metadata: Metadata = None,
        credentials: grpc.CallCredentials | None = None,
        wait_for_ready: bool | None = None,
        compression: grpc.Compression | None = None,
    ) -> Any:
        # Failover's first attempt under a call plan (dubbo_py/cluster/plan.py), written out in
        # this one frame: it runs on every call. The checks say the plan is still current.
        plan = self._plan
        ctx = self._context
        quarantine = ctx.quarantine
        if (
            plan is None
            or metadata
            or plan.chain is not ctx.routes.chain
            or plan.balancer is not ctx.balancer
            or plan.settings is not ctx.settings[self._method]
            or plan.invoker is not ctx.call
            or type(request) is not plan.request_type
            or (quarantine is not None and quarantine.addresses)
        ):
            return self._call(request, timeout, metadata)
        mask = plan.mask
        for read, decide in plan.lookups:
            decision = decide(read(request))
            if decision is not None:
                survivors = mask & decision[0]
                if survivors or decision[1]:
                    mask = survivors
                    if not mask:  # the strategy raises the error naming the router
                        return self._call(request, timeout, metadata)
        budget = plan.budget
        if budget is not None:  # RetryBudget.deposit, written out
            if budget.clock() >= budget.next_fold:
                budget.fold()
            budget.count_request()
        now_ms = time_ns() // 1_000_000
        pick = plan.picks.get(mask)
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
                    provider = plan.rebalance(
                        mask, now_ms, Invocation(self._service, self._method, request)
                    )
        if timeout is None:
            timeout = plan.timeout
        started = 0.0 if timeout is None else monotonic()
        multicallable = plan.multicallables.get(provider.address)
        try:
            if multicallable is not None:
                try:
                    response = multicallable(request, timeout=timeout)
                    if plan.failing:  # the outlier detector counts failures of some provider
                        plan.failing.pop(provider.address, None)
                    return response
                except ValueError as exc:
                    if "closed channel" not in str(exc):
                        raise
                    # The provider's channel was closed after this call picked it (it left):
                    # the invoker below makes that a transport failure failover handles.
            invocation = Invocation(self._service, self._method, request, timeout=timeout)
            response = ctx.call(provider, invocation, timeout)
            ctx.note_success(provider)
            return response
        except grpc.RpcError as error:
            deadline = None if timeout is None else started + timeout
            invocation = Invocation(self._service, self._method, request, timeout=timeout)
            return continue_failover(ctx, invocation, deadline, provider, error)

    def _call(self, request: Any, timeout: float | None, metadata: Metadata) -> Any:
        """A call the plan does not cover: compile a plan first when the call is plain and
        none is current, then run the call through the strategy."""
        if self._plannable and not metadata:
            self._replan(request)
        # Without call metadata the channel's read-only attachments go as they are (no copy).
        attachments: Mapping[str, str] = self._attachments
        if metadata:
            attachments = {**attachments, **attachments_from_metadata(metadata)}
        invocation = Invocation(self._service, self._method, request, attachments, timeout)
        return self._strategy(self._context, invocation)

    def _replan(self, request: Any) -> None:
        ctx = self._context
        now = (
            ctx.routes.chain,
            ctx.balancer,
            ctx.settings[self._method],
            ctx.call,
            type(request),
        )
        plan = self._plan
        tried = self._unplanned
        if plan is not None:
            tried = (plan.chain, plan.balancer, plan.settings, plan.invoker, plan.request_type)
        if tried is not None and all(a is b for a, b in zip(tried, now, strict=True)):
            return  # compiled against this already (the call is here for another reason)
        plan = compile_plan(ctx, self._method, request)
        self._plan = plan
        self._unplanned = now if plan is None else None

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
        sink: list[Any] = []
        token = CALL_SINK.set(sink)
        try:
            response = self._call(request, timeout, metadata)
        finally:
            CALL_SINK.reset(token)
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
        return _shared_executor().submit(self, request, timeout, metadata)


class ClusterChannel(grpc.Channel):
    """A channel whose calls go through a cluster strategy instead of one connection."""

    def __init__(
        self,
        pool: ChannelPool,
        strategy_for: Callable[[str, MethodInvoker], Strategy],
        make_context: Callable[[Any], ClusterContext],
        attachments: dict[str, str] | None = None,
        stats: CallStats | None = None,
        caller: TripleCaller | None = None,
    ) -> None:
        self.pool = pool
        #: Who calls (the Triple headers every call carries).
        self.caller = caller or TripleCaller()
        self.stats = stats
        self.strategy_for = strategy_for
        #: Builds the cluster context of one method from its provider call (shared with the
        #: asyncio flavour, which plugs in an awaitable call).
        self.make_context = make_context
        #: Attachments every call carries (read-only; call metadata is added per call).
        self.attachments: Mapping[str, str] = MappingProxyType(dict(attachments or {}))
        #: Every method invoker of this reference, of either flavour (overrides update them).
        self.invokers: list[RecordingInvoker] = []
        #: The cluster context of each method (by method name), for inspection and tests.
        self.contexts: dict[str, ClusterContext] = {}

    def context_for(self, invoker: RecordingInvoker, method: str = "") -> ClusterContext:
        """The cluster context calls of one method use (built once per method). The invoker
        records into :attr:`stats` from now on, following later changes."""
        self.invokers.append(invoker)
        # After joining the list: a balancer swap running meanwhile either set self.stats
        # before this read or finds the invoker in the list.
        invoker.stats = self.stats
        context = self.make_context(invoker)
        if method:
            self.contexts[method] = context
        return context

    def forget(self, addresses: list[str]) -> None:
        """Drop every method's cached callables for these provider addresses (their channels
        were dropped or replaced in the pool)."""
        for invoker in self.invokers:
            invoker.forget(addresses)

    def _multicallable(
        self,
        method: str,
        request_serializer: Callable[[Any], bytes] | None,
        response_deserializer: Callable[[bytes], Any] | None,
        request_streaming: bool,
        response_streaming: bool,
    ) -> _MultiCallable:
        invoker = MethodInvoker(
            self.pool,
            method,
            request_serializer,
            response_deserializer,
            request_streaming=request_streaming,
            response_streaming=response_streaming,
            caller=self.caller,
        )
        return _MultiCallable(self, method, invoker, request_streaming)

    def unary_unary(
        self,
        method: str,
        request_serializer: Callable[[Any], bytes] | None = None,
        response_deserializer: Callable[[bytes], Any] | None = None,
        _registered_method: bool | None = False,
    ) -> Any:
        return self._multicallable(method, request_serializer, response_deserializer, False, False)

    def unary_stream(
        self,
        method: str,
        request_serializer: Callable[[Any], bytes] | None = None,
        response_deserializer: Callable[[bytes], Any] | None = None,
        _registered_method: bool | None = False,
    ) -> Any:
        return self._multicallable(method, request_serializer, response_deserializer, False, True)

    def stream_unary(
        self,
        method: str,
        request_serializer: Callable[[Any], bytes] | None = None,
        response_deserializer: Callable[[bytes], Any] | None = None,
        _registered_method: bool | None = False,
    ) -> Any:
        return self._multicallable(method, request_serializer, response_deserializer, True, False)

    def stream_stream(
        self,
        method: str,
        request_serializer: Callable[[Any], bytes] | None = None,
        response_deserializer: Callable[[bytes], Any] | None = None,
        _registered_method: bool | None = False,
    ) -> Any:
        return self._multicallable(method, request_serializer, response_deserializer, True, True)

    def subscribe(self, callback: Callable[..., None], try_to_connect: bool = False) -> None:
        """Connectivity callbacks have no single meaning for a cluster; accepted and ignored."""

    def unsubscribe(self, callback: Callable[..., None]) -> None:
        """See :meth:`subscribe`."""

    def close(self) -> None:
        """Close every pooled provider channel."""
        self.pool.close()

    def __enter__(self) -> ClusterChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
