"""Router snapshots of live calls: how a reference routed its last calls, for an operator
asking a running consumer why a call landed where it did (Dubbo's ``enableRouterSnapshot`` /
``getRecentRouterSnapshot`` QoS commands, :mod:`dubbo_py.qos.server`).

Nothing is recorded, and nothing on the call path changes, until an operator enables a
service: :class:`RouteSnapshots` (one per application) then gives each of the service's stacks
a :class:`RouteRecorder`, and the stack's cluster contexts route through
:class:`RecordingRoutes` and call providers through :class:`RecordingCall` (or its awaited
form). Those are not plain provider calls, so the method's call plan steps aside while recording
is on and every call takes the strategy, which routes through the recording chain and attempts
through the recording call. Disabling puts the stack's own routes and call back.

A record (:class:`CallRecord`) holds the time, the method, the call's attachments and
arguments (what the rules read; bounded), each router's providers in and out (the chain's
:meth:`~dubbo_py.router.chain.BoundChain.trace`), and each attempt: the provider the balancer
picked, whether it was a retry, and how it ended. A call is followed through its attempts by a
context variable, so the asyncio flavour's tasks and the blocking flavour's threads keep
theirs apart; a strategy that attempts on other threads (``forking``) records its routing but
not its attempts.
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import Any

import grpc

from dubbo_py.invocation import Invocation
from dubbo_py.router.chain import BoundChain
from dubbo_py.url import URL

__all__ = [
    "MAX_RECENT",
    "AsyncRecordingCall",
    "CallRecord",
    "RecordingCall",
    "RecordingChain",
    "RecordingRoutes",
    "RouteRecorder",
    "RouteSnapshots",
    "RouterRule",
    "continued",
]

#: Calls kept (Dubbo keeps the last 32).
MAX_RECENT = 32
#: At most this many arguments and attachments per record, each cut to _MAX_TEXT characters.
_MAX_ITEMS = 16
_MAX_TEXT = 200

#: (router name, priority, rule key, rule version) of a router in force.
RouterRule = tuple[str, int, str | None, str | None]

#: The call being recorded in this thread or task.
_current: ContextVar[CallRecord | None] = ContextVar("dubbo_py_route_record", default=None)


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 3] + "..."


def _addresses(chain: BoundChain, mask: int) -> list[str]:
    return [p.address for p in chain.snapshot.select(mask)]


class CallRecord:
    """One recorded call (see the module docstring); filled in as the call goes on."""

    __slots__ = (
        "arguments",
        "attachments",
        "attempts",
        "invocation",
        "method",
        "no_provider",
        "routers",
        "service",
        "time",
    )

    def __init__(self, service: str, invocation: Invocation) -> None:
        self.time = time.time()
        self.service = service
        self.method = invocation.method
        #: Kept so that the call's re-routes and attempts find this record (by identity).
        self.invocation = invocation
        items = list(invocation.attachments.items())[:_MAX_ITEMS]
        self.attachments = {k: _text(v) for k, v in items}
        try:
            arguments = list(invocation.arguments)[:_MAX_ITEMS]
        except Exception:  # a request that cannot list its fields is shown without them
            arguments = []
        self.arguments = [_text(repr(a)) for a in arguments]
        self.routers: list[dict[str, Any]] = []
        self.attempts: list[dict[str, Any]] = []
        self.no_provider: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The record as ``/getRecentRouterSnapshot`` shows it."""
        return {
            "time": self.time,
            "service": self.service,
            "method": self.method,
            "attachments": dict(self.attachments),
            "arguments": list(self.arguments),
            "routers": list(self.routers),
            "no_provider": self.no_provider,
            "attempts": list(self.attempts),
        }


class RouteSnapshots:
    """An application's router snapshot switch and its recent records: which services are
    recorded, and the last :data:`MAX_RECENT` calls of any of them."""

    def __init__(self, size: int = MAX_RECENT) -> None:
        self._lock = threading.Lock()
        self._enabled: set[str] = set()
        self._recent: deque[CallRecord] = deque(maxlen=size)

    def enabled(self) -> list[str]:
        """The service keys recorded now."""
        with self._lock:
            return sorted(self._enabled)

    def enable(self, service: str) -> bool:
        """Record ``service`` from now on (its earlier records are dropped, so what is read
        next is this session's); False when it already was."""
        with self._lock:
            if service in self._enabled:
                return False
            self._enabled.add(service)
            kept = [r for r in self._recent if r.service != service]
            self._recent.clear()
            self._recent.extend(kept)
            return True

    def disable(self, service: str) -> bool:
        """Stop recording ``service`` (its records stay readable); False when it was not."""
        with self._lock:
            if service not in self._enabled:
                return False
            self._enabled.discard(service)
            return True

    def add(self, record: CallRecord) -> None:
        """Keep ``record`` among the recent ones (the oldest goes)."""
        with self._lock:
            self._recent.append(record)

    def recent(self, pattern: re.Pattern[str] | None = None) -> list[dict[str, Any]]:
        """The records kept, oldest first, of services ``pattern`` matches in full (None:
        all)."""
        with self._lock:
            records = list(self._recent)
        return [r.to_json() for r in records if pattern is None or pattern.fullmatch(r.service)]

    def recorder(self, service: str, rules: Callable[[], Iterable[RouterRule]]) -> RouteRecorder:
        """The recorder for one stack of ``service``; ``rules`` lists the routers in force."""
        return RouteRecorder(self, service, rules)


