"""Routing from an event loop without running a script on it.

(Here, not in :mod:`dubbo_py.router.script`: every asyncio consumer imports this, and the
script package loads Starlark and the rule readers.)

A script run takes up to its budget (50 ms by default) in the sandbox worker; the routing
thread waits for the answer. On an asyncio consumer that thread is the event loop's, and every
other call of the process would wait too. :func:`settle_scripts` routes the call once on the
loop with script runs forbidden (:class:`WouldBlock` when a script router has no cached answer
for it), and when one would run, routes it again on a worker thread: the script's answer is
then cached in its bound router, and the strategy's own routing on the loop finds it there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from contextvars import ContextVar
from typing import Any, Protocol

from dubbo_py.invocation import Invocation

__all__ = ["WouldBlock", "forbidding_runs", "runs_forbidden", "settle_scripts"]

_FORBIDDEN: ContextVar[bool] = ContextVar("dubbo_py_script_runs_forbidden", default=False)


class WouldBlock(Exception):
    """A script router would have run its script while runs are forbidden."""


class _Chain(Protocol):
    @property
    def active(self) -> Iterable[tuple[str, Any]]: ...

    def route(self, invocation: Invocation) -> object: ...


def runs_forbidden() -> bool:
    """True while :func:`settle_scripts` probes a chain (a script router then raises
    :class:`WouldBlock` instead of running its script). A bound router whose ``route`` may run
    a script says so with a true ``runs_scripts`` attribute."""
    return _FORBIDDEN.get()


def forbidding_runs(chain: _Chain, invocation: Invocation) -> bool:
    """Route ``invocation`` with script runs forbidden; False when a script would have run."""
    token = _FORBIDDEN.set(True)
    try:
        chain.route(invocation)
    except WouldBlock:
        return False
    except Exception:  # no provider, ...: the strategy routes again and reports it
        return True
    finally:
        _FORBIDDEN.reset(token)
    return True


async def settle_scripts(chain: _Chain, invocation: Invocation) -> None:
    """Before an asyncio call is routed on the loop: run the scripts it needs, if any, on a
    worker thread (their answers are then cached for the routing that follows)."""
    # A recording chain (router snapshots) records the call's own routing only.
    chain = getattr(chain, "unrecorded", chain)
    if not any(getattr(router, "runs_scripts", False) for _, router in chain.active):
        return
    if forbidding_runs(chain, invocation):
        return
    try:
        await asyncio.to_thread(chain.route, invocation)
    except Exception:  # reported by the strategy's own routing
        return
