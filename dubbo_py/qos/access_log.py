"""Access logs (Dubbo's ``AccessLogFilter``): one line per call, switched by the ``accesslog``
parameter of a reference or a service -- in code, in ``dubbo.yaml``, or by an override rule.

``accesslog`` ``true`` (or ``default``) logs each call at INFO on the ``dubbo.accesslog.<service>``
logger (under ``dubbo.accesslog``, as Dubbo names it). Switching it on gives ``dubbo.accesslog``
level INFO unless the application set one, and where no handler is configured anywhere (none on
the root, none on the access loggers) the lines go to standard error, as Python's last-resort
handler does for warnings: an access log an operator asked for is seen. A path appends to that
file, rotated at midnight (the day's file is renamed ``<path>.YYYYMMDD``, as Dubbo's).
``false`` or nothing: no access log, and nothing on the call path (the wrappers are put in place
only while it is on).

A path from an override rule is not written: anyone who may write rules could otherwise make
every consumer write files where they say. As Dubbo's default (``accesslog.fixed.path``), such
a path logs to the logger instead, with one warning.

A call only takes what it must (times, addresses, outcome, the request); the line is formatted
and written on the writer thread (:class:`AccessLogWriter`), so a slow disk never slows a call.
The queue is bounded: past :data:`MAX_QUEUED` lines waiting, further lines are dropped and
counted, and the next line written says how many were lost.

The line, as Dubbo's ``AccessLogData`` with the outcome and duration added::

    [2026-12-05 07:42:08.12345] -> [2026-12-05 07:42:08.13012] 127.0.0.1:53190 -> \
127.0.0.1:50051 - grp/demo.Greeter:1.0.0 SayHello(demo.HelloRequest) ["name: \"x\""] OK 6.671ms

A generic call's line names the Java method, its parameter types and the arguments' Python
values: ``estate.UserService getUser(java.lang.Long) [7] OK 1.208ms``.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import grpc

from dubbo_py.invocation import GenericRequest

__all__ = [
    "ACCESSLOG_KEY",
    "ACCESS_LOGGER",
    "MAX_QUEUED",
    "AccessEntry",
    "AccessLogWriter",
    "AccessSwitch",
    "AsyncConsumerAccessLog",
    "ConsumerAccessLog",
    "ProviderAccessLogs",
    "access_log_target",
    "format_line",
    "switched_on",
    "writer",
]

#: The parameter that switches the access log.
ACCESSLOG_KEY = "accesslog"
#: The logger (and prefix of the per-service loggers) lines go to.
ACCESS_LOGGER = "dubbo.accesslog"
#: Lines waiting to be written before further ones are dropped.
MAX_QUEUED = 10_000
#: Arguments shown per line, and characters per argument.
_MAX_ARGUMENTS = 16
_MAX_TEXT = 256

log = logging.getLogger(__name__)


def access_log_target(value: str | None, *, from_rule: bool = False) -> str | None:
    """Where lines go for an ``accesslog`` value: None (off), ``""`` (the logger) or a file
    path. A path from an override rule (``from_rule``) means the logger (see the module
    docstring)."""
    text = (value or "").strip()
    if not text or text.lower() == "false":
        return None
    if text.lower() in ("true", "default"):
        return ""
    if from_rule:
        _warn_rule_path(text)
        return ""
    return text


_warned: set[str] = set()


def _warn_rule_path(path: str) -> None:
    if path not in _warned:
        _warned.add(path)
        log.warning(
            "accesslog=%s from an override rule: a rule may not choose a file to write; "
            "logging to %s instead (set the path in code or dubbo.yaml)",
            path,
            ACCESS_LOGGER,
        )


@dataclass(frozen=True, slots=True)
class AccessEntry:
    """What one call leaves for its line (formatted on the writer thread)."""

    started: float
    ended: float
    caller: str
    callee: str
    service: str
    version: str
    group: str
    method: str
    request: Any
    outcome: str
    elapsed_ms: float


def _when(epoch: float) -> str:
    moment = datetime.fromtimestamp(epoch)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 10:05d}"


def _shown(text: str) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 3] + "..."


def _arguments(request: Any) -> str:
    if request is None:
        return ""
    if isinstance(request, GenericRequest):  # a generic call: its Python values
        values = request.arguments[:_MAX_ARGUMENTS]
        return "[" + ", ".join(_shown(repr(v)) for v in values) + "]"
    fields = getattr(request, "ListFields", None)
    if fields is None:  # a stream, or not a message: its type only
        return ""
    shown = []
    for descriptor, value in fields()[:_MAX_ARGUMENTS]:
        text = (
            f"{descriptor.name}: {value!r}"
            if not hasattr(value, "ListFields")
            else (f"{descriptor.name}: {{{str(value).strip()}}}")
        )
        shown.append(_shown(text))
    return "[" + ", ".join(shown) + "]"


def format_line(entry: AccessEntry) -> str:
    """The access log line of ``entry`` (see the module docstring)."""
    service = entry.service
    if entry.group:
        service = f"{entry.group}/{service}"
    if entry.version:
        service = f"{service}:{entry.version}"
    request_type = ""
    if isinstance(entry.request, GenericRequest):  # Java's types, as Dubbo's line shows them
        request_type = ",".join(entry.request.parameter_types or ())
    elif entry.request is not None:
        descriptor = getattr(entry.request, "DESCRIPTOR", None)
        request_type = descriptor.full_name if descriptor is not None else "stream"
    arguments = _arguments(entry.request)
    return (
        f"[{_when(entry.started)}] -> [{_when(entry.ended)}] {entry.caller} -> {entry.callee}"
        f" - {service} {entry.method}({request_type}) "
        + (arguments + " " if arguments else "")
        + f"{entry.outcome} {entry.elapsed_ms:.3f}ms"
    )


class AccessLogWriter:
    """Writes access log lines on its own thread, to the loggers or to files (one rotating
    handler per path)."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[str, AccessEntry] | None] = queue.Queue(MAX_QUEUED)
        self._files: dict[str, logging.Handler] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.dropped = 0

    def put(self, target: str, entry: AccessEntry) -> None:
        """Queue ``entry``'s line for ``target`` (``""``: the logger; else a file path)."""
        try:
            self._queue.put_nowait((target, entry))
        except queue.Full:
            self.dropped += 1
            return
        if self._thread is None:
            self._start()

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="dubbo-accesslog", daemon=True
                )
                self._thread.start()

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every queued line is written (tests, shutdown); False on timeout."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)
        return not self._queue.unfinished_tasks

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is not None:
                    self._write(*item)
            except Exception:  # a line that cannot be written must not stop the writer
                log.exception("could not write an access log line")
            finally:
                self._queue.task_done()

    def _write(self, target: str, entry: AccessEntry) -> None:
        line = format_line(entry)
        if self.dropped:
            lost, self.dropped = self.dropped, 0
            line += f" ({lost} earlier lines dropped: the access log queue was full)"
        if not target:
            _log_line(logging.getLogger(f"{ACCESS_LOGGER}.{entry.service}"), line)
            return
        handler = self._files.get(target)
        if handler is None:
            handler = self._files[target] = _file_handler(target)
        handler.emit(logging.LogRecord(ACCESS_LOGGER, logging.INFO, "", 0, line, None, None))


