"""Instructions per call, client and provider, of dubbo-py against the protocol's floor: a
raw grpcio stub sending the same two Triple headers (valgrind's callgrind counts them).

    python bench/bench_instructions.py [--calls 400] [--repeats 3]
                                       [--sides client provider] [--no-aa] [--options]
                                       [--client-modes ...] [--provider-modes ...]

CPU time per call moves by several per cent from run to run on a small shared machine
(``bench/bench_cpu.py`` and docs/benchmarks.md), more than the gaps left. Instructions
executed do not depend on what else the machine does, only on what the process does, so a
2 % gap can be told from noise. The measured side alone runs under
``valgrind --tool=callgrind --instr-atstart=no``; it starts, imports and warms up
uninstrumented, then switches instrumentation on, makes a few more calls, zeroes the counters
(``CALLGRIND_ZERO_STATS``), makes ``--calls`` calls and dumps them (``CALLGRIND_DUMP_STATS``),
``--repeats`` times. The counters are those of every thread of the process (gRPC's own
threads, the ZooKeeper session's, the provider's workers). The client requests come from a
tiny C library built with the machine's ``cc`` against valgrind's ``callgrind.h``, loaded
with ctypes (outside valgrind they do nothing). Every other process (ZooKeeper, the server
of a client measurement, the driving client of a provider measurement) runs at full speed.

Client side (each calls the same dubbo-py provider, a blocking one, found through a real
ZooKeeper):

* ``headed``: ``GreeterStub(grpc.insecure_channel(...))`` (``grpc.aio`` for asyncio modes)
  sending ``tri-service-version`` and ``tri-consumer-appname`` on every call, as dubbo-py does;
* ``dubbo-py``: ``app.reference(GreeterStub, version="1.0.0")`` (``reference_async``) with
  every default;
* ``headed (A/A)``: a second process of the headed stub, the instrument against itself.

Modes as bench_cpu.py: blocking stubs from 1 and 8 threads, asyncio stubs from 1 and 32
tasks on one event loop. Provider side (driven by a headed ``grpc.aio`` stub making 1 or 32
concurrent calls, not measured): a raw ``grpc.server`` (32 worker threads) against a dubbo-py
provider (``app.start``), and a raw ``grpc.aio.server`` against an asyncio dubbo-py provider
(``app.start_async``); both flavours serve the servicer of examples/quickstart (its
``SayHello`` body, ``async def`` for the asyncio flavour); plus a second raw server (A/A).

``--options`` adds a client side: the headed stub on a channel opened with dubbo-py's channel
options (its own subchannel pool, gRPC's idle timeout), so that dubbo-py's line against it
is its Python call path alone. Before each measured block the process collects garbage, so
that every block meets the collector in the same state.

Printed per mode and side: instructions per call of each repeat, their median, their spread
((max - min) / median), and the ratio of medians against the baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent import futures
from contextlib import AsyncExitStack, ExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "examples" / "quickstart"))
sys.path.insert(0, str(ROOT / "bench"))
import _paths  # noqa: E402,F401
import grpc  # noqa: E402
from demo import greeter_pb2, greeter_pb2_grpc  # noqa: E402

import dubbo_py  # noqa: E402

CLIENT_MODES = ("blocking-1", "blocking-8", "asyncio-1", "asyncio-32")
PROVIDER_MODES = ("blocking-1", "blocking-32", "asyncio-1", "asyncio-32")
SETUP = "1reg"
HEADERS = (("tri-service-version", "1.0.0"), ("tri-consumer-appname", f"bench-cpu-{SETUP}"))
#: Calls made instrumented before the counters are zeroed (the translation cache is flushed
#: when instrumentation starts; these refill it, so the measured calls run the same code).
SETTLE = 100
#: The options dubbo-py's consumer opens a provider's channel with (dubbo_py/consumer/invoker.py:
#: a subchannel of the channel's own, gRPC's idle timeout of IDLE_TIMEOUT_S) for ``--options``.
DUBBO_CHANNEL_OPTIONS = [
    ("grpc.use_local_subchannel_pool", 1),
    ("grpc.client_idle_timeout_ms", 300_000),
]

_C_SOURCE = r"""
#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void cg_zero(void) { CALLGRIND_ZERO_STATS; }
void cg_dump(const char *label) { CALLGRIND_DUMP_STATS_AT(label); }
int cg_running(void) { return RUNNING_ON_VALGRIND; }
"""


def _callgrind_library() -> Any:
    """The client-request library, built once per source into ~/.cache/dubbo-py."""
    digest = hashlib.sha256(_C_SOURCE.encode()).hexdigest()[:12]
    out = Path.home() / ".cache" / "dubbo-py" / f"callgrind-requests-{digest}.so"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        src = out.with_suffix(".c")
        src.write_text(_C_SOURCE)
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(tmp), str(src)], check=True)
        tmp.replace(out)
    lib = ctypes.CDLL(str(out))
    lib.cg_dump.argtypes = [ctypes.c_char_p]
    return lib


class Counters:
    """Callgrind's counters of this process, driven from Python."""

    def __init__(self) -> None:
        self._lib = _callgrind_library()

    def start(self) -> None:
        """Switch instrumentation on (the process started with ``--instr-atstart=no``)."""
        self._lib.cg_start()

    def zero(self) -> None:
        """Collect garbage, then zero every thread's counters: each block starts with the
        collector's generations empty, so blocks meet the same collections (with this, 100
        settling calls and 600-call blocks, the spread of blocks at 1 thread or task fell from
        0.6-1.7 % to 0.3-0.6 %; the three changes were made at once)."""
        gc.collect()
        self._lib.cg_zero()

    def dump(self, label: str) -> None:
        """Write every thread's counters since the last zero to a new dump file."""
        self._lib.cg_dump(label.encode())


