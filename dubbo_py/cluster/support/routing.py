"""Routing one call, and the bookkeeping of a call that may be tried on several providers."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TypeVar

import grpc

from dubbo_py.cluster.support.context import ClusterContext
from dubbo_py.cluster.support.deadline import Deadline
from dubbo_py.cluster.support.outcome import failure, retryable
from dubbo_py.errors import ClusterError, NoProviderError
from dubbo_py.invocation import RETRIES_ATTACHMENT, Invocation
from dubbo_py.url import URL

__all__ = ["Attempts", "allowed_attempts", "deadline_of", "route"]

log = logging.getLogger(__name__)

_R = TypeVar("_R")


def deadline_of(ctx: ClusterContext, invocation: Invocation) -> Deadline:
    """The call's deadline, starting now: its own timeout, else the method's."""
    timeout = invocation.timeout
    if timeout is None:
        timeout = ctx.settings[invocation.method].timeout
    return Deadline.after(timeout)


def route(ctx: ClusterContext, invocation: Invocation, tried: list[URL]) -> tuple[URL, ...]:
    """The candidates for ``invocation`` now; a ClusterError naming the providers ``tried`` (and
    the router that left none) when there are none."""
    try:
        return ctx.candidates(invocation)
    except NoProviderError as exc:
        raise ClusterError(
            invocation.service, invocation.method, [t.address for t in tried], str(exc)
        ) from None


def allowed_attempts(ctx: ClusterContext, invocation: Invocation) -> int:
    """How many attempts the call may make: the ``dubbo.retries`` attachment when it carries
    one (a bad one is logged and ignored), else the method's ``retries``, plus one."""
    text = invocation.attachments.get(RETRIES_ATTACHMENT) if invocation.attachments else None
    if text is not None:
        try:
            return max(0, int(text)) + 1
        except ValueError:
            log.warning(
                "ignoring %s=%r on %s.%s: not an integer",
                RETRIES_ATTACHMENT,
                text,
                invocation.service,
                invocation.method,
            )
    return max(0, ctx.settings[invocation.method].retries) + 1


class Attempts:
    """One retrying call's bookkeeping, shared by the blocking and the asyncio failover:
    ``for provider in attempts: try: call; except grpc.RpcError as e: attempts.failed(...)``,
    then ``raise attempts.error()``.

    Each iteration re-routes, skips providers already tried while others remain, and before
    every retry checks the deadline and asks the retry budget. ``failed`` records a failure
    (quarantining transport failures) and raises what the caller must see when the error must
    not be retried."""

    def __init__(self, ctx: ClusterContext, invocation: Invocation, deadline: Deadline) -> None:
        self.ctx = ctx
        self.invocation = invocation
        self.deadline = deadline
        self.total = allowed_attempts(ctx, invocation)
        self.tried: list[URL] = []
        self.last: BaseException | None = None
        self.reason = "failed"

    @classmethod
    def start(cls, ctx: ClusterContext, invocation: Invocation) -> Attempts:
        """A call about to make its first attempt (counts it in the retry budget)."""
        if ctx.budget is not None:
            ctx.budget.deposit()
        return cls(ctx, invocation, deadline_of(ctx, invocation))

    def __iter__(self) -> Iterator[URL]:
        for _ in range(len(self.tried), self.total):
            if self.tried:
                if self.deadline.expired():
                    self.reason = "deadline reached"
                    return
                if self.ctx.budget is not None and not self.ctx.budget.try_withdraw():
                    log.warning("retry budget exhausted for %s; not retrying", self.ctx.service)
                    self.reason = "retry budget exhausted"
                    return
            candidates = route(self.ctx, self.invocation, self.tried)
            yield self.ctx.pick(self.invocation, candidates, self.tried)

    def remaining(self) -> float | None:
        """Seconds left of the call's deadline (None: no deadline)."""
        return self.deadline.remaining()

    def failed(self, provider: URL, error: grpc.RpcError) -> None:
        """Record a failed attempt; raises what the caller must see when ``error`` must not be
        retried."""
        self.tried.append(provider)
        self.ctx.note_failure(provider, error)
        if not retryable(error, self.invocation.method, self.ctx.idempotent):
            raise failure(self.invocation, self.tried, error, "failed, not retryable") from None
        self.last = error

    def answered(self, provider: URL, response: _R) -> _R:
        """Record that ``provider`` answered; the response, for the caller to return."""
        self.ctx.note_success(provider)
        return response

    def error(self) -> BaseException:
        """The error to raise once no attempt is left: a ClusterError naming the service,
        method and every provider tried."""
        assert self.last is not None, "error() before any failed attempt"
        reason = f"{self.reason} after {len(self.tried)} attempt(s)"
        return failure(self.invocation, self.tried, self.last, reason)
