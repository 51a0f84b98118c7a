"""Wrappers around a call: the consumer stack's extension point (Finagle's ``Filter``).

A reference's calls pass through two kinds of call, and anything that watches or changes them
is a wrapper around one of the two -- never a flag inside an invoker:

* the **method call** ``(invocation) -> response``: one per stub call, around the whole cluster
  strategy (routing, balancing, every retry). A :class:`CallFilter` wraps it: mock answers
  (:class:`MockFilter`), and metrics or tracing of what the caller sees;
* the **attempt** ``(provider, invocation, timeout) -> response``: one per provider tried. An
  :class:`AttemptFilter` wraps it: the call statistics least-active and shortest-response
  balancing read (:class:`RecordStats`), and per-provider metrics or tracing.

A filter receives the call it wraps as ``proceed`` and decides whether, when and how to call
it -- the same shape as Finagle's ``Filter.apply(request, service)`` and Dubbo's
``Filter.invoke(invoker, invocation)``::

    class Timing:
        def __call__(self, invocation, proceed):
            started = time.perf_counter()
            try:
                return proceed(invocation)
            finally:
                record(invocation.method, time.perf_counter() - started)

    app = Application("shop", filters=ConsumerFilters(calls=(Timing(),)))

The asyncio flavour takes awaiting filters of the same shape (``async def __call__``, ``await
proceed(...)``): :class:`ConsumerFilters` holds both kinds, and each reference uses the ones of
its flavour. For a server-streaming method, the method call returns once the first response
has arrived (the stream is then read by the caller, outside the filters).

Order: the application's filters wrap a reference's own, the first of a tuple outermost; a
method's mock wraps them all (as Dubbo's ``MockClusterInvoker`` wraps its cluster filters), and
the statistics balancers read are the innermost attempt wrapper.

The compiled fast path of plain failover calls (:mod:`dubbo_py.cluster.plan`) is an
optimisation of the same stack, so a filter must see its calls too. A filter with a
``plan_hook(method)`` method says what it records of a planned call of ``method``: a
:class:`~dubbo_py.cluster.plan.CallHook` for a call filter, an
:class:`~dubbo_py.cluster.plan.AttemptHook` for an attempt filter (or None: no fast path). A
method keeps the fast path while every one of its filters has a hook (the consumer's metrics
do); one filter without a hook turns it off for the method. Without filters a call costs what
it did before this layer existed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import grpc
from google.protobuf.message import Message

from dubbo_py.cluster.mock import Mock, MockSpec, stream_of
from dubbo_py.cluster.plan import AttemptHook
from dubbo_py.cluster.stats import CallStats
from dubbo_py.cluster.support.context import PlainCall, ProviderCall
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = [
    "AsyncAttemptFilter",
    "AsyncCall",
    "AsyncCallFilter",
    "AsyncMockFilter",
    "AsyncProviderCall",
    "AsyncRecordStats",
    "AttemptFilter",
    "Call",
    "CallFilter",
    "ConsumerFilters",
    "HookedAttempts",
    "MockFilter",
    "ProviderCall",
    "RecordStats",
    "plan_hooks",
    "wrap_attempts",
    "wrap_calls",
]

#: A method call of the blocking flavour: the invocation in, the response out.
Call = Callable[[Invocation], Any]
#: A method call of the asyncio flavour.
AsyncCall = Callable[[Invocation], Awaitable[Any]]
#: One attempt on one provider, awaited.
AsyncProviderCall = Callable[[URL, Invocation, float | None], Awaitable[Any]]


class CallFilter(Protocol):
    """Wraps a blocking method call: return ``proceed(invocation)`` (or an invocation of your
    own, or an answer without calling it at all)."""

    def __call__(self, invocation: Invocation, proceed: Call) -> Any:
        """The response to ``invocation``."""
        ...


class AsyncCallFilter(Protocol):
    """Wraps an awaited method call: ``return await proceed(invocation)``."""

    def __call__(self, invocation: Invocation, proceed: AsyncCall) -> Awaitable[Any]:
        """The response to ``invocation``, awaited."""
        ...


class AttemptFilter(Protocol):
    """Wraps one blocking attempt on ``provider``: ``return proceed(provider, invocation,
    timeout)`` (``timeout``: seconds left, or None)."""

    def __call__(
        self, provider: URL, invocation: Invocation, timeout: float | None, proceed: ProviderCall
    ) -> Any:
        """The provider's response."""
        ...


