"""Select cost of each load balancer at 10, 1 000 and 10 000 providers.

The same candidate tuple is passed on every call (what the router chain does when nothing was
filtered), so per-tuple precomputation is built once, before timing. Providers alternate
weights 100/200 (the weighted path, not the equal-weight shortcut); for the balancers that read
statistics every other provider has one call in flight and a 5 ms average, so half of them tie.

Two costs per balancer: ``select`` alone, and ``select`` plus recording the call into the
statistics (``begin`` + ``end``, which is what the call path adds for ``leastactive``,
``shortestresponse``, ``p2c`` and ``adaptive``: for the first two it also moves the provider in
their index). Times are CPU time of the benchmark's thread. Sizes are interleaved over
``--rounds`` rounds and the median kept, so a busy moment of the machine hits every size
alike.

    python bench/bench_loadbalance.py [--seconds 0.2] [--rounds 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from dubbo_py.cluster.loadbalance import LOADBALANCE_NAMES, STATS_LOADBALANCES, get_loadbalance
from dubbo_py.cluster.stats import CallStats, method_key
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

SIZES = (10, 1_000, 10_000)
SERVICE = "demo.Greeter"
KEY = method_key(SERVICE, "SayHello")


def providers(n: int) -> tuple[URL, ...]:
    return tuple(
        URL.parse(
            f"tri://10.{i // 65536}.{i // 256 % 256}.{i % 256}:50051/{SERVICE}"
            f"?interface={SERVICE}&version=1.0.0&weight={100 if i % 2 else 200}"
        )
        for i in range(n)
    )


def prepared(
    name: str, candidates: tuple[URL, ...]
) -> tuple[Callable[[], None], Callable[[], None]]:
    """(select once, select and record once) for a balancer facing ``candidates``."""
    stats = CallStats()
    for i, url in enumerate(candidates):
        if i % 2 == 0:
            stats.begin(url.address, KEY)
        stats.end(stats.begin(url.address, KEY), True, elapsed_ms=5.0)
    lb = get_loadbalance(name, stats=stats, rng=random.Random(1))
    invocations = [
        Invocation(SERVICE, "SayHello", explicit_arguments=(f"user-{i}",)) for i in range(64)
    ]
    for inv in invocations:  # build caches, indexes and rings; also the arguments cache
        lb.select(candidates, inv)
    select = lb.select
    begin, end = stats.begin, stats.end

    def select_only() -> None:
        for inv in invocations:
            select(candidates, inv)

    def select_and_record() -> None:
        for inv in invocations:
            end(begin(select(candidates, inv).address, KEY), True, elapsed_ms=5.0)

    return select_only, select_and_record


def per_call_us(batch: Callable[[], None], seconds: float) -> float:
    # CPU time of this thread, so the moments another job holds the core don't count.
    calls = 0
    start = time.thread_time()
    deadline = start + seconds
    while True:
        batch()
        calls += 64
        now = time.thread_time()
        if now >= deadline:
            return (now - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.2, help="time per measurement")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (median kept)")
    parser.add_argument("--balancers", nargs="+", default=list(LOADBALANCE_NAMES))
    args = parser.parse_args()
    tuples = {n: providers(n) for n in SIZES}
    results: dict[str, dict[str, list[float]]] = {}
    for name in args.balancers:
        batches = {n: prepared(name, tuples[n]) for n in SIZES}
        select_runs: dict[int, list[float]] = {n: [] for n in SIZES}
        record_runs: dict[int, list[float]] = {n: [] for n in SIZES}
        for r in range(args.rounds):
            order = SIZES if r % 2 == 0 else tuple(reversed(SIZES))
            for n in order:
                select_runs[n].append(per_call_us(batches[n][0], args.seconds))
                if name in STATS_LOADBALANCES:
                    record_runs[n].append(per_call_us(batches[n][1], args.seconds))
        results[name] = {
            "select": [statistics.median(select_runs[n]) for n in SIZES],
            "record": [statistics.median(record_runs[n]) for n in SIZES] if record_runs[10] else [],
        }
    header = f"{'balancer':<18}" + "".join(f"{n:>12,}" for n in SIZES) + f"{'10k / 10':>12}"
    for kind, title in (
        ("select", "µs per select (same tuple reused), median of the rounds"),
        ("record", "µs per select + statistics begin/end (the call path's balancer cost)"),
    ):
        print(title)
        print(header)
        for name in args.balancers:
            costs = results[name][kind]
            if not costs:
                continue
            row = f"{name:<18}" + "".join(f"{c:>12.2f}" for c in costs)
            print(row + f"{costs[-1] / costs[0]:>11.2f}x")
        print()


if __name__ == "__main__":
    main()
