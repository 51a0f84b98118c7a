"""CPU time per call, client and server, of dubbo-py side by side with raw grpcio; and tail
latency under 8 threads.

    python bench/bench_cpu.py [--rounds 8] [--calls 4000] [--stream-count 10]
                              [--modes blocking-1 blocking-8 asyncio-1 asyncio-32]
                              [--methods unary stream] [--setups 1reg 2reg 1reg-metrics]
                              [--side-by-side] [--headers] [--in-app] [--in-process]

Calls per second swing by ±10 % from run to run on a shared 2-core machine, so they cannot show
a gap of a few per cent; CPU time per call (user + system, every thread of a process, from
``/proc``) does not count time spent waiting for a core. It still moves with load (caches
shared with the neighbours: one round against the next differed by up to 1.8x at load 5-12
here), so compare sides *within* a round: the ratios printed are per round. Each comparison
is end to end and process against process:

* **raw**: a raw ``GreeterStub(grpc.insecure_channel(...))`` (``grpc.aio`` for the asyncio
  modes) calling a raw ``grpc.server`` process (32 worker threads, as dubbo-py's provider) that
  serves the very servicer of examples/quickstart/provider.py (``make_greeter``);
* **dubbo-py**: ``app.reference(GreeterStub)`` (``reference_async``) through a real ZooKeeper
  with every default, calling a dubbo-py provider process (``app.start``) found there.

The server processes are started by this script (``--serve``: one raw server, one dubbo-py
provider per setup) and serve every mode; each side's client is a process of its own
(``--client``, driven over its stdin), so its CPU is that side's alone. Setups
(``--setups``): ``1reg`` (one ZooKeeper registry), ``2reg`` (provider and consumer in two
registries, two chroots of the same ZooKeeper server) and ``1reg-metrics`` (``metrics=True``
on both sides; raw grpcio has none, so that line is what metrics cost over raw). Modes:
blocking stubs from 1 and 8 threads, asyncio stubs from 1 and 32 tasks on one event loop.
Methods: ``unary`` (``SayHello``) and ``stream`` (``SayHelloStream``, ``--stream-count``
replies read to the end).

Every comparison runs ``--rounds`` rounds of ``--calls`` calls per side, raw and dubbo-py
alternating in order round by round (raw first, then dubbo-py first, ...), as
``bench/interleave.py`` does for calls/s; with ``--side-by-side`` both sides of a round run at
once, so both meet the same neighbours at every instant (the tighter measure on a busy
machine). Printed per comparison: each side's median CPU per call over the rounds (µs) with
its spread [min, max], and the median of the per-round ratios dubbo-py / raw [min, max], for
the client process and for the server process. The client's
figure includes every thread of its process (gRPC's, ZooKeeper's session thread) and the
server's every thread of the server process, on both sides alike.

``--headers`` adds a side: a raw stub sending the two Triple headers dubbo-py sends on every
call (``tri-service-version``, ``tri-consumer-appname``) to the dubbo-py provider: its client
line is what those headers cost raw grpcio, the part of dubbo-py's client cost that is the
protocol's. ``--in-app`` adds the same stub in a process that also runs a dubbo-py consumer
application holding a reference to the service (its ZooKeeper session, threads and imports),
unused during the rounds: against it, dubbo-py's client line is what the call path alone
costs. These sides call the dubbo-py provider, so they have no server line, and they run
alternating only (side by side, the provider would serve two clients at once while the raw
server serves one).

``--in-process`` measures within one process instead (unary, one registry): blocks of
``--calls`` calls alternate between a raw stub on a channel of its own, a raw stub sending the
Triple headers on the same channel, and a dubbo-py reference, all calling the dubbo-py
provider. Between two processes, CPU per call carries each process's thread wake-ups, which
on a small virtual machine swing with how the processes meet (the same raw server read 163
and 342 µs per call in two runs minutes apart); in one process, at the same moment, on the
same server, the ratios show the stubs' own work.

Latency: every blocking call is timed (``perf_counter_ns`` around the call, on both sides
alike); the blocking comparisons also print p50 / p99 / p99.9 per side over all rounds and
the ratio. Wall-clock latency does move with load (run ``uptime`` beside it); the ratio of the
two sides, measured in alternating rounds, is what to read.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import partial
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
from interleave import process_cpu  # noqa: E402

import dubbo_py  # noqa: E402
from dubbo_py import RegistryConfig  # noqa: E402
from tests.support.processes import start_ready  # noqa: E402

SETUPS = ("1reg", "2reg", "1reg-metrics")
MODES = ("blocking-1", "blocking-8", "asyncio-1", "asyncio-32")
METHODS = ("unary", "stream")


# ----------------------------- the server processes -----------------------------


def serve(kind: str, registries: list[str], metrics: bool) -> None:
    """Run a server and print ``READY <address>``: ``raw`` grpcio, or a dubbo-py provider
    registered in ``registries``."""
    from provider import make_greeter

    # The same servicer on both sides (@dubbo_py.service only marks its class), so the two
    # servers differ by dubbo-py alone.
    greeter = make_greeter("1.0.0", None, None)
    if kind == "raw":
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
        greeter_pb2_grpc.add_GreeterServicer_to_server(greeter, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        greeter.address = f"127.0.0.1:{port}"
        print(f"READY {greeter.address}", flush=True)
        server.wait_for_termination()
        return
    registry: Any = registries[0]
    if len(registries) > 1:
        registry = {f"r{i}": RegistryConfig(r) for i, r in enumerate(registries)}
    app = dubbo_py.Application("bench-cpu-provider", registry=registry, metrics=metrics)
    started = app.start(greeter, port=0)
    greeter.address = started.address
    print(f"READY {started.address}", flush=True)
    app.wait()


@dataclass
class Server:
    """A server process this script started (``--serve``)."""

    proc: subprocess.Popen[str]
    address: str

    @property
    def pid(self) -> int:
        """The process id (its CPU time is read from /proc)."""
        return self.proc.pid


@contextmanager
def server_process(
    kind: str, registries: Sequence[str] = (), metrics: bool = False
) -> Iterator[Server]:
    """A ``--serve`` process of this script, killed on exit."""
    cmd = [sys.executable, __file__, "--serve", kind, "--metrics", "on" if metrics else "off"]
    for registry in registries:
        cmd += ["--registry", registry]
    proc, address = start_ready(cmd, timeout=None, what=f"{kind} server")
    try:
        yield Server(proc, address)
    finally:
        proc.kill()
        proc.wait(10)


# ----------------------------- measuring -----------------------------


@dataclass
class Side:
    """One side's rounds: CPU seconds per call of client and server, and call latencies."""

    client: list[float] = field(default_factory=list)
    server: list[float] = field(default_factory=list)
    #: p50, p99 and p99.9 latency (µs) over every call of every round (blocking only).
    latency: list[float] = field(default_factory=list)


