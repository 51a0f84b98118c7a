"""Calls per second through dubbo-py against a raw grpcio stub, in the same run.

    python bench/bench_calls.py [--seconds 1] [--rounds 20] [--threads 1 8] [--no-zookeeper]
                                [--side-rounds 15] [--side-threads 1 8]

One provider process (examples/quickstart/provider.py) serves every variant, so the only
difference is the client path: a raw ``GreeterStub(grpc.insecure_channel(...))``, dubbo-py with a
direct ``tri://`` address, and dubbo-py through a real ZooKeeper registry (started here from
Debian's jars). Variants are interleaved round by round so machine noise hits them alike (see
``bench/interleave.py`` for the figures printed); ratios are against raw grpcio. A second raw
grpcio channel runs as one more variant: its ratio is this mode's noise in this run (A/A).

Then each dubbo-py variant runs *side by side* with raw grpcio (``--side-threads`` threads each,
at the same time, ``--side-rounds`` rounds), which cancels the machine's noise out of the ratio;
a second raw grpcio channel run the same way (A/A) shows how precise that is. Side by side
compresses differences (see ``bench/interleave.py``), so both modes also run raw grpcio plus a
known ``--calibration-us`` of client CPU per call, to show how an overhead of that size reads.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))
import _paths  # noqa: E402,F401
import grpc  # noqa: E402
from demo import greeter_pb2, greeter_pb2_grpc  # noqa: E402
from interleave import (  # noqa: E402
    HEADER,
    Call,
    add_round_options,
    compare,
    provider_in_registry,
    side_by_side,
    with_cpu,
)

import dubbo_py  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    add_round_options(parser, rounds=20, side_threads=[1, 8])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--no-zookeeper", action="store_true")
    args = parser.parse_args()

    request = greeter_pb2.HelloRequest(name="bench")
    with provider_in_registry(not args.no_zookeeper, "bench") as (registry, provider):
        raw_channel = grpc.insecure_channel(provider.address)
        raw = greeter_pb2_grpc.GreeterStub(raw_channel)
        control_channel = grpc.insecure_channel(provider.address)
        control = greeter_pb2_grpc.GreeterStub(control_channel)
        direct_app = dubbo_py.Application("bench-direct", registry=f"tri://{provider.address}")
        direct = direct_app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
        variants: dict[str, Call] = {
            "raw grpcio": lambda: raw.SayHello(request),
            # A/A control: the noise of this mode, in this run.
            "raw grpcio, 2nd channel": lambda: control.SayHello(request),
            "dubbo-py direct": lambda: direct.SayHello(request),
        }
        calibration = f"raw grpcio + {args.calibration_us:g} µs CPU"
        if args.calibration_us > 0:
            # A known overhead: how one of that size reads in each mode of this run.
            variants[calibration] = with_cpu(lambda: control.SayHello(request), args.calibration_us)
        registry_app = None
        if not args.no_zookeeper:
            registry_app = dubbo_py.Application("bench-zk", registry=registry)
            via_zk = registry_app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
            variants["dubbo-py via ZooKeeper"] = lambda: via_zk.SayHello(request)
        for call in variants.values():
            for _ in range(200):  # warm up channels and caches
                call()
        print(f"# {args.rounds} rounds x {args.seconds}s per variant, interleaved")
        print(HEADER)
        for threads in args.threads:
            result = compare(variants, threads, args.rounds, args.seconds, [provider.pid])
            print("\n".join(result.lines()), flush=True)
        if args.side_rounds > 0:
            print(
                f"# side by side: {args.side_rounds} rounds x {args.seconds}s, against raw grpcio"
            )
            side = {"raw grpcio (A/A control)": lambda: control.SayHello(request)}
            side.update(
                (name, call)
                for name, call in variants.items()
                if name.startswith("dubbo-py") or name == calibration
            )
            baseline = variants["raw grpcio"]
            for per_side in args.side_threads:
                for name, call in side.items():
                    pair = side_by_side(
                        name, baseline, call, per_side, args.side_rounds, args.seconds
                    )
                    print(pair.line(), flush=True)
        control_channel.close()
        direct_app.close()
        if registry_app is not None:
            registry_app.close()
        raw_channel.close()


if __name__ == "__main__":
    main()
