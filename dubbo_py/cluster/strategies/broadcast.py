"""``broadcast``: call every routed provider (one after another, as Dubbo does); fail if any
failed, naming each provider called and each failure; otherwise return the last response. For
cache invalidation and the like. With the shard router, "every provider" means every provider
of the routed shards. Blocking and asyncio forms."""

from __future__ import annotations

from typing import Any

import grpc

from dubbo_py.cluster.support.context import ClusterContext
from dubbo_py.cluster.support.outcome import status_code
from dubbo_py.cluster.support.routing import deadline_of, route
from dubbo_py.errors import ClusterError
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = ["Sweep", "broadcast", "broadcast_async"]


class Sweep:
    """One broadcast's bookkeeping, shared by both forms: the routed ``candidates``, the
    ``deadline``, which providers failed, and the outcome."""

    def __init__(self, ctx: ClusterContext, invocation: Invocation) -> None:
        self.ctx = ctx
        self.invocation = invocation
        self.candidates = route(ctx, invocation, [])
        self.deadline = deadline_of(ctx, invocation)
        self.failed: list[URL] = []
        self.last_error: BaseException | None = None
        self.result: Any = None

    def answered(self, provider: URL, result: Any) -> None:
        """``provider`` answered ``result``."""
        self.ctx.note_success(provider)
        self.result = result

    def failure(self, provider: URL, error: grpc.RpcError) -> None:
        """``provider`` failed with ``error``."""
        self.ctx.note_failure(provider, error)
        self.failed.append(provider)
        self.last_error = error

    def outcome(self) -> Any:
        """The last response when every provider answered; else raise a ClusterError naming
        every provider called and those that failed."""
        last_error = self.last_error
        if last_error is None:
            return self.result
        invocation, candidates, failed = self.invocation, self.candidates, self.failed
        raise ClusterError(
            invocation.service,
            invocation.method,
            [p.address for p in candidates],
            f"broadcast failed on {len(failed)} of {len(candidates)} providers "
            f"({', '.join(p.address for p in failed)})",
            code=status_code(last_error) or grpc.StatusCode.UNAVAILABLE,
            last=last_error,
        )


def broadcast(ctx: ClusterContext, invocation: Invocation) -> Any:
    """Every routed provider, one after another (see the module doc)."""
    sweep = Sweep(ctx, invocation)
    for provider in sweep.candidates:
        try:
            result = ctx.call(provider, invocation, sweep.deadline.remaining())
        except grpc.RpcError as error:
            sweep.failure(provider, error)
        else:
            sweep.answered(provider, result)
    return sweep.outcome()


async def broadcast_async(ctx: ClusterContext, invocation: Invocation) -> Any:
    """:func:`broadcast`, each provider call awaited."""
    sweep = Sweep(ctx, invocation)
    for provider in sweep.candidates:
        try:
            result = await ctx.call(provider, invocation, sweep.deadline.remaining())
        except grpc.RpcError as error:
            sweep.failure(provider, error)
        else:
            sweep.answered(provider, result)
    return sweep.outcome()
