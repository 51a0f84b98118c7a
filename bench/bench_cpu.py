"""CPU time per call, client and server, of dubbo-py side by side with raw grpcio; and tail
latency under 8 threads.

    python bench/bench_cpu.py [--rounds 8] [--calls 4000] [--stream-count 10]
                              [--modes blocking-1 blocking-8 asyncio-1 asyncio-32]
                              [--methods unary stream] [--setups 1reg 2reg 1reg-metrics]

Calls per second swing by ±10 % from run to run on a shared 2-core machine, so they cannot show
a gap of a few per cent; CPU time per call (user + system, every thread of a process, from
``/proc``) hardly moves with load, because time spent waiting for a core is not counted. Each
comparison is end to end and process against process:

* **raw**: a raw ``GreeterStub(grpc.insecure_channel(...))`` (``grpc.aio`` for the asyncio
  modes) calling a raw ``grpc.server`` process (32 worker threads, as dubbo-py's provider) that
  serves the same Greeter;
* **dubbo-py**: ``app.reference(GreeterStub)`` (``reference_async``) through a real ZooKeeper
  with every default, calling a dubbo-py provider process (``app.start``) found there.

Both server processes are started by this script (``--serve``) and serve every mode; the
client is this process. Setups (``--setups``): ``1reg`` (one ZooKeeper registry), ``2reg``
(provider and consumer in two registries, two chroots of the same ZooKeeper server) and
``1reg-metrics`` (``metrics=True`` on both sides; raw grpcio has none, so that line is what
metrics cost over raw). Modes: blocking stubs from 1 and 8 threads, asyncio stubs from 1 and
32 tasks on one event loop. Methods: ``unary`` (``SayHello``) and ``stream``
(``SayHelloStream``, ``--stream-count`` replies read to the end).

Every comparison runs ``--rounds`` rounds of ``--calls`` calls per side, raw and dubbo-py
alternating in order round by round (raw first, then dubbo-py first, ...), as
``bench/interleave.py`` does for calls/s. Printed per comparison: each side's median CPU per
call over the rounds (µs) with its spread [min, max], and the median of the per-round ratios
dubbo-py / raw [min, max], for the client process and for the server process. The client's
figure includes every thread of this process (gRPC's, ZooKeeper's session thread) and the
server's every thread of the server process, on both sides alike.

Latency: every blocking call is timed (``perf_counter_ns`` around the call, on both sides
alike); the blocking comparisons also print p50 / p99 / p99.9 per side over all rounds and
the ratio. Wall-clock latency does move with load (run ``uptime`` beside it); the ratio of the
two sides, measured in alternating rounds, is what to read.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
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

SETUPS = ("1reg", "2reg", "1reg-metrics")
MODES = ("blocking-1", "blocking-8", "asyncio-1", "asyncio-32")
METHODS = ("unary", "stream")


# ----------------------------- the server processes -----------------------------


class RawGreeter(greeter_pb2_grpc.GreeterServicer):
    """The Greeter of examples/quickstart/provider.py without dubbo-py: the same replies."""

    address = ""

    def SayHello(self, request: Any, context: Any) -> Any:
        if request.name == "fail":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "asked to fail")
        return greeter_pb2.HelloReply(
            message=f"Hello, {request.name}!", provider=self.address, shard=-1
        )

    def SayHelloStream(self, request: Any, context: Any) -> Any:
        for i in range(max(1, request.count)):
            yield greeter_pb2.HelloReply(
                message=f"Hello #{i}, {request.name}!", provider=self.address, shard=-1
            )


def serve(kind: str, registries: list[str], metrics: bool) -> None:
    """Run a server and print ``READY <address>``: ``raw`` grpcio, or a dubbo-py provider
    registered in ``registries``."""
    if kind == "raw":
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
        greeter = RawGreeter()
        greeter_pb2_grpc.add_GreeterServicer_to_server(greeter, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        greeter.address = f"127.0.0.1:{port}"
        print(f"READY {greeter.address}", flush=True)
        server.wait_for_termination()
        return
    from provider import make_greeter

    registry: Any = registries[0]
    if len(registries) > 1:
        registry = {f"r{i}": RegistryConfig(r) for i, r in enumerate(registries)}
    app = dubbo_py.Application("bench-cpu-provider", registry=registry, metrics=metrics)
    provided = make_greeter("1.0.0", None, None)
    started = app.start(provided, port=0)
    provided.address = started.address
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
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("READY "):
                break
        else:
            raise RuntimeError(f"{kind} server did not start: {''.join(lines)}")
        yield Server(proc, line.split()[1])
    finally:
        proc.kill()
        proc.wait(10)


# ----------------------------- measuring -----------------------------


@dataclass
class Side:
    """One side's rounds: CPU seconds per call of client and server, and call latencies."""

    client: list[float] = field(default_factory=list)
    server: list[float] = field(default_factory=list)
    latencies: list[int] = field(default_factory=list)