def totals(out_dir: Path, pid: int) -> dict[str, int]:
    """The instruction totals of a callgrind process's dumps, by dump label."""
    found: dict[str, int] = {}
    for path in sorted(out_dir.glob(f"cg.{pid}.*"), key=lambda p: int(p.name.rsplit(".", 1)[1])):
        label, total = "", None
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("desc: Trigger: Client Request: "):
                label = line.removeprefix("desc: Trigger: Client Request: ").strip()
            elif line.startswith(("totals:", "summary:")):
                total = int(line.split()[1])
        if total is not None and label:
            found[label] = total
    return found


def callgrind_command(out_dir: Path) -> list[str]:
    """The valgrind prefix of a measured process."""
    return [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        "--dump-instr=no",
        "--dump-line=no",
        "--compress-strings=no",
        f"--callgrind-out-file={out_dir}/cg.%p",
    ]


# ----------------------------- servicers -----------------------------


def _greeters() -> tuple[Any, Any]:
    """The quickstart's servicer (blocking) and the same body as ``async def``."""
    from provider import make_greeter

    blocking = make_greeter("1.0.0", None, None)

    @dubbo_py.service(version="1.0.0")
    class AsyncGreeter(greeter_pb2_grpc.GreeterServicer):
        address = ""

        async def SayHello(self, request: Any, context: Any) -> Any:
            if request.name == "fail":
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "asked to fail")
            return greeter_pb2.HelloReply(
                message=f"Hello, {request.name}!", provider=self.address, shard=-1
            )

    return blocking, AsyncGreeter()


def _control(counters: Counters | None) -> None:
    """Answer the driver's ``start`` / ``zero`` / ``dump LABEL`` lines on stdin (provider
    measurements: the counters are the server process's, driven from outside)."""
    for line in sys.stdin:
        command, *rest = line.split()
        if counters is not None:
            if command == "start":
                counters.start()
            elif command == "zero":
                counters.zero()
            elif command == "dump":
                counters.dump(rest[0])
        print("ok", flush=True)


def serve(kind: str, registry: str, measure: bool) -> None:
    """A server: ``raw`` / ``raw-aio`` grpcio, or a ``dubbo`` / ``dubbo-aio`` provider
    registered in ``registry``; prints ``READY <address>`` and answers :func:`_control`."""
    counters = Counters() if measure else None
    blocking, async_greeter = _greeters()
    if kind in ("raw", "dubbo"):
        if kind == "raw":
            server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
            greeter_pb2_grpc.add_GreeterServicer_to_server(blocking, server)
            port = server.add_insecure_port("127.0.0.1:0")
            server.start()
            address = f"127.0.0.1:{port}"
        else:
            app = dubbo_py.Application("bench-cpu-provider", registry=registry)
            address = app.start(blocking, port=0, host="127.0.0.1").address
        print(f"READY {address}", flush=True)
        _control(counters)
        return

    async def run() -> None:
        if kind == "raw-aio":
            server = grpc.aio.server()
            greeter_pb2_grpc.add_GreeterServicer_to_server(async_greeter, server)
            port = server.add_insecure_port("127.0.0.1:0")
            await server.start()
            address = f"127.0.0.1:{port}"
        else:
            app = dubbo_py.Application("bench-cpu-provider", registry=registry)
            exported = await app.start_async(async_greeter, port=0, host="127.0.0.1")
            address = exported.address
        print(f"READY {address}", flush=True)
        await asyncio.to_thread(_control, counters)

    asyncio.run(run())


