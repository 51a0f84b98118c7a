"""A Greeter consumer: calls SayHello in a loop and shows which provider answered.

`python examples/quickstart/consumer.py --registry sqlite:///tmp/r.db --calls 100`
"""

from __future__ import annotations

import argparse
import collections
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _paths  # noqa: F401
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--registry", default=None)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--interval", type=float, default=0.0, help="pause between calls (s)")
    parser.add_argument("--loadbalance", default="roundrobin")
    parser.add_argument(
        "--report-every", type=int, default=0, help="print where the last N calls landed"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="consumer %(levelname)s %(message)s")

    with dubbo_py.Application("greeter-consumer", registry=args.registry) as app:
        greeter = app.reference(
            greeter_pb2_grpc.GreeterStub,
            version="1.0.0",
            loadbalance=args.loadbalance,
            retries=2,
            timeout=2.0,
        )
        served_by: collections.Counter[str] = collections.Counter()
        window: collections.Counter[str] = collections.Counter()
        failed = 0
        for i in range(args.calls):
            try:
                reply = greeter.SayHello(greeter_pb2.HelloRequest(name=f"ada-{i}"))
                served_by[reply.provider] += 1
                window[reply.provider] += 1
            except Exception as exc:  # the demo reports failures instead of stopping
                failed += 1
                window["failed"] += 1
                print(f"call {i} failed: {exc}", flush=True)
            if args.report_every and (i + 1) % args.report_every == 0:
                spread = ", ".join(f"{p}: {n}" for p, n in sorted(window.items()))
                print(f"  calls {i + 2 - args.report_every:>4}-{i + 1:<4} {spread}", flush=True)
                window.clear()
            if args.interval:
                time.sleep(args.interval)
        for provider, count in sorted(served_by.items()):
            print(f"  {provider}: {count} calls", flush=True)
        print(f"{sum(served_by.values())} succeeded, {failed} failed", flush=True)
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