class AsyncAttemptFilter(Protocol):
    """Wraps one awaited attempt on ``provider``."""

    def __call__(
        self,
        provider: URL,
        invocation: Invocation,
        timeout: float | None,
        proceed: AsyncProviderCall,
    ) -> Awaitable[Any]:
        """The provider's response, awaited."""
        ...


@dataclass(frozen=True, slots=True)
class ConsumerFilters:
    """The wrappers a reference's calls go through, for both flavours (see the module doc).
    ``a + b``: ``a``'s filters outside ``b``'s."""

    calls: tuple[CallFilter, ...] = ()
    attempts: tuple[AttemptFilter, ...] = ()
    async_calls: tuple[AsyncCallFilter, ...] = ()
    async_attempts: tuple[AsyncAttemptFilter, ...] = ()

    def around_calls(self, asyncio: bool) -> tuple[Any, ...]:
        """The call filters of one flavour."""
        return self.async_calls if asyncio else self.calls

    def around_attempts(self, asyncio: bool) -> tuple[Any, ...]:
        """The attempt filters of one flavour."""
        return self.async_attempts if asyncio else self.attempts

    def __add__(self, inner: ConsumerFilters) -> ConsumerFilters:
        return ConsumerFilters(
            self.calls + inner.calls,
            self.attempts + inner.attempts,
            self.async_calls + inner.async_calls,
            self.async_attempts + inner.async_attempts,
        )


class _Wrapped:
    """``proceed`` with one filter around it; one class serves every kind of call, since a
    filter is called with the call's own arguments and ``proceed`` last."""

    __slots__ = ("_filter", "_proceed")

    def __init__(self, filter_: Callable[..., Any], proceed: Callable[..., Any]) -> None:
        self._filter = filter_
        self._proceed = proceed

    def __call__(self, *arguments: Any) -> Any:
        return self._filter(*arguments, self._proceed)


def _wrap(filters: Sequence[Callable[..., Any]], call: Callable[..., Any]) -> Any:
    for filter_ in reversed(filters):
        call = _Wrapped(filter_, call)
    return call


def wrap_calls(filters: Sequence[CallFilter] | Sequence[AsyncCallFilter], call: Any) -> Any:
    """``call`` (a :data:`Call` or :data:`AsyncCall`) inside ``filters``, the first outermost;
    ``call`` itself when there are none."""
    return _wrap(filters, call)


def wrap_attempts(
    filters: Sequence[AttemptFilter] | Sequence[AsyncAttemptFilter], call: Any
) -> Any:
    """``call`` (a :data:`ProviderCall` or :data:`AsyncProviderCall`) inside ``filters``, the
    first outermost; ``call`` itself when there are none. When ``call`` is a plain provider
    call (:class:`~dubbo_py.cluster.support.context.PlainCall`) and every filter has a plan
    hook, the result is a :class:`HookedAttempts`, which a call plan may still bypass."""
    if not filters:
        return call
    wrapped = _wrap(filters, call)
    method = getattr(getattr(call, "spec", None), "name", None)
    if method is None or not isinstance(call, PlainCall):
        return wrapped
    hooks = plan_hooks(filters, method)
    return wrapped if hooks is None else HookedAttempts(wrapped, call, hooks)


def plan_hooks(filters: Sequence[Any], method: str) -> tuple[Any, ...] | None:
    r"""Each filter's plan hook for ``method``, outermost first (call filters give
    :class:`~dubbo_py.cluster.plan.CallHook`\ s, attempt filters
    :class:`~dubbo_py.cluster.plan.AttemptHook`\ s): () without filters, None when one of
    them has no hook (the method's calls then take the filters, never a plan)."""
    hooks = []
    for filter_ in filters:
        plan_hook = getattr(filter_, "plan_hook", None)
        hook = plan_hook(method) if plan_hook is not None else None
        if hook is None:
            return None
        hooks.append(hook)
    return tuple(hooks)


