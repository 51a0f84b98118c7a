"""``failfast``: one attempt; any failure goes straight to the caller (for non-idempotent
writes). Blocking and asyncio forms."""

from __future__ import annotations

from typing import Any

import grpc

from dubbo_py.cluster.support.context import ClusterContext
from dubbo_py.cluster.support.outcome import failure
from dubbo_py.cluster.support.routing import deadline_of, route
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = ["failfast", "failfast_async", "failfast_failed", "one_provider"]


def one_provider(ctx: ClusterContext, invocation: Invocation) -> tuple[URL, float | None]:
    """The provider of a single-attempt call, and the seconds it may take (None: unbounded)."""
    provider = ctx.pick(invocation, route(ctx, invocation, []))
    return provider, deadline_of(ctx, invocation).remaining()


def failfast_failed(
    ctx: ClusterContext, invocation: Invocation, provider: URL, error: grpc.RpcError
) -> BaseException:
    """Record the failure of a single attempt on ``provider``; what the caller sees."""
    ctx.note_failure(provider, error)
    return failure(invocation, [provider], error, "failed (failfast)")


def failfast(ctx: ClusterContext, invocation: Invocation) -> Any:
    """One attempt; any failure goes straight to the caller (for non-idempotent writes)."""
    provider, timeout = one_provider(ctx, invocation)
    try:
        response = ctx.call(provider, invocation, timeout)
    except grpc.RpcError as error:
        raise failfast_failed(ctx, invocation, provider, error) from None
    ctx.note_success(provider)
    return response


async def failfast_async(ctx: ClusterContext, invocation: Invocation) -> Any:
    """:func:`failfast`, the provider call awaited."""
    provider, timeout = one_provider(ctx, invocation)
    try:
        response = await ctx.call(provider, invocation, timeout)
    except grpc.RpcError as error:
        raise failfast_failed(ctx, invocation, provider, error) from None
    ctx.note_success(provider)
    return response
