"""Strategies that call several providers at once: ``forking`` and ``broadcast``."""

from __future__ import annotations

import threading
from concurrent import futures
from typing import Any

import grpc

from dubbo_py.cluster.errors import ClusterError
from dubbo_py.cluster.strategy import ClusterContext, _deadline, _remaining, _route
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = ["broadcast", "forking"]

_pool_lock = threading.Lock()
_pool: futures.ThreadPoolExecutor | None = None


def _executor() -> futures.ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = futures.ThreadPoolExecutor(64, thread_name_prefix="dubbo-parallel")
        return _pool


def _pick_distinct(ctx: ClusterContext, invocation: Invocation, n: int) -> list[URL]:
    candidates = _route(ctx, invocation, [])
    chosen: list[URL] = []
    while len(chosen) < min(n, len(candidates)):
        chosen.append(ctx.pick(invocation, candidates, chosen))
        if chosen[-1] in chosen[:-1]:
            chosen.pop()
            break
    return chosen


def forking(ctx: ClusterContext, invocation: Invocation) -> Any:
    """Call ``forks`` (default 2) providers in parallel; the first success wins. For reads where
    latency matters more than load. Fails only when every fork failed."""
    forks = int(ctx.options(invocation.method, "forks") or 2)
    deadline = _deadline(ctx, invocation)
    chosen = _pick_distinct(ctx, invocation, max(1, forks))
    pending = {_executor().submit(ctx.call, p, invocation, _remaining(deadline)): p for p in chosen}
    last: BaseException | None = None
    for done in futures.as_completed(pending, timeout=_remaining(deadline)):
        error = done.exception()
        if error is None:
            return done.result()
        last = error
    code = last.code() if isinstance(last, grpc.RpcError) else grpc.StatusCode.UNAVAILABLE
    raise ClusterError(
        invocation.service,
        invocation.method,
        [p.address for p in chosen],
        f"all {len(chosen)} forks failed",
        code=code,
        last=last,
    )


def broadcast(ctx: ClusterContext, invocation: Invocation) -> Any:
    """Call every routed provider (one after another, as Dubbo does); fail if any failed,
    naming each failure; otherwise return the last response. For cache invalidation and the
    like. With the shard router, "every provider" means every provider of the routed shards."""
    candidates = _route(ctx, invocation, [])
    deadline = _deadline(ctx, invocation)
    failed: list[URL] = []
    last_error: BaseException | None = None
    result: Any = None
    for provider in candidates:
        try:
            result = ctx.call(provider, invocation, _remaining(deadline))
        except grpc.RpcError as error:
            failed.append(provider)
            last_error = error
    if failed:
        code = (
            last_error.code()
            if isinstance(last_error, grpc.RpcError)
            else grpc.StatusCode.UNAVAILABLE
        )
        raise ClusterError(
            invocation.service,
            invocation.method,
            [p.address for p in failed],
            f"broadcast failed on {len(failed)} of {len(candidates)} providers",
            code=code,
            last=last_error,
        )
    return result