def spread(values: Sequence[float]) -> tuple[float, float, float]:
    """(median, min, max)."""
    return statistics.median(values), min(values), max(values)


def percentile(ordered: Sequence[int], q: float) -> float:
    """The ``q`` quantile of sorted ``ordered`` (nearest rank), in µs."""
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000


@dataclass
class Comparison:
    """Raw grpcio against dubbo-py for one (mode, method, setup)."""

    label: str
    raw: Side = field(default_factory=Side)
    dubbo: Side = field(default_factory=Side)

    def lines(self) -> list[str]:
        """Client and server lines, plus latencies when calls were timed."""
        out = []
        for part in ("client", "server"):
            raw, dubbo = getattr(self.raw, part), getattr(self.dubbo, part)
            ratios = [d / r for d, r in zip(dubbo, raw, strict=True)]
            (rm, rl, rh), (dm, dl, dh), (qm, ql, qh) = spread(raw), spread(dubbo), spread(ratios)
            out.append(
                f"{self.label:<34} {part:<6} raw {rm * 1e6:6.1f} [{rl * 1e6:.1f}, {rh * 1e6:.1f}]"
                f"  dubbo-py {dm * 1e6:6.1f} [{dl * 1e6:.1f}, {dh * 1e6:.1f}] µs/call"
                f"  ratio {qm:.3f} [{ql:.3f}, {qh:.3f}]"
            )
        if self.raw.latencies and self.dubbo.latencies:
            raw, dubbo = sorted(self.raw.latencies), sorted(self.dubbo.latencies)
            cells = []
            for q, name in ((0.5, "p50"), (0.99, "p99"), (0.999, "p99.9")):
                r, d = percentile(raw, q), percentile(dubbo, q)
                cells.append(f"{name} raw {r:7.0f} dubbo-py {d:7.0f} µs ({d / r:.3f})")
            out.append(f"{self.label:<34} latency  " + "  ".join(cells))
        return out


def blocking_round(
    call: Callable[[], Any], threads: int, calls: int, server: int
) -> tuple[float, float, list[int]]:
    """``calls`` calls split over ``threads`` threads: client and server CPU seconds per call,
    and every call's latency (ns)."""
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
    served0, cpu0 = process_cpu(server), time.process_time()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    cpu, served = time.process_time() - cpu0, process_cpu(server) - served0
    return cpu / calls, served / calls, [t for times in timings for t in times]


