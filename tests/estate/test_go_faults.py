"""kill -9 in a mixed estate with dubbo-go 3.3.2 (tests/peers/go/estate), counted on each side:
a Go provider under a dubbo-py consumer, and a dubbo-py provider under a Go consumer. The Java
counterparts are tests/estate/test_mixed_faults.py; the figures of both are side by side in
docs/compatibility.md ("kill -9 under load").

Each side has two providers of demo.Greeter, one Go and one dubbo-py (a separate process, the
quick start's provider), and its consumer's defaults: failover with the default retries (2 on
both sides), random load balance. 8 threads (goroutines on the Go side) call back to back;
after 1.5 s one provider gets SIGKILL, with calls in flight on it.

Both providers are given the same flat weight: the Go provider ``--weight 100`` (dubbo-go 3.3.2
registers ``weight=0`` unless told, and no weighted balancer would pick it), the dubbo-py
provider ``--warmup 0`` (dubbo-go's URL carries no start time, so dubbo-py gives it no warm-up,
and a dubbo-py provider in its 10-minute warm-up would get almost no calls beside it).

Unlike Dubbo Java's, dubbo-go's failover retries every failure that is not the provider's own
(``isBizError``: a Triple wire error with the biz-error code), so a call in flight on the killed
provider is retried on the other one, on both sides.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from tests.estate.test_mixed_faults import AFTER, BEFORE, BUCKET_MS, THREADS, retried_attempts
from tests.support.go_estate import GoConsumer, GoProvider
from tests.support.load import Load
from tests.support.processes import ProviderProcess
from tests.support.waiting import wait_until

pytestmark = pytest.mark.zookeeper


@pytest.fixture
def version() -> str:
    """A version of this test's own: no other test's providers of demo.Greeter are found."""
    return f"gofaults-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def py_provider(estate_registry: str, version: str) -> Iterator[Callable[..., ProviderProcess]]:
    """Starts a dubbo-py provider in its own process (examples/quickstart/provider.py)."""
    started: list[ProviderProcess] = []

    def start(*extra: str) -> ProviderProcess:
        args = ("--version", version, "--application", f"py-{version}", "--warmup", "0", *extra)
        started.append(ProviderProcess(estate_registry, *args).start())
        return started[-1]

    yield start
    for provider in started:
        provider.kill()


@pytest.fixture
def go_provider(estate_registry: str, version: str) -> Iterator[GoProvider]:
    """A dubbo-go 3.3.2 provider of the same service, registered at both levels (Dubbo 3.3's
    default, as the Java provider of test_mixed_faults), its metadata served by MetadataServiceV2
    on Triple: a dubbo-py consumer (APPLICATION_FIRST) that finds the dubbo-py provider at the
    application level stays there, and would not see an interface-level-only Go provider."""
    with GoProvider(
        "--registry",
        estate_registry,
        "--application",
        f"go-{version}",
        "--name",
        "g1",
        "--version",
        version,
        "--register-mode",
        "all",
        "--metadata-protocol",
        "tri",
        "--chat",
        "false",
        "--weight",
        "100",
    ) as provider:
        yield provider


def test_kill9_of_a_go_provider_loses_no_call_of_a_dubbo_py_consumer(
    estate_registry: str,
    version: str,
    go_provider: GoProvider,
    py_provider: Callable[..., ProviderProcess],
    tmp_path: Path,
) -> None:
    survivor = py_provider()
    with dubbo_py.Application(
        f"py-consumer-{version}", estate_registry, cache_path=tmp_path / "c.json", metrics=True
    ) as app:
        ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version=version)
        both = {go_provider.address, survivor.address}
        wait_until(
            lambda: {u.address for u in ref.directory.providers} == both, 20, "both providers"
        )
        request = greeter_pb2.HelloRequest(name="k")
        with Load(lambda: str(ref.stub.SayHello(request).provider), THREADS, pause=0) as load:
            time.sleep(BEFORE)
            killed_at = time.monotonic()
            assert go_provider.proc is not None
            go_provider.proc.send_signal(signal.SIGKILL)
            go_provider.proc.wait(10)
            time.sleep(AFTER)
        retries = retried_attempts(app)
    before = Counter(s.provider for s in load.between(0, killed_at))
    after = Counter(s.provider for s in load.between(killed_at))
    failed = load.errors()
    print(
        f"\nFIGURE dubbo-py consumer, Go provider killed: {len(load.samples)} calls, "
        f"{len(failed)} failed, {retries:.0f} attempts retried; "
        f"before the kill {dict(before)}, after {dict(after)}"
    )
    # The Go provider had its share of the calls up to the kill (so calls were in flight on
    # it), the survivor alone answered after it, and no call failed ...
    assert before[go_provider.address] >= 0.2 * before.total(), before
    assert set(after) == {survivor.address}, (after, failed[:3])
    assert after[survivor.address] > 100, after
    assert not failed, failed[:3]
    # ... because failover retried the attempts that met the dead provider.
    assert retries >= 1, retries


def test_kill9_of_a_dubbo_py_provider_under_a_go_consumer(
    estate_registry: str,
    version: str,
    go_provider: GoProvider,
    py_provider: Callable[..., ProviderProcess],
) -> None:
    killed = py_provider()
    consumer = GoConsumer(
        "--registry",
        estate_registry,
        "--application",
        f"go-consumer-{version}",
        "--version",
        version,
    )
    with consumer as go:
        both = {go_provider.address, killed.address}
        deadline = time.monotonic() + 20
        while set(go.command("load 2 300")["ok"]) != both:
            assert time.monotonic() < deadline, "the Go consumer never called both providers"
        go.send(f"load {THREADS} {int((BEFORE + AFTER) * 1000)}")
        time.sleep(BEFORE)
        killed.kill()
        result = go.result(30)
    print(f"\nFIGURE Go consumer, dubbo-py provider killed: {result}")
    ok, errors, last = result["ok"], result["errors"], result["last_ok_ms"]
    slices = result["ok_per_250ms"]
    assert set(ok) == both, result
    # Up to the kill the dubbo-py provider had its share (the slices wholly before it).
    early = int(BEFORE * 1000) // BUCKET_MS - 1
    py_early = sum(slices[killed.address][:early])
    go_early = sum(slices[go_provider.address][:early])
    assert py_early >= 0.2 * (py_early + go_early), result
    # The Go provider went on answering to the end, well past the kill.
    assert last[go_provider.address] > last[killed.address] + 1000, result
    # What dubbo-go 3.3.2 does: failover retries the calls that met the dead provider (in
    # flight, or sent to it before its node left the registry) on the Go provider.
    assert errors == {}, result
