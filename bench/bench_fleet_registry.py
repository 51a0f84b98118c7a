"""A fleet in a real registry: a consumer's first read and one provider's change, on ZooKeeper
and on etcd, at the interface and at the application level.

    python bench/bench_fleet_registry.py [--providers 20000] [--instances 2000] [--services 100]
                                         [--changes 5] [--backends zookeeper etcd]

A real ZooKeeper (``tests.support.zookeeper.ZooKeeperServer``, Debian's jars) and a real etcd
(``tests.support.etcd.EtcdServer``) are started here. Into each the parent writes, in bulk
(kazoo's asynchronous creates; etcd ``Put`` futures), in dubbo-py's layout:

* **interface level**: ``--providers`` provider URLs of one service,
  ``/dubbo/<interface>/providers/<url-encoded URL>`` (persistent, empty data);
* **application level**: ``--instances`` instances of one application exporting ``--services``
  services: ``/services/<app>/<host:port>`` (the instance JSON), one metadata document for
  their shared revision (``/dubbo/metadata/<app>/<revision>``), one mapping node per service
  (``/dubbo/mapping/<interface>``).

Every address is 127.x.y.z (never 127.0.0.1) on ports 20880-20886: registration entries only,
nobody dials them.

Each consumer runs in a fresh process (so its resident memory is its own), through dubbo-py's
own consumer side: the interface level a ``RegistryDirectory`` (built-in routers, as a
reference has) on a ``Registry`` over the real store; the application level an
``ApplicationDiscovery`` over the store, subscribed to every service. Measured:

* **first read**: from the store's start to the directory's bound chain holding every provider
  (application level: every service's listener holding every instance's URL);
* **change**: one provider restarts with a new address -- one registry transaction deletes its
  node and creates the new one -- until the new chain (every service's provider list) holds the
  new address and not the old; median and worst of ``--changes``;
* **memory**: RSS growth of the consumer process over the first read (after a full collection),
  and, with ``--tracemalloc``, the Python heap it holds (tracemalloc slows every step: its
  times are not comparable with a run without it).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# ``--cpu --against DIR`` runs children on another checkout's dubbo_py (the bench stays this one).
if "DUBBO_PY_BENCH_CODE" in __import__("os").environ:
    sys.path.insert(0, __import__("os").environ["DUBBO_PY_BENCH_CODE"])

from dubbo_py.registry import layout  # noqa: E402
from dubbo_py.registry.application.instance import (  # noqa: E402
    ENDPOINTS,
    REVISION,
    STORAGE_TYPE,
    ServiceInstance,
    endpoints_json,
)
from dubbo_py.registry.application.metadata import MetadataInfo  # noqa: E402
from dubbo_py.registry.application.paths import (  # noqa: E402
    instance_path,
    mapping_path,
    metadata_path,
)
from dubbo_py.url import URL  # noqa: E402

SERVICE = "bench.fleet.Greeter"
APP = "fleet"
APP_SERVICES = "bench.fleet.Service{:03d}"
APP_PORT = 20880


def host_of(i: int) -> tuple[str, int]:
    """Loopback address ``i``: 127.a.b.c with a, b, c >= 1 (never 127.0.0.1), port spread."""
    block, c = divmod(i, 250)
    a, b = divmod(block, 250)
    return f"127.{1 + a}.{1 + b}.{1 + c}", 20880 + i % 7


def provider_url(i: int, service: str = SERVICE, port: int | None = None) -> URL:
    """The URL provider ``i`` registers (the parameters ``rpc.provider.provider_url`` writes)."""
    host, spread = host_of(i)
    port = spread if port is None else port
    return URL(
        "tri",
        host,
        port,
        service,
        parameters={
            "anyhost": "false",
            "application": APP,
            "interface": service,
            "methods": "SayHello,SayHelloStream",
            "side": "provider",
            "timestamp": str(1_764_672_000_000 + i),
            "pid": str(10_000 + i % 50_000),
            "release": "0.9.0",
            "dubbo": "2.0.2",
            "version": "1.0.0",
            "weight": ("100", "200", "50")[i % 3],
        },
    )


def consumer_url(service: str = SERVICE) -> URL:
    return URL.parse(
        f"consumer://127.0.0.1/{service}?application=shop&category=consumers&check=false"
        f"&interface={service}&side=consumer&version=1.0.0"
    )


def app_urls(i: int, services: int) -> list[URL]:
    # One port for every instance: the port is part of the services' metadata, so instances
    # sharing one revision (one metadata document) listen on the same port, as in Dubbo.
    return [provider_url(i, APP_SERVICES.format(s), APP_PORT) for s in range(services)]


def instance_node(i: int, services: int, info: MetadataInfo) -> tuple[str, bytes]:
    urls = app_urls(i, services)
    metadata = info.instance_params(urls)
    metadata.update(
        {
            REVISION: info.revision,
            STORAGE_TYPE: "remote",
            ENDPOINTS: endpoints_json({"tri": urls[0].port}),
        }
    )
    instance = ServiceInstance(APP, urls[0].host, urls[0].port, metadata, registration_time_ms=1)
    return instance_path(APP, f"{urls[0].host}:{urls[0].port}"), instance.to_json().encode()


def interface_nodes(n: int) -> list[tuple[str, bytes]]:
    return [(layout.node_path(provider_url(i)), b"") for i in range(n)]


def app_nodes(n: int, services: int) -> tuple[list[tuple[str, bytes]], MetadataInfo]:
    info = MetadataInfo.of(APP, app_urls(0, services))
    nodes = [instance_node(i, services, info) for i in range(n)]
    nodes.append((metadata_path(APP, info.revision), info.to_json().encode()))
    nodes += [(mapping_path(APP_SERVICES.format(s)), APP.encode()) for s in range(services)]
    return nodes, info


# -- writers: the registry's other side, in bulk -------------------------------------------------


class Writer:
    """Bulk creates and one atomic replace (delete a node, create another) on one backend."""

    def create_all(self, nodes: list[tuple[str, bytes]]) -> None:
        raise NotImplementedError

    def replace(self, old: str, new: str, data: bytes) -> None:
        raise NotImplementedError

    def delete(self, paths: list[str]) -> None:
        """Remove these nodes and everything below them (the estate, after a test)."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class ZooKeeperWriter(Writer):
    def __init__(self, address: str) -> None:
        from kazoo.client import KazooClient

        self.client = KazooClient(hosts=address)
        self.client.start(30)

    def create_all(self, nodes: list[tuple[str, bytes]]) -> None:
        for parent in sorted({p.rsplit("/", 1)[0] for p, _ in nodes}):
            self.client.ensure_path(parent)
        pending = []
        for path, data in nodes:
            pending.append(self.client.create_async(path, data))
            if len(pending) >= 2000:
                for p in pending:
                    p.get()
                pending = []
        for p in pending:
            p.get()

    def replace(self, old: str, new: str, data: bytes) -> None:
        tx = self.client.transaction()
        tx.delete(old)
        tx.create(new, data)
        results = tx.commit()
        assert not any(isinstance(r, Exception) for r in results), results

    def delete(self, paths: list[str]) -> None:
        for path in paths:
            self.client.delete(path, recursive=True)

    def close(self) -> None:
        self.client.stop()
        self.client.close()


