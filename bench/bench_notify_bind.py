"""Provider notification -> new chain in force, at 10 / 1 000 / 10 000 providers with 20 rules.

    python bench/bench_notify_bind.py [--sizes 10 1000 10000] [--repeats 7]

A consumer's ``RegistryDirectory`` (a registry on an in-memory store, the 20 condition rules
of ``bench/bench_routing_cost.py`` registered as router URLs in the service's ``routers``
category, the built-in mock and tag routers) receives provider notifications as a registry
delivers them: the provider folder's node names. Each notification replaces one provider by a
new one (a provider restarting), so every round sees a list it has not seen. Timed: from the
node names to the directory's listener being called with the new bound chain -- decoding the
names into URLs, filtering them for this consumer, applying override rules, sorting, binding
all 20 rules to the new snapshot, swapping the chain in. What the store does before it hands
the names over (ZooKeeper's watch and ``getChildren``) is not included: that is the push
benchmark's *delivery*.

Printed per size: the median and the worst of ``--repeats`` notifications (after one
untimed, and after a full garbage collection of what the setup left), as CPU time of the
notifying thread (the cost; other jobs on the machine do not count) and as wall time, against
the target of 50 ms at 10 000 providers.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from bench_routing_cost import CONSUMER, RULES, SERVICE, providers  # noqa: E402

from dubbo_py.registry import layout  # noqa: E402
from dubbo_py.registry.directory import RegistryDirectory  # noqa: E402
from dubbo_py.registry.registry import Registry  # noqa: E402
from dubbo_py.router import factory  # noqa: E402
from dubbo_py.router.chain import BoundChain  # noqa: E402
from dubbo_py.url import URL, encode_component  # noqa: E402
from tests.support.memory_store import MemoryStore  # noqa: E402


def rule_urls() -> list[URL]:
    return [
        URL.parse(
            f"condition://0.0.0.0/{SERVICE}?category=routers&dynamic=false&force=false"
            f"&priority={priority}&rule={encode_component(rule)}"
        )
        for priority, (rule, _) in enumerate(RULES)
    ]


def measure(n: int, repeats: int) -> tuple[list[float], list[float]]:
    """(CPU ms, wall ms) from node names to the new chain, for ``repeats`` notifications of
    ``n`` providers."""
    store = MemoryStore()
    registry = Registry(store)
    for url in rule_urls():
        registry.register(url)
    directory = RegistryDirectory(
        CONSUMER,
        registry,
        factory.new_rulebook(),
        assemble=factory.chain_routers,
    )
    directory.start(wait=10)
    bound: list[tuple[float, float]] = []

    def on_chain(chain: BoundChain) -> None:
        bound.append((time.thread_time(), time.perf_counter()))

    directory.add_listener(on_chain)
    path = layout.category_path(SERVICE, layout.PROVIDERS)
    # The registry's own watch callback for the providers folder: what a store calls with the
    # folder's node names (and what keeps the names it decoded last time).
    (notify,) = [callback for watched, callback in store._children_watches if watched == path]
    fleet = list(providers(n + repeats + 1))
    names = [u.encode() for u in fleet[:n]]
    spare = [u.encode() for u in fleet[n:]]
    cpu, wall = [], []
    # A full collection owed by the setup (imports, the fleet's URLs) is paid here, untimed,
    # rather than in whichever notification happens to cross the threshold.
    gc.collect()
    for k in range(repeats + 1):
        names[k % n] = spare[k]  # one provider restarts with a new URL
        delivered = list(names)
        start_cpu, start_wall = time.thread_time(), time.perf_counter()
        notify(delivered)
        cpu.append((bound[-1][0] - start_cpu) * 1e3)
        wall.append((bound[-1][1] - start_wall) * 1e3)
        assert len(directory.providers) > 0
    directory.close()
    assert len(directory.chain.snapshot.providers) == len(directory.providers)
    return cpu[1:], wall[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 1_000, 10_000])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(f"# {len(RULES)} condition rules as router URLs, plus the mock and tag routers")
    print(f"{'providers':>10} {'CPU ms median':>14} {'max':>8} {'wall ms median':>15} {'max':>8}")
    for n in args.sizes:
        cpu, wall = measure(n, args.repeats)
        print(
            f"{n:>10,} {statistics.median(cpu):>14.1f} {max(cpu):>8.1f}"
            f" {statistics.median(wall):>15.1f} {max(wall):>8.1f}"
        )


if __name__ == "__main__":
    main()
