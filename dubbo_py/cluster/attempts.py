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

from dubbo_py.cluster.errors import ClusterError, is_transport_failure
from dubbo_py.cluster.strategy import ClusterContext, _deadline, _remaining, _retryable, _route
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = ["Attempts"]

log = logging.getLogger(__name__)


class Attempts:
    """One call's attempts: ``for provider in attempts: try call; except: attempts.failed()``."""

    def __init__(self, ctx: ClusterContext, invocation: Invocation, retries: int) -> None:
        self.ctx = ctx
        self.invocation = invocation
        self.deadline = _deadline(ctx, invocation)
        self.total = max(0, retries) + 1
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
        """Record a failed attempt; re-raises ``error`` when it must not be retried."""
        if not _retryable(self.ctx, self.invocation, error):
            raise error
        self.last = error
        self.tried.append(provider)
        if is_transport_failure(error) and self.ctx.quarantine is not None:
            self.ctx.quarantine.add(provider, f"{error.code().name}: {error.details()}")

    def error(self) -> ClusterError:
        """The error to raise once every attempt failed."""
        last = self.last
        code = last.code() if isinstance(last, grpc.RpcError) else grpc.StatusCode.UNAVAILABLE
        return ClusterError(
            self.invocation.service,
            self.invocation.method,
            [t.address for t in self.tried],
            f"failed after {len(self.tried)} attempt(s)",
            code=code,
            last=last,
        )