class EtcdWriter(Writer):
    def __init__(self, address: str) -> None:
        import grpc

        from dubbo_py.registry.store.etcd import _api as api

        self.api = api
        self.channel = grpc.insecure_channel(address)
        self.stub = api.EtcdStub(self.channel)
        self.put = self.channel.unary_unary(
            "/etcdserverpb.KV/Put",
            request_serializer=api.PutRequest.SerializeToString,
            response_deserializer=api.PutResponse.FromString,
        )

    def create_all(self, nodes: list[tuple[str, bytes]]) -> None:
        # etcd has no directories: dubbo-py's store reads a path with keys below it as a node.
        pending = []
        for path, data in nodes:
            pending.append(self.put.future(self.api.PutRequest(key=path.encode(), value=data)))
            if len(pending) >= 1000:
                for p in pending:
                    p.result(30)
                pending = []
        for p in pending:
            p.result(30)

    def replace(self, old: str, new: str, data: bytes) -> None:
        api = self.api
        request = api.TxnRequest(
            success=[
                api.RequestOp(request_delete_range=api.DeleteRangeRequest(key=old.encode())),
                api.RequestOp(request_put=api.PutRequest(key=new.encode(), value=data)),
            ]
        )
        assert self.stub.Txn(request, timeout=10).succeeded

    def delete(self, paths: list[str]) -> None:
        for path in paths:
            key = path.encode()
            self.stub.DeleteRange(self.api.DeleteRangeRequest(key=key), timeout=10)
            below = key + b"/"
            end = below[:-1] + bytes([below[-1] + 1])
            self.stub.DeleteRange(self.api.DeleteRangeRequest(key=below, range_end=end), timeout=10)

    def close(self) -> None:
        self.channel.close()


