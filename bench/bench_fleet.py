"""A consumer facing a fleet: calls/s and memory at 1 and at 1 + ``--extra`` providers, per
balancer, against raw grpcio with as many channels.

    python bench/bench_fleet.py [--extra 2000] [--seconds 1] [--rounds 5] [--threads 4]

One real provider (``examples/quickstart/provider.py``) listens on 0.0.0.0 and registers
127.0.0.1 in a real ZooKeeper (started here from Debian's jars). ``--extra`` more provider URLs,
copies of the real one at 127.0.x.y (x >= 1) on the same port, are then registered in
ZooKeeper: every one of them reaches the same server over loopback, so the fleet costs the
consumer what a real one would (a channel, a TCP connection, statistics, routing state per
provider) while the server side stays one process.

**dubbo-py** (one process, ``consumer``): one application with one reference per balancer.
Phase 1 -- only the real provider registered: every reference is warmed, then measured
(``--rounds`` rounds, the balancers interleaved, ``--threads`` threads calling for
``--seconds`` each); the process's RSS is noted. Phase 2 -- the parent registers the extra
URLs; once every reference sees them all, each reference is warmed with ``--warm`` calls per
provider (8 threads), the RSS and open TCP connections are noted, and the rounds run again.
A raw grpcio stub on one channel runs in both phases as a drift control (its ratio is how much
the machine changed between the phases).

**raw grpcio** (another process, ``raw``): one ``grpc.insecure_channel`` (phase 1), then one
channel per provider address, each connected by a call, a random channel per call (phase 2),
the same rounds.

Printed per balancer: median calls/s in each phase, the ratio phase 2 / phase 1, that ratio
relative to raw grpcio's (the figure of the target: >= 0.9), and the RSS growth against raw
grpcio's (target: <= 2x raw + 20 MB). Requests carry 4 096 distinct names, so
``consistenthash`` spreads too. Every address is loopback.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
import _paths  # noqa: E402,F401

SERVICE = "demo.Greeter"
BALANCERS = (
    "random",
    "roundrobin",
    "leastactive",
    "shortestresponse",
    "consistenthash",
    "p2c",
    "adaptive",
)
Call = Callable[[], Any]


def extra_hosts(n: int) -> list[str]:
    """``n`` loopback addresses 127.0.x.y with x >= 1 (never the real provider's 127.0.0.1)."""
    return [f"127.0.{1 + k // 250}.{1 + k % 250}" for k in range(n)]


def rss_mb() -> float:
    """This process's resident memory (MB)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def tcp_connections() -> int:
    """Sockets this process holds open."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                count += 1
        except OSError:
            pass
    return count


def hammer(call: Call, threads: int, seconds: float) -> float:
    """Calls per second of ``threads`` threads calling ``call`` for ``seconds``."""
    counts = [0] * threads
    stop = threading.Event()

    def worker(i: int) -> None:
        n = 0
        while not stop.is_set():
            call()
            n += 1
        counts[i] = n

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    start = time.perf_counter()
    for t in pool:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in pool:
        t.join()
    return sum(counts) / (time.perf_counter() - start)


def rounds(variants: dict[str, Call], args: argparse.Namespace) -> dict[str, float]:
    """Median calls/s of each variant over interleaved rounds (order alternating)."""
    runs: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else reversed(names):
            runs[name].append(hammer(variants[name], args.threads, args.seconds))
    return {name: statistics.median(values) for name, values in runs.items()}


def calls_of(stub: Any, requests: list[Any]) -> Call:
    counter = iter(range(1 << 62))

    def call() -> None:
        stub.SayHello(requests[next(counter) % len(requests)], timeout=10)

    return call


def warm(call: Call, calls: int, threads: int = 8) -> None:
    left = iter(range(calls))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                if next(left, None) is None:
                    return
            call()

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()


def print_growth(
    before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, top: int, providers: int
) -> None:
    """The Python allocations that grew between the phases, by line and by the first frame
    inside dubbo_py (``--tracemalloc``; gRPC's C core is not traced), to stderr."""
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__)]
    before, after = before.filter_traces(ignore), after.filter_traces(ignore)
    total = sum(s.size_diff for s in after.compare_to(before, "filename"))
    out = sys.stderr
    out.write(f"\ntraced Python growth: {total / 2**20:.1f} MB ({providers} providers)\n")
    for stat in after.compare_to(before, "lineno")[:top]:
        frame = stat.traceback[0]
        out.write(
            f"{stat.size_diff / 2**20:8.2f} MB {stat.count_diff:+9d} blocks "
            f"{stat.size_diff / providers:8.0f} B/provider  {frame.filename}:{frame.lineno}\n"
        )
    by_origin: dict[str, list[int]] = {}
    for stat in after.compare_to(before, "traceback"):
        own = [f for f in stat.traceback if "/dubbo_py/" in f.filename]
        key = f"{own[-1].filename.split('/dubbo_py/')[-1]}:{own[-1].lineno}" if own else "(other)"
        sums = by_origin.setdefault(key, [0, 0])
        sums[0] += stat.size_diff
        sums[1] += stat.count_diff
    out.write("\nby the innermost dubbo_py line that allocated (directly or below it):\n")
    for key, (size, count) in sorted(by_origin.items(), key=lambda kv: -kv[1][0])[:top]:
        out.write(
            f"{size / 2**20:8.2f} MB {count:+9d} blocks {size / providers:8.0f} B/provider  {key}\n"
        )
    out.flush()


