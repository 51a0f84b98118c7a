"""Where route scripts run: a guarded worker process (default) or, for trusted rules, inline.

Starlark itself has no I/O, no ``load`` (disabled here), no ``while`` and no recursion, and the
engine cancels a run between Starlark steps once its time budget is spent. What Starlark cannot
bound is a *single* builtin operation: ``"a" * 2147483647``, ``[0] * 2147483647``,
``sorted(range(2147483647))``, ``s.replace("a", s)`` or comparing/printing a structure doubled
sixty times each allocate gigabytes or run for minutes inside one step, and starlark-rust answers
an allocation failure by aborting the process. Compiling is no safer: constants are folded at
compile time. So :class:`ProcessSandbox` compiles and runs scripts in child processes under
``RLIMIT_AS`` (memory), ``RLIMIT_FSIZE=0`` and ``RLIMIT_CORE=0``, one per rule (a *lane*), so
that no rule's cost, crash or restart reaches another's calls. A run is answered as a timeout
once it has used its budget of CPU time, whatever it is doing; one that overshoots its budget
by more than ``grace`` seconds ends its child (its own SIGALRM, and the parent kills it too).
The router process only ever reads length-limited JSON from a worker and checks every index it
returns.

:class:`InlineSandbox` runs the same engine in this process: faster, but a hostile or buggy
script can exhaust memory or abort the process. Use it only for rules you trust (tests, tools).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import re
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
from dubbo_py.router.script.checker import CHECKING

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
    "printable",
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
    #: Whose worker runs it: programs of one lane (a rule's identity) share a worker, programs
    #: of different lanes never do. "" is one lane shared by every program that names none.
    lane: str = ""


@dataclass(frozen=True)
class Outcome:
    """The result of one run: ``indices`` chosen by the script, or a failure ``kind`` and
    ``message`` (then ``indices`` is ``None``)."""

    indices: tuple[int, ...] | None
    kind: str = ""
    message: str = ""

    def __post_init__(self) -> None:
        if self.message:
            # Whatever writes it (a script's fail(), an error naming script text) ends up in
            # logs and terminals: bounded, one line, no escape sequences.
            object.__setattr__(self, "message", printable(self.message))

    @property
    def ok(self) -> bool:
        """True when the script ran and answered."""
        return self.indices is not None


#: The most characters of a failure message (a script's fail() text) kept for logs.
MAX_MESSAGE_CHARS = 300
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")


def printable(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` fit for a log line: terminal escape sequences removed, other control and
    bidirectional-formatting characters shown as ``?``, at most ``limit`` characters (an
    ellipsis and the count of the rest when cut)."""
    text = _ESCAPES.sub("", text)
    cleaned = "".join(
        c
        if c.isprintable() and not ("\u202a" <= c <= "\u202e" or "\u2066" <= c <= "\u2069")
        else ("?" if c not in "\n\t" else " ")
        for c in text[: limit * 2]
    )
    if len(text) > limit or len(cleaned) > limit:
        rest = len(text) - limit
        return f"{cleaned[:limit]}... ({rest} more characters)"
    return cleaned


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
            CHECKING.call(lambda: engine.check_source(source))  # a stack sized for the limits
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
                    built = CHECKING.call(
                        lambda: engine.Program.build(
                            program.source,
                            program.invokers,
                            program.context,
                            max_callstack=program.max_callstack,
                        )
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
    #: A reply the worker still owes for a run the parent cut at its budget, and the time by
    #: which it must come (the worker's own hard deadline); drained before the next request.
    owed_until: float | None = None
    #: The worker's CPU seconds when it last answered (it is idle between requests): where
    #: the CPU a run has used is counted from.
    cpu_seen: float = 0.0


@dataclass
class _Lane:
    """One rule's worker and its restart state: nothing here is shared between rules."""

    name: str
    backoff: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    worker: _Worker | None = None
    retry_at: float = 0.0
    used_at: float = 0.0
    #: CPU seconds of runs, decaying by half each second: about the share of a CPU this
    #: lane's worker has used lately.
    busy: float = 0.0
    busy_at: float = 0.0
    #: The lane's worker runs at the lowest priority (its rule keeps its worker busy).
    demoted: bool = False


#: The lane that compiles scripts for the checks made when a rule is read.
_CHECK_LANE = "\0check"
#: The lane of programs that name none (one shared worker, as before lanes existed).
_SHARED_LANE = "\0shared"
#: Check outcomes kept by script digest: a check is deterministic (compile only, no clock).
_CHECK_CACHE = 256


@dataclass(kw_only=True, eq=False)
class ProcessSandbox:
    """Runs scripts in child processes with a memory cap and a time budget enforced from here.

    Each *lane* (a rule's identity, :attr:`ProgramSpec.lane`) has its own worker process, lock
    and restart back-off, so one rule's cost, crash or back-off never delays, opens or fails
    another rule's calls; at most ``max_workers`` workers live at once (the least recently used
    idle one is stopped to start another). Checks made when a rule is read have a lane of their
    own; a check never answers "unavailable": it waits for a worker (at most ``check_timeout``
    seconds), and its outcome is kept per script text, so a script that crashes the compiler
    is refused every time it is read.

    A run is cut at its budget (plus ``slack`` for the round trip): its answer is discarded
    and it is reported as TIMEOUT. The worker stops it between Starlark steps soon after; one
    step that never ends kills the worker ``grace`` seconds after the budget (its own SIGALRM,
    and the next request of the lane kills it too). After a crash a lane's worker is restarted
    on demand, but not sooner than ``restart_backoff`` seconds (doubling up to 30 s while
    crashes repeat); meanwhile that lane's runs report UNAVAILABLE.
    """

    memory_limit: int = 256 * 1024 * 1024
    grace: float = 1.0
    startup_timeout: float = 10.0
    restart_backoff: float = 0.2
    max_programs: int = 32
    #: At least 1 (a smaller number is taken for 1).
    max_workers: int = 16
    check_timeout: float = 10.0
    slack: float = 0.02
    #: The workers' niceness. A lane whose runs use more than ``hog_share`` of a CPU
    #: lately (an expensive rule called often) has its worker moved to
    #: the lowest priority (niceness 19): it then gets the CPU that the router process and
    #: the other rules' workers leave, so it cannot slow them down.
    nice: int = 0
    hog_share: float = 0.25

    def __post_init__(self) -> None:
        self.max_workers = max(1, self.max_workers)
        self._lanes_lock = threading.Lock()
        self._lanes: dict[str, _Lane] = {}
        self._checked: dict[str, Outcome] = {}
        #: Count of worker processes started (a test and monitoring aid).
        self.starts = 0

    def check(self, source: str) -> Outcome:
        """Compile ``source`` in the check lane's worker (compiling can allocate, see
        :func:`~dubbo_py.router.script.engine.check_source`). Never UNAVAILABLE while a worker
        can be started within ``check_timeout``: the check waits for one instead."""
        digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()
        with self._lanes_lock:
            known = self._checked.get(digest)
        if known is not None:
            return known
        lane = self._lane(_CHECK_LANE)
        give_up = time.monotonic() + self.check_timeout
        crashes = 0
        while True:
            with lane.lock:
                # A crash while compiling is the script's doing, not the machine's: the next
                # check gets a fresh worker at once (no back-off for other rules to wait out).
                reply = self._guarded(
                    lane, lambda worker: self._check(worker, source), backoff=False
                )
            if isinstance(reply, Outcome) and reply.kind == UNAVAILABLE:
                wait = min(lane.retry_at, give_up) - time.monotonic()
                if time.monotonic() >= give_up:
                    return Outcome(None, UNAVAILABLE, f"{reply.message}; gave up after waiting")
                time.sleep(max(wait, 0.01))
                continue
            outcome = reply if isinstance(reply, Outcome) else self._checked_outcome(reply)
            crashes += outcome.kind == CRASH
            # A crash is kept only when a fresh worker crashes again: something else (a kill
            # from outside, the machine out of memory) must not refuse a script for good.
            if outcome.kind != CRASH or crashes > 1:
                break
        with self._lanes_lock:
            self._checked[digest] = outcome
            while len(self._checked) > _CHECK_CACHE:
                self._checked.pop(next(iter(self._checked)))
        return outcome

    def _checked_outcome(self, reply: Mapping[str, Any]) -> Outcome:
        return Outcome(()) if reply.get("ok") else self._failure(reply)

    def run(
        self,
        program: ProgramSpec,
        candidates: Sequence[int],
        invocation: Mapping[str, Any],
        budget: float,
    ) -> Outcome:
        """Run one program in its lane's worker; failures (including worker death and a run cut
        at its budget) come back as an Outcome."""
        lane = self._lane(program.lane or _SHARED_LANE)
        with lane.lock:
            reply = self._guarded(
                lane,
                lambda worker: self._exchange(worker, program, candidates, invocation, budget),
            )
            if isinstance(reply, dict):
                cpu = reply.get("cpu")
                self._account(lane, cpu if isinstance(cpu, int | float) else 0.0)
            elif reply.kind == TIMEOUT:
                self._account(lane, budget)  # cut at the budget: it spent at least that
        if isinstance(reply, Outcome):
            return reply
        if reply.get("ok"):
            indices = reply.get("indices")
            allowed = set(candidates)
            if isinstance(indices, list) and all(type(i) is int and i in allowed for i in indices):
                return Outcome(tuple(indices))
            return Outcome(None, CRASH, "sandbox worker sent an invalid answer")
        return self._failure(reply)

    def workers(self) -> dict[str, int]:
        """The live worker of each lane: lane name -> process id (a test and monitoring aid)."""
        with self._lanes_lock:
            lanes = list(self._lanes.values())
        return {
            lane.name: lane.worker.process.pid
            for lane in lanes
            if lane.worker is not None and lane.worker.process.poll() is None
        }

    def _account(self, lane: _Lane, cpu: float) -> None:
        """Add a run's CPU seconds (as its worker measured them) to its lane's busy time;
        demote the worker of a lane over its share."""
        now = time.monotonic()
        cpu = min(max(float(cpu), 0.0), 60.0)  # the worker's figure, not trusted beyond that
        lane.busy = lane.busy * 0.5 ** (now - lane.busy_at) + cpu
        lane.busy_at = now
        # busy decays by half a second, so a steady share s of the time sums to about 1.44 s.
        hogging = lane.busy > self.hog_share * 1.44
        if hogging != lane.demoted:
            lane.demoted = hogging
            worker = lane.worker
            if worker is not None:
                _set_niceness(worker.process.pid, self._niceness(lane))

    def _niceness(self, lane: _Lane) -> int:
        return 19 if lane.demoted else self.nice

    def _lane(self, name: str) -> _Lane:
        with self._lanes_lock:
            lane = self._lanes.get(name)
            if lane is None:
                lane = self._lanes[name] = _Lane(name, self.restart_backoff)
            lane.used_at = time.monotonic()
            return lane

    def _guarded(
        self,
        lane: _Lane,
        exchange: Callable[[_Worker], dict[str, Any] | Outcome],
        *,
        backoff: bool = True,
    ) -> dict[str, Any] | Outcome:
        """Run one exchange with the lane's live worker (lock held); worker trouble becomes an
        Outcome."""
        try:
            worker = self._ensure_worker(lane)
            if worker.owed_until is not None:
                try:
                    self._settle(worker)
                except _WorkerGone:
                    # The run cut at its budget never ended: the worker was killed at its hard
                    # deadline. That run already counted as a timeout (toward the switch-off),
                    # so a fresh worker serves this one without a back-off.
                    self._discard(lane, worker, failed=False)
                    worker = self._ensure_worker(lane)
        except _WorkerGone as gone:
            return Outcome(None, UNAVAILABLE, gone.message)
        try:
            reply = exchange(worker)
        except _WorkerGone as gone:
            self._discard(lane, worker, failed=backoff)
            return Outcome(None, CRASH, gone.message)
        if isinstance(reply, Outcome):
            return reply
        if not reply.get("ok") and reply.get("kind") not in (SCRIPT, TIMEOUT, "unknown"):
            self._discard(lane, worker, failed=backoff)  # it exits after a fault; don't race it
        else:
            lane.backoff = self.restart_backoff
        return reply

    @staticmethod
    def _failure(reply: Mapping[str, Any]) -> Outcome:
        kind = reply.get("kind")
        message = str(reply.get("error", "unknown error"))[:2000]
        if kind in (SCRIPT, TIMEOUT):
            return Outcome(None, str(kind), message)
        return Outcome(None, CRASH, f"sandbox worker fault: {message}; worker restarts")

    def close(self) -> None:
        """Stop every worker (a new one starts on the next run of its lane)."""
        with self._lanes_lock:
            lanes = list(self._lanes.values())
        for lane in lanes:
            with lane.lock:
                if lane.worker is not None:
                    self._discard(lane, lane.worker, failed=False)

    # ------------------------------------------------------------------ worker management

    def _ensure_worker(self, lane: _Lane) -> _Worker:
        worker = lane.worker
        if worker is not None and worker.pid_of_parent != os.getpid():
            lane.worker = worker = None  # we are a forked child: that worker is the parent's
        if worker is not None and worker.process.poll() is None:
            return worker
        if worker is not None:
            self._discard(lane, worker, failed=True)
        now = time.monotonic()
        if now < lane.retry_at:
            raise _WorkerGone(
                f"sandbox worker restarting (back-off {lane.retry_at - now:.1f} s more)"
            )
        self._make_room(lane)
        return self._start(lane)

    def _make_room(self, starting: _Lane) -> None:
        """Stop the least recently used idle worker while ``max_workers`` are alive."""
        with self._lanes_lock:
            busy = sorted(
                (lane for lane in self._lanes.values() if lane is not starting and lane.worker),
                key=lambda lane: lane.used_at,
            )
        while len(busy) >= self.max_workers:
            victim = busy.pop(0)
            if victim.lock.acquire(blocking=False):  # in use: leave it, the cap is soft
                try:
                    if victim.worker is not None:
                        self._discard(victim, victim.worker, failed=False)
                finally:
                    victim.lock.release()

    def _start(self, lane: _Lane) -> _Worker:
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
            "--nice",
            str(self._niceness(lane)),
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
            self._note_failure(lane)
            raise _WorkerGone(f"cannot start sandbox worker: {exc}") from None
        self.starts += 1
        worker = _Worker(process, os.getpid())
        try:
            hello = self._read(worker, time.monotonic() + self.startup_timeout)
        except _WorkerGone:
            self._discard(lane, worker, failed=True)
            raise
        if not hello.get("ready"):
            self._discard(lane, worker, failed=True)
            raise _WorkerGone("sandbox worker did not start")
        lane.worker = worker
        return worker

    def _discard(self, lane: _Lane, worker: _Worker, *, failed: bool) -> None:
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
        if lane.worker is worker:
            lane.worker = None
        if failed:
            self._note_failure(lane)

    @staticmethod
    def _note_failure(lane: _Lane) -> None:
        lane.retry_at = time.monotonic() + lane.backoff
        lane.backoff = min(max(lane.backoff * 2, 0.05), 30.0) if lane.backoff else 0.0

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
    ) -> dict[str, Any] | Outcome:
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
            sent = time.monotonic()
            try:
                reply = self._read(
                    worker, sent + budget + self.slack, cut=budget, hard=sent + budget + self.grace
                )
            except _BudgetSpent:
                # Cut at the budget: the caller gets TIMEOUT now; the worker stops the script
                # at its next step and its (discarded) answer is read before the next request.
                worker.owed_until = sent + budget + self.grace + 0.25
                return Outcome(None, TIMEOUT, f"time budget of {budget * 1000:.0f} ms exceeded")
            if reply.get("kind") != "unknown":
                return reply
            worker.loaded.discard(program.key)  # evicted by the worker: send it again
        raise _WorkerGone("sandbox worker keeps forgetting the program")

    def _settle(self, worker: _Worker) -> None:
        """Read (and drop) the answer owed for a run cut at its budget; past the worker's hard
        deadline it is killed (the caller restarts it)."""
        if worker.owed_until is None:
            return
        self._read(worker, worker.owed_until)
        worker.owed_until = None

    def _write(self, worker: _Worker, message: Mapping[str, Any]) -> None:
        stream = worker.process.stdin
        assert stream is not None
        payload = json.dumps(message, separators=(",", ":")).encode()
        try:
            stream.write(engine.HEADER.pack(len(payload)) + payload)
            stream.flush()
        except (BrokenPipeError, OSError):
            raise _WorkerGone(self._death_message(worker)) from None

    def _read(
        self,
        worker: _Worker,
        deadline: float,
        *,
        cut: float | None = None,
        hard: float = 0.0,
    ) -> dict[str, Any]:
        """One reply; past ``deadline`` _WorkerGone, or, for a run (``cut``: its budget of CPU
        seconds), _BudgetSpent once the worker has used that much CPU since its last answer
        (a worker still short of it was waiting for a CPU: it is waited for, until ``hard``)."""
        stream = worker.process.stdout
        assert stream is not None
        fd = stream.fileno()
        buffer = bytearray()
        needed = engine.HEADER.size
        header_done = False
        while len(buffer) < needed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if cut is not None and not buffer:
                    used = _cpu_seconds(worker.process.pid)
                    short = cut - (used - worker.cpu_seen) if used is not None else 0.0
                    if short > _CPU_TICK and time.monotonic() < hard:
                        # Starved, not overrunning: wait for the rest of its budget to be used.
                        deadline = min(time.monotonic() + short, hard)
                        continue
                    raise _BudgetSpent
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
                # The answer has begun: finish reading it (it is at most _MAX_REPLY bytes).
                deadline = max(deadline, time.monotonic() + self.grace)
        try:
            reply = json.loads(bytes(buffer))
        except ValueError:
            raise _WorkerGone("sandbox worker sent malformed data") from None
        if not isinstance(reply, dict):
            raise _WorkerGone("sandbox worker sent malformed data")
        total = reply.get("cpu_total")
        if isinstance(total, int | float):
            worker.cpu_seen = float(total)
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


#: The resolution of a process's CPU time in /proc/<pid>/stat (clock ticks).
_CPU_TICK = 1.0 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


def _cpu_seconds(pid: int) -> float | None:
    """CPU seconds (user + system) process ``pid`` has used, from /proc; None where there is
    no /proc (the run is then cut by wall time alone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    try:
        return (int(fields[11]) + int(fields[12])) * _CPU_TICK  # utime, stime
    except (IndexError, ValueError):
        return None


class _BudgetSpent(Exception):
    """The run's budget passed with no answer begun: the parent stops waiting."""


def _set_niceness(pid: int, niceness: int) -> None:
    """Set a worker's niceness, and its autogroup's: a worker leads a session of its own, and
    where the kernel groups sessions for scheduling (``sched_autogroup``) the group's niceness
    is what weighs against other processes. Raising a priority may need privileges: errors
    are ignored (the worker then keeps its priority)."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, pid, niceness)
    with contextlib.suppress(OSError), open(f"/proc/{pid}/autogroup", "w") as group:
        group.write(str(niceness))


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