class RouteRecorder:
    """Records the calls of one stack (see the module docstring)."""

    def __init__(
        self, snapshots: RouteSnapshots, service: str, rules: Callable[[], Iterable[RouterRule]]
    ) -> None:
        self.snapshots = snapshots
        self.service = service
        self._rules = rules

    def routes(self, source: Any) -> RecordingRoutes:
        """``source`` (a :class:`~dubbo_py.cluster.support.context.ChainSource`), recorded."""
        return RecordingRoutes(source, self)

    def call(self, call: Any, asyncio: bool) -> Any:
        """A provider call of the flavour, recorded."""
        return AsyncRecordingCall(call) if asyncio else RecordingCall(call)

    def routed(self, chain: BoundChain, invocation: Invocation) -> None:
        """Record how ``chain`` routes ``invocation``: a new record for a new call, nothing
        for a retry's re-route of the call being recorded."""
        record = _current.get()
        if record is not None and record.invocation is invocation:
            return
        record = CallRecord(self.service, invocation)
        _current.set(record)
        rules = {name: (priority, key, version) for name, priority, key, version in self._rules()}
        try:
            _survivors, steps = chain.trace(invocation)
        except Exception as exc:  # a router that raises: the call's own routing says so
            record.no_provider = f"routing failed: {exc}"
            steps = []
        for step in steps:
            priority, key, version = rules.get(step.router, (None, None, None))
            kept = _addresses(chain, step.mask_out)
            record.routers.append(
                {
                    "router": step.router,
                    "priority": priority,
                    "rule": key,
                    "version": version,
                    "in": _addresses(chain, step.mask_in),
                    "out": kept,
                    "removed": [a for a in _addresses(chain, step.mask_in) if a not in kept],
                }
            )
            if not step.mask_out:
                record.no_provider = step.reason or f"{step.router} left no provider"
        self.snapshots.add(record)


class RecordingChain:
    """A bound chain whose ``route`` also records (it has no per-method plan, so a call plan
    compiled against it is never made)."""

    __slots__ = ("_inner", "_recorder", "empty_reason", "snapshot")

    def __init__(self, inner: BoundChain, recorder: RouteRecorder) -> None:
        self._inner = inner
        self._recorder = recorder
        self.snapshot = inner.snapshot
        self.empty_reason = inner.empty_reason

    def plan(self, _call: Invocation) -> None:
        """No shortcut while recording."""
        return None

    def route(self, invocation: Invocation) -> tuple[URL, ...]:
        """The chain's routing, recorded first."""
        self._recorder.routed(self._inner, invocation)
        return self._inner.route(invocation)

    def trace(self, invocation: Invocation) -> Any:
        """The chain's own trace."""
        return self._inner.trace(invocation)

    @property
    def unrecorded(self) -> BoundChain:
        """The chain itself, for routing that is not the call's own (the asyncio consumer's
        look-ahead for script rules, :func:`dubbo_py.router.offloop.settle_scripts`)."""
        return self._inner


class RecordingRoutes:
    """A chain source whose chain records each call's routing."""

    __slots__ = ("_recorder", "_source", "_wrapped")

    def __init__(self, source: Any, recorder: RouteRecorder) -> None:
        self._source = source
        self._recorder = recorder
        self._wrapped: RecordingChain | None = None

    @property
    def chain(self) -> Any:
        """The source's current chain, recording (one wrapper per chain)."""
        inner = self._source.chain
        wrapped = self._wrapped
        if wrapped is None or wrapped._inner is not inner:
            wrapped = self._wrapped = RecordingChain(inner, self._recorder)
        return wrapped


def continued(previous: Invocation, current: Invocation) -> None:
    """The call recorded as ``previous`` goes on as ``current`` (a generic call's invocation
    once its parameter types are read): its attempts are then recorded under the same record."""
    record = _current.get()
    if record is not None and record.invocation is previous:
        record.invocation = current


def _outcome(error: BaseException | None) -> str:
    if error is None:
        return "OK"
    if isinstance(error, grpc.RpcError):
        code = error.code() if hasattr(error, "code") else None
        return getattr(code, "name", "ERROR")
    return type(error).__name__


def _attempt(invocation: Invocation, provider: URL) -> dict[str, Any] | None:
    record = _current.get()
    if record is None or record.invocation is not invocation:
        return None
    entry: dict[str, Any] = {
        "provider": provider.address,
        "retry": bool(record.attempts),
        "outcome": None,
    }
    record.attempts.append(entry)
    return entry


class RecordingCall:
    """A blocking provider call that records each attempt of the call being recorded."""

    __slots__ = ("_call",)

    def __init__(self, call: Any) -> None:
        self._call = call

    def __call__(self, provider: URL, invocation: Invocation, timeout: float | None) -> Any:
        entry = _attempt(invocation, provider)
        if entry is None:
            return self._call(provider, invocation, timeout)
        try:
            response = self._call(provider, invocation, timeout)
        except BaseException as exc:
            entry["outcome"] = _outcome(exc)
            raise
        entry["outcome"] = "OK"
        return response


class AsyncRecordingCall:
    """:class:`RecordingCall`, awaited."""

    __slots__ = ("_call",)

    def __init__(self, call: Any) -> None:
        self._call = call

    async def __call__(self, provider: URL, invocation: Invocation, timeout: float | None) -> Any:
        entry = _attempt(invocation, provider)
        if entry is None:
            return await self._call(provider, invocation, timeout)
        try:
            response = await self._call(provider, invocation, timeout)
        except BaseException as exc:
            entry["outcome"] = _outcome(exc)
            raise
        entry["outcome"] = "OK"
        return response