def estate_roots(services: int) -> list[str]:
    """The nodes below which both estates live (what :meth:`Writer.delete` removes)."""
    return [
        f"/dubbo/{SERVICE}",
        f"/services/{APP}",
        f"/dubbo/metadata/{APP}",
        *(mapping_path(APP_SERVICES.format(s)) for s in range(services)),
    ]


def writer_for(backend: str, address: str) -> Writer:
    return ZooKeeperWriter(address) if backend == "zookeeper" else EtcdWriter(address)


def store_for(backend: str, address: str) -> Any:
    if backend == "zookeeper":
        from dubbo_py.registry.store.zookeeper import ZooKeeperStore

        return ZooKeeperStore(address)
    from dubbo_py.registry.store.etcd.store import EtcdStore

    return EtcdStore(address)


# -- the consumer (its own process) -------------------------------------------------------------


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Seen:
    """What listeners were called with, and when; ``wait`` for a predicate over the latest."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.events: list[tuple[float, Any, Any]] = []

    def note(self, key: Any, value: Any) -> None:
        now = time.perf_counter()
        with self.cond:
            self.events.append((now, key, value))
            self.cond.notify_all()

    def wait(self, ok: Callable[[Any], bool], keys: int, timeout: float) -> float:
        """The time of the first event after which the latest value of each of ``keys`` keys
        satisfies ``ok``. Each value is checked once, when it arrives, outside the lock the
        listeners take (so the check costs O(providers) per notification, and never holds up
        a notification)."""
        deadline = time.monotonic() + timeout
        good: dict[Any, bool] = {}
        checked = 0
        while True:
            with self.cond:
                while checked == len(self.events):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError(f"not done within {timeout}s: {len(self.events)} events")
                    self.cond.wait(left)
                batch = self.events[checked:]
            checked += len(batch)
            for at, key, value in batch:
                good[key] = ok(value)
                if len(good) == keys and all(good.values()):
                    return at

    def reset(self) -> None:
        with self.cond:
            self.events = []


def run_consumer(args: argparse.Namespace) -> dict[str, Any]:
    writer = writer_for(args.backend, args.address)
    app = args.level == "application"
    n, services = (args.instances, args.services) if app else (args.providers, 1)
    info = MetadataInfo.of(APP, app_urls(0, services)) if app else None
    # What the changes will write, prepared before anything is measured.
    changes = []
    for k in range(args.changes):
        old, new = k, n + k
        if info is not None:
            old_path = instance_node(old, services, info)[0]
            new_path, data = instance_node(new, services, info)
        else:
            old_path, new_path, data = (
                layout.node_path(provider_url(old)),
                layout.node_path(provider_url(new)),
                b"",
            )
        if info is not None:
            changes.append(
                ((host_of(old)[0], APP_PORT), (host_of(new)[0], APP_PORT), old_path, new_path, data)
            )
        else:
            changes.append((host_of(old), host_of(new), old_path, new_path, data))

    from dubbo_py.registry.application.discovery import AppLevelProviders, ApplicationDiscovery
    from dubbo_py.registry.directory import RegistryDirectory
    from dubbo_py.registry.registry import Registry
    from dubbo_py.router import factory
    from dubbo_py.router.chain import BoundChain

    seen = Seen()
    gc.collect()
    if args.tracemalloc:
        tracemalloc.start()
    rss0 = rss_mb()
    start = time.perf_counter()
    store = store_for(args.backend, args.address)
    assert store.start(30), "the store did not connect"
    closers: list[Callable[[], None]] = []

    def addresses(urls: Any) -> set[tuple[str, int]]:
        return {(u.host, u.port) for u in urls}

    if info is None:
        registry = Registry(store)
        directory = RegistryDirectory(
            consumer_url(), registry, factory.new_rulebook(), assemble=factory.chain_routers
        )

        def on_chain(chain: BoundChain) -> None:
            seen.note(SERVICE, chain.snapshot.providers)

        directory.add_listener(on_chain)
        directory.start(wait=120)
        closers.append(directory.close)
        keys = [SERVICE]
    else:
        discovery = ApplicationDiscovery(store)
        keys = [APP_SERVICES.format(s) for s in range(services)]
        for key in keys:

            def on_state(state: AppLevelProviders, key: str = key) -> None:
                seen.note(key, state.urls)

            discovery.subscribe(key, on_state)
        closers.append(discovery.close)

    first_at = seen.wait(lambda urls: len(urls) == n, len(keys), args.timeout)
    first_s = first_at - start
    gc.collect()
    rss1 = rss_mb()
    heap_mb = tracemalloc.get_traced_memory()[0] / 2**20 if args.tracemalloc else float("nan")
    change_ms = []
    for old_host, new_host, old_path, new_path, data in changes:
        seen.reset()
        t0 = time.perf_counter()
        writer.replace(old_path, new_path, data)

        def applied(urls: Any, old: Any = old_host, new: Any = new_host) -> bool:
            got = addresses(urls)
            return len(urls) == n and new in got and old not in got

        change_ms.append((seen.wait(applied, len(keys), args.timeout) - t0) * 1e3)
        time.sleep(0.2)  # let late notifications of this change settle before the next
    rss2 = rss_mb()
    for close in closers:
        close()
    store.close()
    writer.close()
    return {
        "first_s": first_s,
        "rss_mb": rss1 - rss0,
        "rss_after_changes_mb": rss2 - rss0,
        "heap_mb": heap_mb,
        "change_ms": change_ms,
        "providers": n * services,
    }


# -- CPU of one instance's change, in process (--cpu) ------------------------------------------


def cpu_consumer(
    instances: int, services: int, changes: int, downstream: bool = False
) -> dict[str, Any]:
    """An ``ApplicationDiscovery`` subscribed to every service on an in-memory store whose
    watches fire on the writing thread: the CPU time of one write is the consumer's whole
    reaction to it (instance node read, lists updated, every listener called).

    With ``downstream``, each service is subscribed as a reference subscribes it: a
    ``MigrationSubscriber`` (``FORCE_APPLICATION``) handing the list to a ``RegistryDirectory``
    with the built-in routers, whose bound chain is the listener counted; the write's CPU time
    then includes the directory's patch and the chain's rebind (the downstream hop)."""
    from dubbo_py.registry.application.discovery import ApplicationDiscovery
    from tests.support.memory_store import MemoryStore

    store = MemoryStore()
    nodes, info = app_nodes(instances, services)
    for path, data in nodes:
        store.create(path, data, makepath=True)
    # One more revision: an instance serving only the first service.
    one = MetadataInfo.of(APP, app_urls(0, 1))
    store.create(metadata_path(APP, one.revision), one.to_json().encode(), makepath=True)
    discovery = ApplicationDiscovery(store)
    calls = [0]
    keys = [APP_SERVICES.format(k) for k in range(services)]
    lists: dict[str, int] = {}
    closers: list[Callable[[], None]] = []
    for key in keys:
        if downstream:
            closers.append(_downstream(store, discovery, key, calls, lists))
            continue

        def on_state(state: Any, key: str = key) -> None:
            calls[0] += 1
            lists[key] = len(state.urls)

        discovery.subscribe(key, on_state)
    assert all(lists[k] == instances for k in keys), "first read incomplete"
    gc.collect()
    figures: dict[str, list[float]] = {"join": [], "leave": [], "join one service": []}
    notified: dict[str, int] = {}
    for k in range(changes):
        path, data = instance_node(instances + k, services, info)
        for what, write in (
            ("join", lambda p=path, d=data: store.create(p, d, makepath=True)),
            ("leave", lambda p=path: store.delete(p)),
        ):
            calls[0] = 0
            t0 = time.thread_time()
            write()
            figures[what].append((time.thread_time() - t0) * 1e3)
            notified[what] = calls[0]
        urls = app_urls(instances + changes + k, 1)
        metadata = {REVISION: one.revision, STORAGE_TYPE: "remote"}
        node = ServiceInstance(APP, urls[0].host, urls[0].port, metadata, registration_time_ms=1)
        calls[0] = 0
        t0 = time.thread_time()
        store.create(instance_path(APP, node.id), node.to_json().encode(), makepath=True)
        figures["join one service"].append((time.thread_time() - t0) * 1e3)
        notified["join one service"] = calls[0]
        store.delete(instance_path(APP, node.id))
    for close in closers:
        close()
    discovery.close()
    return {"ms": figures, "notified": notified}


def _downstream(
    store: Any, discovery: Any, key: str, calls: list[int], lists: dict[str, int]
) -> Callable[[], None]:
    """One service subscribed as a reference subscribes it (see :func:`cpu_consumer`); its
    directory's bound chains are counted in ``calls`` and ``lists``. Returns its closer."""
    from dubbo_py.registry.application.migration import MigrationSubscriber
    from dubbo_py.registry.application.modes import MigrationStep
    from dubbo_py.registry.directory import RegistryDirectory
    from dubbo_py.registry.registry import Registry
    from dubbo_py.router import factory
    from dubbo_py.router.chain import BoundChain

    registry = Registry(store)
    consumer = consumer_url(key)
    subscriber = MigrationSubscriber(
        registry, discovery, None, consumer, MigrationStep.FORCE_APPLICATION
    )
    directory = RegistryDirectory(
        consumer,
        registry,
        factory.new_rulebook(),
        assemble=factory.chain_routers,
        subscribe=subscriber,
    )

    def on_chain(chain: BoundChain) -> None:
        calls[0] += 1
        lists[key] = len(chain.snapshot.providers)

    directory.add_listener(on_chain)
    directory.start(wait=30)
    return directory.close


