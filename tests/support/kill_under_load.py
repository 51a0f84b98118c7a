"""kill -9 of one of two providers under load, counted on the consumer's side: the shape shared
by the mixed-estate fault tests (tests/estate/test_mixed_faults.py with Java Dubbo 3.3.6,
tests/estate/test_go_faults.py with dubbo-go 3.3.2).

Each case has two providers of demo.Greeter; ``THREADS`` callers call back to back; ``BEFORE``
seconds in, one provider gets SIGKILL with calls in flight on it, and the calls go on for
``AFTER`` seconds. Only the peers and the assertions on what each consumer does differ between
the two files.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.qos.metrics import MetricsCollector
from tests.support.load import Load, Sample
from tests.support.processes import ProviderProcess
from tests.support.waiting import wait_until

THREADS = 8
#: Seconds of calls before and after the kill.
BEFORE, AFTER = 1.5, 2.5
#: A peer consumer's replies are counted in slices of this many ms (Consumer.java and the Go
#: consumer's ``load`` command, BUCKET_MS).
BUCKET_MS = 250


def retried_attempts(app: dubbo_py.Application) -> float:
    """The application's ``dubbo_py_consumer_retries_total`` (attempts beyond the first)."""
    assert app.metrics is not None
    return sum(
        sample.value
        for family in MetricsCollector(app.metrics).collect()
        for sample in family.samples
        if sample.name == "dubbo_py_consumer_retries_total"
    )


def start_py_providers(
    registry: str, version: str, *defaults: str
) -> Iterator[Callable[..., ProviderProcess]]:
    """Generator for a fixture: starts dubbo-py providers in processes of their own
    (examples/quickstart/provider.py) with ``defaults`` before each start's own arguments, and
    kills them all at teardown."""
    started: list[ProviderProcess] = []

    def start(*extra: str) -> ProviderProcess:
        args = ("--version", version, "--application", f"py-{version}", *defaults, *extra)
        started.append(ProviderProcess(registry, *args).start())
        return started[-1]

    yield start
    for provider in started:
        provider.kill()


@dataclass(frozen=True)
class ConsumerSideCount:
    """What a dubbo-py consumer saw while a provider was killed under it."""

    #: Every call made, in the order they ended.
    samples: list[Sample]
    #: Calls answered per provider address, started before the kill and after it.
    before: Counter[str]
    after: Counter[str]
    failed: list[Sample]
    #: Attempts failover retried (the consumer's retries metric).
    retries: float


def kill_under_a_dubbo_py_consumer(
    registry: str,
    version: str,
    victim: subprocess.Popen[Any],
    addresses: set[str],
    cache_dir: Path,
) -> ConsumerSideCount:
    """Calls demo.Greeter ``version`` from a dubbo-py consumer on ``THREADS`` threads, SIGKILLs
    ``victim`` ``BEFORE`` seconds in, and counts. The consumer must first see ``addresses``."""
    with dubbo_py.Application(
        f"py-consumer-{version}", registry, cache_path=cache_dir / "c.json", metrics=True
    ) as app:
        ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version=version)
        wait_until(
            lambda: {u.address for u in ref.directory.providers} == addresses,
            20,
            "both providers",
        )
        request = greeter_pb2.HelloRequest(name="k")
        with Load(lambda: str(ref.stub.SayHello(request).provider), THREADS, pause=0) as load:
            time.sleep(BEFORE)
            killed_at = time.monotonic()
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            time.sleep(AFTER)
        retries = retried_attempts(app)
    return ConsumerSideCount(
        samples=load.samples,
        before=Counter(s.provider for s in load.between(0, killed_at)),
        after=Counter(s.provider for s in load.between(killed_at)),
        failed=load.errors(),
        retries=retries,
    )


class PeerConsumer(Protocol):
    """The command channel the Java and Go peer consumers share (``load N MS``)."""

    def command(self, line: str) -> dict[str, Any]: ...
    def send(self, line: str) -> None: ...
    def result(self, timeout: float) -> dict[str, Any]: ...


def kill_under_a_peer_consumer(
    peer: PeerConsumer, addresses: set[str], kill: Callable[[], None]
) -> dict[str, Any]:
    """Has a peer consumer call on ``THREADS`` threads once it has called both ``addresses``,
    runs ``kill`` ``BEFORE`` seconds in, and returns the peer's count of the load."""
    deadline = time.monotonic() + 20
    while set((warm := peer.command("load 2 300"))["ok"]) != addresses:
        assert time.monotonic() < deadline, (
            f"the peer consumer never called both providers {sorted(addresses)}: {warm}"
        )
    peer.send(f"load {THREADS} {int((BEFORE + AFTER) * 1000)}")
    time.sleep(BEFORE)
    kill()
    return peer.result(30)


def share_before_the_kill(result: dict[str, Any], address: str, other: str) -> float:
    """``address``'s share of the calls a peer consumer had answered in the slices wholly
    before the kill."""
    early = int(BEFORE * 1000) // BUCKET_MS - 1
    mine = sum(result["ok_per_250ms"][address][:early])
    theirs = sum(result["ok_per_250ms"][other][:early])
    return mine / max(1, mine + theirs)
