"""Where route scripts run: a guarded worker process (default) or, for trusted rules, inline.

Starlark itself has no I/O, no ``load`` (disabled here), no ``while`` and no recursion, and the
engine cancels a run between Starlark steps once its time budget is spent. What Starlark cannot
bound is a *single* builtin operation: ``"a" * 2147483647``, ``[0] * 2147483647``,
``sorted(range(2147483647))``, ``s.replace("a", s)`` or comparing/printing a structure doubled
sixty times each allocate gigabytes or run for minutes inside one step, and starlark-rust answers
an allocation failure by aborting the process. Compiling is no safer: constants are folded at
compile time. So :class:`ProcessSandbox` compiles and runs scripts in a child process under
``RLIMIT_AS`` (memory), ``RLIMIT_FSIZE=0`` and ``RLIMIT_CORE=0``; a run that overshoots its
budget by more than ``grace`` seconds ends the child (its own SIGALRM, and the parent kills it
too). The router process only ever reads length-limited JSON from it and checks every index it
returns.

:class:`InlineSandbox` runs the same engine in this process: faster, but a hostile or buggy
script can exhaust memory or abort the process. Use it only for rules you trust (tests, tools).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import starlark

from dubbo_py.router.script import engine

__all__ = [
    "CRASH",
    "SCRIPT",
    "TIMEOUT",
    "UNAVAILABLE",
    "InlineSandbox",
    "Outcome",
    "ProcessSandbox",
    "ProgramSpec",
    "Sandbox",
    "default_sandbox",
]

SCRIPT = engine.SCRIPT
TIMEOUT = engine.TIMEOUT
#: The worker died or was killed (memory cap, hard deadline, interpreter fault).
CRASH = "crash"
#: The worker is restarting after a crash (back-off); the script was not run.
UNAVAILABLE = "unavailable"

_MAX_REPLY = 1024 * 1024
_ENGINE_PATH = os.path.abspath(engine.__file__)
# The worker runs isolated (-I: no PYTHONPATH, no user site, no script directory on the path)
# but must import the very starlark package this process uses, wherever it is installed.
_STARLARK_HOME = os.path.dirname(os.path.dirname(os.path.abspath(starlark.__file__)))
_BOOT = (
    "import runpy, sys; sys.path.insert(0, sys.argv[1]); del sys.argv[:2]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


@dataclass(frozen=True)
class ProgramSpec:
    """Everything a sandbox needs to build one program (rule version x snapshot).

    ``key`` identifies it (a sandbox may cache the built program under it); ``invokers`` and
    ``context`` are JSON-compatible records (see :mod:`dubbo_py.router.script.router`)."""

    key: str
    source: str
    invokers: tuple[Mapping[str, Any], ...]
    context: Mapping[str, Any]
    max_callstack: int = 64


@dataclass(frozen=True)
class Outcome:
    """The result of one run: ``indices`` chosen by the script, or a failure ``kind`` and
    ``message`` (then ``indices`` is ``None``)."""

    indices: tuple[int, ...] | None
    kind: str = ""
    message: str = ""

    @property
    def ok(self) -> bool:
        """True when the script ran and answered."""
        return self.indices is not None


class Sandbox(Protocol):
    """Compiles scripts and runs ``route`` of a program for candidates and an invocation."""

    def check(self, source: str) -> Outcome:
        """Compile ``source`` (names resolved, constants folded); ``Outcome(())`` when it
        compiles, else the failure. Never raises for script problems."""
        ...

    def run(
        self,
        program: ProgramSpec,
        candidates: Sequence[int],
        invocation: Mapping[str, Any],
        budget: float,
    ) -> Outcome:
        """Never raises for script problems: failures come back as an :class:`Outcome`."""
        ...


class InlineSandbox:
    """Runs scripts in this process. NOT a memory guard: for trusted rules only (see module)."""

    def __init__(self, max_programs: int = 32) -> None:
        self._programs: dict[str, engine.Program | engine.EvalFailure] = {}
        self._max_programs = max_programs
        self._lock = threading.Lock()

    def check(self, source: str) -> Outcome:
        """Compile in this process (see the class warning)."""
        try:
            engine.check_source(source)
        except engine.EvalFailure as failure:
            return Outcome(None, failure.kind, failure.message)
        return Outcome(())

    def run(
        self,
        program: ProgramSpec,
        candidates: Sequence[int],
        invocation: Mapping[str, Any],
        budget: float,
    ) -> Outcome:
        """Build the program once per key, then call it."""
        with self._lock:
            built = self._programs.get(program.key)
            if built is None:
                try:
                    built = engine.Program.build(
                        program.source,
                        program.invokers,
                        program.context,
                        max_callstack=program.max_callstack,
                    )
                except engine.EvalFailure as failure:
                    built = failure
                if len(self._programs) >= self._max_programs:
                    self._programs.pop(next(iter(self._programs)))
                self._programs[program.key] = built
        if isinstance(built, engine.EvalFailure):
            return Outcome(None, built.kind, built.message)
        try:
            return Outcome(tuple(built.call(candidates, invocation, budget)))
        except engine.EvalFailure as failure:
            return Outcome(None, failure.kind, failure.message)


class _WorkerGone(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class _Worker:
    process: subprocess.Popen[bytes]
    pid_of_parent: int
    loaded: set[str] = field(default_factory=set)
    failed_loads: dict[str, dict[str, Any]] = field(default_factory=dict)


class ProcessSandbox:
    """Runs scripts in a child process with a memory cap and a hard deadline.

    One worker serves every script router that shares this sandbox; calls are serialized.
    After a crash the worker is restarted on demand, but not sooner than ``restart_backoff``
    seconds (doubling up to 30 s while crashes repeat); meanwhile runs report UNAVAILABLE.
    """

    def __init__(
        self,
        *,
        memory_limit: int = 256 * 1024 * 1024,
        grace: float = 1.0,
        startup_timeout: float = 10.0,
        restart_backoff: float = 0.2,
        max_programs: int = 32,
    ) -> None:
        self.memory_limit = memory_limit
        self.grace = grace
        self.startup_timeout = startup_timeout
        self.restart_backoff = restart_backoff
        self.max_programs = max_programs
        self._lock = threading.Lock()
        self._worker: _Worker | None = None
        self._backoff = restart_backoff
        self._retry_at = 0.0
        #: Count of worker processes started (a test and monitoring aid).
        self.starts = 0

    def check(self, source: str) -> Outcome:
        """Compile ``source`` in the worker (compiling can allocate, see
        :func:`~dubbo_py.router.script.engine.check_source`)."""
        with self._lock:
            reply = self._guarded(lambda worker: self._check(worker, source))
        if isinstance(reply, Outcome):
            return reply
        return Outcome(()) if reply.get("ok") else self._failure(reply)

    def run(
        self,
        program: ProgramSpec,
        candidates: Sequence[int],
        invocation: Mapping[str, Any],
        budget: float,
    ) -> Outcome:
        """Run one program; failures (including worker death) come back as an Outcome."""
        with self._lock:
            reply = self._guarded(
                lambda worker: self._exchange(worker, program, candidates, invocation, budget)
            )
        if isinstance(reply, Outcome):
            return reply
        if reply.get("ok"):
            indices = reply.get("indices")
            allowed = set(candidates)
            if isinstance(indices, list) and all(type(i) is int and i in allowed for i in indices):
                return Outcome(tuple(indices))
            return Outcome(None, CRASH, "sandbox worker sent an invalid answer")
        return self._failure(reply)

    def _guarded(self, exchange: Callable[[_Worker], dict[str, Any]]) -> dict[str, Any] | Outcome:
        """Run one exchange with a live worker; worker trouble becomes an Outcome."""
        try:
            worker = self._ensure_worker()
        except _WorkerGone as gone:
            return Outcome(None, UNAVAILABLE, gone.message)
        try:
            reply = exchange(worker)
        except _WorkerGone as gone:
            self._discard(worker, failed=True)
            return Outcome(None, CRASH, gone.message)
        if not reply.get("ok") and reply.get("kind") not in (SCRIPT, TIMEOUT, "unknown"):
            self._discard(worker, failed=True)  # it exits after a fault; don't race it
        else:
            self._backoff = self.restart_backoff
        return reply

    @staticmethod
    def _failure(reply: Mapping[str, Any]) -> Outcome:
        kind = reply.get("kind")
        message = str(reply.get("error", "unknown error"))[:2000]
        if kind in (SCRIPT, TIMEOUT):
            return Outcome(None, str(kind), message)
        return Outcome(None, CRASH, f"sandbox worker fault: {message}; worker restarts")

    def close(self) -> None:
        """Stop the worker (a new one starts on the next run)."""
        with self._lock:
            if self._worker is not None:
                self._discard(self._worker, failed=False)

    # ------------------------------------------------------------------ worker management

    def _ensure_worker(self) -> _Worker:
        worker = self._worker
        if worker is not None and worker.pid_of_parent != os.getpid():
            self._worker = worker = None  # we are a forked child: that worker is the parent's
        if worker is not None and worker.process.poll() is None:
            return worker
        if worker is not None:
            self._discard(worker, failed=True)
        now = time.monotonic()
        if now < self._retry_at:
            raise _WorkerGone(
                f"sandbox worker restarting (back-off {self._retry_at - now:.1f} s more)"
            )
        return self._start()

    def _start(self) -> _Worker:
        command = [
            sys.executable,
            "-I",
            "-c",
            _BOOT,
            _STARLARK_HOME,
            _ENGINE_PATH,
            "--memory-limit",
            str(self.memory_limit),
            "--max-programs",
            str(self.max_programs),
        ]
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env={"RUST_BACKTRACE": "0", "LC_ALL": "C.UTF-8"},
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            self._note_failure()
            raise _WorkerGone(f"cannot start sandbox worker: {exc}") from None
        self.starts += 1
        worker = _Worker(process, os.getpid())
        try:
            hello = self._read(worker, time.monotonic() + self.startup_timeout)
        except _WorkerGone:
            self._discard(worker, failed=True)
            raise
        if not hello.get("ready"):
            self._discard(worker, failed=True)
            raise _WorkerGone("sandbox worker did not start")
        self._worker = worker
        return worker

    def _discard(self, worker: _Worker, *, failed: bool) -> None:
        process = worker.process
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except OSError:
                process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        if self._worker is worker:
            self._worker = None
        if failed:
            self._note_failure()

    def _note_failure(self) -> None:
        self._retry_at = time.monotonic() + self._backoff
        self._backoff = min(max(self._backoff * 2, 0.05), 30.0) if self._backoff else 0.0

    # ------------------------------------------------------------------ protocol

    def _check(self, worker: _Worker, source: str) -> dict[str, Any]:
        request = {"op": "check", "source": source, "deadline": self.startup_timeout}
        self._write(worker, request)
        return self._read(worker, time.monotonic() + self.startup_timeout + self.grace)

    def _exchange(
        self,
        worker: _Worker,
        program: ProgramSpec,
        candidates: Sequence[int],
        invocation: Mapping[str, Any],
        budget: float,
    ) -> dict[str, Any]:
        request = {
            "op": "route",
            "id": program.key,
            "candidates": list(candidates),
            "invocation": dict(invocation),
            "budget": budget,
            "deadline": budget + self.grace,
        }
        for _attempt in range(2):
            failed = worker.failed_loads.get(program.key)
            if failed is not None:
                return failed  # the program does not build; don't rebuild it on every call
            if program.key not in worker.loaded:
                self._write(worker, _load_request(program, self.startup_timeout))
                # Building binds invokers once per snapshot: allow it the startup timeout.
                reply = self._read(worker, time.monotonic() + self.startup_timeout + self.grace)
                if not reply.get("ok"):
                    if reply.get("kind") == SCRIPT:
                        worker.failed_loads[program.key] = reply
                    return reply
                worker.loaded.add(program.key)
            self._write(worker, request)
            # The worker's own alarm fires at the same deadline; a little slack lets it report.
            reply = self._read(worker, time.monotonic() + budget + self.grace + 0.25)
            if reply.get("kind") != "unknown":
                return reply
            worker.loaded.discard(program.key)  # evicted by the worker: send it again
        raise _WorkerGone("sandbox worker keeps forgetting the program")

    def _write(self, worker: _Worker, message: Mapping[str, Any]) -> None:
        stream = worker.process.stdin
        assert stream is not None
        payload = json.dumps(message, separators=(",", ":")).encode()
        try:
            stream.write(engine.HEADER.pack(len(payload)) + payload)
            stream.flush()
        except (BrokenPipeError, OSError):
            raise _WorkerGone(self._death_message(worker)) from None

    def _read(self, worker: _Worker, deadline: float) -> dict[str, Any]:
        stream = worker.process.stdout
        assert stream is not None
        fd = stream.fileno()
        buffer = bytearray()
        needed = engine.HEADER.size
        header_done = False
        while len(buffer) < needed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _WorkerGone(
                    "script overran its time budget inside one operation; worker killed"
                )
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, needed - len(buffer))
            if not chunk:
                raise _WorkerGone(self._death_message(worker))
            buffer += chunk
            if not header_done and len(buffer) >= engine.HEADER.size:
                (length,) = engine.HEADER.unpack(bytes(buffer[: engine.HEADER.size]))
                if length > _MAX_REPLY:
                    raise _WorkerGone(f"sandbox worker sent an oversized answer ({length} bytes)")
                del buffer[: engine.HEADER.size]
                needed, header_done = length, True
        try:
            reply = json.loads(bytes(buffer))
        except ValueError:
            raise _WorkerGone("sandbox worker sent malformed data") from None
        if not isinstance(reply, dict):
            raise _WorkerGone("sandbox worker sent malformed data")
        return reply

    def _death_message(self, worker: _Worker) -> str:
        process = worker.process
        try:
            code = process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            return "sandbox worker stopped answering"
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            hint = (
                {
                    signal.SIGABRT: " (most likely the memory cap)",
                    signal.SIGALRM: " (its own hard deadline: one step overran the time budget)",
                }.get(signal.Signals(-code), "")
                if -code in signal.valid_signals()
                else ""
            )
            return f"sandbox worker died of {name}{hint}"
        return f"sandbox worker exited with status {code}"


def _load_request(program: ProgramSpec, deadline: float) -> dict[str, Any]:
    return {
        "op": "load",
        "deadline": deadline,
        "id": program.key,
        "source": program.source,
        "invokers": [dict(i) for i in program.invokers],
        "context": dict(program.context),
        "max_callstack": program.max_callstack,
    }


_default: ProcessSandbox | None = None
_default_lock = threading.Lock()


def default_sandbox() -> ProcessSandbox:
    """The process-wide :class:`ProcessSandbox` (its worker starts on first use, stops at exit)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = ProcessSandbox()
            atexit.register(_default.close)
        return _default