def switched_on() -> None:
    """An access log to the loggers was switched on: give ``dubbo.accesslog`` level INFO,
    unless the application chose a level for it (or ``switchLogLevel`` did), so that its
    lines do not depend on the application's own level (Python's default, WARNING, would
    drop them all)."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)


def _log_line(logger: logging.Logger, line: str) -> None:
    # Where no handler is configured anywhere on the logger's way up, Python hands a record
    # to logging.lastResort (standard error) only from WARNING up; an access log an operator
    # switched on is wanted at INFO, so it goes there too. Any handler found (the
    # application's, on the root or on the access loggers) takes it the ordinary way instead.
    if not logger.isEnabledFor(logging.INFO):
        return
    if logger.hasHandlers():
        logger.info(line)
        return
    last = logging.lastResort
    if last is not None:
        last.handle(logger.makeRecord(logger.name, logging.INFO, "", 0, line, (), None))


def _file_handler(path: str) -> logging.Handler:
    # Imported here: every application imports this module, few write access logs to files.
    import logging.handlers

    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    handler = logging.handlers.TimedRotatingFileHandler(path, when="midnight", encoding="utf-8")
    handler.suffix = "%Y%m%d"
    handler.setFormatter(logging.Formatter("%(message)s"))
    return handler


_writer = AccessLogWriter()


def writer() -> AccessLogWriter:
    """The process's access log writer."""
    return _writer


