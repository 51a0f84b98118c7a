"""The Starlark side of the script router: build a program, run ``route`` with a time budget.

This module is deliberately self-contained (standard library and ``starlark`` only) because it
is also the *sandbox worker*: :class:`~dubbo_py.router.script.sandbox.ProcessSandbox` runs it as
``python -I engine.py`` in a child process with a memory cap, talking length-prefixed JSON over
its stdin/stdout. Nothing here trusts the script; nothing the worker sends back is more than
JSON that the parent validates.

A *program* is one rule version bound to one provider snapshot: a Starlark module in which the
invokers (read-only ``struct`` records) and the consumer context are frozen globals, the rule's
script defines ``route``, and :data:`EPILOGUE` adds the entry point that builds the call's
arguments, calls ``route`` and turns its answer into provider indices.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import struct as binary
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

import starlark

__all__ = [
    "CALLBACKS",
    "ENTRY",
    "FAULT",
    "HEADER",
    "NATIVES",
    "RESERVED_PREFIX",
    "SCRIPT",
    "SCRIPT_FILE",
    "TIMEOUT",
    "EvalFailure",
    "Program",
    "check_source",
    "dialect",
    "globals_",
    "main",
]

#: Failure kinds reported by :meth:`Program.call` and the worker.
SCRIPT = "script"  # the script raised an error or returned something that is not invokers
TIMEOUT = "timeout"  # the time budget ran out (cancelled between Starlark steps)
FAULT = "fault"  # the interpreter itself failed (Rust panic, MemoryError): worker restarts

#: Module globals the engine defines; scripts may not define names starting with this.
RESERVED_PREFIX = "dubbo_sandbox_"
ENTRY = RESERVED_PREFIX + "entry"
#: The file name Starlark diagnostics use for the rule's script.
SCRIPT_FILE = "route.star"

PRELUDE = f"""
{RESERVED_PREFIX}invokers = tuple([
    struct(index = i, **d) for i, d in enumerate({RESERVED_PREFIX}raw_invokers)
])
{RESERVED_PREFIX}context = struct(**{RESERVED_PREFIX}raw_context)
"""

#: The builtins that call back into the script (``key=``), captured before :data:`CALLBACKS`
#: shadows them. A callback called from inside a native builtin never reaches the engine's
#: step check (``max(range(45000000), key = lambda v: -v)`` ran 17 budgets long uncut).
NATIVES = f"""
{RESERVED_PREFIX}native_max = max
{RESERVED_PREFIX}native_min = min
{RESERVED_PREFIX}native_sorted = sorted
"""

#: ``max``, ``min`` and ``sorted`` with the same results as the builtins, but calling ``key``
#: from a Starlark loop, where the time budget is checked between steps; without ``key`` they
#: are the builtins themselves.
CALLBACKS = f"""
def {RESERVED_PREFIX}items(name, args):
    if len(args) == 0:
        fail(name + "() expects at least one argument")
    if len(args) == 1:
        return args[0]
    return args

def max(*args, key = None):
    if key == None:
        return {RESERVED_PREFIX}native_max(*args)
    best = None
    best_key = None
    seen = False
    for item in {RESERVED_PREFIX}items("max", args):
        k = key(item)
        if not seen or k > best_key:
            best, best_key, seen = item, k, True
    if not seen:
        fail("max() of an empty sequence")
    return best

def min(*args, key = None):
    if key == None:
        return {RESERVED_PREFIX}native_min(*args)
    best = None
    best_key = None
    seen = False
    for item in {RESERVED_PREFIX}items("min", args):
        k = key(item)
        if not seen or k < best_key:
            best, best_key, seen = item, k, True
    if not seen:
        fail("min() of an empty sequence")
    return best

def sorted(iterable, key = None, reverse = False):
    if key == None:
        return {RESERVED_PREFIX}native_sorted(iterable, reverse = reverse)
    items = [item for item in iterable]  # a loop: cancellable, unlike list()
    # Stable either way: ties keep their order (a negated index when sorting in reverse).
    sign = -1 if reverse else 1
    keyed = [(key(item), sign * i) for i, item in enumerate(items)]
    ordered = {RESERVED_PREFIX}native_sorted(keyed, reverse = reverse)
    return [items[sign * i] for _, i in ordered]
"""

EPILOGUE = f"""
def {ENTRY}(candidates, raw_invocation):
    invokers = [{RESERVED_PREFIX}invokers[i] for i in candidates]
    invocation = struct(
        service = raw_invocation["service"],
        method = raw_invocation["method"],
        arguments = tuple(raw_invocation["arguments"]),
        attachments = raw_invocation["attachments"],
    )
    result = route(invokers, invocation, {RESERVED_PREFIX}context)
    if type(result) != "list" and type(result) != "tuple":
        fail("route() must return a list of invokers, got " + type(result))
    chosen = {{}}
    for item in result:
        if type(item) != "struct" or not hasattr(item, "index") or type(item.index) != "int":
            fail("route() must return invokers taken from its first argument, got " + type(item))
        chosen[item.index] = True
    return list(chosen.keys())
