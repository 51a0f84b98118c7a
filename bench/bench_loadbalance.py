"""Select cost of each load balancer at 10, 1 000 and 10 000 providers.

The same candidate tuple is passed on every call (what the router chain does when nothing was
filtered), so per-tuple precomputation is built once, before timing. Providers alternate
weights 100/200 (the weighted path, not the equal-weight shortcut); for leastactive and
shortestresponse every other provider has one call in flight and a 5 ms average, so half of
them tie.

    python bench/bench_loadbalance.py [--seconds 0.3]
"""

from __future__ import annotations

import argparse
import random
import time

from dubbo_py.cluster.loadbalance import LOADBALANCE_NAMES, get_loadbalance
from dubbo_py.cluster.stats import CallStats, method_key
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

SIZES = (10, 1_000, 10_000)
SERVICE = "demo.Greeter"


def providers(n: int) -> tuple[URL, ...]:
    return tuple(
        URL.parse(
            f"tri://10.{i // 65536}.{i // 256 % 256}.{i % 256}:50051/{SERVICE}"
            f"?interface={SERVICE}&version=1.0.0&weight={100 if i % 2 else 200}"
        )
        for i in range(n)
    )


def per_select_us(name: str, candidates: tuple[URL, ...], seconds: float) -> float:
    stats = CallStats()
    key = method_key(SERVICE, "SayHello")
    for i, url in enumerate(candidates):
        if i % 2 == 0:
            stats.begin(url.address, key)
        stats.end(stats.begin(url.address, key), True, elapsed_ms=5.0)
    lb = get_loadbalance(name, stats=stats, rng=random.Random(1))
    invocations = [
        Invocation(SERVICE, "SayHello", explicit_arguments=(f"user-{i}",)) for i in range(64)
    ]
    for inv in invocations:  # build caches and rings; also touch the arguments cache
        lb.select(candidates, inv)
    select = lb.select
    calls = 0
    batch = 64
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for inv in invocations[:batch]:
            select(candidates, inv)
        calls += batch
        now = time.perf_counter()
        if now >= deadline:
            return (now - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.3, help="time per measurement")
    args = parser.parse_args()
    tuples = {n: providers(n) for n in SIZES}
    header = f"{'balancer':<18}" + "".join(f"{n:>12,}" for n in SIZES) + f"{'10k / 10':>12}"
    print("µs per select (same tuple reused)")
    print(header)
    for name in LOADBALANCE_NAMES:
        costs = [per_select_us(name, tuples[n], args.seconds) for n in SIZES]
        row = f"{name:<18}" + "".join(f"{c:>12.2f}" for c in costs)
        print(row + f"{costs[-1] / costs[0]:>11.1f}x")


if __name__ == "__main__":
    main()
