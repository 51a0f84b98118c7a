"""A provider blackholed for 15 s under load, with and without hedged requests.

    python bench/bench_hedging_blackhole.py [--blackhole 15] [--threads 4] [--timeout 1.0]
                                            [--runs off on]

Two real provider processes (``examples/quickstart/provider.py``) on a real ZooKeeper server
(started here), a consumer with ``--threads`` threads calling ``SayHello`` with a ``--timeout``
deadline, round-robin. After 5 s, every packet to and from provider A's port is dropped by
iptables (``tests/support/netfault.py``: a chain of its own, removed at the end) for
``--blackhole`` seconds: A's connection hangs without an error, and its registry session (on
another port) lives on, so only the consumer can tell. Each run prints the calls, the failed
calls, the calls per second before, during and after the blackhole, and, with hedging, the
hedges sent, won and refused by the budget and the extra load they made (hedges / calls).
Needs root (iptables).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))
import bench_calls  # noqa: E402,F401  (puts the demo protos on sys.path)
from demo import greeter_pb2, greeter_pb2_grpc  # noqa: E402

import dubbo_py  # noqa: E402
from tests.support.load import Load  # noqa: E402
from tests.support.netfault import NetFaults  # noqa: E402
from tests.support.processes import ProviderProcess  # noqa: E402
from tests.support.zookeeper import ZooKeeperServer  # noqa: E402

BEFORE = 5.0
AFTER = 3.0


def run(zk: ZooKeeperServer, args: argparse.Namespace, hedging: bool) -> str:
    registry = f"zookeeper://{zk.address}/bench-hedge-{uuid.uuid4().hex[:8]}"
    providers = [ProviderProcess(registry).start(), ProviderProcess(registry).start()]
    victim = providers[0]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            app = dubbo_py.Application("shop", registry, cache_path=Path(tmp) / "c.json")
            try:
                ref = app.reference_handle(
                    greeter_pb2_grpc.GreeterStub,
                    version="1.0.0",
                    timeout=args.timeout,
                    loadbalance="roundrobin",
                    hedging=True if hedging else None,
                )
                while len(ref.directory.providers) < 2:
                    time.sleep(0.05)
                request = greeter_pb2.HelloRequest(name="x")

                def call() -> str:
                    return str(ref.stub.SayHello(request).provider)

                with NetFaults() as faults, Load(call, args.threads) as load:
                    time.sleep(BEFORE)
                    cut = time.monotonic()
                    with faults.blackhole(victim.port):
                        time.sleep(args.blackhole)
                    healed = time.monotonic()
                    time.sleep(AFTER)
                return report(ref, load, cut, healed, hedging)
            finally:
                app.close()
    finally:
        for proc in providers:
            proc.kill()


def report(ref: Any, load: Load, cut: float, healed: float, hedging: bool) -> str:
    calls = len(load.samples)
    failed = load.errors()
    before = len(load.between(cut - BEFORE + 1.0, cut)) / (BEFORE - 1.0)
    during = len(load.between(cut, healed)) / (healed - cut)
    first = len(load.between(cut, cut + 1.0))
    after = len(load.between(healed + 1.0)) / (AFTER - 1.0)
    line = (
        f"hedging {'on ' if hedging else 'off'}: {calls} calls, {len(failed)} failed; "
        f"calls/s before {before:.0f}, during {during:.0f} ({during / before:.2f}x; "
        f"first second {first}), after {after:.0f}; ejections {ref.outliers.ejections}"
    )
    counts = ref.assembly.hedge_counts.get("SayHello")
    if counts is not None:
        line += (
            f"; hedges sent {counts.sent}, won {counts.won}, refused {counts.refused}, "
            f"extra load {counts.sent / max(1, calls):.2%}"
        )
    if failed:
        line += f"; first failure: {failed[0].error[:160]}"
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--blackhole", type=float, default=15.0)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=1.0)
    parser.add_argument("--runs", nargs="+", choices=("on", "off"), default=["off", "on"])
    args = parser.parse_args()
    zk = ZooKeeperServer()
    zk.start()
    try:
        print(
            f"# {args.threads} threads, {args.timeout}s deadline, 2 providers, "
            f"provider A blackholed for {args.blackhole:g}s"
        )
        for which in args.runs:
            print(run(zk, args, which == "on"), flush=True)
    finally:
        zk.close()


if __name__ == "__main__":
    main()