"""


def dialect() -> starlark.Dialect:
    """Standard Starlark (no ``while``, no recursion, no top-level ``if``/``for``) minus
    ``load`` and f-strings."""
    d = starlark.Dialect.standard()
    d.enable_load = False
    d.enable_f_strings = False
    d.enable_top_level_stmt = False
    return d


def globals_() -> starlark.Globals:
    """Standard builtins plus ``struct``; there is no ``print``, file, clock or network access."""
    return starlark.Globals.extended_by([starlark.LibraryExtension.StructType])


class EvalFailure(Exception):
    """A program could not be built or run; ``kind`` is one of SCRIPT, TIMEOUT, FAULT."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class Program:
    """A frozen Starlark module ready to route one snapshot's invokers."""

    module: starlark.FrozenModule
    size: int
    max_callstack: int

    @classmethod
    def build(
        cls,
        source: str,
        invokers: Sequence[Mapping[str, Any]],
        context: Mapping[str, Any],
        *,
        max_callstack: int = 64,
    ) -> Program:
        """Evaluate prelude, script and epilogue into one module and freeze it. The script's
        top level is restricted by the rule parser to ``def`` and constants, so this is cheap."""
        d, g = dialect(), globals_()
        module = starlark.Module()
        module[RESERVED_PREFIX + "raw_invokers"] = [dict(i) for i in invokers]
        module[RESERVED_PREFIX + "raw_context"] = dict(context)
        try:
            starlark.eval(module, starlark.parse("prelude.star", PRELUDE, d), g)
            starlark.eval(module, starlark.parse("natives.star", NATIVES, d), g)
            starlark.eval(module, starlark.parse("callbacks.star", CALLBACKS, d), g)
            starlark.eval(module, starlark.parse(SCRIPT_FILE, source, d), g)
            starlark.eval(module, starlark.parse("entry.star", EPILOGUE, d), g)
            frozen = module.freeze()
        except starlark.StarlarkError as exc:
            raise EvalFailure(SCRIPT, first_line(str(exc))) from None
        except BaseException as exc:  # PanicException derives from BaseException
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            raise EvalFailure(FAULT, f"{type(exc).__name__}: {exc}") from None
        return cls(frozen, len(invokers), max_callstack)

    def call(
        self, candidates: Sequence[int], invocation: Mapping[str, Any], budget: float
    ) -> list[int]:
        """Run ``route`` for these candidate indices; the chosen indices (a subset of
        ``candidates``), or :class:`EvalFailure`.

        ``budget`` is CPU time of this thread, not wall time: a run that waited for a CPU on a
        loaded machine has not used its budget (a short script would time out there)."""
        deadline = time.thread_time() + budget
        expired = False

        def check_cancelled() -> bool:
            nonlocal expired
            if time.thread_time() > deadline:
                expired = True
            return expired

        options = starlark.EvalOptions(
            check_cancelled=check_cancelled, max_callstack_size=self.max_callstack
        )
        try:
            value = self.module.call_with(options, ENTRY, list(candidates), dict(invocation)).value
        except starlark.StarlarkError as exc:
            if expired:
                raise EvalFailure(
                    TIMEOUT, f"time budget of {budget * 1000:.0f} ms exceeded"
                ) from None
            raise EvalFailure(SCRIPT, first_line(str(exc))) from None
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            raise EvalFailure(FAULT, f"{type(exc).__name__}: {first_line(str(exc))}") from None
        if expired or time.thread_time() > deadline:
            # One last step overran the budget (a native builtin, no step check inside): the
            # answer came too late and is discarded, as the parent would have.
            raise EvalFailure(TIMEOUT, f"time budget of {budget * 1000:.0f} ms exceeded")
        allowed = set(candidates)
        if not isinstance(value, list) or not all(type(i) is int and i in allowed for i in value):
            raise EvalFailure(SCRIPT, "route() returned invokers that were not offered to it")
        return value


def check_source(source: str) -> None:
    """Compile ``source`` as a route script (names resolved, constants folded) without any
    invokers; EvalFailure on the first problem. Compiling may itself allocate (starlark-rust
    folds ``"a" * 2147483647`` at compile time), so this belongs in the sandbox too."""
    Program.build(source, (), {})


