"""Rule push -> applied latency across consumer processes, on ZooKeeper and the embedded store.

    python bench/bench_push_latency.py [--consumers 20] [--apps 1] [--pushes 20]
                                       [--interval 0.3] [--rounds 3]
                                       [--backends zookeeper embedded etcd nacos]
    python bench/bench_push_latency.py --consumers 10 --apps 10   # 100 consumers

For each backend: a registry (a real ZooKeeper started here from Debian's jars, or the embedded
SQLite store with its default 20 ms poll), two provider processes
(``examples/quickstart/provider.py``) and ``--consumers`` consumer processes (this script with
``consumer``) of ``--apps`` consumer applications each (every one its own
``dubbo_py.Application``, registry session and directory). Each consumer application builds an
``Application.reference_handle`` for the Greeter and adds a listener to its
``RegistryDirectory``; on every new bound chain it notes ``time.time()`` first, then routes a
probe call on that chain and prints which provider ports it reaches.

The applications of one consumer process share one registry session (as every dubbo-py
process does: :mod:`dubbo_py.registry.store.shared`), so ZooKeeper serves ``--consumers``
consumer sessions, not ``--consumers`` x ``--apps``.

The parent pushes ``--pushes`` condition-router documents per round with
``Registry.put_config``, alternating a rule that keeps only provider 1 and one that keeps only
provider 2, ``--interval`` seconds apart, noting ``time.time()`` just before each write. A push's
latency at a consumer is the time from that instant to the consumer's first chain that routes
the probe to the pushed rule's provider. A push that a later one overwrote before a consumer
read it (the consumer went straight to the newer rule) is counted as *superseded* for that
consumer, not timed. One untimed push first brings every consumer to a known rule. Every
process runs on this machine, so one wall clock serves all. The figures are the p50 / p99 / max
over every (consumer, push) pair of a round, and the median of the rounds.

Each consumer also notes when the store handed it the document (it wraps the directory's
document callback), which splits the latency into *delivery* (push -> document in the consumer:
the write, the watch event, the re-read) and *processing* (parse, compile, rebind, swap). The
consumers' CPU time per push (from ``/proc``, background work included) is printed too: on a
small machine, 20 consumers waking at once mostly wait for a core.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
import _paths  # noqa: E402,F401

SERVICE = "demo.Greeter"
RULE_KEY = f"{SERVICE}:1.0.0:.condition-router"


def rule_text(port: int, push: int) -> str:
    """A service-scope condition document that keeps only the provider on ``port``; ``push``
    goes in a comment so every write is a new document even when the rule repeats."""
    return (
        f"# push {push}\nconfigVersion: v3.0\nscope: service\nkey: {SERVICE}:1.0.0\n"
        f"force: true\nconditions:\n  - '=> port = {port}'\n"
    )


# --------------------------------------------------------------------------- consumer process


def consumer_main(registry: str, cache: str, name: str, apps: int = 1) -> None:
    """One consumer process holding ``apps`` applications: report ``APPLIED <app> <time>
    <ports>`` for every new bound chain of each, ``READY`` once every application sees both
    providers; exit when stdin closes."""
    from demo import greeter_pb2, greeter_pb2_grpc

    import dubbo_py
    from dubbo_py.errors import NoProviderError
    from dubbo_py.invocation import Invocation
    from dubbo_py.router.chain import BoundChain

    probe = Invocation(SERVICE, "SayHello", greeter_pb2.HelloRequest(name="probe"))
    lock = threading.Lock()
    # The number of the last pushed document each application's directory was handed (-1:
    # none yet): a chain built after it carries that push.
    last_push = [-1] * apps

    def watch(app_index: int) -> tuple[Any, Any]:
        def on_chain(chain: BoundChain) -> None:
            applied = time.time()  # first: the new chain was swapped in just before this call
            try:
                ports = sorted({u.port for u in chain.route(probe)})
            except NoProviderError:
                ports = []
            with lock:
                print(
                    f"APPLIED {app_index} {applied:.6f} {','.join(map(str, ports)) or '-'}"
                    f" {last_push[app_index]}",
                    flush=True,
                )

        app = dubbo_py.Application(
            f"{name}-{app_index}", registry=registry, cache_path=f"{cache}.{app_index}"
        )
        ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0", check=30.0)
        ref.directory.add_listener(on_chain)
        directory: Any = ref.directory
        on_document = directory._on_document

        def received(watched: Any, text: str | None) -> None:
            # When the store handed the document over, for the delivery/processing split; the
            # watch closures look the method up on the instance at each call.
            if watched.key == RULE_KEY and text and text.startswith("# push "):
                number = int(text.split()[2])
                with lock:
                    print(f"RECEIVED {app_index} {time.time():.6f} {number}", flush=True)
                    last_push[app_index] = number
            on_document(watched, text)

        directory._on_document = received
        return app, (ref, on_chain)

    opened = [watch(i) for i in range(apps)]
    deadline = time.monotonic() + 60
    for _, (ref, on_chain) in opened:
        while len(ref.directory.providers) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        on_chain(ref.directory.chain)  # the state the parent starts from
    with lock:
        print("READY", flush=True)
    sys.stdin.read()  # until the parent closes our stdin
    for app, _ in opened:
        app.close()


# --------------------------------------------------------------------------- parent side


@dataclass
class Consumer:
    """One consumer application (in a consumer process) and what it reported: (time, ports)
    per applied chain."""

    proc: subprocess.Popen[str]
    applied: list[tuple[float, str, int]] = field(default_factory=list)
    received: dict[int, float] = field(default_factory=dict)
    ready: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def last(self) -> str | None:
        with self.lock:
            return self.applied[-1][1] if self.applied else None

    def reports(self) -> tuple[list[tuple[float, str, int]], dict[int, float]]:
        with self.lock:
            return list(self.applied), dict(self.received)


def read_process(proc: subprocess.Popen[str], apps: list[Consumer]) -> None:
    """Hand each line of a consumer process to the application it names."""
    assert proc.stdout is not None
    for line in proc.stdout:
        parts = line.split()
        if parts[:1] == ["APPLIED"]:
            app = apps[int(parts[1])]
            with app.lock:
                app.applied.append((float(parts[2]), parts[3], int(parts[4])))
        elif parts[:1] == ["RECEIVED"]:
            app = apps[int(parts[1])]
            with app.lock:
                app.received.setdefault(int(parts[3]), float(parts[2]))
        elif parts[:1] == ["READY"]:
            for app in apps:
                app.ready.set()


def start_consumers(registry: str, count: int, apps: int, workdir: Path) -> list[Consumer]:
    """``count`` consumer processes of ``apps`` applications each; one :class:`Consumer` per
    application."""
    consumers: list[Consumer] = []
    for i in range(count):
        log = (workdir / f"consumer-{i}.log").open("w")
        proc = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "consumer",
                "--registry",
                registry,
                "--cache",
                str(workdir / f"cache-{i}.json"),
                "--apps",
                str(apps),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            cwd=ROOT,
        )
        log.close()
        mine = [Consumer(proc) for _ in range(apps)]
        threading.Thread(target=read_process, args=(proc, mine), daemon=True).start()
        consumers.extend(mine)
    return consumers


def stop_consumers(consumers: list[Consumer]) -> None:
    processes = list({id(c.proc): c for c in consumers}.values())
    for consumer in processes:
        if consumer.proc.stdin is not None:
            consumer.proc.stdin.close()
    for consumer in processes:
        try:
            consumer.proc.wait(10)
        except subprocess.TimeoutExpired:
            consumer.proc.kill()
            consumer.proc.wait(5)


def wait_for(predicate: object, timeout: float, what: str) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of these processes so far (0 where /proc cannot tell)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


@dataclass
class Round:
    """One round's latencies (ms) over every (consumer, push), and pushes never seen applied;
    ``delivery`` is push -> document handed to the directory, ``processing`` the rest."""

    latencies: list[float]
    missed: int
    superseded: int
    delivery: list[float]
    processing: list[float]
    cpu_ms_per_push: float

    def line(self) -> str:
        lat = self.latencies
        split = ""
        if self.delivery and self.processing:
            split = (
                f"  [delivery p50 {percentile(self.delivery, 50):.1f} p99"
                f" {percentile(self.delivery, 99):.1f}; processing p50"
                f" {percentile(self.processing, 50):.1f} p99 {percentile(self.processing, 99):.1f}]"
            )
        return (
            f"p50 {percentile(lat, 50):6.1f} ms  p99 {percentile(lat, 99):6.1f} ms"
            f"  max {max(lat):6.1f} ms  ({len(lat)} samples, {self.missed} missed,"
            f" {self.superseded} superseded){split}"
            f"  consumer CPU {self.cpu_ms_per_push:.1f} ms/push"
        )


def push_round(
    put: object,
    consumers: list[Consumer],
    labels: tuple[str, str],
    pushes: int,
    interval: float,
    first_push: int,
) -> Round:
    """Push ``pushes`` rules alternating between ``labels`` (each a provider port) and measure."""
    assert callable(put)
    pushed: list[tuple[float, str, int]] = []
    pids = sorted({c.proc.pid for c in consumers})
    cpu_before = cpu_seconds(pids)
    start = time.monotonic()
    for k in range(pushes):
        target = start + k * interval
        time.sleep(max(0.0, target - time.monotonic()))
        port = labels[k % 2]
        at = time.time()
        put(rule_text(int(port), first_push + k))
        pushed.append((at, port, first_push + k))
    final = pushed[-1][1]
    with contextlib.suppress(TimeoutError):  # a consumer that never got there counts as missed
        wait_for(lambda: all(c.last() == final for c in consumers), 10, "the last push")
    # Everything the consumer processes burnt during the round (pushes plus background: pings,
    # polls, heartbeats), per push and consumer application.
    cpu_ms = (cpu_seconds(pids) - cpu_before) * 1e3 / (pushes * len(consumers))
    latencies: list[float] = []
    delivery: list[float] = []
    processing: list[float] = []
    missed = superseded = 0
    for consumer in consumers:
        reports, received = consumer.reports()
        for at, port, number in pushed:
            # The first chain built from this push or a later one: when a later push overwrote
            # this one before the consumer read it, the consumer never routed by it (it went
            # straight to the newer rule), which is counted apart, not timed.
            first = next(((t, ports, n) for t, ports, n in reports if n >= number), None)
            if first is not None and first[2] > number:
                superseded += 1
                continue
            if first is None or first[1] != port:
                missed += 1
                continue
            applied = first[0]
            latencies.append((applied - at) * 1e3)
            got = received.get(number)
            if got is not None and got <= applied:
                delivery.append((got - at) * 1e3)
                processing.append((applied - got) * 1e3)
    return Round(latencies, missed, superseded, delivery, processing, cpu_ms)


@contextmanager
def registry_for(backend: str, workdir: Path) -> Iterator[str]:
    """A fresh registry address on ``backend`` (zookeeper, etcd, nacos: a server started here)."""
    if backend == "zookeeper":
        from tests.support.zookeeper import ZooKeeperServer

        with ZooKeeperServer() as zk:
            yield f"zookeeper://{zk.address}/push-{uuid.uuid4().hex[:8]}"
    elif backend == "etcd":
        from tests.support.etcd import EtcdServer

        with EtcdServer() as etcd:
            yield f"etcd://{etcd.address}"
    elif backend == "nacos":
        from tests.support.nacos import NacosServer

        nacos = NacosServer()
        nacos.start()
        try:
            # Interface level only: the nacos:// store refuses application-level metadata.
            yield f"nacos://{nacos.address}?register-mode=interface"
        finally:
            nacos.close()
    else:
        yield f"sqlite://{workdir / 'registry.db'}"


def run_backend(backend: str, args: argparse.Namespace) -> list[Round]:
    import dubbo_py
    from dubbo_py.errors import StoreError
    from tests.support.processes import ProviderProcess

    rounds: list[Round] = []
    with tempfile.TemporaryDirectory(prefix="push-bench-") as tmp:
        workdir = Path(tmp)
        with registry_for(backend, workdir) as registry:
            began = time.monotonic()
            p1 = ProviderProcess(registry, log_dir=workdir).start()
            p2 = ProviderProcess(registry, log_dir=workdir).start()
            admin = dubbo_py.Application("push-bench-admin", registry=registry)
            consumers = start_consumers(registry, args.consumers, args.apps, workdir)
            try:
                # Every application opens its own registry session: allow for many of them.
                ready_s = 90 + 2 * len(consumers)
                wait_for(lambda: all(c.ready.is_set() for c in consumers), ready_s, "consumers")
                assert admin.registry is not None
                reg = admin.registry
                started = time.monotonic() - began
                labels = (str(p1.port), str(p2.port))

                def put(text: str) -> None:
                    # A write while the operator's connection is down is retried once it is
                    # back (the session outlives a short disconnection): said, and timed from
                    # the first attempt.
                    deadline = time.monotonic() + 15
                    while True:
                        try:
                            reg.put_config(RULE_KEY, text)
                            return
                        except StoreError as exc:
                            if time.monotonic() > deadline:
                                raise
                            print(f"{backend}: push retried: {exc}", flush=True)
                            time.sleep(0.1)

                put(rule_text(p2.port, 0))  # untimed: every consumer on a known rule first
                wait_for(lambda: all(c.last() == labels[1] for c in consumers), 15, "warm-up")
                time.sleep(1.0)  # what the warm-up set off (first cache writes...) settles
                print(
                    f"{backend}: {len(consumers)} consumer applications in {args.consumers}"
                    f" processes and 2 providers up in {started:.1f}s",
                    flush=True,
                )
                for r in range(args.rounds):
                    result = push_round(
                        put, consumers, labels, args.pushes, args.interval, 1 + r * args.pushes
                    )
                    rounds.append(result)
                    print(f"{backend}: round {r + 1}: {result.line()}", flush=True)
                    time.sleep(args.interval)
            finally:
                stop_consumers(consumers)
                admin.close()
                p1.kill()
                p2.kill()
    return rounds


def summary(backend: str, rounds: list[Round]) -> str:
    p50 = statistics.median(percentile(r.latencies, 50) for r in rounds)
    p99 = statistics.median(percentile(r.latencies, 99) for r in rounds)
    worst = max(max(r.latencies) for r in rounds)
    pooled = [x for r in rounds for x in r.latencies]
    missed = sum(r.missed for r in rounds)
    superseded = sum(r.superseded for r in rounds)

    delivery = [
        statistics.median(percentile(r.delivery, q) for r in rounds if r.delivery) for q in (50, 99)
    ]
    processing = [
        statistics.median(percentile(r.processing, q) for r in rounds if r.processing)
        for q in (50, 99)
    ]
    cpu = statistics.median(r.cpu_ms_per_push for r in rounds)
    return (
        f"{backend:<10} median of {len(rounds)} rounds: p50 {p50:.1f} ms, p99 {p99:.1f} ms;"
        f" pooled p99 {percentile(pooled, 99):.1f} ms, max {worst:.1f} ms,"
        f" {len(pooled)} samples, {missed} missed, {superseded} superseded; delivery p50/p99"
        f" {delivery[0]:.1f}/{delivery[1]:.1f} ms, processing p50/p99"
        f" {processing[0]:.1f}/{processing[1]:.1f} ms, consumer CPU {cpu:.1f} ms/push"
    )


def main() -> None:
    if sys.argv[1:2] == ["consumer"]:
        parser = argparse.ArgumentParser()
        parser.add_argument("--registry", required=True)
        parser.add_argument("--cache", required=True)
        parser.add_argument("--name", default="push-bench")
        parser.add_argument("--apps", type=int, default=1)
        ns = parser.parse_args(sys.argv[2:])
        consumer_main(ns.registry, ns.cache, ns.name, ns.apps)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--consumers", type=int, default=20, help="consumer processes")
    parser.add_argument("--apps", type=int, default=1, help="consumer applications per process")
    parser.add_argument("--pushes", type=int, default=20, help="pushes per round")
    parser.add_argument("--interval", type=float, default=0.3, help="seconds between pushes")
    parser.add_argument("--rounds", type=int, default=3)
    backends = ["zookeeper", "embedded", "etcd", "nacos"]
    parser.add_argument("--backends", nargs="+", default=backends[:2], choices=backends)
    args = parser.parse_args()
    results = {backend: run_backend(backend, args) for backend in args.backends}
    for backend, rounds in results.items():
        print(summary(backend, rounds))


if __name__ == "__main__":
    main()