class HookedAttempts:
    """A plain provider call inside attempt filters that all have plan hooks: calling it runs
    the filters; a call plan calls ``plain``'s multicallables directly and runs
    :attr:`attempt_hooks` for the first attempt instead."""

    __slots__ = ("_call", "attempt_hooks", "inner")

    def __init__(self, call: Any, inner: Any, hooks: tuple[AttemptHook, ...]) -> None:
        self._call = call
        #: The provider call inside the filters.
        self.inner = inner
        #: What the filters record of a planned first attempt, outermost first.
        self.attempt_hooks = hooks

    @property
    def plain(self) -> bool:
        """Whether the provider call inside is plain."""
        return bool(self.inner.plain)

    @property
    def multicallables(self) -> dict[str, Any]:
        """The provider call's cached multicallables."""
        multicallables: dict[str, Any] = self.inner.multicallables
        return multicallables

    def __call__(self, provider: URL, invocation: Invocation, timeout: float | None) -> Any:
        return self._call(provider, invocation, timeout)


# ---------------------------------------------------------------------------- built-in filters


class _Mocking:
    """A method's mock (:class:`~dubbo_py.cluster.mock.Mock`: spec, response type, whether
    answers go out as a stream), for either flavour's filter."""

    __slots__ = ("mock",)

    def __init__(
        self, spec: MockSpec, response_type: type[Message] | None, *, streaming: bool = False
    ) -> None:
        self.mock = Mock(spec, response_type, streaming)

    @property
    def forced(self) -> bool:
        """True for a ``force:`` mock: the provider is never called."""
        return self.mock.spec.mode == "force"


class MockFilter(_Mocking):
    """A method's ``mock`` option around its blocking call (Dubbo's ``MockClusterInvoker``)."""

    __slots__ = ()

    def __call__(self, invocation: Invocation, proceed: Call) -> Any:
        if self.forced:
            return self.mock.answer(invocation)
        try:
            return proceed(invocation)
        except grpc.RpcError as error:
            return self.mock.answer(invocation, error)


class AsyncMockFilter(_Mocking):
    """A method's ``mock`` option around its awaited call; a stream answer is an async
    stream."""

    __slots__ = ()

    async def __call__(self, invocation: Invocation, proceed: AsyncCall) -> Any:
        if self.forced:
            return self._answer(invocation)
        try:
            return await proceed(invocation)
        except grpc.RpcError as error:
            return self._answer(invocation, error)

    def _answer(self, invocation: Invocation, error: grpc.RpcError | None = None) -> Any:
        answer = self.mock.answer(invocation, error)
        return stream_of(list(answer)) if self.mock.streaming else answer


class _Recording:
    __slots__ = ("key", "stats")

    def __init__(self, stats: CallStats, key: str) -> None:
        #: Where calls are counted.
        self.stats = stats
        #: The method's key in :attr:`stats` (its gRPC path).
        self.key = key


class RecordStats(_Recording):
    """Counts each blocking attempt in the call statistics (in flight, elapsed, failed), for
    the balancers that read them (least-active, shortest-response)."""

    __slots__ = ()

    def __call__(
        self, provider: URL, invocation: Invocation, timeout: float | None, proceed: ProviderCall
    ) -> Any:
        with self.stats.track(provider.address, self.key):
            return proceed(provider, invocation, timeout)


class AsyncRecordStats(_Recording):
    """Counts each awaited attempt in the call statistics, in flight across the await."""

    __slots__ = ()

    async def __call__(
        self,
        provider: URL,
        invocation: Invocation,
        timeout: float | None,
        proceed: AsyncProviderCall,
    ) -> Any:
        with self.stats.track(provider.address, self.key):
            return await proceed(provider, invocation, timeout)
