"""``failback``: fail now, retry later in the background (for notifications that must get there
eventually). Blocking and asyncio forms, and the queue of background retries.

The queue is bounded: when it is full, the oldest pending retry is dropped and logged. Only
failures the cluster would retry anyway are queued (transport failures, and DEADLINE_EXCEEDED of
idempotent methods); an application error is an answer and is never replayed. Each background
retry is one attempt on a freshly routed provider, and it draws from the reference's retry
budget like any retry, so a total outage cannot multiply the load.

Apache Dubbo's ``FailbackClusterInvoker`` returns an empty result to the caller and retries in
the background; dubbo-py raises the error to the caller at once (the caller learns that the
call has not happened yet) and retries the same way: every ``period`` seconds, up to
``max_attempts`` times.

The asyncio form raises at once too, and hands the call to the queue with the reference's
*blocking* context for the method: the queue retries on its own thread, with its own channels,
so retries go on whether or not the event loop still runs.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import grpc

from dubbo_py.cluster.strategies.failfast import failfast, failfast_async
from dubbo_py.cluster.support.context import AsyncStrategy, ClusterContext
from dubbo_py.cluster.support.outcome import retryable
from dubbo_py.invocation import Invocation

__all__ = ["FailbackQueue", "default_queue", "failback", "failback_async"]

log = logging.getLogger(__name__)


@dataclass
class _Pending:
    ctx: ClusterContext
    invocation: Invocation
    attempts: int
    due: float


class FailbackQueue:
    """Background retries: every ``period`` s, up to ``max_attempts`` per call, at most
    ``capacity`` calls waiting. ``succeeded`` and ``abandoned`` count outcomes."""

    def __init__(self, period: float = 5.0, max_attempts: int = 3, capacity: int = 1000) -> None:
        if not period > 0 or max_attempts < 1 or capacity < 1:
            raise ValueError(
                "failback queue needs period > 0, max_attempts >= 1 and capacity >= 1, got "
                f"{period!r}, {max_attempts!r}, {capacity!r}"
            )
        self.period = period
        self.max_attempts = max_attempts
        self._queue: collections.deque[_Pending] = collections.deque(maxlen=capacity)
        self._lock = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.succeeded = 0
        self.abandoned = 0

    def submit(self, ctx: ClusterContext, invocation: Invocation) -> None:
        """Schedule a retry of a failed call (ignored once the queue is closed)."""
        with self._lock:
            if self._closed:
                return
            if len(self._queue) == self._queue.maxlen:
                dropped = self._queue[0]
                self.abandoned += 1
                log.error(
                    "failback queue full; dropping %s.%s",
                    dropped.invocation.service,
                    dropped.invocation.method,
                )
            self._queue.append(_Pending(ctx, invocation, 0, time.monotonic() + self.period))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="dubbo-failback", daemon=True
                )
                self._thread.start()
            self._lock.notify()

    def __len__(self) -> int:
        return len(self._queue)

    def close(self) -> None:
        """Stop retrying; pending retries are dropped."""
        with self._lock:
            self._closed = True
            self._queue.clear()
            self._lock.notify_all()
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(5.0)

    def _next(self) -> _Pending | None:
        with self._lock:
            while not self._closed and (not self._queue or self._queue[0].due > time.monotonic()):
                wait = self._queue[0].due - time.monotonic() if self._queue else None
                self._lock.wait(wait)
            return None if self._closed else self._queue.popleft()

    def _run(self) -> None:
        while (item := self._next()) is not None:
            budget = item.ctx.budget
            error: BaseException | None = None
            if budget is not None and not budget.try_withdraw():
                error = RuntimeError("retry budget exhausted")
            else:
                try:
                    failfast(item.ctx, item.invocation)
                    self.succeeded += 1
                    continue
                except grpc.RpcError as exc:
                    error = exc
                    if not retryable(exc, item.invocation.method, item.ctx.idempotent):
                        item.attempts = self.max_attempts  # an answer: never replay it
            item.attempts += 1
            if item.attempts >= self.max_attempts:
                self.abandoned += 1
                log.error(
                    "failback: giving up on %s.%s after %d attempt(s): %s",
                    item.invocation.service,
                    item.invocation.method,
                    item.attempts,
                    error,
                )
                continue
            item.due = time.monotonic() + self.period
            with self._lock:
                if not self._closed:
                    self._queue.append(item)


_default_queue = FailbackQueue()


def default_queue() -> FailbackQueue:
    """The process-wide queue, for contexts that name none in ``failback``."""
    return _default_queue


def queue_retry(ctx: ClusterContext, invocation: Invocation, error: grpc.RpcError) -> None:
    """Queue a failed call for background retries under ``ctx`` (a blocking context) when the
    failure may be retried: in ``ctx.failback``, else the process-wide queue."""
    if retryable(error, invocation.method, ctx.idempotent):
        queue = ctx.failback if ctx.failback is not None else _default_queue
        queue.submit(ctx, invocation)


def failback(ctx: ClusterContext, invocation: Invocation) -> Any:
    """One attempt now; on a retryable failure the error is raised to the caller *and* the call
    is queued for background retries (:func:`queue_retry`)."""
    if ctx.budget is not None:
        ctx.budget.deposit()
    try:
        return failfast(ctx, invocation)
    except grpc.RpcError as error:
        queue_retry(ctx, invocation, error)
        raise


def failback_async(blocking: ClusterContext) -> AsyncStrategy:
    """The asyncio ``failback`` of a method whose blocking context is ``blocking``: one
    attempt now, awaited; a retryable failure is raised *and* queued, with ``blocking``."""

    async def failback(ctx: ClusterContext, invocation: Invocation) -> Any:
        if ctx.budget is not None:
            ctx.budget.deposit()
        try:
            return await failfast_async(ctx, invocation)
        except grpc.RpcError as error:
            queue_retry(blocking, invocation, error)
            raise

    return failback