def spread(values: Sequence[float]) -> tuple[float, float, float]:
    """(median, min, max)."""
    return statistics.median(values), min(values), max(values)


def percentile(ordered: Sequence[int], q: float) -> float:
    """The ``q`` quantile of sorted ``ordered`` (nearest rank), in µs."""
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000


@dataclass
class Comparison:
    """Raw grpcio against dubbo-py for one (mode, method, setup); with ``--headers``, also a
    raw stub sending dubbo-py's Triple headers (``raw+headers``), to the dubbo-py provider."""

    label: str
    sides: dict[str, Side] = field(default_factory=dict)

    def side(self, name: str) -> Side:
        """The rounds of one side (``raw``, ``dubbo`` or ``raw+headers``)."""
        return self.sides.setdefault(name, Side())

    def lines(self) -> list[str]:
        """Client and server lines, plus latencies when calls were timed."""
        out = []
        raw_side = self.sides["raw"]
        for name, other in self.sides.items():
            if name == "raw":
                continue
            # raw+headers and raw-in-app call the dubbo-py provider: their server CPU is not a
            # side of its own.
            for part in ("client", "server") if name == "dubbo" else ("client",):
                raw, dubbo = getattr(raw_side, part), getattr(other, part)
                ratios = [d / r for d, r in zip(dubbo, raw, strict=True)]
                (rm, rl, rh), (dm, dl, dh) = spread(raw), spread(dubbo)
                qm, ql, qh = spread(ratios)
                shown = "dubbo-py" if name == "dubbo" else name
                out.append(
                    f"{self.label:<30} {part:<6}"
                    f" raw {rm * 1e6:6.1f} [{rl * 1e6:.1f}, {rh * 1e6:.1f}]"
                    f"  {shown} {dm * 1e6:6.1f} [{dl * 1e6:.1f}, {dh * 1e6:.1f}] µs/call"
                    f"  ratio {qm:.3f} [{ql:.3f}, {qh:.3f}]"
                )
            for ref in ("raw+headers", "raw-in-app") if name == "dubbo" else ():
                if ref in self.sides:
                    ratios = [
                        d / r for d, r in zip(other.client, self.sides[ref].client, strict=True)
                    ]
                    qm, ql, qh = spread(ratios)
                    out.append(
                        f"{self.label:<30} client dubbo-py against {ref}:"
                        f" ratio {qm:.3f} [{ql:.3f}, {qh:.3f}]"
                    )
            if raw_side.latency and other.latency:
                cells = []
                names = ("p50", "p99", "p99.9")
                for r, d, q in zip(raw_side.latency, other.latency, names, strict=True):
                    cells.append(f"{q} raw {r:7.0f} {name} {d:7.0f} µs ({d / r:.3f})")
                out.append(f"{self.label:<30} latency  " + "  ".join(cells))
        return out


