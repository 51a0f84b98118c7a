"""Strategies that call several providers at once: ``forking`` and ``broadcast``."""

from __future__ import annotations

import threading
from concurrent import futures
from functools import partial
from typing import Any

import grpc

from dubbo_py.cluster.errors import ClusterError, is_call_failure, status_code
from dubbo_py.cluster.strategy import ClusterContext, _deadline, _remaining, _route
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = [
    "broadcast",
    "broadcast_failed",
    "forking",
    "forks_failed",
    "no_fork_answered",
    "note_outcome",
    "pick_distinct",
]

_pool_lock = threading.Lock()
_pool: futures.ThreadPoolExecutor | None = None


def _executor() -> futures.ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = futures.ThreadPoolExecutor(64, thread_name_prefix="dubbo-parallel")
        return _pool


def pick_distinct(ctx: ClusterContext, invocation: Invocation, n: int) -> list[URL]:
    """Up to ``n`` distinct providers for one call, picked by the reference's balancer."""
    candidates = _route(ctx, invocation, [])
    chosen: list[URL] = []
    while len(chosen) < min(n, len(candidates)):
        chosen.append(ctx.pick(invocation, candidates, chosen))
        if chosen[-1] in chosen[:-1]:
            chosen.pop()
            break
    return chosen


def forking(ctx: ClusterContext, invocation: Invocation) -> Any:
    """Call ``forks`` (default 2) distinct providers in parallel; the first success wins. For
    reads where latency matters more than load. When every fork failed, an application error
    (a provider's answer) is raised as is; otherwise a :class:`ClusterError` names every fork.
    The deadline bounds the wait: a call still running then fails with DEADLINE_EXCEEDED."""
    forks = ctx.settings[invocation.method].forks
    deadline = _deadline(ctx, invocation)
    chosen = pick_distinct(ctx, invocation, max(1, forks))
    timeout = _remaining(deadline)
    pending = {_executor().submit(ctx.call, p, invocation, timeout): p for p in chosen}
    errors: list[BaseException] = []
    seen: set[futures.Future[Any]] = set()
    try:
        for done in futures.as_completed(pending, timeout=timeout):
            seen.add(done)
            error = done.exception()
            if error is None:
                ctx.note_success(pending[done])
                return done.result()
            ctx.note_failure(pending[done], error)
            errors.append(error)
    except futures.TimeoutError:
        raise no_fork_answered(invocation, chosen, timeout) from None
    finally:
        # Forks still running are recorded when they end: a hung provider that loses every
        # race must still count towards its ejection.
        for fork, provider in pending.items():
            if fork not in seen:
                fork.add_done_callback(partial(note_outcome, ctx, provider))
    raise forks_failed(invocation, chosen, errors)


def note_outcome(ctx: ClusterContext, provider: URL, fork: futures.Future[Any]) -> None:
    """Record how a fork left running after its call returned ended (success or failure)."""
    if fork.cancelled():
        return
    error = fork.exception()
    if error is None:
        ctx.note_success(provider)
    elif isinstance(error, grpc.RpcError):
        ctx.note_failure(provider, error)


def no_fork_answered(
    invocation: Invocation, chosen: list[URL], timeout: float | None
) -> ClusterError:
    """The error of a forking call whose deadline passed before any fork answered."""
    return ClusterError(
        invocation.service,
        invocation.method,
        [p.address for p in chosen],
        f"no fork answered within {timeout or 0.0:.3f}s",
        code=grpc.StatusCode.DEADLINE_EXCEEDED,
    )


def forks_failed(
    invocation: Invocation, chosen: list[URL], errors: list[BaseException]
) -> BaseException:
    """The error of a forking call whose every fork failed: an application error (a provider's
    answer) as it is, else a :class:`ClusterError` naming every fork."""
    answer = next((e for e in errors if status_code(e) and not is_call_failure(e)), None)
    if answer is not None:
        return answer
    last = errors[-1]
    return ClusterError(
        invocation.service,
        invocation.method,
        [p.address for p in chosen],
        f"all {len(chosen)} forks failed",
        code=status_code(last) or grpc.StatusCode.UNAVAILABLE,
        last=last,
    )


def broadcast(ctx: ClusterContext, invocation: Invocation) -> Any:
    """Call every routed provider (one after another, as Dubbo does); fail if any failed,
    naming each provider called and each failure; otherwise return the last response. For cache
    invalidation and the like. With the shard router, "every provider" means every provider of
    the routed shards."""
    candidates = _route(ctx, invocation, [])
    deadline = _deadline(ctx, invocation)
    failed: list[URL] = []
    last_error: BaseException | None = None
    result: Any = None
    for provider in candidates:
        try:
            result = ctx.call(provider, invocation, _remaining(deadline))
        except grpc.RpcError as error:
            ctx.note_failure(provider, error)
            failed.append(provider)
            last_error = error
        else:
            ctx.note_success(provider)
    if last_error is not None:
        raise broadcast_failed(invocation, candidates, failed, last_error)
    return result


def broadcast_failed(
    invocation: Invocation,
    candidates: tuple[URL, ...],
    failed: list[URL],
    last_error: BaseException,
) -> ClusterError:
    """The error of a broadcast that failed on ``failed`` (some of ``candidates``)."""
    return ClusterError(
        invocation.service,
        invocation.method,
        [p.address for p in candidates],
        f"broadcast failed on {len(failed)} of {len(candidates)} providers "
        f"({', '.join(p.address for p in failed)})",
        code=status_code(last_error) or grpc.StatusCode.UNAVAILABLE,
        last=last_error,
    )
