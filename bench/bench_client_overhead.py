"""dubbo-py's own client cost per call, with the network taken out.

    python bench/bench_client_overhead.py [--calls 200000] [--repeats 7]

A reference to a direct ``tri://`` address whose gRPC multicallable is replaced by a function
that returns a fixed reply: what is left is exactly what dubbo-py adds to a call (the stub's
entry, the call plan's checks, balancing, the retry budget's count, outcome recording). Run it
with two builds on ``PYTHONPATH`` to compare them to the nanosecond, which the calls/s
benchmarks cannot do on a shared machine:

    PYTHONPATH=/path/to/build-a python bench/bench_client_overhead.py
    PYTHONPATH=/path/to/build-b python bench/bench_client_overhead.py

Printed: ns per call, best of ``--repeats`` runs of ``--calls`` calls (the best run is the one
least disturbed by other work), for one method under ``roundrobin`` over three providers and
under ``random`` over one.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
import _paths  # noqa: E402,F401
from demo import greeter_pb2, greeter_pb2_grpc  # noqa: E402

import dubbo_py  # noqa: E402


def measure(addresses: list[str], loadbalance: str, calls: int, repeats: int) -> float:
    """Best ns per call of ``calls`` planned calls over ``addresses``."""
    reply = greeter_pb2.HelloReply(message="hi")

    def fake(request: Any, timeout: float | None = None, **_: Any) -> Any:
        return reply

    registry = "tri://" + ",".join(addresses)
    with dubbo_py.Application("bench", registry) as app:
        ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, loadbalance=loadbalance)
        stub = ref.stub
        request = greeter_pb2.HelloRequest(name="bench")
        stub.SayHello  # noqa: B018  (the method's context exists once its multicallable does)
        invoker = ref.contexts["SayHello"].call
        targets = getattr(invoker, "_targets", None)  # (callable, metadata) by address
        for address in addresses:
            invoker.multicallables[address] = fake
            if targets is not None:
                targets[address] = (fake, ())
        say = stub.SayHello
        for _ in range(1000):  # compile the plan, warm the caches
            say(request)
        best = float("inf")
        for _ in range(repeats):
            started = time.perf_counter_ns()
            for _ in range(calls):
                say(request)
            best = min(best, (time.perf_counter_ns() - started) / calls)
        return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(f"# dubbo_py from {Path(dubbo_py.__file__).parent}")
    three = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]
    for label, addresses, balancer in (
        ("roundrobin, 3 providers", three, "roundrobin"),
        ("random, 1 provider", three[:1], "random"),
    ):
        ns = measure(addresses, balancer, args.calls, args.repeats)
        print(f"{label:26s} {ns:7.0f} ns per call")


if __name__ == "__main__":
    main()
