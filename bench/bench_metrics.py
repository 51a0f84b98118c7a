"""What metrics cost: calls per second through dubbo-py with metrics on and off, against raw
grpcio, in the same run.

    python bench/bench_metrics.py [--seconds 1] [--rounds 15] [--threads 1 8]
                                  [--side-rounds 15] [--side-threads 1 4]
    python bench/bench_metrics.py --frames 1000      # function calls per call, no clock

One provider process (``bench/metrics_provider.py``) runs two Greeter servers: a plain one and
one that records the ``dubbo_provider_*`` metrics of every call (``Application(metrics=True)``).
Both share that process's CPU and GIL, so calls to the two, side by side, differ only by the
metrics. The variants:

- raw grpcio to the plain server (the baseline), and a second channel to it (A/A control);
- raw grpcio to the measured server: what provider-side metrics cost;
- dubbo-py (direct ``tri://`` address), metrics off, to the plain server;
- dubbo-py with metrics on (``Application(..., metrics=True)``) to the plain server: what the
  consumer's metrics cost;
- dubbo-py, metrics on, to the measured server: both sides record every call.

Interleaved rounds and side-by-side runs against the baseline, as ``bench/bench_calls.py``
(see ``bench/interleave.py``), with a known ``--calibration-us`` of client CPU per call to read
the side-by-side ratios against. No tracer provider is set, as in an application without the
OpenTelemetry SDK.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import subprocess
import sys
import tempfile
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
    side_by_side,
    with_cpu,
)

import dubbo_py  # noqa: E402


def frames(call: Call, calls: int) -> str:
    """Function calls per ``call`` in this thread, counted by cProfile over ``calls`` calls:
    all of them, and the Python frames of dubbo-py's own modules (a count, not a time: load
    does not move it)."""
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(calls):
        call()
    profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    everything = sum(counts[1] for counts in stats.values())
    own = sum(counts[1] for where, counts in stats.items() if "/dubbo_py/" in where[0])
    return f"{everything / calls:6.1f} function calls per call, {own / calls:5.1f} in dubbo_py"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    add_round_options(parser, rounds=15, side_threads=[1, 4])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 8])
    parser.add_argument(
        "--frames",
        type=int,
        default=0,
        metavar="N",
        help="instead: count the function calls per dubbo-py call over N calls (cProfile)",
    )
    args = parser.parse_args()

    request = greeter_pb2.HelloRequest(name="bench")
    registry = f"sqlite://{Path(tempfile.mkdtemp(prefix='dubbo-bench-')) / 'registry.db'}"
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "metrics_provider.py"), registry],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert server.stdout is not None
    ready = server.stdout.readline().split()
    if not ready or ready[0] != "READY":
        server.kill()
        raise SystemExit(f"the bench provider did not start: {ready}")
    plain_address, measured_address = ready[1], ready[2]
    apps: list[dubbo_py.Application] = []
    channels: list[grpc.Channel] = []
    try:

        def raw_stub(address: str) -> greeter_pb2_grpc.GreeterStub:
            channel = grpc.insecure_channel(address)
            channels.append(channel)
            return greeter_pb2_grpc.GreeterStub(channel)

        def dubbo_stub(address: str, metrics: bool) -> greeter_pb2_grpc.GreeterStub:
            app = dubbo_py.Application("bench", registry=f"tri://{address}", metrics=metrics)
            apps.append(app)
            return app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")

        raw = raw_stub(plain_address)
        control = raw_stub(plain_address)
        raw_measured = raw_stub(measured_address)
        off = dubbo_stub(plain_address, metrics=False)
        consumer_only = dubbo_stub(plain_address, metrics=True)
        on = dubbo_stub(measured_address, metrics=True)
        variants: dict[str, Call] = {
            "raw grpcio": lambda: raw.SayHello(request),
            "raw grpcio, 2nd channel": lambda: control.SayHello(request),
            "raw grpcio, provider metrics on": lambda: raw_measured.SayHello(request),
            "dubbo-py, metrics off": lambda: off.SayHello(request),
            "dubbo-py, consumer metrics only": lambda: consumer_only.SayHello(request),
            "dubbo-py, metrics on (both sides)": lambda: on.SayHello(request),
        }
        calibration = f"raw grpcio + {args.calibration_us:g} µs CPU"
        if args.calibration_us > 0:
            variants[calibration] = with_cpu(lambda: control.SayHello(request), args.calibration_us)
        for call in variants.values():
            for _ in range(200):  # warm up channels and caches
                call()
        if args.frames:
            for name in ("dubbo-py, metrics off", "dubbo-py, metrics on (both sides)"):
                print(f"{name:36s} {frames(variants[name], args.frames)}")
            return
        providers = [server.pid]
        print(f"# {args.rounds} rounds x {args.seconds}s per variant, interleaved")
        print(HEADER)
        for threads in args.threads:
            result = compare(variants, threads, args.rounds, args.seconds, providers)
            print("\n".join(result.lines()), flush=True)
        if args.side_rounds > 0:
            print(
                f"# side by side: {args.side_rounds} rounds x {args.seconds}s, against raw grpcio"
            )
            baseline = variants["raw grpcio"]
            side = {"raw grpcio (A/A control)": variants["raw grpcio, 2nd channel"]}
            side.update((k, v) for k, v in variants.items() if k not in ("raw grpcio",))
            side.pop("raw grpcio, 2nd channel")
            for per_side in args.side_threads:
                for name, call in side.items():
                    pair = side_by_side(
                        name, baseline, call, per_side, args.side_rounds, args.seconds
                    )
                    print(pair.line(), flush=True)
    finally:
        for app in apps:
            app.close()
        for channel in channels:
            channel.close()
        server.kill()
        server.wait(10)


if __name__ == "__main__":
    main()