def blocking_round(call: Callable[[], Any], threads: int, calls: int) -> list[int]:
    """``calls`` calls split over ``threads`` threads; every call's latency (ns)."""
    share = [calls // threads + (1 if i < calls % threads else 0) for i in range(threads)]
    timings: list[list[int]] = [[] for _ in range(threads)]
    clock = time.perf_counter_ns

    def worker(i: int) -> None:
        times = timings[i]
        for _ in range(share[i]):
            t0 = clock()
            call()
            times.append(clock() - t0)

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return [t for times in timings for t in times]


async def asyncio_round(call: Callable[[], Any], tasks: int, calls: int) -> None:
    """``calls`` awaited calls split over ``tasks`` tasks."""
    share = [calls // tasks + (1 if i < calls % tasks else 0) for i in range(tasks)]

    async def worker(n: int) -> None:
        for _ in range(n):
            await call()

    await asyncio.gather(*(worker(n) for n in share))


def unary(stub: Any, request: Any) -> Callable[[], Any]:
    return lambda: stub.SayHello(request)


def streamed(stub: Any, request: Any) -> Callable[[], Any]:
    def call() -> Any:
        replies = 0
        for _ in stub.SayHelloStream(request):
            replies += 1
        return replies

    return call


def streamed_async(stub: Any, request: Any) -> Callable[[], Any]:
    async def call() -> Any:
        replies = 0
        async for _ in stub.SayHelloStream(request):
            replies += 1
        return replies

    return call


# ----------------------------- the client processes -----------------------------


def registries_of(zk: str, setup: str) -> list[str]:
    """The registry addresses of a setup (two chroots of one ZooKeeper for ``2reg``)."""
    if setup == "2reg":
        return [f"zookeeper://{zk}/bench-cpu-a", f"zookeeper://{zk}/bench-cpu-b"]
    return [f"zookeeper://{zk}/bench-cpu-{setup}"]


def consumer_app(zk: str, setup: str) -> dubbo_py.Application:
    """The consumer application of a setup, every other setting a default."""
    found = registries_of(zk, setup)
    registry: Any = found[0]
    if len(found) > 1:
        registry = {f"r{i}": RegistryConfig(r) for i, r in enumerate(found)}
    return dubbo_py.Application(
        f"bench-cpu-{setup}", registry=registry, metrics=setup.endswith("metrics")
    )


class Client:
    """The commands a client process answers, one line each on stdin: ``run METHOD N CALLS``
    (N threads or tasks) prints ``cpu SECONDS``, the process's CPU time over the calls;
    ``latency METHOD N`` prints ``latency P50 P99 P999`` (µs) over every call run so far
    with that method and N; ``quit``."""

    def __init__(self, stream_count: int) -> None:
        self.requests = {
            "unary": greeter_pb2.HelloRequest(name="bench"),
            "stream": greeter_pb2.HelloRequest(name="bench", count=stream_count),
        }
        self.warm: set[str] = set()
        self.latencies: dict[tuple[str, int], list[int]] = {}

    def latency(self, method: str, n: int) -> str:
        ordered = sorted(self.latencies.get((method, n), [0]))
        return "latency " + " ".join(f"{percentile(ordered, q):.1f}" for q in (0.5, 0.99, 0.999))

    def blocking(self, stub: Any) -> None:
        for line in sys.stdin:
            command, *rest = line.split()
            if command == "quit":
                return
            method, n = rest[0], int(rest[1])
            if command == "latency":
                print(self.latency(method, n), flush=True)
                continue
            make = unary if method == "unary" else streamed
            call = make(stub, self.requests[method])
            if method not in self.warm:
                for _ in range(300):  # channels, plans, caches
                    call()
                self.warm.add(method)
            cpu0 = time.process_time()
            timings = blocking_round(call, n, int(rest[2]))
            print(f"cpu {time.process_time() - cpu0}", flush=True)
            self.latencies.setdefault((method, n), []).extend(timings)

    async def asyncio(self, stub: Any) -> None:
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            command, *rest = line.split() or ["quit"]
            if command == "quit":
                return
            method = rest[0]
            make = unary if method == "unary" else streamed_async
            call = make(stub, self.requests[method])
            if method not in self.warm:
                for _ in range(300):
                    await call()
                self.warm.add(method)
            cpu0 = time.process_time()
            await asyncio_round(call, int(rest[1]), int(rest[2]))
            print(f"cpu {time.process_time() - cpu0}", flush=True)


class _Headed:
    """A stub whose calls carry ``headers``."""

    def __init__(self, stub: Any, headers: Any) -> None:
        self.SayHello = partial(stub.SayHello, metadata=headers)
        self.SayHelloStream = partial(stub.SayHelloStream, metadata=headers)


def client(
    kind: str, flavour: str, target: str, setup: str, stream_count: int, zk: str = ""
) -> None:
    """A client process: raw grpcio to the server at ``target``, or dubbo-py through the
    ZooKeeper at ``target`` in ``setup``; answers :class:`Client`'s commands. ``raw-headers``
    is a raw stub sending dubbo-py's Triple headers to the dubbo-py provider at ``target``;
    ``raw-in-app`` the same stub in a process that also runs a dubbo-py consumer application
    (through the ZooKeeper at ``zk``) holding a reference to the service, which it does not
    call during the rounds."""
    commands = Client(stream_count)
    headers = (("tri-service-version", "1.0.0"), ("tri-consumer-appname", f"bench-cpu-{setup}"))
    if flavour == "blocking":
        if kind == "raw":
            with grpc.insecure_channel(target) as channel:
                commands.blocking(greeter_pb2_grpc.GreeterStub(channel))
            return
        if kind in ("raw-headers", "raw-in-app"):
            with ExitStack() as stack:
                if kind == "raw-in-app":
                    app = stack.enter_context(consumer_app(zk, setup))
                    app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0").SayHello(
                        greeter_pb2.HelloRequest(name="warm")
                    )
                channel = stack.enter_context(grpc.insecure_channel(target))
                commands.blocking(_Headed(greeter_pb2_grpc.GreeterStub(channel), headers))
            return
        with consumer_app(target, setup) as app:
            stub = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
            commands.blocking(stub)
        return

    async def run() -> None:
        if kind == "raw":
            async with grpc.aio.insecure_channel(target) as channel:
                await commands.asyncio(greeter_pb2_grpc.GreeterStub(channel))
            return
        if kind in ("raw-headers", "raw-in-app"):
            held = consumer_app(zk, setup) if kind == "raw-in-app" else None
            try:
                if held is not None:
                    ref = await held.reference_async(greeter_pb2_grpc.GreeterStub, version="1.0.0")
                    await ref.SayHello(greeter_pb2.HelloRequest(name="warm"))
                async with grpc.aio.insecure_channel(target) as channel:
                    stub = greeter_pb2_grpc.GreeterStub(channel)
                    await commands.asyncio(_Headed(stub, headers))
            finally:
                if held is not None:
                    await held.aclose()
            return
        app = consumer_app(target, setup)
        try:
            stub = await app.reference_async(greeter_pb2_grpc.GreeterStub, version="1.0.0")
            await commands.asyncio(stub)
        finally:
            await app.aclose()

    asyncio.run(run())


class ClientProcess:
    """A ``--client`` process of this script, driven over its stdin and stdout."""

    def __init__(
        self, kind: str, flavour: str, target: str, setup: str, stream_count: int, zk: str = ""
    ):
        cmd = [sys.executable, __file__, "--client", kind, "--flavour", flavour]
        cmd += ["--target", target, "--setup", setup, "--stream-count", str(stream_count)]
        cmd += ["--zk", zk] if zk else []
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def send(self, line: str) -> None:
        """Send a command (its answer is read with :meth:`answer`)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def answer(self) -> list[str]:
        """The words of the next answer line."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"client process ended (exit code {self.proc.wait()})")
        return line.split()

    def close(self) -> None:
        """Ask it to quit; kill it when it does not."""
        try:
            self.send("quit")
            self.proc.wait(20)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(10)


# ----------------------------- in one process -----------------------------

#: The stubs an in-process comparison alternates between, in the order of a block: the first
#: three call the dubbo-py provider, ``raw server`` calls the raw grpcio server.
IN_PROCESS = ("raw", "raw+headers", "dubbo-py", "raw server")


def in_process(args: argparse.Namespace, zk: str, provider: Server, raw_server: Server) -> None:
    """``--in-process``: one process makes blocks of ``--calls`` calls, alternating four stubs:
    a raw stub on a channel of its own, a raw stub sending dubbo-py's Triple headers on the
    same channel, and a dubbo-py reference (found through the ZooKeeper at ``zk``), all three
    calling the dubbo-py ``provider``; and the raw stub with the headers calling the raw
    grpcio server. Same process, same moment: the first three differ by the stub alone; the
    last two by the server alone (whose CPU per call is read from /proc for each block).
    Prints each side's median CPU per call and the medians of the per-block ratios."""
    headers = (("tri-service-version", "1.0.0"), ("tri-consumer-appname", "bench-cpu-1reg"))
    request = greeter_pb2.HelloRequest(name="bench")
    pids = {name: provider.pid for name in IN_PROCESS}
    pids["raw server"] = raw_server.pid
    for mode in args.modes:
        flavour, n = mode.split("-")[0], int(mode.split("-")[1])
        if flavour == "blocking":
            with ExitStack() as stack:
                app = stack.enter_context(consumer_app(zk, "1reg"))
                channel = stack.enter_context(grpc.insecure_channel(provider.address))
                other = stack.enter_context(grpc.insecure_channel(raw_server.address))
                ref = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
                stubs = _in_process_stubs(channel, other, ref, headers)
                for call in stubs.values():
                    for _ in range(300):  # channels, plans, caches
                        call(request)

                def one_block(name: str, stubs: dict[str, Any] = stubs, n: int = n) -> None:
                    blocking_round(partial(stubs[name], request), n, args.calls)

                rounds = _blocks(args, pids, one_block)
        else:
            rounds = asyncio.run(_blocks_asyncio(args, zk, provider, raw_server, headers, n, pids))
        print("\n".join(_in_process_lines(f"{mode} unary in-process", rounds)), flush=True)


Rounds = dict[str, tuple[list[float], list[float]]]


def _in_process_stubs(channel: Any, other: Any, ref: Any, headers: Any) -> dict[str, Any]:
    """The four sides' ``SayHello``: ``channel`` is on the dubbo-py provider, ``other`` on the
    raw server, ``ref`` the dubbo-py reference (blocking or asyncio alike)."""
    raw = greeter_pb2_grpc.GreeterStub(channel)
    return {
        "raw": raw.SayHello,
        "raw+headers": partial(raw.SayHello, metadata=headers),
        "dubbo-py": ref.SayHello,
        "raw server": partial(greeter_pb2_grpc.GreeterStub(other).SayHello, metadata=headers),
    }


def _blocks(args: argparse.Namespace, pids: dict[str, int], one_block: Any) -> Rounds:
    """``args.rounds`` blocks of each stub, alternating; client and server CPU per call."""
    rounds: Rounds = {name: ([], []) for name in IN_PROCESS}
    for block in range(args.rounds):
        for name in IN_PROCESS if block % 2 == 0 else IN_PROCESS[::-1]:
            served0, cpu0 = process_cpu(pids[name]), time.process_time()
            one_block(name)
            rounds[name][0].append((time.process_time() - cpu0) / args.calls)
            rounds[name][1].append((process_cpu(pids[name]) - served0) / args.calls)
    return rounds


async def _blocks_asyncio(
    args: argparse.Namespace,
    zk: str,
    provider: Server,
    raw_server: Server,
    headers: Any,
    tasks: int,
    pids: dict[str, int],
) -> Rounds:
    request = greeter_pb2.HelloRequest(name="bench")
    app = consumer_app(zk, "1reg")
    try:
        async with (
            grpc.aio.insecure_channel(provider.address) as channel,
            grpc.aio.insecure_channel(raw_server.address) as other,
        ):
            ref = await app.reference_async(greeter_pb2_grpc.GreeterStub, version="1.0.0")
            stubs = _in_process_stubs(channel, other, ref, headers)
            for call in stubs.values():
                for _ in range(300):
                    await call(request)
            rounds: Rounds = {name: ([], []) for name in IN_PROCESS}
            for block in range(args.rounds):
                for name in IN_PROCESS if block % 2 == 0 else IN_PROCESS[::-1]:
                    served0, cpu0 = process_cpu(pids[name]), time.process_time()
                    await asyncio_round(partial(stubs[name], request), tasks, args.calls)
                    rounds[name][0].append((time.process_time() - cpu0) / args.calls)
                    rounds[name][1].append((process_cpu(pids[name]) - served0) / args.calls)
            return rounds
    finally:
        await app.aclose()


def _in_process_lines(label: str, rounds: Rounds) -> list[str]:
    out = []
    for name, (client_cpu, server_cpu) in rounds.items():
        (m, lo, hi), (sm, slo, shi) = spread(client_cpu), spread(server_cpu)
        out.append(
            f"{label:<30} {name:<12} client {m * 1e6:6.1f} [{lo * 1e6:.1f}, {hi * 1e6:.1f}]"
            f"  server {sm * 1e6:6.1f} [{slo * 1e6:.1f}, {shi * 1e6:.1f}] µs/call"
        )
    pairs = (
        ("client", "raw+headers", "raw"),
        ("client", "dubbo-py", "raw+headers"),
        ("client", "dubbo-py", "raw"),
        ("server", "raw+headers", "raw server"),
        ("client", "raw+headers", "raw server"),
    )
    for part, top, base in pairs:
        index = 0 if part == "client" else 1
        ratios = [t / b for t, b in zip(rounds[top][index], rounds[base][index], strict=True)]
        m, lo, hi = spread(ratios)
        out.append(f"{label:<30} {part} {top} against {base}: ratio {m:.3f} [{lo:.3f}, {hi:.3f}]")
    return out


# ----------------------------- the run -----------------------------


def compare(
    args: argparse.Namespace,
    label: str,
    clients: dict[str, ClientProcess],
    servers: dict[str, int],
    method: str,
    n: int,
) -> Comparison:
    """``args.rounds`` rounds of ``args.calls`` calls per side, the sides alternating (or at
    once with ``--side-by-side``)."""
    result = Comparison(label)
    for round_no in range(args.rounds):
        order = tuple(clients) if round_no % 2 == 0 else tuple(reversed(clients))
        command = f"run {method} {n} {args.calls}"
        groups = [order] if args.side_by_side else [(name,) for name in order]
        for group in groups:
            served0 = {name: process_cpu(servers[name]) for name in group}
            for name in group:
                clients[name].send(command)
            cpu = {name: float(clients[name].answer()[1]) for name in group}
            for name in group:
                side = result.side(name)
                side.client.append(cpu[name] / args.calls)
                side.server.append((process_cpu(servers[name]) - served0[name]) / args.calls)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=4000, help="calls per side per round")
    parser.add_argument("--stream-count", type=int, default=10)
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--setups", nargs="+", choices=SETUPS, default=list(SETUPS))
    parser.add_argument(
        "--side-by-side", action="store_true", help="run both sides of a round at once"
    )
    parser.add_argument(
        "--headers",
        action="store_true",
        help="also a raw stub sending dubbo-py's Triple headers to its provider",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="one process alternating a raw stub, a raw stub with the Triple headers and dubbo-py",
    )
    parser.add_argument(
        "--in-app",
        action="store_true",
        help="also raw-headers' stub in a process running a dubbo-py consumer application",
    )
    parser.add_argument("--serve", choices=("raw", "dubbo"), help=argparse.SUPPRESS)
    parser.add_argument("--registry", action="append", default=[], help=argparse.SUPPRESS)
    parser.add_argument("--metrics", choices=("on", "off"), default="off", help=argparse.SUPPRESS)
    parser.add_argument(
        "--client",
        choices=("raw", "raw-headers", "raw-in-app", "dubbo"),
        help=argparse.SUPPRESS,
    )
    parser.add_argument("--flavour", default="blocking", help=argparse.SUPPRESS)
    parser.add_argument("--target", default="", help=argparse.SUPPRESS)
    parser.add_argument("--setup", default="1reg", help=argparse.SUPPRESS)
    parser.add_argument("--zk", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if (args.headers or args.in_app) and args.side_by_side:
        parser.error("--headers and --in-app run alternating only (see the description)")
    if args.serve:
        serve(args.serve, args.registry, args.metrics == "on")
        return
    if args.client:
        client(args.client, args.flavour, args.target, args.setup, args.stream_count, args.zk)
        return

    from tests.support.zookeeper import ZooKeeperServer

    print(f"# dubbo_py from {Path(dubbo_py.__file__).parent}")
    print("# load average at start: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    how = "at once" if args.side_by_side else "alternating"
    print(
        f"# {args.rounds} rounds x {args.calls} calls per side, {how};"
        f" stream = {args.stream_count} replies"
    )
    with ExitStack() as stack:
        zk = ZooKeeperServer()
        zk.start()
        stack.callback(zk.stop)
        raw = stack.enter_context(server_process("raw"))
        providers = {
            setup: stack.enter_context(
                server_process("dubbo", registries_of(zk.address, setup), setup.endswith("metrics"))
            )
            for setup in args.setups
        }
        if args.in_process:
            in_process(args, zk.address, providers["1reg"], raw)
            return
        for flavour in ("blocking", "asyncio"):
            modes = [m for m in args.modes if m.startswith(flavour)]
            if not modes:
                continue
            for setup in args.setups:
                count = args.stream_count
                clients = {
                    "raw": ClientProcess("raw", flavour, raw.address, setup, count),
                    "dubbo": ClientProcess("dubbo", flavour, zk.address, setup, count),
                }
                for process in clients.values():
                    stack.callback(process.close)
                servers = {"raw": raw.pid, "dubbo": providers[setup].pid}
                extra = [("raw+headers", "raw-headers")] if args.headers else []
                extra += [("raw-in-app", "raw-in-app")] if args.in_app else []
                for name, kind in extra:
                    address = providers[setup].address
                    clients[name] = ClientProcess(kind, flavour, address, setup, count, zk.address)
                    stack.callback(clients[name].close)
                    servers[name] = providers[setup].pid
                for mode in modes:
                    n = int(mode.split("-")[1])
                    for method in args.methods:
                        label = f"{mode} {method} {setup}"
                        result = compare(args, label, clients, servers, method, n)
                        if flavour == "blocking":
                            for name, process in clients.items():
                                process.send(f"latency {method} {n}")
                                words = process.answer()
                                result.side(name).latency = [float(w) for w in words[1:]]
                        print("\n".join(result.lines()), flush=True)
                for process in clients.values():
                    process.close()
    print("# load average at end: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