# --------------------------------------------------------------------------- children


def consumer_main(args: argparse.Namespace) -> None:
    """dubbo-py: phase 1, ``PHASE1`` line, wait for ``GO`` on stdin, phase 2, ``RESULT``."""
    import grpc
    from demo import greeter_pb2, greeter_pb2_grpc

    import dubbo_py

    if args.tracemalloc:
        tracemalloc.start(args.tracemalloc_frames)
    requests = [greeter_pb2.HelloRequest(name=f"user-{i}") for i in range(4096)]
    # The extra provider URLs exist at the interface level only, and an APPLICATION_FIRST
    # consumer (the default, as in Dubbo 3.3) prefers the real provider's one instance: pin
    # the interface level so the references see the whole fleet.
    app = dubbo_py.Application(
        "bench-fleet", registry=args.registry, migration_step="FORCE_INTERFACE"
    )
    refs = {
        name: app.reference_handle(
            greeter_pb2_grpc.GreeterStub, version="1.0.0", loadbalance=name, check=30.0
        )
        for name in args.balancers
    }
    control = greeter_pb2_grpc.GreeterStub(grpc.insecure_channel(args.address))
    variants = {name: calls_of(ref.stub, requests) for name, ref in refs.items()}
    variants["raw grpcio, 1 channel (drift control)"] = calls_of(control, requests)
    for call in variants.values():
        warm(call, 200)
    phase1 = rounds(variants, args)
    rss1, sockets1 = rss_mb(), tcp_connections()
    before = tracemalloc.take_snapshot() if args.tracemalloc else None
    print("PHASE1", flush=True)
    if sys.stdin.readline().strip() != "GO":
        return
    wanted = 1 + args.extra
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if all(len(ref.directory.providers) >= wanted for ref in refs.values()):
            break
        time.sleep(0.1)
    seen = min(len(ref.directory.providers) for ref in refs.values())
    if seen < wanted:
        sys.exit(f"only {seen} of {wanted} providers seen after 120 s: the figures would be void")
    start = time.monotonic()
    for name, call in variants.items():
        if name in refs:
            warm(call, args.warm * wanted)
    warm_s = time.monotonic() - start
    rss2, sockets2 = rss_mb(), tcp_connections()
    if before is not None:
        print_growth(before, tracemalloc.take_snapshot(), args.tracemalloc, seen)
    phase2 = rounds(variants, args)
    print(
        "RESULT "
        + json.dumps(
            {
                "phase1": phase1,
                "phase2": phase2,
                "rss1": rss1,
                "rss2": rss2,
                "rss_end": rss_mb(),
                "sockets1": sockets1,
                "sockets2": sockets2,
                "providers_seen": seen,
                "warm_s": warm_s,
            }
        ),
        flush=True,
    )
    app.close()