# ----------------------------- clients -----------------------------


def _blocking_calls(call: Any, threads: int, calls: int) -> None:
    share = [calls // threads + (1 if i < calls % threads else 0) for i in range(threads)]

    def worker(n: int) -> None:
        for _ in range(n):
            call()

    pool = [threading.Thread(target=worker, args=(n,)) for n in share]
    for t in pool:
        t.start()
    for t in pool:
        t.join()


async def _asyncio_calls(call: Any, tasks: int, calls: int) -> None:
    share = [calls // tasks + (1 if i < calls % tasks else 0) for i in range(tasks)]

    async def worker(n: int) -> None:
        for _ in range(n):
            await call()

    await asyncio.gather(*(worker(n) for n in share))


def client(kind: str, flavour: str, target: str, measure: bool) -> None:
    """A client process (``headed`` raw stub to the provider at ``target``, or ``dubbo``
    through the ZooKeeper at ``target``) answering ``run LABEL N CALLS REPEATS`` lines: warm
    up (uninstrumented), then, measured, REPEATS blocks of CALLS calls from N threads or
    tasks, each dumped as ``LABEL.r<i>``; prints ``done``."""
    counters = Counters() if measure else None
    request = greeter_pb2.HelloRequest(name="bench")
    if flavour == "blocking":
        with ExitStack() as stack:
            if kind in ("headed", "headed-options"):
                options = DUBBO_CHANNEL_OPTIONS if kind == "headed-options" else None
                channel = stack.enter_context(grpc.insecure_channel(target, options=options))
                raw = greeter_pb2_grpc.GreeterStub(channel)

                def call() -> Any:
                    return raw.SayHello(request, metadata=HEADERS)

            else:
                app = stack.enter_context(_consumer_app(target))
                ref = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")

                def call() -> Any:
                    return ref.SayHello(request)

            print("READY -", flush=True)
            for line in sys.stdin:
                words = line.split()
                if words[0] == "run":
                    label, n, calls, repeats = words[1], int(words[2]), int(words[3]), int(words[4])
                    _blocking_calls(call, n, 300)
                    if counters is not None:
                        counters.start()
                    _blocking_calls(call, n, SETTLE)
                    for i in range(repeats):
                        if counters is not None:
                            counters.zero()
                        _blocking_calls(call, n, calls)
                        if counters is not None:
                            counters.dump(f"{label}.r{i}")
                elif words[0] == "idle" and counters is not None:
                    # The process's background work (its threads) over wall-clock seconds.
                    counters.zero()
                    time.sleep(float(words[2]))
                    counters.dump(words[1])
                elif words[0] == "drive":
                    # A driving client (provider measurements) runs plain calls.
                    _blocking_calls(call, int(words[1]), int(words[2]))
                print("done", flush=True)
        return

    async def run() -> None:
        async with AsyncExitStack() as stack:
            if kind in ("headed", "headed-options"):
                options = DUBBO_CHANNEL_OPTIONS if kind == "headed-options" else None
                channel = grpc.aio.insecure_channel(target, options=options)
                stack.push_async_callback(channel.close)
                raw = greeter_pb2_grpc.GreeterStub(channel)

                def call() -> Any:
                    return raw.SayHello(request, metadata=HEADERS)

            else:
                app = _consumer_app(target)
                stack.push_async_callback(app.aclose)
                ref = await app.reference_async(greeter_pb2_grpc.GreeterStub, version="1.0.0")

                def call() -> Any:
                    return ref.SayHello(request)

            print("READY -", flush=True)
            loop = asyncio.get_running_loop()
            while True:
                line = await loop.run_in_executor(None, sys.stdin.readline)
                words = line.split() or ["quit"]
                if words[0] == "quit":
                    return
                if words[0] == "run":
                    label, n, calls, repeats = words[1], int(words[2]), int(words[3]), int(words[4])
                    await _asyncio_calls(call, n, 300)
                    if counters is not None:
                        counters.start()
                    await _asyncio_calls(call, n, SETTLE)
                    for i in range(repeats):
                        if counters is not None:
                            counters.zero()
                        await _asyncio_calls(call, n, calls)
                        if counters is not None:
                            counters.dump(f"{label}.r{i}")
                elif words[0] == "idle" and counters is not None:
                    counters.zero()
                    await asyncio.sleep(float(words[2]))
                    counters.dump(words[1])
                elif words[0] == "drive":
                    await _asyncio_calls(call, int(words[1]), int(words[2]))
                print("done", flush=True)

    asyncio.run(run())


def _consumer_app(zk: str) -> dubbo_py.Application:
    """The consumer application of bench_cpu.py's ``1reg`` setup (every setting a default)."""
    return dubbo_py.Application(f"bench-cpu-{SETUP}", registry=_registry(zk))


def _registry(zk: str) -> str:
    return f"zookeeper://{zk}/bench-instructions"


# ----------------------------- the driver -----------------------------


class Proc:
    """A process of this script driven over stdin/stdout."""

    def __init__(self, args: Sequence[str], prefix: Sequence[str] = (), what: str = "") -> None:
        cmd = [*prefix, sys.executable, __file__, *args]
        # stderr (valgrind's own lines among it) to a file, so stdout holds the answers alone.
        self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115  (closed in close())
        # One hash seed for every process: string hashes decide dict and set layouts, and so
        # the instructions their look-ups take (two processes of one stub differed by 1 %).
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, env=env
        )
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("READY"):
                self.address = [*line.split(), ""][1]
                return
        self.log.seek(0)
        raise RuntimeError(f"{what} did not start: {self.log.read()[-3000:]}")

    def ask(self, line: str) -> str:
        """Send a line, return the answer line."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise RuntimeError(f"{self.proc.args} ended (exit code {self.proc.wait()})")
        return answer.strip()

    @property
    def pid(self) -> int:
        """The process id: valgrind's own, which its dump files are named by."""
        return self.proc.pid

    def close(self) -> None:
        """Close its stdin (it ends); kill it when it does not."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(60)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()


@contextmanager
def proc(args: Sequence[str], prefix: Sequence[str] = (), what: str = "") -> Iterator[Proc]:
    """A :class:`Proc`, closed on exit."""
    p = Proc(args, prefix, what)
    try:
        yield p
    finally:
        p.close()


def report(label: str, sides: dict[str, list[float]], calls: int) -> list[str]:
    """One line per side: per-call counts of each repeat, median, spread, ratio to the first."""
    out = []
    base = statistics.median(next(iter(sides.values())))
    for name, per_call in sides.items():
        m = statistics.median(per_call)
        spread = (max(per_call) - min(per_call)) / m
        cells = " ".join(f"{v:,.0f}" for v in per_call)
        out.append(
            f"{label:<22} {name:<16} {m:>10,.0f} instr/call  [{cells}]"
            f"  spread {spread * 100:.2f} %  ratio {m / base:.4f}"
        )
    return out


def _per_call(out_dir: Path, pid: int, label: str, repeats: int, calls: int) -> list[float]:
    found = totals(out_dir, pid)
    return [found[f"{label}.r{i}"] / calls for i in range(repeats)]


def measure_clients(args: argparse.Namespace, zk: str, out_dir: Path) -> None:
    """The client side: the sides of every mode, measured one after the other."""
    kinds = {"headed": "headed", "dubbo-py": "dubbo"}
    if args.aa:
        kinds["headed (A/A)"] = "headed"
    if args.options:
        kinds["headed+options"] = "headed-options"
    with ExitStack() as stack:
        provider = stack.enter_context(
            proc(["--serve", "dubbo", "--registry", _registry(zk)], what="dubbo-py provider")
        )
        for flavour in ("blocking", "asyncio"):
            modes = [m for m in args.client_modes if m.startswith(flavour)]
            if not modes:
                continue
            clients = {}
            for name, kind in kinds.items():
                target = zk if kind == "dubbo" else provider.address
                cmd = ["--client", kind, "--flavour", flavour, "--target", target, "--measure"]
                clients[name] = stack.enter_context(
                    proc(cmd, callgrind_command(out_dir), what=f"{name} client")
                )
            for mode in modes:
                n = int(mode.split("-")[1])
                label = f"client-{mode}"
                # Side by side: each side's count is its own process's, whatever runs beside.
                threads = [
                    threading.Thread(
                        target=c.ask, args=(f"run {label} {n} {args.calls} {args.repeats}",)
                    )
                    for c in clients.values()
                ]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                sides = {
                    name: _per_call(out_dir, c.pid, label, args.repeats, args.calls)
                    for name, c in clients.items()
                }
                print("\n".join(report(f"client {mode}", sides, args.calls)), flush=True)
            for c in clients.values():  # before the next flavour's start (2 cores)
                c.close()


def measure_providers(args: argparse.Namespace, zk: str, out_dir: Path) -> None:
    """The provider side: each server under callgrind, driven by a headed grpc.aio stub."""
    for flavour in ("blocking", "asyncio"):
        modes = [m for m in args.provider_modes if m.startswith(flavour)]
        if not modes:
            continue
        raw, dubbo = ("raw", "dubbo") if flavour == "blocking" else ("raw-aio", "dubbo-aio")
        kinds = {f"{raw} server": raw, "dubbo-py provider": dubbo}
        if args.aa:
            kinds[f"{raw} (A/A)"] = raw
        with ExitStack() as stack:
            servers = {
                name: stack.enter_context(
                    proc(
                        ["--serve", kind, "--registry", _registry(zk), "--measure"],
                        callgrind_command(out_dir),
                        what=name,
                    )
                )
                for name, kind in kinds.items()
            }
            drivers = {
                name: stack.enter_context(
                    proc(
                        ["--client", "headed", "--flavour", "asyncio", "--target", s.address],
                        what=f"driver of {name}",
                    )
                )
                for name, s in servers.items()
            }
            for mode in modes:
                n = int(mode.split("-")[1])
                label = f"provider-{mode}"

                def one(
                    name: str,
                    n: int = n,
                    label: str = label,
                    servers: Any = servers,
                    drivers: Any = drivers,
                ) -> None:
                    server, driver = servers[name], drivers[name]
                    driver.ask(f"drive {n} 300")
                    server.ask("start")
                    driver.ask(f"drive {n} {SETTLE}")
                    for i in range(args.repeats):
                        server.ask("zero")
                        driver.ask(f"drive {n} {args.calls}")
                        server.ask(f"dump {label}.r{i}")

                threads = [threading.Thread(target=one, args=(name,)) for name in servers]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                sides = {
                    name: _per_call(out_dir, s.pid, label, args.repeats, args.calls)
                    for name, s in servers.items()
                }
                print("\n".join(report(f"provider {mode}", sides, args.calls)), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=400, help="calls per measured block")
    parser.add_argument("--repeats", type=int, default=3, help="measured blocks per side")
    parser.add_argument(
        "--sides", nargs="+", choices=("client", "provider"), default=["client", "provider"]
    )
    parser.add_argument(
        "--client-modes", nargs="+", choices=CLIENT_MODES, default=list(CLIENT_MODES)
    )
    parser.add_argument(
        "--provider-modes", nargs="+", choices=PROVIDER_MODES, default=list(PROVIDER_MODES)
    )
    parser.add_argument(
        "--no-aa",
        dest="aa",
        action="store_false",
        help="leave out the baseline's second process (the A/A side)",
    )
    parser.add_argument(
        "--options",
        action="store_true",
        help="client side: also the headed stub on a channel with dubbo-py's channel options",
    )
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--registry", default="", help=argparse.SUPPRESS)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--flavour", default="blocking", help=argparse.SUPPRESS)
    parser.add_argument("--target", default="", help=argparse.SUPPRESS)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.registry, args.measure)
        return
    if args.client:
        client(args.client, args.flavour, args.target, args.measure)
        return

    from tests.support.zookeeper import ZooKeeperServer

    _callgrind_library()  # built once, before the processes that load it start
    print(f"# dubbo_py from {Path(dubbo_py.__file__).parent}, grpcio {grpc.__version__}")
    print(f"# {args.repeats} measured blocks x {args.calls} calls per side")
    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="bench-instr-") as tmp:
        zk = ZooKeeperServer()
        zk.start()
        stack.callback(zk.stop)
        if "client" in args.sides:
            measure_clients(args, zk.address, Path(tmp))
        if "provider" in args.sides:
            measure_providers(args, zk.address, Path(tmp))


if __name__ == "__main__":
    main()
