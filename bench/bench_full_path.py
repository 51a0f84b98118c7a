"""Calls per second through dubbo-py's full call path against raw grpcio, in the same run.

    python bench/bench_full_path.py [--seconds 2] [--rounds 7] [--threads 1 8] [--providers 3]

The full path: a ZooKeeper registry directory (a real server, started here from Debian's jars),
three condition rules in the chain (two that read the call -- method and arguments[0] -- and one
that reads the consumer), the built-in routers of ``dubbo_py.router.factory`` (tag and mock, once
merged; the script prints the chain it measured), ``roundrobin`` and ``failover`` with the retry
budget and the quarantine in place. The raw side cycles over plain ``GreeterStub`` s of the same
provider processes with the same deadline per call, so both clients spread the same work over
the same servers and the only difference is the client path. Variants are interleaved round by
round (the first alternating) so machine noise hits them alike; the figures are the median of
the rounds, ratios are against raw grpcio, and the per-round ratios (their median and range)
say how noisy the machine was. The client process's CPU time per call is printed too.

``--overhead`` instead times the client path alone (the gRPC call replaced by a canned reply);
``--profile FILE`` runs the dubbo-py client alone under cProfile for ``--seconds`` and
writes the stats (``python -m pstats FILE``).
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import statistics
import sys
import time
import timeit
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import grpc  # noqa: E402
from bench_calls import Call, measure  # noqa: E402  (also puts the demo protos on sys.path)
from demo import greeter_pb2, greeter_pb2_grpc  # noqa: E402

import dubbo_py  # noqa: E402
from dubbo_py.router import factory  # noqa: E402
from tests.support.processes import ProviderProcess  # noqa: E402
from tests.support.zookeeper import ZooKeeperServer  # noqa: E402

SERVICE = "demo.Greeter"
TIMEOUT = 5.0
#: Three condition rules: none matches the benchmark's calls in a way that removes a provider,
#: but each is evaluated (the when side reads the method, an argument or the consumer).
CONDITION_RULES = f"""\
configVersion: v3.0
scope: service
key: {SERVICE}
force: false
conditions:
  - 'method = SayHelloStream => shard = 1'
  - 'arguments[0] = vip => region = gold'
  - 'application = reporting => port = 1'
"""


def measure_with_cpu(call: Call, threads: int, seconds: float) -> tuple[float, float]:
    """(calls/s, client CPU seconds per call) for one :func:`measure` run. CPU time is less
    disturbed than wall time by other work on a shared machine."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    rate = measure(call, threads, seconds)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return rate, cpu / max(1.0, rate * wall)


def print_overhead(ref: Any, request: Any, calls: int = 100_000, repeats: int = 5) -> None:
    """dubbo-py's own cost per call: the full client path (stub, invocation, routing,
    balancing, failover, budget, quarantine check) with the gRPC call replaced by a canned
    reply, so nothing but Python runs. Best of ``repeats``."""
    context = ref.channel.contexts["SayHello"]
    reply = greeter_pb2.HelloReply(message="canned")
    real_call = context.call
    context.call = lambda _provider, _invocation, _timeout: reply
    try:
        stub = ref.stub
        best = min(
            timeit.timeit(lambda: stub.SayHello(request), number=calls) for _ in range(repeats)
        )
    finally:
        context.call = real_call
    print(f"dubbo-py client path without the network: {best / calls * 1e6:.2f} µs/call")


def chain_description(ref: Any) -> str:
    """The routers a call goes through, in order."""
    names = [name for name, _ in ref.directory.chain.stages]
    return ", ".join(names) if names else "(none)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--providers", type=int, default=3)
    parser.add_argument("--profile", metavar="FILE", default=None)
    parser.add_argument(
        "--overhead",
        action="store_true",
        help="time the client path alone: the provider call replaced by a canned reply",
    )
    args = parser.parse_args()

    request = greeter_pb2.HelloRequest(name="bench")
    zk = ZooKeeperServer()
    zk.start()
    registry = f"zookeeper://{zk.address}/bench-full"
    started = [ProviderProcess(registry).start() for _ in range(args.providers)]
    app = dubbo_py.Application("bench-full", registry=registry)
    raw_channels = [grpc.insecure_channel(p.address) for p in started]
    try:
        assert app.registry is not None
        app.registry.put_config(f"{SERVICE}:1.0.0:.condition-router", CONDITION_RULES)
        ref = app.reference_handle(
            greeter_pb2_grpc.GreeterStub,
            version="1.0.0",
            loadbalance="roundrobin",
            cluster="failover",
            timeout=TIMEOUT,
        )
        deadline = time.monotonic() + 30
        while len(ref.directory.providers) < args.providers or "condition" not in (
            chain_description(ref)
        ):
            if time.monotonic() > deadline:
                raise SystemExit(f"providers or rules never arrived: {chain_description(ref)}")
            time.sleep(0.05)
        dubbo = ref.stub
        raw_stubs = itertools.cycle([greeter_pb2_grpc.GreeterStub(c) for c in raw_channels])

        def raw_call() -> Any:
            # The same deadline as the reference's timeout: gRPC's deadline timers cost CPU.
            return next(raw_stubs).SayHello(request, timeout=TIMEOUT)

        variants: dict[str, Call] = {
            "raw grpcio": raw_call,
            "dubbo-py full path": lambda: dubbo.SayHello(request),
        }
        for call in variants.values():  # warm up channels and caches
            for _ in range(300):
                call()
        builtin = [r.name for r in factory.builtin_routers()]
        print(f"# providers: {args.providers}; chain: {chain_description(ref)}")
        if not builtin:
            print("# note: factory.builtin_routers() is empty: no tag/mock router in the chain")

        if args.overhead:
            print_overhead(ref, request)
            return

        if args.profile:
            call = variants["dubbo-py full path"]
            profiler = cProfile.Profile()  # profiles this thread only: call from it
            end = time.monotonic() + args.seconds
            profiler.enable()
            while time.monotonic() < end:
                call()
            profiler.disable()
            profiler.dump_stats(args.profile)
            print(f"# profile written to {args.profile}")
            return

        print(
            f"# {args.rounds} rounds x {args.seconds}s per variant, interleaved; median calls/s,"
            " and the client process's CPU time per call (median µs)"
        )
        for threads in args.threads:
            rates: dict[str, list[float]] = {name: [] for name in variants}
            cpu: dict[str, list[float]] = {name: [] for name in variants}
            for round_no in range(args.rounds):
                # Alternate which variant goes first so a drift in machine load is shared.
                order = list(variants) if round_no % 2 == 0 else list(reversed(variants))
                for name in order:
                    rate, cpu_per_call = measure_with_cpu(variants[name], threads, args.seconds)
                    rates[name].append(rate)
                    cpu[name].append(cpu_per_call)
            raw = rates["raw grpcio"]
            base = statistics.median(raw)
            for name, values in rates.items():
                med = statistics.median(values)
                ratios = sorted(v / r for v, r in zip(values, raw, strict=True))
                print(
                    f"threads={threads:<2} {name:<20} {med:7.0f} calls/s  ratio {med / base:.3f}"
                    f"  per-round ratio median {statistics.median(ratios):.3f}"
                    f" ({ratios[0]:.2f}..{ratios[-1]:.2f})"
                    f"  client CPU {statistics.median(cpu[name]) * 1e6:5.0f} µs/call"
                )
    finally:
        app.close()
        for channel in raw_channels:
            channel.close()
        for provider in started:
            provider.kill()
        zk.close()


if __name__ == "__main__":
    main()