def _outcome(error: BaseException | None) -> str:
    if error is None:
        return "OK"
    code = getattr(error, "code", None)
    if callable(code):
        try:
            found = code()
        except Exception:  # an error without a status: its type
            found = None
        if isinstance(found, grpc.StatusCode):
            return found.name
    return type(error).__name__


@dataclass(slots=True, eq=False)
class _ConsumerLog:
    """What both flavours of the consumer's access log share: the provider call inside, the
    log's target and what each line says of the consumer."""

    _call: Any
    target: str
    caller: str
    interface: str
    version: str
    group: str

    def _log(
        self, provider: Any, invocation: Any, started: float, began: float, error: Any
    ) -> None:
        elapsed = (time.perf_counter() - began) * 1000.0
        _writer.put(
            self.target,
            AccessEntry(
                started,
                time.time(),
                self.caller,
                provider.address,
                self.interface,
                self.version,
                self.group,
                invocation.method,
                invocation.request,
                _outcome(error),
                elapsed,
            ),
        )


class ConsumerAccessLog(_ConsumerLog):
    """A blocking provider call (one attempt) that logs a line when it ends."""

    __slots__ = ()

    def __call__(self, provider: Any, invocation: Any, timeout: float | None) -> Any:
        started, began = time.time(), time.perf_counter()
        try:
            response = self._call(provider, invocation, timeout)
        except BaseException as exc:
            self._log(provider, invocation, started, began, exc)
            raise
        self._log(provider, invocation, started, began, None)
        return response


class AsyncConsumerAccessLog(_ConsumerLog):
    """:class:`ConsumerAccessLog`, awaited."""

    __slots__ = ()

    async def __call__(self, provider: Any, invocation: Any, timeout: float | None) -> Any:
        started, began = time.time(), time.perf_counter()
        try:
            response = await self._call(provider, invocation, timeout)
        except BaseException as exc:
            self._log(provider, invocation, started, began, exc)
            raise
        self._log(provider, invocation, started, began, None)
        return response


# ---------------------------------------------------------------------------- provider side


class AccessSwitch:
    """Whether one exported service (service, version, group) logs its calls, and where:
    ``target`` None (off), ``""`` (the logger) or a file path; ``callee`` is the provider's
    registered address."""

    __slots__ = ("applied", "callee", "target")

    def __init__(self) -> None:
        self.target: str | None = None
        self.callee = ""
        #: Whether a registration has set it (else the exported URL does, once served).
        self.applied = False


def _peer(context: Any) -> str:
    try:
        peer = str(context.peer())
    except Exception:  # a context without a peer: unknown caller
        return "?"
    for prefix in ("ipv4:", "ipv6:", "unix:"):
        if peer.startswith(prefix):
            return peer[len(prefix) :]
    return peer


def _status(context: Any, error: BaseException | None) -> str:
    try:
        code = context.code()
    except Exception:  # a context without code(): judge by the error
        code = None
    if isinstance(code, grpc.StatusCode):
        return code.name
    return _outcome(error)


class _ProviderCall:
    """What one logged provider call keeps until it ends."""

    __slots__ = ("began", "context", "request", "started", "switch")

    def __init__(self, switch: AccessSwitch, request: Any, context: Any) -> None:
        self.switch = switch
        self.request = request
        self.context = context
        self.started = time.time()
        self.began = time.perf_counter()

    def end(self, target: str, key: tuple[str, str, str, str], error: BaseException | None) -> None:
        service, method, version, group = key
        _writer.put(
            target,
            AccessEntry(
                self.started,
                time.time(),
                _peer(self.context),
                self.switch.callee,
                service,
                version,
                group,
                method,
                self.request,
                _status(self.context, error),
                (time.perf_counter() - self.began) * 1000.0,
            ),
        )


def _logged_sync(switch: AccessSwitch, key: tuple[str, str, str, str], handler: Any) -> Any:
    from dubbo_py.server_handlers import behaviour_of, rebuild

    behaviour = behaviour_of(handler)
    streaming_request = handler.request_streaming

    def unary(request: Any, context: Any) -> Any:
        target = switch.target
        if target is None:
            return behaviour(request, context)
        call = _ProviderCall(switch, None if streaming_request else request, context)
        try:
            response = behaviour(request, context)
        except BaseException as exc:
            call.end(target, key, exc)
            raise
        call.end(target, key, None)
        return response

    def streaming(request: Any, context: Any) -> Any:
        target = switch.target
        if target is None:
            return behaviour(request, context)
        call = _ProviderCall(switch, None if streaming_request else request, context)
        return _logged_stream(behaviour(request, context), call, target, key)

    return rebuild(handler, streaming if handler.response_streaming else unary)


