"""Registry size and notify cost: interface-level against application-level discovery.

    python bench/bench_app_level.py [--instances 1000] [--services 20] [--rounds 5]

An estate of ``--instances`` provider processes of one application, each exporting
``--services`` services, is written to a real ZooKeeper (started here from Debian's jars) twice,
in two chroots: once at the interface level (one provider node per service per process, the
URL dubbo-py's providers register) and once at the application level (one instance node per
process, one metadata document for the shared revision, one mapping node per service), with
dubbo-py's own writers' names and data. Written with kazoo's asynchronous creates, so the
writing is quick; what is measured is what sits in the registry afterwards.

Registry size: nodes and bytes (node names plus data) under each chroot, and ZooKeeper's own
``mntr`` figures (``zk_znode_count``, ``zk_approximate_data_size``) after each level.

Notify cost, for one consumer of all the services when one provider process restarts:

* what the consumer reads from ZooKeeper: at the interface level every service folder's
  children watch fires and each re-reads its whole child list; at the application level the
  application's children watch fires (one list of ``host:port`` names) and the new instance
  node is read once (its revision's metadata is cached);
* the consumer's CPU to turn that into provider lists (median of ``--rounds``): the interface
  level decodes every service's provider URLs (``Registry.subscribe``'s callback); the
  application level parses the instance node and rebuilds every service's provider URLs from
  the instances and the cached metadata (``ApplicationDiscovery``'s refresh, on a real watch).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dubbo_py.registry import layout  # noqa: E402
from dubbo_py.registry.application.discovery import (  # noqa: E402
    AppLevelProviders,
    ApplicationDiscovery,
)
from dubbo_py.registry.application.instance import (  # noqa: E402
    ENDPOINTS,
    REVISION,
    STORAGE_TYPE,
    ServiceInstance,
    endpoints_json,
)
from dubbo_py.registry.application.metadata import MetadataInfo  # noqa: E402
from dubbo_py.registry.application.paths import (  # noqa: E402
    application_path,
    instance_path,
    mapping_path,
    metadata_path,
)
from dubbo_py.registry.registry import decode_children  # noqa: E402
from dubbo_py.registry.store.zookeeper import ZooKeeperStore  # noqa: E402
from dubbo_py.url import URL  # noqa: E402
from tests.support.zookeeper import ZooKeeperServer, four_letter_word  # noqa: E402

APP = "inventory"


def provider_urls(index: int, services: int) -> list[URL]:
    """The provider URLs process ``index`` registers (what ``rpc.provider.provider_url``
    writes: methods, side, timestamp, pid, release, dubbo, application, version)."""
    host = f"10.{index // 65536 % 256}.{index // 256 % 256}.{index % 256}"
    return [
        URL(
            "tri",
            host,
            50051,
            f"bench.Service{s:02d}",
            parameters={
                "anyhost": "false",
                "application": APP,
                "interface": f"bench.Service{s:02d}",
                "methods": "Get,List,Put,Delete",
                "side": "provider",
                "timestamp": str(1_764_672_000_000 + index),
                "pid": str(10_000 + index),
                "release": "0.9.0",
                "dubbo": "2.0.2",
                "version": "1.0.0",
            },
        )
        for s in range(services)
    ]


def instance_of(urls: list[URL], info: MetadataInfo) -> ServiceInstance:
    metadata = info.instance_params(urls)
    metadata.update(
        {
            REVISION: info.revision,
            STORAGE_TYPE: "remote",
            ENDPOINTS: endpoints_json({"tri": urls[0].port}),
        }
    )
    return ServiceInstance(APP, urls[0].host, urls[0].port, metadata, registration_time_ms=1)


def create_all(store: ZooKeeperStore, nodes: list[tuple[str, bytes]]) -> None:
    """Create the nodes with kazoo's asynchronous creates, parents first."""
    client, root = store.kazoo_client, store.chroot  # kazoo's paths are not chrooted
    parents = sorted({p.rsplit("/", 1)[0] for p, _ in nodes})
    for parent in parents:
        client.ensure_path(root + parent)
    pending = []
    for path, data in nodes:
        pending.append(client.create_async(root + path, data))
        if len(pending) >= 2000:
            for p in pending:
                p.get()
            pending = []
    for p in pending:
        p.get()


def size(nodes: list[tuple[str, bytes]]) -> tuple[int, int]:
    """(node count, bytes of names and data)."""
    return len(nodes), sum(len(p.rsplit("/", 1)[1]) + len(d) for p, d in nodes)