def raw_main(args: argparse.Namespace) -> None:
    """raw grpcio: one channel, then one per provider address picked at random per call."""
    import grpc
    from demo import greeter_pb2, greeter_pb2_grpc

    requests = [greeter_pb2.HelloRequest(name=f"user-{i}") for i in range(4096)]
    port = args.address.rsplit(":", 1)[1]
    one = greeter_pb2_grpc.GreeterStub(grpc.insecure_channel(args.address))
    single = {"raw grpcio": calls_of(one, requests)}
    warm(single["raw grpcio"], 200)
    phase1 = rounds(single, args)
    rss1, sockets1 = rss_mb(), tcp_connections()
    stubs = [one] + [
        greeter_pb2_grpc.GreeterStub(grpc.insecure_channel(f"{host}:{port}"))
        for host in extra_hosts(args.extra)
    ]
    for stub in stubs:  # connect every channel, as a consumer that called each provider has
        stub.SayHello(requests[0], timeout=10)
    choice = random.Random(1).choice
    counter = iter(range(1 << 62))

    def fleet_call() -> None:
        choice(stubs).SayHello(requests[next(counter) % len(requests)], timeout=10)

    warm(fleet_call, args.warm * len(stubs))
    rss2, sockets2 = rss_mb(), tcp_connections()
    phase2 = rounds({"raw grpcio": fleet_call}, args)
    print(
        "RESULT "
        + json.dumps(
            {
                "phase1": phase1,
                "phase2": phase2,
                "rss1": rss1,
                "rss2": rss2,
                "rss_end": rss_mb(),
                "sockets1": sockets1,
                "sockets2": sockets2,
            }
        ),
        flush=True,
    )


# --------------------------------------------------------------------------- parent


def child(
    mode: str, args: argparse.Namespace, registry: str, address: str
) -> subprocess.Popen[str]:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        mode,
        "--registry",
        registry,
        "--address",
        address,
        "--extra",
        str(args.extra),
        "--seconds",
        str(args.seconds),
        "--rounds",
        str(args.rounds),
        "--threads",
        str(args.threads),
        "--warm",
        str(args.warm),
        "--tracemalloc",
        str(args.tracemalloc if mode == "consumer" else 0),
        "--tracemalloc-frames",
        str(args.tracemalloc_frames),
        "--balancers",
        *args.balancers,
    ]
    return subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT, env=os.environ
    )


def read_until(proc: subprocess.Popen[str], prefix: str) -> str:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(prefix):
            return line[len(prefix) :].strip()
        sys.stderr.write(line)
    raise RuntimeError(f"child exited before {prefix!r} (code {proc.wait()})")


