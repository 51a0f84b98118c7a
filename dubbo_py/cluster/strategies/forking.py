"""``forking``: call ``forks`` (default 2) distinct providers at once; the first success wins.
For reads where latency matters more than load. Blocking (forks on a shared thread pool) and
asyncio (forks as tasks on the loop) forms.

As in Dubbo, the forks that lose are not cancelled: they run to their end (bounded by the
call's deadline), their results dropped and their outcomes recorded, so a hung provider that
loses every race still counts towards its ejection. When every fork failed, an application
error (a provider's answer) is raised as is; otherwise a ClusterError names every fork. The
deadline bounds the wait: a call still running then fails with DEADLINE_EXCEEDED.
"""

from __future__ import annotations

import asyncio
from concurrent import futures
from functools import partial
from typing import Any

import grpc

from dubbo_py.cluster.support.context import ClusterContext
from dubbo_py.cluster.support.outcome import is_call_failure, status_code
from dubbo_py.cluster.support.pool import LazyPool
from dubbo_py.cluster.support.routing import deadline_of, route
from dubbo_py.errors import ClusterError
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = ["Race", "forking", "forking_async", "note_outcome", "pick_distinct"]

_forks = LazyPool(64, "dubbo-parallel")


def pick_distinct(ctx: ClusterContext, invocation: Invocation, n: int) -> list[URL]:
    """Up to ``n`` distinct providers for one call, picked by the reference's balancer."""
    candidates = route(ctx, invocation, [])
    chosen: list[URL] = []
    while len(chosen) < min(n, len(candidates)):
        chosen.append(ctx.pick(invocation, candidates, chosen))
        if chosen[-1] in chosen[:-1]:
            chosen.pop()
            break
    return chosen


class Race:
    """One forking call's bookkeeping, shared by both forms: the forks ``chosen``, the
    ``timeout`` they run under, the failures so far, and the error when none answers."""

    def __init__(self, ctx: ClusterContext, invocation: Invocation) -> None:
        self.ctx = ctx
        self.invocation = invocation
        self.deadline = deadline_of(ctx, invocation)
        self.chosen = pick_distinct(ctx, invocation, max(1, ctx.settings[invocation.method].forks))
        self.timeout = self.deadline.remaining()
        self.errors: list[BaseException] = []

    def won(self, provider: URL, error: BaseException | None) -> bool:
        """Record how ``provider``'s fork ended; True when it answered (the race is won)."""
        self.ctx.note(provider, error)
        if error is not None:
            self.errors.append(error)
        return error is None

    def timed_out(self) -> ClusterError:
        """The error of a race whose deadline passed before any fork answered."""
        return ClusterError(
            self.invocation.service,
            self.invocation.method,
            [p.address for p in self.chosen],
            f"no fork answered within {self.timeout or 0.0:.3f}s",
            code=grpc.StatusCode.DEADLINE_EXCEEDED,
        )

    def lost(self) -> BaseException:
        """The error of a race whose every fork failed: an application error (a provider's
        answer) as it is, else a ClusterError naming every fork."""
        errors = self.errors
        answer = next((e for e in errors if status_code(e) and not is_call_failure(e)), None)
        if answer is not None:
            return answer
        last = errors[-1]
        return ClusterError(
            self.invocation.service,
            self.invocation.method,
            [p.address for p in self.chosen],
            f"all {len(self.chosen)} forks failed",
            code=status_code(last) or grpc.StatusCode.UNAVAILABLE,
            last=last,
        )


def note_outcome(
    ctx: ClusterContext, provider: URL, fork: futures.Future[Any] | asyncio.Future[Any]
) -> None:
    """Record how a fork left running after its call returned ended (success or failure)."""
    if fork.cancelled():
        return
    # Retrieved, so a late fork's failure is not reported as never retrieved.
    error = fork.exception()
    if error is None or isinstance(error, grpc.RpcError):
        ctx.note(provider, error)


def forking(ctx: ClusterContext, invocation: Invocation) -> Any:
    """The forks on the shared thread pool; the first success wins (see the module doc)."""
    race = Race(ctx, invocation)
    pending = {_forks.get().submit(ctx.call, p, invocation, race.timeout): p for p in race.chosen}
    seen: set[futures.Future[Any]] = set()
    try:
        for done in futures.as_completed(pending, timeout=race.timeout):
            seen.add(done)
            if race.won(pending[done], done.exception()):
                return done.result()
    except futures.TimeoutError:
        raise race.timed_out() from None
    finally:
        for fork, provider in pending.items():
            if fork not in seen:
                fork.add_done_callback(partial(note_outcome, ctx, provider))
    raise race.lost()


# Forks left running after their call returned: the loop keeps only weak references to tasks.
_running: set[asyncio.Future[Any]] = set()


def _let_finish(ctx: ClusterContext, provider: URL, fork: asyncio.Future[Any]) -> None:
    _running.add(fork)
    fork.add_done_callback(_running.discard)
    fork.add_done_callback(partial(note_outcome, ctx, provider))


async def forking_async(ctx: ClusterContext, invocation: Invocation) -> Any:
    """The forks as tasks on the loop; the first success wins (see the module doc)."""
    race = Race(ctx, invocation)
    forks = {asyncio.ensure_future(ctx.call(p, invocation, race.timeout)): p for p in race.chosen}
    pending = set(forks)
    try:
        while pending:
            done, pending = await asyncio.wait(
                pending, timeout=race.deadline.remaining(), return_when=asyncio.FIRST_COMPLETED
            )
            if not done:
                raise race.timed_out()
            for fork in done:
                if race.won(forks[fork], fork.exception()):
                    return fork.result()
    finally:
        for fork in pending:
            _let_finish(ctx, forks[fork], fork)
    raise race.lost()