def _logged_stream(
    responses: Any, call: _ProviderCall, target: str, key: tuple[str, str, str, str]
) -> Any:
    try:
        yield from responses
    except BaseException as exc:
        call.end(target, key, exc)
        raise
    call.end(target, key, None)


def _logged_async(switch: AccessSwitch, key: tuple[str, str, str, str], handler: Any) -> Any:
    from dubbo_py.server_handlers import awaitable_of, behaviour_of, rebuild

    if handler.response_streaming:
        # grpc.aio tells a streaming handler by its function's kind (an async generator):
        # wrapping it would cost every message of every stream. Not logged (docs say so).
        return handler
    behaviour = awaitable_of(behaviour_of(handler))
    streaming_request = handler.request_streaming

    async def unary(request: Any, context: Any) -> Any:
        target = switch.target
        if target is None:
            return await behaviour(request, context)
        call = _ProviderCall(switch, None if streaming_request else request, context)
        try:
            response = await behaviour(request, context)
        except BaseException as exc:
            call.end(target, key, exc)
            raise
        call.end(target, key, None)
        return response

    return rebuild(handler, unary)


#: ``(service, method, version, group, handler) -> handler``, as the provider's export plan
#: takes it (:data:`dubbo_py.provider.dispatch.HandlerWrap`).
HandlerWrap = Any


class ProviderAccessLogs:
    """The provider side of an application's access log: one :class:`AccessSwitch` per exported
    service, set from its registered URL -- the ``accesslog`` parameter the service was
    exported with (code, ``dubbo.yaml``), or the one a provider-side override rule gives it
    (the provider registers again with it: :mod:`dubbo_py.registry.provider_overrides`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._switches: dict[tuple[str, str, str], AccessSwitch] = {}

    def switch(self, service: str, version: str, group: str) -> AccessSwitch:
        """The switch of one exported service (made off when first asked)."""
        key = (service, version, group)
        with self._lock:
            found = self._switches.get(key)
            if found is None:
                found = self._switches[key] = AccessSwitch()
            return found

    def apply(self, original: Any, current: Any) -> None:
        """A provider URL as exported (``original``) and as registered now with its override
        rules (``current``, the same without any): switch its service's access log."""
        switch = self.switch(original.path, original.get_str("version"), original.get_str("group"))
        value = current.get_str(ACCESSLOG_KEY)
        from_rule = value != original.get_str(ACCESSLOG_KEY)
        switch.callee = original.address
        switch.applied = True
        target = access_log_target(value, from_rule=from_rule)
        if target != switch.target:
            switch.target = target
            if target == "":
                switched_on()
            state = "off" if target is None else (target or ACCESS_LOGGER)
            log.info("access log of %s: %s", original.service_key, state)

    def served(self, urls: Iterable[Any]) -> None:
        """Provider URLs now served: those no registration has switched yet (no registry, or
        one that registers instances only) take their own ``accesslog`` parameter."""
        for url in urls:
            if not self.switch(url.path, url.get_str("version"), url.get_str("group")).applied:
                self.apply(url, url)

    def wrap(self, inner: HandlerWrap | None, *, aio: bool) -> HandlerWrap:
        """A handler wrap that logs calls while their service's switch is on, around
        ``inner`` (the metrics' wrap, or None)."""
        # Always in place, since a provider-side override may switch it on at any time (as
        # Dubbo's AccessLogFilter is always in the provider's chain): while off it costs one
        # frame and one attribute read per call, ~50 ns (timeit of a wrapped handler against
        # the bare one, this machine), against ~300 µs of provider CPU per call in
        # bench/bench_full_path.py.
        logged = _logged_async if aio else _logged_sync

        def wrap_handler(service: str, method: str, version: str, group: str, handler: Any) -> Any:
            if inner is not None:
                handler = inner(service, method, version, group, handler)
            switch = self.switch(service, version, group)
            return logged(switch, (service, method, version, group), handler)

        return wrap_handler
