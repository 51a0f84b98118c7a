"""Calls per second through dubbo-py's full call path against raw grpcio, in the same run.

    python bench/bench_full_path.py [--seconds 1] [--rounds 20] [--threads 1 8] [--providers 3]
                                    [--side-rounds 15] [--side-threads 1 8] [--registries 2]
                                    [--script]

The full path: a ZooKeeper registry directory (a real server, started here from Debian's jars),
three condition rules in the chain (two that read the call -- method and arguments[0] -- and one
that reads the consumer), the built-in routers of ``dubbo_py.router.factory`` (tag and mock; the
script prints the chain it measured), ``roundrobin`` and ``failover`` with the retry
budget and the quarantine in place; the providers are past their warmup (started with
``--warmup 0``). The raw side cycles over plain ``GreeterStub`` s of the same
provider processes with the same deadline per call, so both clients spread the same work over
the same servers and the only difference is the client path. Variants are interleaved round by
round so machine noise hits them alike (``bench/interleave.py`` explains the figures printed);
ratios are against raw grpcio.

Then the full path runs *side by side* with raw grpcio (``--side-threads`` threads each, at the
same time, ``--side-rounds`` rounds), with raw grpcio against itself as the A/A control (see
``bench/interleave.py``).

``--registries 2`` runs the full path through two registries: a second ZooKeeper server, every
provider registered in both, the consumer subscribed to both (one stack per registry behind the
zone-aware channel; no zone, so each call is a weighted pick between them), the rules pushed to
both.

``--script`` adds a script rule of the providers' application to the chain (a
one-line filter; the repeated request is answered from the bound router's cache after its first
run). ``--hedging`` gives the reference ``hedging=True`` and prints, at the end, the hedges
sent per call with no fault (the extra load, which the budget keeps under 5 % plus 1 a second).
``--overhead`` instead times the client path alone (the gRPC call replaced by a canned reply);
``--profile FILE`` runs the dubbo-py client alone under cProfile for ``--seconds`` and
writes the stats (``python -m pstats FILE``).
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import sys
import time
import timeit
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import bench_calls  # noqa: E402,F401  (puts the demo protos on sys.path)
import grpc  # noqa: E402
from demo import greeter_pb2, greeter_pb2_grpc  # noqa: E402
from interleave import HEADER, Call, compare, side_by_side, with_cpu  # noqa: E402

import dubbo_py  # noqa: E402
from dubbo_py.cluster.strategies.failover import failover  # noqa: E402
from dubbo_py.invocation import Invocation  # noqa: E402
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

#: ``--script``: a script rule of the providers' application that keeps every provider (each is
#: looked at); the benchmark's calls repeat one request, so after the first call of each
#: snapshot its answer is the bound router's cached one, as for any steady repeated call.
SCRIPT_RULE = """\
type: starlark
key: greeter-provider
script: |
  def route(invokers, invocation, context):
      return [i for i in invokers if i.parameters.get("application") != "nobody"]
