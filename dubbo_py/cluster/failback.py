"""``failback``: fail now, retry later in the background (for notifications that must get there
eventually). The queue is bounded: when full, the oldest pending retry is dropped and logged."""

from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import grpc

from dubbo_py.cluster.strategy import ClusterContext, failfast
from dubbo_py.invocation import Invocation

__all__ = ["FailbackQueue", "failback"]

log = logging.getLogger(__name__)


@dataclass
class _Pending:
    ctx: ClusterContext
    invocation: Invocation
    attempts: int
    due: float


class FailbackQueue:
    """Background retries: every ``period`` s, up to ``max_attempts`` per call, at most
    ``capacity`` calls waiting."""

    def __init__(self, period: float = 5.0, max_attempts: int = 3, capacity: int = 1000) -> None:
        self.period = period
        self.max_attempts = max_attempts
        self._queue: collections.deque[_Pending] = collections.deque(maxlen=capacity)
        self._lock = threading.Condition()
        self._thread: threading.Thread | None = None
        self.succeeded = 0
        self.abandoned = 0

    def submit(self, ctx: ClusterContext, invocation: Invocation) -> None:
        """Schedule a retry of a failed call."""
        with self._lock:
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

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queue or self._queue[0].due > time.monotonic():
                    wait = self._queue[0].due - time.monotonic() if self._queue else None
                    self._lock.wait(wait)
                item = self._queue.popleft()
            try:
                failfast(item.ctx, item.invocation)
                self.succeeded += 1
            except grpc.RpcError as error:
                item.attempts += 1
                if item.attempts >= self.max_attempts:
                    self.abandoned += 1
                    log.error(
                        "failback: giving up on %s.%s after %d retries: %s",
                        item.invocation.service,
                        item.invocation.method,
                        item.attempts,
                        error,
                    )
                    continue
                item.due = time.monotonic() + self.period
                with self._lock:
                    self._queue.append(item)


_default_queue = FailbackQueue()


def failback(ctx: ClusterContext, invocation: Invocation) -> Any:
    """One attempt now; on failure the error is raised to the caller *and* the call is queued
    for background retries (the queue in ``ctx.extras["failback_queue"]`` or a shared one)."""
    try:
        return failfast(ctx, invocation)
    except grpc.RpcError:
        queue = ctx.extras.get("failback_queue", _default_queue)
        queue.submit(ctx, invocation)
        raise
