"""Provider notification -> new chain in force, and what each provider costs in memory.

    python bench/bench_notify_bind.py [--sizes 1000 10000 100000] [--repeats 7]
    python bench/bench_notify_bind.py --fleet [--services 1000] [--per-service 100]
                                      [--rules 20] [--shard]
    python bench/bench_notify_bind.py --sizes 100000 --tracemalloc

**Notify (default).** A consumer's ``RegistryDirectory`` (a registry on an in-memory store, the
20 condition rules of ``bench/bench_routing_cost.py`` registered as router URLs in the
service's ``routers`` category, the built-in mock and tag routers) receives provider
notifications as a registry delivers them: the provider folder's node names. Each notification
replaces one provider by a new one (a provider restarting), so every round sees a list it has
not seen. Timed: from the node names to the directory's listener being called with the new
bound chain -- decoding the names into URLs, filtering them for this consumer, applying
override rules, sorting, binding all 20 rules to the new snapshot, swapping the chain in. What
the store does before it hands the names over (ZooKeeper's watch and ``getChildren``) is not
included: that is the push benchmark's *delivery*.

Each size runs in a fresh process (so its memory figures are its own). Printed per size: the
first notification (every provider new: the full bind), its cost per provider; then the median
and the worst of ``--repeats`` one-provider notifications (after one untimed, and after a full
garbage collection of what the setup left), as CPU time of the notifying thread (the cost;
other jobs on the machine do not count) and as wall time; and the memory the consumer holds per
provider: the growth of the resident set from before the first notification to after the
last (node-name strings excluded: they are made before, as a store makes them) divided by the
number of providers, and the process's resident set at the end (names included).

**Fleet (``--fleet``).** One consumer process referencing ``--services`` services of
``--per-service`` providers each (100 000 providers over 1 000 services by default), one
``RegistryDirectory`` per service on one registry, each with ``--rules`` condition rules as
router URLs (default 20) and, with ``--shard``, a shard-router document (Elasticsearch scheme,
4 shards; the providers carry ``shard``). Printed: the resident set before and after, per
provider, and the time the services' first notifications took, then one-provider
notifications of one service (median / max CPU ms).

``--tracemalloc`` adds, per size, where the bytes the consumer keeps were allocated (top
sites, bytes per provider): slow, so the timings of that run are not the figures.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from bench_routing_cost import (  # noqa: E402
    CONSUMER,
    RULES,
    SERVICE,
    provider_host,
    provider_parameters,
)

from dubbo_py.registry import layout  # noqa: E402
from dubbo_py.registry.directory import RegistryDirectory  # noqa: E402
from dubbo_py.registry.registry import Registry  # noqa: E402
from dubbo_py.router import factory  # noqa: E402
from dubbo_py.router.chain import BoundChain  # noqa: E402
from dubbo_py.url import URL, encode_component  # noqa: E402
from tests.support.memory_store import MemoryStore  # noqa: E402

SHARD_RULE = "scheme: elasticsearch\nshards: 4\nkey: attachments[tenant]\n"


def rule_urls(service: str = SERVICE, count: int = len(RULES)) -> list[URL]:
    """The first ``count`` rules of bench_routing_cost as router URLs of ``service``."""
    return [
        URL.parse(
            f"condition://0.0.0.0/{service}?category=routers&dynamic=false&force=false"
            f"&priority={priority}&rule={encode_component(rule)}"
        )
        for priority, (rule, _) in enumerate(RULES[:count])
    ]


def provider_name(i: int, service: str = SERVICE, shard: bool = False) -> str:
    """The node name of provider ``i`` (bench_routing_cost's spread of fields), made without
    keeping its URL object (the bench's own data must not count as the consumer's)."""
    params = provider_parameters(i, service)
    if shard:
        params["shard"] = str(i % 4)
    return URL("tri", provider_host(i), 50051 + i % 4, service, parameters=params).encode()


def rss_mb() -> float:
    """The resident set now (not the peak), in MB."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _watch_of(store: MemoryStore, service: str) -> Callable[[list[str]], None]:
    # The registry's own watch callback for the providers folder: what a store calls with the
    # folder's node names (and what keeps the names it decoded last time).
    path = layout.category_path(service, layout.PROVIDERS)
    (notify,) = [callback for watched, callback in store._children_watches if watched == path]
    return notify


def _consumer(service: str) -> URL:
    return CONSUMER.replace(path=service).with_parameters(interface=service)


def _directory(store: MemoryStore, registry: Registry, service: str) -> RegistryDirectory:
    directory = RegistryDirectory(
        _consumer(service), registry, factory.new_rulebook(), assemble=factory.chain_routers
    )
    directory.start(wait=10)
    return directory


def _top_sites(before: Any, after: Any, n: int, limit: int = 12) -> list[tuple[float, str]]:
    out = []
    for stat in after.compare_to(before, "traceback")[:limit]:
        frames = [f"{f.filename.rsplit('/', 2)[-1]}:{f.lineno}" for f in stat.traceback]
        out.append((stat.size_diff / n, " <- ".join(reversed(frames[-3:]))))
    return out


def measure(n: int, repeats: int, trace: bool) -> dict[str, Any]:
    """One size in this process: first notification, ``repeats`` one-provider ones, memory."""
    store = MemoryStore()
    registry = Registry(store)
    for url in rule_urls():
        registry.register(url)
    directory = _directory(store, registry, SERVICE)
    bound: list[tuple[float, float]] = []

    def on_chain(chain: BoundChain) -> None:
        bound.append((time.thread_time(), time.perf_counter()))

    directory.add_listener(on_chain)
    notify = _watch_of(store, SERVICE)
    names = [provider_name(i) for i in range(n)]
    spare = [provider_name(i) for i in range(n, n + repeats + 1)]
    gc.collect()
    rss_before = rss_mb()
    if trace:
        import tracemalloc

        tracemalloc.start(8)
        snap_before = tracemalloc.take_snapshot()
    start_cpu = time.thread_time()
    notify(list(names))
    first_ms = (bound[-1][0] - start_cpu) * 1e3
    cpu, wall = [], []
    # A full collection owed by the setup (the names, the first list's URLs) is paid here,
    # untimed, rather than in whichever notification happens to cross the threshold.
    gc.collect()
    for k in range(repeats + 1):
        names[k % n] = spare[k]  # one provider restarts with a new URL
        delivered = list(names)
        start_cpu, start_wall = time.thread_time(), time.perf_counter()
        notify(delivered)
        cpu.append((bound[-1][0] - start_cpu) * 1e3)
        wall.append((bound[-1][1] - start_wall) * 1e3)
        assert len(directory.providers) > 0
    gc.collect()
    result: dict[str, Any] = {
        "n": n,
        "first_ms": first_ms,
        "cpu": cpu[1:],
        "wall": wall[1:],
        "bytes_per_provider": (rss_mb() - rss_before) * 2**20 / n,
        "rss_mb": rss_mb(),
        "peak_mb": peak_mb(),
    }
    if trace:
        snap_after = tracemalloc.take_snapshot()
        result["traced_per_provider"] = tracemalloc.get_traced_memory()[0] / n
        result["sites"] = _top_sites(snap_before, snap_after, n)
        tracemalloc.stop()
    assert len(directory.chain.snapshot.providers) == len(directory.providers)
    directory.close()
    return result


def fleet(services: int, per_service: int, rules: int, shard: bool, repeats: int) -> None:
    """The fleet mode: one consumer of ``services`` services (see the module docstring)."""
    store = MemoryStore()
    registry = Registry(store)
    names_of = [f"demo.Greeter{s}" for s in range(services)]
    for service in names_of:
        for url in rule_urls(service, rules):
            registry.register(url)
        if shard:
            registry.put_config(f"{service}:1.0.0:.shard-router", SHARD_RULE)
    gc.collect()
    rss_empty = rss_mb()
    directories = [_directory(store, registry, service) for service in names_of]
    gc.collect()
    rss_directories = rss_mb()
    folders = [
        [provider_name(s * per_service + i, service, shard) for i in range(per_service)]
        for s, service in enumerate(names_of)
    ]
    gc.collect()
    rss_names = rss_mb()
    start = time.process_time()
    for service, names in zip(names_of, folders, strict=True):
        _watch_of(store, service)(list(names))
    first_s = time.process_time() - start
    gc.collect()
    rss_full = rss_mb()
    total = services * per_service
    usable = sum(len(d.providers) for d in directories)
    # One-provider notifications of one service, as in the notify mode.
    bound: list[float] = []
    directories[0].add_listener(lambda _chain: bound.append(time.thread_time()))
    notify = _watch_of(store, names_of[0])
    names = folders[0]
    cpu = []
    for k in range(repeats + 1):
        names[k % per_service] = provider_name(total + k, names_of[0], shard)
        start_cpu = time.thread_time()
        notify(list(names))
        cpu.append((bound[-1] - start_cpu) * 1e3)
    routers = len(directories[0].routers_in_force())
    print(
        f"# {services:,} services x {per_service:,} providers = {total:,} ({usable:,} usable),"
        f" {rules} condition rules per service{', a shard-router document' if shard else ''};"
        f" {routers} routers in each chain"
    )
    print(
        f"resident MB: empty registry {rss_empty:.0f}, + {services:,} directories "
        f"{rss_directories:.0f}, + node names {rss_names:.0f}, + providers {rss_full:.0f}"
        f" (peak {peak_mb():.0f})"
    )
    print(
        f"per provider: {(rss_full - rss_names) * 2**20 / total:,.0f} B (names excluded), "
        f"{(rss_full - rss_empty) * 2**20 / total:,.0f} B (directories and names included)"
    )
    print(
        f"first notification of every service: {first_s:.1f} s CPU "
        f"({first_s * 1e6 / total:.1f} us per provider)"
    )
    print(
        f"one-provider notification of one service: CPU ms median "
        f"{statistics.median(cpu[1:]):.2f}, max {max(cpu[1:]):.2f}"
    )
    for directory in directories:
        directory.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--fleet", action="store_true")
    parser.add_argument("--services", type=int, default=1_000)
    parser.add_argument("--per-service", type=int, default=100)
    parser.add_argument("--rules", type=int, default=len(RULES))
    parser.add_argument("--shard", action="store_true")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(measure(args.child, args.repeats, args.tracemalloc)))
        return
    if args.fleet:
        fleet(args.services, args.per_service, args.rules, args.shard, args.repeats)
        return
    print(f"# {len(RULES)} condition rules as router URLs, plus the mock and tag routers")
    print(
        f"{'providers':>10} {'first ms':>9} {'us/prov':>8} {'CPU ms median':>14} {'max':>7}"
        f" {'wall ms median':>15} {'max':>7} {'B/provider':>11} {'RSS MB':>7} {'peak':>6}"
    )
    for n in args.sizes:
        command = [sys.executable, __file__, "--child", str(n), "--repeats", str(args.repeats)]
        if args.tracemalloc:
            command.append("--tracemalloc")
        r = json.loads(subprocess.run(command, check=True, capture_output=True).stdout)
        print(
            f"{n:>10,} {r['first_ms']:>9.1f} {r['first_ms'] * 1e3 / n:>8.2f}"
            f" {statistics.median(r['cpu']):>14.2f} {max(r['cpu']):>7.2f}"
            f" {statistics.median(r['wall']):>15.2f} {max(r['wall']):>7.2f}"
            f" {r['bytes_per_provider']:>11,.0f} {r['rss_mb']:>7.0f} {r['peak_mb']:>6.0f}"
        )
        if args.tracemalloc:
            print(f"    traced: {r['traced_per_provider']:,.0f} B per provider; top sites:")
            for size, site in r["sites"]:
                print(f"    {size:>8,.1f} B  {site}")


if __name__ == "__main__":
    main()