"""


def print_overhead(ref: Any, request: Any, calls: int = 100_000, repeats: int = 5) -> None:
    """dubbo-py's own cost per call with the gRPC call replaced by a canned reply, so nothing
    but Python runs (best of ``repeats``): a stub call, which takes the method's call plan,
    and the failover strategy called directly, which is what a call without a plan runs."""
    contexts = [a.contexts["SayHello"] for a in ref.assemblies]
    context = contexts[0]
    reply = greeter_pb2.HelloReply(message="canned")
    # The plan calls the invoker's cached multicallables; canned ones stand in for a while.
    saved = [(c.call.multicallables, dict(c.call.multicallables)) for c in contexts]
    for multicallables, originals in saved:
        for address in originals:
            multicallables[address] = lambda _request, timeout=None: reply
    stub = ref.stub
    try:
        best = min(
            timeit.timeit(lambda: stub.SayHello(request), number=calls) for _ in range(repeats)
        )
    finally:
        for multicallables, originals in saved:
            multicallables.update(originals)
    print(f"dubbo-py client path without the network, stub call: {best / calls * 1e6:.2f} µs/call")
    real_call = context.call
    context.call = lambda _provider, _invocation, _timeout: reply
    try:
        best = min(
            timeit.timeit(
                lambda: failover(context, Invocation(SERVICE, "SayHello", request)), number=calls
            )
            for _ in range(repeats)
        )
    finally:
        context.call = real_call
    print(f"the same through the failover strategy (no plan): {best / calls * 1e6:.2f} µs/call")


def chain_description(ref: Any) -> str:
    """The routers a call goes through, in order."""
    names = [name for name, _ in ref.directory.chain.stages]
    return ", ".join(names) if names else "(none)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--providers", type=int, default=3)
    parser.add_argument("--side-rounds", type=int, default=15)
    parser.add_argument("--side-threads", type=int, nargs="+", default=[1, 8])
    parser.add_argument(
        "--calibration-us", type=float, default=100.0, help="known extra cost (0: no such run)"
    )
    parser.add_argument("--profile", metavar="FILE", default=None)
    parser.add_argument(
        "--registries",
        type=int,
        choices=(1, 2),
        default=1,
        help="2: every provider in two ZooKeeper servers, the consumer subscribed to both",
    )
    parser.add_argument(
        "--hedging",
        action="store_true",
        help="the reference hedges (hedging=True); prints the hedges sent per call at the end",
    )
    parser.add_argument(
        "--overhead",
        action="store_true",
        help="time the client path alone: the provider call replaced by a canned reply",
    )
    parser.add_argument(
        "--script",
        action="store_true",
        help="also a script rule (greeter-provider.script-router) in the chain",
    )
    args = parser.parse_args()

    request = greeter_pb2.HelloRequest(name="bench")
    servers = [ZooKeeperServer() for _ in range(args.registries)]
    for zk in servers:
        zk.start()
    registries = [f"zookeeper://{zk.address}/bench-full" for zk in servers]
    # Providers past their warmup, as in a steady deployment: during warmup (10 minutes by
    # default) every balancer deliberately sends a new provider less traffic, which the raw
    # side's plain rotation does not, so the comparison would be of two traffic shapes.
    also = [arg for r in registries[1:] for arg in ("--registry", r)]
    started = [
        ProviderProcess(registries[0], "--warmup", "0", *also).start()
        for _ in range(args.providers)
    ]
    if len(registries) == 1:
        app = dubbo_py.Application("bench-full", registry=registries[0])
    else:
        app = dubbo_py.Application(
            "bench-full", registry={f"zk{i}": r for i, r in enumerate(registries)}
        )
    raw_channels = [grpc.insecure_channel(p.address) for p in started]
    try:
        for binding in app.bindings:
            assert binding.registry is not None
            binding.registry.put_config(f"{SERVICE}:1.0.0:.condition-router", CONDITION_RULES)
            if args.script:
                binding.registry.put_config("greeter-provider.script-router", SCRIPT_RULE)
        ref = app.reference_handle(
            greeter_pb2_grpc.GreeterStub,
            version="1.0.0",
            loadbalance="roundrobin",
            cluster="failover",
            timeout=TIMEOUT,
            **({"hedging": True} if args.hedging else {}),
        )
        deadline = time.monotonic() + 30
        while any(
            len(a.directory.providers) < args.providers
            or "condition" not in chain_description(a)
            or (args.script and "script" not in chain_description(a))
            for a in ref.assemblies
        ):
            if time.monotonic() > deadline:
                raise SystemExit(f"providers or rules never arrived: {chain_description(ref)}")
            time.sleep(0.05)
        dubbo = ref.stub
        raw_stubs = itertools.cycle([greeter_pb2_grpc.GreeterStub(c) for c in raw_channels])

        def raw_call() -> Any:
            # The same deadline as the reference's timeout: gRPC's deadline timers cost CPU.
            return next(raw_stubs).SayHello(request, timeout=TIMEOUT)

        # The A/A control of the side-by-side runs: raw grpcio on channels of its own.
        control_channels = [grpc.insecure_channel(p.address) for p in started]
        raw_channels.extend(control_channels)
        control_stubs = itertools.cycle([greeter_pb2_grpc.GreeterStub(c) for c in control_channels])

        def control_call() -> Any:
            return next(control_stubs).SayHello(request, timeout=TIMEOUT)

        counted = itertools.count()

        def dubbo_call() -> Any:
            return dubbo.SayHello(request)

        def counted_call() -> Any:
            next(counted)
            return dubbo.SayHello(request)

        variants: dict[str, Call] = {
            "raw grpcio": raw_call,
            "dubbo-py full path": counted_call if args.hedging else dubbo_call,
        }
        calibration = f"raw grpcio + {args.calibration_us:g} µs CPU"
        if args.calibration_us > 0:
            # A known overhead: how one of that size reads in each mode of this run.
            variants[calibration] = with_cpu(control_call, args.calibration_us)
        for call in [*variants.values(), control_call]:
            for _ in range(300):  # warm up channels and caches
                call()
        builtin = [r.name for r in factory.builtin_routers()]
        print(
            f"# providers: {args.providers}; registries: {len(registries)}; "
            f"chain: {chain_description(ref)}"
        )
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

        print(f"# {args.rounds} rounds x {args.seconds}s per variant, interleaved")
        print(HEADER)
        for threads in args.threads:
            result = compare(variants, threads, args.rounds, args.seconds, [p.pid for p in started])
            print("\n".join(result.lines()), flush=True)
        if args.side_rounds > 0:
            print(
                f"# side by side: {args.side_rounds} rounds x {args.seconds}s, against raw grpcio"
            )
            side = {
                "raw grpcio (A/A control)": control_call,
                "dubbo-py full path": variants["dubbo-py full path"],
            }
            if calibration in variants:
                side[calibration] = variants[calibration]
            for per_side in args.side_threads:
                for name, call in side.items():
                    pair = side_by_side(
                        name, raw_call, call, per_side, args.side_rounds, args.seconds
                    )
                    print(pair.line(), flush=True)
        if args.hedging:
            calls = next(counted)
            hedges = {k: 0 for k in ("sent", "won", "refused")}
            for assembly in ref.assemblies:
                for counts in assembly.hedge_counts.values():
                    for key in hedges:
                        hedges[key] += getattr(counts, key)
            print(
                f"# hedging on, no fault: {calls} calls, hedges sent {hedges['sent']} "
                f"({hedges['sent'] / max(1, calls):.2%} extra load; budget 5% + 1/s), "
                f"won {hedges['won']}, refused by the budget {hedges['refused']}"
            )
    finally:
        app.close()
        for channel in raw_channels:
            channel.close()
        for provider in started:
            provider.kill()
        for zk in servers:
            zk.close()


if __name__ == "__main__":
    main()