def mntr(address: str) -> dict[str, str]:
    out = {}
    for line in four_letter_word(address, "mntr").splitlines():
        key, _, value = line.partition("\t")
        out[key] = value
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--instances", type=int, default=1000)
    parser.add_argument("--services", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    n, s = args.instances, args.services

    estate = [provider_urls(i, s) for i in range(n)]
    info = MetadataInfo.of(APP, estate[0])
    assert all(MetadataInfo.of(APP, urls).revision == info.revision for urls in estate[:5])

    interface_nodes = [(layout.node_path(u), b"") for urls in estate for u in urls]
    app_nodes = [
        (
            instance_path(APP, f"{urls[0].host}:{urls[0].port}"),
            instance_of(urls, info).to_json().encode(),
        )
        for urls in estate
    ]
    app_nodes.append((metadata_path(APP, info.revision), info.to_json().encode()))
    app_nodes += [(mapping_path(u.service_interface), APP.encode()) for u in estate[0]]

    with ZooKeeperServer() as zk:
        figures: dict[str, dict[str, float]] = {}
        base = mntr(zk.address)
        for level, nodes in (("interface", interface_nodes), ("application", app_nodes)):
            store = ZooKeeperStore(zk.address, f"/bench-{level}-{uuid.uuid4().hex[:6]}")
            assert store.start(30)
            started = time.monotonic()
            create_all(store, nodes)
            count, nbytes = size(nodes)
            after = mntr(zk.address)
            figures[level] = {
                "nodes": count,
                "bytes": nbytes,
                "write_s": time.monotonic() - started,
                "zk_znodes": float(after.get("zk_znode_count", "nan"))
                - float(base.get("zk_znode_count", "nan")),
                "zk_data": float(after.get("zk_approximate_data_size", "nan"))
                - float(base.get("zk_approximate_data_size", "nan")),
            }
            base = after

            if level == "interface":
                names = {
                    svc: store.children(layout.category_path(svc, layout.PROVIDERS))
                    for svc in {u.service_interface for u in estate[0]}
                }
                read = sum(len(x) for ns in names.values() for x in ns)
                cpu = []
                for _ in range(args.rounds):
                    t0 = time.process_time()
                    for svc, ns in names.items():
                        decode_children(layout.category_path(svc, layout.PROVIDERS), ns, set())
                    cpu.append(time.process_time() - t0)
                figures[level].update(events=len(names), read=read, cpu=statistics.median(cpu))
            else:
                discovery = ApplicationDiscovery(store)
                seen: dict[str, int] = {}

                def note(state: AppLevelProviders, seen: dict[str, int] = seen) -> None:
                    if state.urls:
                        seen[state.urls[0].service_interface] = len(state.urls)

                for u in estate[0]:
                    discovery.subscribe(u.service_interface, note)
                deadline = time.monotonic() + 60
                while (len(seen) < s or min(seen.values()) < n) and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert len(seen) == s and min(seen.values()) == n, seen
                children = store.children(application_path(APP))
                one = app_nodes[0][1]
                read = sum(len(c) for c in children) + len(one)
                watch = discovery.app_watch(APP)
                assert watch is not None
                name = app_nodes[0][0].rsplit("/", 1)[1]
                cpu = []
                for r in range(args.rounds):
                    # The restarted process's node as its data watch delivers it (a new
                    # registration time, so a new instance): parsed, then every interface of
                    # the application refreshed (the new instance's URLs built, the others'
                    # reused).
                    data = one.replace(
                        b'"registrationTimeUTC":1', f'"registrationTimeUTC":{r + 2}'.encode()
                    )
                    t0 = time.process_time()
                    with discovery.lock:
                        watch._set(name, data)
                    discovery.app_changed(APP)
                    cpu.append(time.process_time() - t0)
                figures[level].update(events=2, read=read, cpu=statistics.median(cpu))
                discovery.close()
            store.close()

    i, a = figures["interface"], figures["application"]
    print(f"{n} instances x {s} services (one application), ZooKeeper {zk.address}")
    print(f"{'':38}{'interface':>14}{'application':>14}{'ratio':>8}")

    def row(label: str, key: str, fmt: str = "{:,.0f}") -> None:
        ratio = a[key] / i[key] if i[key] else float("nan")
        print(f"{label:38}{fmt.format(i[key]):>14}{fmt.format(a[key]):>14}{ratio:>8.3f}")

    row("registry nodes written", "nodes")
    row("registry bytes (names + data)", "bytes")
    if i["zk_znodes"] == i["zk_znodes"]:  # mntr answered (not NaN): ZooKeeper's own figures
        row("ZooKeeper znodes (mntr delta)", "zk_znodes")
        row("ZooKeeper data bytes (mntr delta)", "zk_data")
    row("watch events per process restart", "events")
    row("bytes a consumer re-reads per restart", "read")
    i["cpu_ms"], a["cpu_ms"] = i["cpu"] * 1000, a["cpu"] * 1000
    row("consumer CPU per restart (ms)", "cpu_ms", "{:.1f}")


if __name__ == "__main__":
    main()