def first_line(message: str) -> str:
    """The ``error: ...`` line of a Starlark diagnostic (with its ``--> file:line:col``)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    head = next((line for line in lines if line.startswith("error:")), lines[0] if lines else "")
    where = next((line for line in lines if line.startswith("-->")), "")
    head = head.removeprefix("error:").strip()
    return f"{head} ({where[3:].strip()})" if where else head


# --------------------------------------------------------------------------- the worker process

#: Frame header: the payload length, 4 bytes big-endian.
HEADER = binary.Struct(">I")
MAX_REQUEST = 64 * 1024 * 1024


def read_frame(stream: BinaryIO, limit: int) -> Any:
    """One length-prefixed JSON message, ``None`` at end of stream."""
    header = _read_exactly(stream, HEADER.size)
    if header is None:
        return None
    (length,) = HEADER.unpack(header)
    if length > limit:
        raise ValueError(f"message of {length} bytes exceeds {limit}")
    payload = _read_exactly(stream, length)
    return None if payload is None else json.loads(payload)


def _read_exactly(stream: BinaryIO, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = stream.read(size - len(chunks))
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)


def write_frame(stream: BinaryIO, message: Mapping[str, Any]) -> None:
    """Write one length-prefixed JSON message and flush."""
    payload = json.dumps(message, separators=(",", ":")).encode()
    stream.write(HEADER.pack(len(payload)) + payload)
    stream.flush()


def serve(
    requests: BinaryIO, replies: BinaryIO, *, max_programs: int = 32, on_fault: Callable[[], None]
) -> None:
    """Answer requests until the parent closes the pipe.

    Every reply carries ``cpu``, the CPU seconds its request took here, and ``cpu_total``, this
    process's CPU seconds so far.

    ``check`` {source} compiles a script without keeping it; ``load`` {id, source, invokers,
    context, max_callstack} builds and keeps a program (the ``max_programs`` most recently used
    are kept); ``route`` {id, candidates, invocation, budget} runs one; a route for an unknown id
    answers ``unknown`` so the parent re-sends it. After a FAULT the worker answers and then
    calls ``on_fault`` (exits): its heap is suspect.

    Every request may carry ``deadline`` (seconds): an interval timer with SIGALRM's default
    action (terminate) then ends this process if the request is not answered in time, even when
    one Starlark step never returns and even if the parent is gone - no orphan keeps spinning.
    """
    programs: OrderedDict[str, Program] = OrderedDict()
    write_frame(
        replies, {"ok": True, "ready": True, "pid": os.getpid(), "cpu_total": time.process_time()}
    )
    while True:
        request = read_frame(requests, MAX_REQUEST)
        if request is None:
            return
        deadline = float(request.get("deadline", 0) or 0)
        if deadline > 0:
            signal.setitimer(signal.ITIMER_REAL, deadline)
        cpu = time.process_time()
        reply: dict[str, Any]
        try:
            if request["op"] == "check":
                check_source(request["source"])
                reply = {"ok": True}
            elif request["op"] == "load":
                programs[request["id"]] = Program.build(
                    request["source"],
                    request["invokers"],
                    request["context"],
                    max_callstack=int(request["max_callstack"]),
                )
                while len(programs) > max_programs:
                    programs.popitem(last=False)
                reply = {"ok": True}
            else:
                program = programs.get(request["id"])
                if program is None:
                    reply = {"ok": False, "kind": "unknown", "error": "program not loaded"}
                else:
                    programs.move_to_end(request["id"])
                    chosen = program.call(
                        request["candidates"], request["invocation"], float(request["budget"])
                    )
                    reply = {"ok": True, "indices": chosen}
        except EvalFailure as failure:
            reply = {"ok": False, "kind": failure.kind, "error": failure.message}
        signal.setitimer(signal.ITIMER_REAL, 0)
        now = time.process_time()
        reply["cpu"] = now - cpu  # what the parent accounts to the rule
        reply["cpu_total"] = now  # where the parent starts counting this process's next run
        write_frame(replies, reply)
        if not reply["ok"] and reply["kind"] == FAULT:
            on_fault()


def _limit_resources(memory_limit: int) -> None:
    import resource

    limits = [
        (resource.RLIMIT_AS, memory_limit),  # the memory cap: an over-allocation aborts us
        (resource.RLIMIT_CORE, 0),  # ... without writing a core file
        (resource.RLIMIT_FSIZE, 0),  # no file writes at all
    ]
    for which, value in limits:
        with contextlib.suppress(ValueError, OSError):  # a platform without that limit
            resource.setrlimit(which, (value, value))


def main(argv: Sequence[str]) -> int:
    """Worker entry point: ``engine.py --memory-limit BYTES --max-programs N --nice N``."""
    args = dict(zip(argv[0::2], argv[1::2], strict=False))
    memory_limit = int(args.get("--memory-limit", str(256 * 1024 * 1024)))
    max_programs = int(args.get("--max-programs", "32"))
    niceness = int(args.get("--nice", "0"))
    if niceness > 0:
        # Below the router process (a worker whose rule hogs it is started so): it yields
        # the CPU to the consumer and to other rules' workers. This process leads a session
        # of its own, so where the kernel schedules sessions as groups (sched_autogroup) the
        # group's niceness is the one that counts.
        with contextlib.suppress(OSError):
            os.nice(niceness)
        with contextlib.suppress(OSError), open("/proc/self/autogroup", "w") as group:
            group.write(str(niceness))
    # The protocol owns private copies of the pipes; fds 0/1 point at /dev/null so nothing
    # else in this process (a warning, a library) can write into the protocol stream.
    requests = os.fdopen(os.dup(0), "rb", buffering=0)
    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    _limit_resources(memory_limit)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)  # the per-request deadline terminates us
    serve(requests, replies, max_programs=max_programs, on_fault=lambda: os._exit(3))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
