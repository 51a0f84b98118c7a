"""The cluster strategies and mocks for the asyncio consumer (``app.reference_async``).

Each is the blocking strategy of the same name (``dubbo_py.cluster.strategy``,
``parallel``, ``failback``, ``mock``) with the provider call awaited: the same routing,
balancing, quarantine, retry budget, errors and mock responses. Only where the two differ in
kind is it said here:

* ``forking`` runs its forks as tasks on the loop; once one succeeds the others run to their
  end, their results dropped, as the blocking one's threads do;
* ``failback`` raises at once, as the blocking one does, and hands the call to the reference's
  background :class:`~dubbo_py.cluster.failback.FailbackQueue`, which retries it through the
  reference's *blocking* context for the method (on the queue's thread, with its own channels),
  so retries go on whether or not the event loop still runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.message import Message

from dubbo_py.cluster.failback import FailbackQueue, default_queue
from dubbo_py.cluster.mock import MockSpec, answer_failure
from dubbo_py.cluster.parallel import (
    broadcast_failed,
    forks_failed,
    no_fork_answered,
    pick_distinct,
)
from dubbo_py.cluster.policy import MethodPolicy
from dubbo_py.cluster.strategy import (
    Attempts,
    ClusterContext,
    _deadline,
    _failure,
    _remaining,
    _retryable,
    _route,
    failsafe_answer,
)
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = [
    "AsyncStrategy",
    "async_strategy",
    "broadcast_async",
    "failback_async",
    "failfast_async",
    "failover_async",
    "failsafe_async",
    "forking_async",
    "stream_of",
    "with_mock_async",
]

#: An awaited strategy: ``await strategy(ctx, invocation)`` -> the response.
AsyncStrategy = Callable[[ClusterContext, Invocation], Awaitable[Any]]


async def failover_async(ctx: ClusterContext, invocation: Invocation) -> Any:
    """The failover strategy, awaited (see :func:`dubbo_py.cluster.strategy.failover`)."""
    attempts = Attempts.start(ctx, invocation)
    for provider in attempts:
        try:
            response = await ctx.call(provider, invocation, attempts.remaining())
        except grpc.RpcError as error:
            attempts.failed(provider, error)
            continue
        ctx.note_success(provider)
        return response
    raise attempts.error()


async def failfast_async(ctx: ClusterContext, invocation: Invocation) -> Any:
    """One attempt; any failure goes straight to the caller."""
    provider = ctx.pick(invocation, _route(ctx, invocation, []))
    try:
        response = await ctx.call(provider, invocation, _remaining(_deadline(ctx, invocation)))
    except grpc.RpcError as error:
        ctx.note_failure(provider, error)
        raise _failure(invocation, [provider], error, "failed (failfast)") from None
    ctx.note_success(provider)
    return response


async def failsafe_async(ctx: ClusterContext, invocation: Invocation) -> Any:
    """Never raise: one attempt; a failure is logged and the empty response returned."""
    try:
        return await failfast_async(ctx, invocation)
    except grpc.RpcError as error:
        return failsafe_answer(ctx, invocation, error)


async def forking_async(ctx: ClusterContext, invocation: Invocation) -> Any:
    """``forks`` distinct providers at once; the first success wins. As in the blocking
    ``forking`` (and Dubbo), the other forks are not cancelled: they run to their end (bounded
    by the call's deadline) and their results are dropped. Errors as the blocking one's."""
    deadline = _deadline(ctx, invocation)
    chosen = pick_distinct(ctx, invocation, max(1, ctx.settings[invocation.method].forks))
    timeout = _remaining(deadline)
    forks = {asyncio.ensure_future(ctx.call(p, invocation, timeout)): p for p in chosen}
    errors: list[BaseException] = []
    pending = set(forks)
    try:
        while pending:
            done, pending = await asyncio.wait(
                pending, timeout=_remaining(deadline), return_when=asyncio.FIRST_COMPLETED
            )
            if not done:
                raise no_fork_answered(invocation, chosen, timeout)
            for fork in done:
                error = fork.exception()
                if error is None:
                    ctx.note_success(forks[fork])
                    return fork.result()
                ctx.note_failure(forks[fork], error)
                errors.append(error)
    finally:
        for fork in pending:
            _let_finish(fork, ctx, forks[fork])
    raise forks_failed(invocation, chosen, errors)


# Forks left running after their call returned: the loop keeps only weak references to tasks.
_running: set[asyncio.Future[Any]] = set()


def _let_finish(fork: asyncio.Future[Any], ctx: ClusterContext, provider: URL) -> None:
    _running.add(fork)

    def done(finished: asyncio.Future[Any]) -> None:
        _running.discard(finished)
        if finished.cancelled():
            return
        # Retrieved, so a late fork's failure is not reported as never retrieved; recorded, so
        # a hung provider that loses every race still counts towards its ejection.
        error = finished.exception()
        if error is None:
            ctx.note_success(provider)
        elif isinstance(error, grpc.RpcError):
            ctx.note_failure(provider, error)

    fork.add_done_callback(done)


async def broadcast_async(ctx: ClusterContext, invocation: Invocation) -> Any:
    """Every routed provider, one after another; fails if any failed, naming each failure;
    otherwise the last response."""
    candidates = _route(ctx, invocation, [])
    deadline = _deadline(ctx, invocation)
    failed: list[URL] = []
    last_error: BaseException | None = None
    result: Any = None
    for provider in candidates:
        try:
            result = await ctx.call(provider, invocation, _remaining(deadline))
        except grpc.RpcError as error:
            ctx.note_failure(provider, error)
            failed.append(provider)
            last_error = error
        else:
            ctx.note_success(provider)
    if last_error is not None:
        raise broadcast_failed(invocation, candidates, failed, last_error)
    return result


def failback_async(blocking: ClusterContext) -> AsyncStrategy:
    """``failback``: one attempt now; on a retryable failure the error is raised *and* the call
    is queued for background retries through ``blocking`` (the reference's blocking context
    for the method, whose ``extras["failback_queue"]`` is the queue)."""

    async def failback(ctx: ClusterContext, invocation: Invocation) -> Any:
        if ctx.budget is not None:
            ctx.budget.deposit()
        try:
            return await failfast_async(ctx, invocation)
        except grpc.RpcError as error:
            if _retryable(ctx, invocation, error):
                queue: FailbackQueue = blocking.extras.get("failback_queue", default_queue())
                queue.submit(blocking, invocation)
            raise

    return failback


def with_mock_async(
    strategy: AsyncStrategy,
    spec: MockSpec,
    response_type: type[Message] | None,
    *,
    streaming: bool = False,
) -> AsyncStrategy:
    """Wrap an awaited strategy with a mock (see :mod:`dubbo_py.cluster.mock`); for a
    server-streaming method the mock's answer is a stream of that one response."""

    def answer(response: Any) -> Any:
        return stream_of([response]) if streaming else response

    async def mocked(ctx: ClusterContext, invocation: Invocation) -> Any:
        if spec.mode == "force":
            return answer(spec.response(invocation, response_type))
        try:
            return await strategy(ctx, invocation)
        except grpc.RpcError as error:
            return answer(answer_failure(spec, invocation, response_type, error))

    return mocked


async def stream_of(items: list[Any]) -> AsyncIterator[Any]:
    """An async stream of ``items``: what an asyncio caller of a server-streaming method
    iterates over when no provider answered (a mock's reply, failsafe's nothing)."""
    for item in items:
        yield item


_PLAIN: dict[str, AsyncStrategy] = {
    "failover": failover_async,
    "failfast": failfast_async,
    "failsafe": failsafe_async,
    "forking": forking_async,
    "broadcast": broadcast_async,
}


def async_strategy(
    policy: MethodPolicy,
    blocking: ClusterContext,
    response_type: type[Message] | None,
    *,
    streaming: bool = False,
) -> AsyncStrategy:
    """The awaited strategy for a method's policy; ``blocking`` is the reference's blocking
    context for the method (failback retries through it); ``response_type`` is what a mock
    answers with, as a stream when the method is server-streaming (``streaming``). ValueError
    for an unknown strategy name."""
    if policy.cluster == "failback":
        strategy = failback_async(blocking)
    else:
        try:
            strategy = _PLAIN[policy.cluster]
        except KeyError:
            known = ", ".join(sorted([*_PLAIN, "failback"]))
            raise ValueError(
                f"unknown cluster strategy {policy.cluster!r}; choose one of {known}"
            ) from None
    if policy.mock is not None:
        strategy = with_mock_async(strategy, policy.mock, response_type, streaming=streaming)
    return strategy
