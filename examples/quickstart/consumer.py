"""A Greeter consumer: calls SayHello in a loop and shows which provider answered.

`python examples/quickstart/consumer.py --registry sqlite:///tmp/r.db --calls 100`; with
`--calls 0` it calls until stopped (SIGTERM or Ctrl-C), then prints its totals.
"""

from __future__ import annotations

import argparse
import collections
import logging
import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _paths  # noqa: F401
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py


def report(window: collections.Counter[str], calls: int) -> None:
    """Prints where the calls since the last report landed (numbered from 1) and clears them."""
    first = calls - sum(window.values()) + 1
    spread = ", ".join(f"{p}: {n}" for p, n in sorted(window.items()))
    print(f"  calls {first:>4}-{calls:<4} {spread}", flush=True)
    window.clear()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--registry", default=None)
    parser.add_argument("--calls", type=int, default=100, help="0: until SIGTERM or Ctrl-C")
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
        # A stop asked by a signal ends the loop between calls, so the totals below are printed
        # and count every call that was made (the demo stops its consumer this way).
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        i = 0
        while not stop.is_set() and (args.calls <= 0 or i < args.calls):
            try:
                reply = greeter.SayHello(greeter_pb2.HelloRequest(name=f"ada-{i}"))
                served_by[reply.provider] += 1
                window[reply.provider] += 1
            except Exception as exc:  # the demo reports failures instead of stopping
                failed += 1
                window["failed"] += 1
                print(f"call {i + 1} failed: {exc}", flush=True)
            i += 1
            if args.report_every and i % args.report_every == 0:
                report(window, i)
            if args.interval:
                stop.wait(args.interval)
        if window:  # the calls of a block cut short by a stop, so the blocks add up to the totals
            report(window, i)
        for provider, count in sorted(served_by.items()):
            print(f"  {provider}: {count} calls", flush=True)
        print(f"{sum(served_by.values())} succeeded, {failed} failed", flush=True)
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
