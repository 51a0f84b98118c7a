"""Dubbo's consumer-side ``actives`` limit: calls of a method in flight to one provider, at most.

Apache Dubbo's ``ActiveLimitFilter`` (dubbo-rpc-api) counts, per provider and method, the calls
a consumer has in flight; a call that finds ``actives`` of them running waits until one ends, up
to the method's timeout, and fails with ``LIMIT_EXCEEDED`` when none does -- a failure the
failover strategy retries on another provider. The filters here do the same around each
attempt, blocking (:class:`ActiveLimit`) or awaited (:class:`AsyncActiveLimit`), reading the
limit from the method's live settings (``actives``, set by the reference's options or a
consumer override) on every call:

* a slot freed by a call that ends goes to the call that has waited longest (no stampede of
  waiters re-checking; the next in line proceeds);
* the wait counts against the attempt's time: the call goes on with what is left of its
  timeout, so the caller's deadline holds (Dubbo restarts the timeout after the wait);
* a call that waited in vain fails with RESOURCE_EXHAUSTED carrying the ``dubbo-shed`` marker
  (the call never ran), which strategies retry elsewhere as Dubbo's failover does; without a
  timeout the call waits for a slot.

A reference adds the filter only while some method has a limit, so calls without one keep the
compiled fast path (:mod:`dubbo_py.cluster.plan`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import grpc

from dubbo_py.cluster.method_settings import MethodSettings
from dubbo_py.cluster.support.outcome import SHED_KEY
from dubbo_py.consumer.filters import AsyncProviderCall, ProviderCall
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = ["ActiveLimit", "ActiveLimits", "ActivesExceeded", "AsyncActiveLimit"]


class ActivesExceeded(grpc.RpcError):
    """RESOURCE_EXHAUSTED raised on the consumer: the provider had ``actives`` calls of the
    method in flight for the whole wait. Nothing was sent, so a strategy may try elsewhere."""

    def __init__(self, address: str, method: str, limit: int, waited: float) -> None:
        self.address = address
        self._details = (
            f"{address}: {limit} calls of {method} already in flight (actives={limit}); "
            f"no slot freed within {waited * 1000:.0f} ms"
        )
        super().__init__(self._details)

    def code(self) -> grpc.StatusCode:
        """Always RESOURCE_EXHAUSTED."""
        return grpc.StatusCode.RESOURCE_EXHAUSTED

    def details(self) -> str:
        """Which provider and method, the limit and the wait."""
        return self._details

    def trailing_metadata(self) -> tuple[Any, ...]:
        """The shed marker: the call did not run."""
        return ((SHED_KEY, "actives"),)

    def __str__(self) -> str:
        return f"<ActivesExceeded: {self._details}>"


class _Waiter:
    __slots__ = ("granted", "wake")

    def __init__(self, wake: Callable[[], bool]) -> None:
        self.granted = False
        #: Wakes the waiting call; False when it cannot be woken (its event loop closed).
        self.wake = wake


class _Slots:
    """The calls in flight to one provider for one method, and those waiting for a slot."""

    __slots__ = ("active", "lock", "waiters")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active = 0
        self.waiters: deque[_Waiter] = deque()

    def try_take(self, limit: int, wake: Callable[[], bool]) -> _Waiter | None:
        """Take a slot (None) or queue a waiter to be woken with one."""
        with self.lock:
            if self.active < limit and not self.waiters:
                self.active += 1
                return None
            waiter = _Waiter(wake)
            self.waiters.append(waiter)
            return waiter

    def give_up(self, waiter: _Waiter) -> bool:
        """Stop waiting; True when the slot had been handed over meanwhile (then it is held)."""
        with self.lock:
            if waiter.granted:
                return True
            self.waiters.remove(waiter)
            return False

    def release(self) -> None:
        """A call ended: its slot goes to the longest waiter, else back to the pool."""
        with self.lock:
            while self.waiters:
                waiter = self.waiters.popleft()
                waiter.granted = True
                if waiter.wake():
                    return
            self.active -= 1


class ActiveLimits:
    """The slot counts of one reference, by provider address and method (shared by every
    wrapping of its provider calls, so a rebuilt stack keeps the calls in flight counted)."""

    def __init__(self, settings: Mapping[str, MethodSettings]) -> None:
        self.settings = settings
        self._slots: dict[tuple[str, str], _Slots] = {}
        self._lock = threading.Lock()

    def slots(self, address: str, method: str) -> _Slots:
        """The counts of ``method`` on the provider at ``address``."""
        key = (address, method)
        found = self._slots.get(key)
        if found is None:
            with self._lock:
                found = self._slots.setdefault(key, _Slots())
        return found

    def in_flight(self, address: str, method: str) -> int:
        """Calls of ``method`` in flight to ``address`` (for tests and diagnostics)."""
        found = self._slots.get((address, method))
        return 0 if found is None else found.active


def _left(timeout: float | None, started: float) -> float | None:
    return None if timeout is None else max(0.0, timeout - (time.monotonic() - started))


class ActiveLimit:
    """The ``actives`` limit around each blocking attempt."""

    __slots__ = ("limits",)

    def __init__(self, limits: ActiveLimits) -> None:
        self.limits = limits

    def __call__(
        self, provider: URL, invocation: Invocation, timeout: float | None, proceed: ProviderCall
    ) -> Any:
        limit = self.limits.settings[invocation.method].actives
        if limit <= 0:
            return proceed(provider, invocation, timeout)
        slots = self.limits.slots(provider.address, invocation.method)
        started = time.monotonic()
        event = threading.Event()

        def wake() -> bool:
            event.set()
            return True

        waiter = slots.try_take(limit, wake)
        if waiter is not None:
            event.wait(timeout)
            if not slots.give_up(waiter):
                raise ActivesExceeded(
                    provider.address, invocation.method, limit, time.monotonic() - started
                )
            timeout = _left(timeout, started)
        try:
            return proceed(provider, invocation, timeout)
        finally:
            slots.release()


class AsyncActiveLimit:
    """The ``actives`` limit around each awaited attempt (the wait does not block the loop)."""

    __slots__ = ("limits",)

    def __init__(self, limits: ActiveLimits) -> None:
        self.limits = limits

    async def __call__(
        self,
        provider: URL,
        invocation: Invocation,
        timeout: float | None,
        proceed: AsyncProviderCall,
    ) -> Any:
        limit = self.limits.settings[invocation.method].actives
        if limit <= 0:
            return await proceed(provider, invocation, timeout)
        slots = self.limits.slots(provider.address, invocation.method)
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()

        def wake() -> bool:
            # Called under the slots' lock from whichever thread ended a call.
            try:
                loop.call_soon_threadsafe(_resolve, woken)
            except RuntimeError:  # the loop is closed: nobody is waiting any more
                return False
            return True

        waiter = slots.try_take(limit, wake)
        if waiter is not None:
            try:
                await asyncio.wait_for(asyncio.shield(woken), timeout)
            except TimeoutError:
                pass
            except asyncio.CancelledError:
                if slots.give_up(waiter):
                    slots.release()
                raise
            if not slots.give_up(waiter):
                raise ActivesExceeded(
                    provider.address, invocation.method, limit, time.monotonic() - started
                )
            timeout = _left(timeout, started)
        try:
            return await proceed(provider, invocation, timeout)
        finally:
            slots.release()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
