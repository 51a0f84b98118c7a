"""The bookkeeping of a retrying call, shared by the blocking and the asyncio strategies.

``Attempts`` yields the provider for each attempt (re-routing first, skipping providers already
tried while others remain, asking the retry budget before every retry) and records each failure
(quarantining transport failures, re-raising errors that must not be retried). The strategy
itself is then a three-line loop around the call, sync or ``await``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import grpc

from dubbo_py.cluster.strategy import (
    ClusterContext,
    _attempts,
    _deadline,
    _failure,
    _remaining,
    _retryable,
    _route,
)
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = ["Attempts"]

log = logging.getLogger(__name__)


class Attempts:
    """One call's attempts: ``for provider in attempts: try call; except: attempts.failed()``."""

    def __init__(
        self, ctx: ClusterContext, invocation: Invocation, retries: int | None = None
    ) -> None:
        self.ctx = ctx
        self.invocation = invocation
        self.deadline = _deadline(ctx, invocation)
        # None: the method's retries, or the call's own ``dubbo.retries`` attachment.
        self.total = _attempts(ctx, invocation) if retries is None else max(0, retries) + 1
        self.tried: list[URL] = []
        self.last: BaseException | None = None
        if ctx.budget is not None:
            ctx.budget.deposit()

    def __iter__(self) -> Iterator[URL]:
        for attempt in range(self.total):
            if attempt:
                if self.deadline is not None and time.monotonic() >= self.deadline:
                    return
                if self.ctx.budget is not None and not self.ctx.budget.try_withdraw():
                    log.warning("retry budget exhausted for %s; not retrying", self.ctx.service)
                    return
            candidates = _route(self.ctx, self.invocation, self.tried)
            yield self.ctx.pick(self.invocation, candidates, self.tried)

    def remaining(self) -> float | None:
        """Seconds left of the call's deadline (None: no deadline)."""
        return _remaining(self.deadline)

    def failed(self, provider: URL, error: grpc.RpcError) -> None:
        """Record a failed attempt (quarantining transport failures); raises what the caller
        must see when ``error`` must not be retried."""
        self.tried.append(provider)
        self.ctx.note_failure(provider, error)
        if not _retryable(self.ctx, self.invocation, error):
            raise _failure(self.invocation, self.tried, error, "failed, not retryable") from None
        self.last = error

    def error(self) -> BaseException:
        """The error to raise once every attempt failed: a ClusterError naming the service,
        method and every provider tried."""
        assert self.last is not None, "error() before any failed attempt"
        reason = f"failed after {len(self.tried)} attempt(s)"
        return _failure(self.invocation, self.tried, self.last, reason)