def cpu_main(args: argparse.Namespace) -> None:
    """Children on this checkout and, with ``--against``, on another one; ratios."""
    import os

    runs = [("this", None)] + ([("against", args.against)] if args.against else [])
    results = {}
    for label, code in runs:
        env = dict(os.environ)
        if code:
            env["DUBBO_PY_BENCH_CODE"] = str(Path(code).resolve())
        command = [
            sys.executable, __file__, "--cpu-child", "--instances", str(args.instances),
            "--services", str(args.services), "--changes", str(args.changes),
        ] + (["--downstream"] if args.downstream else [])  # fmt: skip
        out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
        if out.returncode != 0:
            raise SystemExit(f"{label} failed:\n{out.stderr[-4000:]}")
        results[label] = json.loads(out.stdout.strip().splitlines()[-1])
    subscribed = (
        "a directory and bound chain per service (--downstream)"
        if args.downstream
        else "ApplicationDiscovery listeners"
    )
    print(
        f"# {args.instances:,} instances x {args.services} services, one consumer subscribed to"
        f" every service, {subscribed}; CPU ms of one instance's change (median of"
        f" {args.changes})"
    )
    print(f"{'change':18} {'this':>9} {'notified':>9} {'against':>9} {'notified':>9} {'ratio':>7}")
    for what in results["this"]["ms"]:
        now = statistics.median(results["this"]["ms"][what])
        line = f"{what:18} {now:>9.2f} {results['this']['notified'][what]:>9}"
        if "against" in results:
            then = statistics.median(results["against"]["ms"][what])
            line += f" {then:>9.2f} {results['against']['notified'][what]:>9} {now / then:>7.3f}"
        print(line)