async def asyncio_round(
    call: Callable[[], Any], tasks: int, calls: int, server: int
) -> tuple[float, float]:
    """``calls`` awaited calls split over ``tasks`` tasks: client and server CPU s per call."""
    share = [calls // tasks + (1 if i < calls % tasks else 0) for i in range(tasks)]

    async def worker(n: int) -> None:
        for _ in range(n):
            await call()

    served0, cpu0 = process_cpu(server), time.process_time()
    await asyncio.gather(*(worker(n) for n in share))
    return (time.process_time() - cpu0) / calls, (process_cpu(server) - served0) / calls


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


# ----------------------------- the run -----------------------------


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


def run_blocking(
    args: argparse.Namespace, raw: Server, providers: dict[str, Server], apps: dict[str, Any]
) -> None:
    unary_request = greeter_pb2.HelloRequest(name="bench")
    stream_request = greeter_pb2.HelloRequest(name="bench", count=args.stream_count)
    channel = grpc.insecure_channel(raw.address)
    raw_stub = greeter_pb2_grpc.GreeterStub(channel)
    stubs = {
        s: app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0") for s, app in apps.items()
    }
    for mode in (m for m in args.modes if m.startswith("blocking")):
        threads = int(mode.split("-")[1])
        for method in args.methods:
            make, request = (
                (unary, unary_request) if method == "unary" else (streamed, stream_request)
            )
            for setup, stub in stubs.items():
                sides = {"raw": make(raw_stub, request), "dubbo": make(stub, request)}
                servers = {"raw": raw.pid, "dubbo": providers[setup].pid}
                for call in sides.values():
                    for _ in range(300):  # warm up: channels, plans, caches
                        call()
                result = Comparison(f"{mode} {method} {setup}")
                for round_no in range(args.rounds):
                    order = ("raw", "dubbo") if round_no % 2 == 0 else ("dubbo", "raw")
                    for name in order:
                        c, s, lat = blocking_round(sides[name], threads, args.calls, servers[name])
                        side = getattr(result, name)
                        side.client.append(c)
                        side.server.append(s)
                        side.latencies.extend(lat)
                print("\n".join(result.lines()), flush=True)
    channel.close()


async def run_asyncio(
    args: argparse.Namespace, raw: Server, providers: dict[str, Server], apps: dict[str, Any]
) -> None:
    unary_request = greeter_pb2.HelloRequest(name="bench")
    stream_request = greeter_pb2.HelloRequest(name="bench", count=args.stream_count)
    channel = grpc.aio.insecure_channel(raw.address)
    raw_stub = greeter_pb2_grpc.GreeterStub(channel)
    stubs = {
        s: await app.reference_async(greeter_pb2_grpc.GreeterStub, version="1.0.0")
        for s, app in apps.items()
    }
    for mode in (m for m in args.modes if m.startswith("asyncio")):
        tasks = int(mode.split("-")[1])
        for method in args.methods:
            if method == "unary":
                sides_of = lambda stub: unary(stub, unary_request)  # noqa: E731
            else:
                sides_of = lambda stub: streamed_async(stub, stream_request)  # noqa: E731
            for setup, stub in stubs.items():
                sides = {"raw": sides_of(raw_stub), "dubbo": sides_of(stub)}
                servers = {"raw": raw.pid, "dubbo": providers[setup].pid}
                for call in sides.values():
                    for _ in range(300):
                        await call()
                result = Comparison(f"{mode} {method} {setup}")
                for round_no in range(args.rounds):
                    order = ("raw", "dubbo") if round_no % 2 == 0 else ("dubbo", "raw")
                    for name in order:
                        c, s = await asyncio_round(sides[name], tasks, args.calls, servers[name])
                        side = getattr(result, name)
                        side.client.append(c)
                        side.server.append(s)
                print("\n".join(result.lines()), flush=True)
    await channel.close()
    for app in apps.values():
        await app.aclose()


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
    parser.add_argument("--serve", choices=("raw", "dubbo"), help=argparse.SUPPRESS)
    parser.add_argument("--registry", action="append", default=[], help=argparse.SUPPRESS)
    parser.add_argument("--metrics", choices=("on", "off"), default="off", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.registry, args.metrics == "on")
        return

    from tests.support.zookeeper import ZooKeeperServer

    print(f"# dubbo_py from {Path(dubbo_py.__file__).parent}")
    print(
        f"# {args.rounds} rounds x {args.calls} calls per side, alternating;"
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
        if any(m.startswith("blocking") for m in args.modes):
            apps = {setup: consumer_app(zk.address, setup) for setup in args.setups}
            try:
                run_blocking(args, raw, providers, apps)
            finally:
                for app in apps.values():
                    app.close()
        if any(m.startswith("asyncio") for m in args.modes):

            async def asyncio_part() -> None:
                apps = {setup: consumer_app(zk.address, setup) for setup in args.setups}
                await run_asyncio(args, raw, providers, apps)

            asyncio.run(asyncio_part())


if __name__ == "__main__":
    main()
