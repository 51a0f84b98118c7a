"""``failback``: fail now, retry later in the background (for notifications that must get there
eventually).

The queue is bounded: when it is full, the oldest pending retry is dropped and logged. Only
failures the cluster would retry anyway are queued (transport failures, and DEADLINE_EXCEEDED of
idempotent methods); an application error is an answer and is never replayed. Each background
retry is one attempt on a freshly routed provider, and it draws from the reference's retry
budget like any retry, so a total outage cannot multiply the load.

Apache Dubbo's ``FailbackClusterInvoker`` returns an empty result to the caller and retries in
the background; dubbo-py raises the error to the caller at once (the caller learns that the
call has not happened yet) and retries the same way: every ``period`` seconds, up to
``max_attempts`` times.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import grpc

from dubbo_py.cluster.strategy import ClusterContext, _retryable, failfast
from dubbo_py.invocation import Invocation

__all__ = ["FailbackQueue", "default_queue", "failback"]

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
                    if not _retryable(item.ctx, item.invocation, exc):
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
    """The process-wide queue, for contexts that name none in ``extras["failback_queue"]``."""
    return _default_queue


def failback(ctx: ClusterContext, invocation: Invocation) -> Any:
    """One attempt now; on a retryable failure the error is raised to the caller *and* the call
    is queued for background retries (the queue in ``ctx.extras["failback_queue"]``, else a
    process-wide one)."""
    if ctx.budget is not None:
        ctx.budget.deposit()
    try:
        return failfast(ctx, invocation)
    except grpc.RpcError as error:
        if _retryable(ctx, invocation, error):
            queue = ctx.extras.get("failback_queue", _default_queue)
            queue.submit(ctx, invocation)
        raise