# -- the parent -----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--providers", type=int, default=20_000)
    parser.add_argument("--instances", type=int, default=2_000)
    parser.add_argument("--services", type=int, default=100)
    parser.add_argument("--changes", type=int, default=5)
    parser.add_argument("--backends", nargs="+", default=["zookeeper", "etcd"])
    parser.add_argument("--levels", nargs="+", default=["interface", "application"])
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--timeout", type=float, default=600.0, help="per wait, seconds")
    # Internal: run one consumer and print its figures as JSON.
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="application level in process: CPU of one instance's change (see cpu_consumer)",
    )
    parser.add_argument("--against", help="with --cpu: another checkout to compare with")
    parser.add_argument(
        "--downstream",
        action="store_true",
        help="with --cpu: each service through a RegistryDirectory and its bound chain",
    )
    parser.add_argument("--cpu-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--consumer", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--backend", help=argparse.SUPPRESS)
    parser.add_argument("--level", help=argparse.SUPPRESS)
    parser.add_argument("--address", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cpu_child:
        print(
            json.dumps(cpu_consumer(args.instances, args.services, args.changes, args.downstream))
        )
        return
    if args.cpu:
        cpu_main(args)
        return
    if args.consumer:
        print(json.dumps(run_consumer(args)))
        return

    from tests.support.etcd import EtcdServer
    from tests.support.zookeeper import ZooKeeperServer

    rows = []
    for backend in args.backends:
        server: Any = (
            ZooKeeperServer(max_session_timeout_ms=120_000)
            if backend == "zookeeper"
            else EtcdServer()
        )
        with server:
            writer = writer_for(backend, server.address)
            for level in args.levels:
                if level == "interface":
                    nodes = interface_nodes(args.providers)
                    shape = f"{args.providers:,} providers x 1 service"
                else:
                    nodes, _ = app_nodes(args.instances, args.services)
                    shape = f"{args.instances:,} instances x {args.services} services"
                t0 = time.perf_counter()
                writer.create_all(nodes)
                write_s = time.perf_counter() - t0
                command = [
                    sys.executable,
                    __file__,
                    "--consumer",
                    "--backend",
                    backend,
                    "--level",
                    level,
                    "--address",
                    server.address,
                    "--providers",
                    str(args.providers),
                    "--instances",
                    str(args.instances),
                    "--services",
                    str(args.services),
                    "--changes",
                    str(args.changes),
                    "--timeout",
                    str(args.timeout),
                ]
                if args.tracemalloc:
                    command.append("--tracemalloc")
                out = subprocess.run(command, capture_output=True, text=True, timeout=1800)
                if out.returncode != 0:
                    raise SystemExit(f"{backend} {level} consumer failed:\n{out.stderr[-4000:]}")
                figures = json.loads(out.stdout.strip().splitlines()[-1])
                rows.append((backend, level, shape, len(nodes), write_s, figures))
                print(f"# {backend} {level}: done", file=sys.stderr, flush=True)
            writer.close()

    print(
        f"{'registry':10} {'level':12} {'estate':28} {'nodes':>7} {'write s':>8}"
        f" {'first read s':>13} {'change ms med':>14} {'max':>7} {'RSS MB':>7}"
        f" {'KB/prov':>8} {'heap MB':>8}"
    )
    for backend, level, shape, count, write_s, f in rows:
        changes = f["change_ms"]
        print(
            f"{backend:10} {level:12} {shape:28} {count:>7,} {write_s:>8.1f}"
            f" {f['first_s']:>13.2f} {statistics.median(changes):>14.1f} {max(changes):>7.1f}"
            f" {f['rss_mb']:>7.1f} {f['rss_mb'] * 1024 / f['providers']:>8.2f}"
            f" {f['heap_mb']:>8.1f}"
        )


if __name__ == "__main__":
    main()