def report(dubbo: dict[str, Any], raw: dict[str, Any], args: argparse.Namespace) -> None:
    raw_ratio = raw["phase2"]["raw grpcio"] / raw["phase1"]["raw grpcio"]
    raw_growth = raw["rss2"] - raw["rss1"]
    growth = dubbo["rss2"] - dubbo["rss1"]
    print(
        f"\n1 + {args.extra} providers, {args.threads} threads, {args.rounds} rounds x "
        f"{args.seconds:g} s, median calls/s; every reference saw {dubbo['providers_seen']}"
    )
    print(f"{'variant':<40}{'at 1':>10}{'at fleet':>10}{'ratio':>8}{'vs raw':>8}")
    print(
        f"{'raw grpcio, a channel per provider':<40}{raw['phase1']['raw grpcio']:>10.0f}"
        f"{raw['phase2']['raw grpcio']:>10.0f}{raw_ratio:>8.3f}{1.0:>8.3f}"
    )
    for name, at1 in dubbo["phase1"].items():
        at_fleet = dubbo["phase2"][name]
        ratio = at_fleet / at1
        print(f"{name:<40}{at1:>10.0f}{at_fleet:>10.0f}{ratio:>8.3f}{ratio / raw_ratio:>8.3f}")
    print(
        f"\nmemory growth: dubbo-py {growth:.1f} MB ({len(dubbo['phase1']) - 1} references, "
        f"sockets {dubbo['sockets1']} -> {dubbo['sockets2']}), raw grpcio {raw_growth:.1f} MB "
        f"(sockets {raw['sockets1']} -> {raw['sockets2']}); target <= "
        f"{2 * raw_growth + 20:.1f} MB (2x raw + 20 MB): "
        f"{'met' if growth <= 2 * raw_growth + 20 else 'NOT met'}"
    )
    print(
        f"RSS after phase 2 rounds: dubbo-py {dubbo['rss_end']:.1f} MB, raw {raw['rss_end']:.1f} "
        f"MB; dubbo-py warm-up {dubbo['warm_s']:.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", default="run", choices=("run", "consumer", "raw"))
    parser.add_argument("--extra", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--warm", type=int, default=2, help="warm-up calls per provider")
    parser.add_argument("--balancers", nargs="+", default=list(BALANCERS))
    parser.add_argument(
        "--tracemalloc",
        type=int,
        default=0,
        metavar="TOP",
        help="trace the consumer's Python allocations and print the TOP growths (slower)",
    )
    parser.add_argument("--tracemalloc-frames", type=int, default=30, help=argparse.SUPPRESS)
    parser.add_argument("--registry", default="")
    parser.add_argument("--address", default="")
    args = parser.parse_args()
    if args.mode == "consumer":
        consumer_main(args)
        return
    if args.mode == "raw":
        raw_main(args)
        return

    import dubbo_py
    from dubbo_py.url import URL
    from tests.support.processes import ProviderProcess
    from tests.support.zookeeper import ZooKeeperServer

    zk = ZooKeeperServer()
    zk.start()
    registry = f"zookeeper://{zk.address}/bench-fleet"
    # The provider listens on every interface, so 127.0.x.y reach it, and registers 127.0.0.1.
    os.environ.update(DUBBO_IP_TO_BIND="0.0.0.0", DUBBO_PY_HOST="127.0.0.1")
    provider = ProviderProcess(registry, "--warmup", "0").start()
    del os.environ["DUBBO_IP_TO_BIND"], os.environ["DUBBO_PY_HOST"]
    admin = dubbo_py.Application("bench-fleet-operator", registry=registry)
    operator = admin.registry
    assert operator is not None
    try:
        (real,) = [u for u in operator.lookup(SERVICE) if u.port == provider.port]
        extras = [
            URL(real.protocol, host, real.port, real.path, "", "", real.parameters)
            for host in extra_hosts(args.extra)
        ]
        print(f"provider {provider.address}; raw grpcio with {1 + args.extra} channels ...")
        raw = child("raw", args, registry, provider.address)
        raw_result = json.loads(read_until(raw, "RESULT "))
        raw.wait(30)
        print("dubbo-py, phase 1 (1 provider) ...")
        consumer = child("consumer", args, registry, provider.address)
        read_until(consumer, "PHASE1")
        print(f"registering {args.extra} more provider URLs ...")
        for url in extras:
            operator.register(url)
        assert consumer.stdin is not None
        consumer.stdin.write("GO\n")
        consumer.stdin.flush()
        print("dubbo-py, phase 2 (the fleet) ...")
        dubbo_result = json.loads(read_until(consumer, "RESULT "))
        consumer.stdin.close()
        consumer.wait(60)
        report(dubbo_result, raw_result, args)
    finally:
        admin.close()
        provider.kill()
        zk.stop()


if __name__ == "__main__":
    main()
