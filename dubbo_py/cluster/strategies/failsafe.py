"""``failsafe``: never raise. One attempt (as Apache Dubbo's ``FailsafeClusterInvoker``); a
failure, of any kind, is logged and the method's empty response is returned (for calls whose
result is optional, such as audit logging). Blocking and asyncio forms."""

from __future__ import annotations

import logging
from typing import Any

import grpc

from dubbo_py.cluster.strategies.failfast import failfast, failfast_async
from dubbo_py.cluster.support.context import ClusterContext
from dubbo_py.invocation import Invocation

__all__ = ["failsafe", "failsafe_answer", "failsafe_async"]

log = logging.getLogger(__name__)


def failsafe(ctx: ClusterContext, invocation: Invocation) -> Any:
    """One attempt; on failure, the method's empty response (logged)."""
    try:
        return failfast(ctx, invocation)
    except grpc.RpcError as error:
        return failsafe_answer(ctx, invocation, error)


async def failsafe_async(ctx: ClusterContext, invocation: Invocation) -> Any:
    """:func:`failsafe`, the provider call awaited."""
    try:
        return await failfast_async(ctx, invocation)
    except grpc.RpcError as error:
        return failsafe_answer(ctx, invocation, error)


def failsafe_answer(ctx: ClusterContext, invocation: Invocation, error: grpc.RpcError) -> Any:
    """What ``failsafe`` returns for a failed call: the method's empty response (logged)."""
    log.error(
        "failsafe: %s.%s failed, returning an empty response: %s",
        invocation.service,
        invocation.method,
        error,
    )
    return ctx.empty_response()
