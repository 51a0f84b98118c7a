"""The calls a reference has in flight, so that closing the application lets them finish.

Closing an application used to close its provider channels at once, and gRPC cancels every call
still running on a channel it closes: a consumer that shut down under traffic failed its last
calls with ``CANCELLED: Channel closed!``. Dubbo's consumer waits for its pending requests
before it closes a connection (up to the shutdown wait, 10 s by default). So does dubbo-py:
:meth:`~dubbo_py.Application.close` first *refuses* new calls on every reference (they fail at
once with UNAVAILABLE, "the application is closed"), then waits until the calls already running
have ended, or ``wait`` seconds have passed, and only then closes the channels.

A call counts from the moment a stub is called until it returns or raises -- retries included.
A response stream counts until its first response (what failover can still move to another
provider); a stream still being read when the channels close is cancelled.

The count is kept without a lock: a call appends to a list and pops from it (each one C-level
step under the GIL), and checks the closing flag *after* appending, so a call either sees the
flag and backs out, or is counted before :meth:`CallsInFlight.wait` can see the list empty.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager

from dubbo_py.call_errors import ClusterError

__all__ = ["CallsInFlight"]

#: Seconds between two looks at the count while waiting for calls to end.
_POLL = 0.005
#: Entries :attr:`CallsInFlight.running` always holds. A list of 4 grown by one has room for
#: 8, and CPython reallocates a list whose length falls below half its room: from empty,
#: every call's append and pop reallocated it (about 300 instructions per call, under
#: callgrind); from 4, up to 4 concurrent calls never do.
_BASE = 4


class CallsInFlight:
    """The calls one reference has running (see the module docstring)."""

    __slots__ = ("closing", "running")

    def __init__(self) -> None:
        #: One entry per call running, past the first :data:`_BASE` (always there). The
        #: stubs' hot paths append and pop it themselves (what :meth:`counted` does), saving
        #: its calls on every call.
        self.running: list[None] = [None] * _BASE
        #: Set by :meth:`refuse`: new calls fail, those running go on.
        self.closing = False

    @contextmanager
    def counted(self, service: str, method: str) -> Iterator[None]:
        """Count a call of ``method`` while the block runs; :meth:`refused` raised (and
        nothing counted) once calls are refused."""
        running = self.running
        running.append(None)
        if self.closing:
            running.pop()
            raise self.refused(service, method)
        try:
            yield
        finally:
            running.pop()

    def __len__(self) -> int:
        return len(self.running) - _BASE

    def refuse(self) -> None:
        """Refuse every call from now on (the application is closing)."""
        self.closing = True

    @staticmethod
    def refused(service: str, method: str) -> ClusterError:
        """The error a refused call raises: UNAVAILABLE, before anything was sent."""
        return ClusterError(service, method, [], "the application is closed")

    def wait(self, deadline: float) -> bool:
        """Block until no call is running or ``time.monotonic()`` reaches ``deadline``; True
        when none is running."""
        while len(self.running) > _BASE:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(_POLL, left))
        return True

    async def wait_async(self, deadline: float) -> bool:
        """:meth:`wait` for the event loop the calls run on (it keeps running them)."""
        while len(self.running) > _BASE:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            await asyncio.sleep(min(_POLL, left))
        return True
