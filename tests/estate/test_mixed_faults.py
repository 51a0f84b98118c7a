"""kill -9 in a mixed estate, counted on each side: a Java provider under a dubbo-py consumer,
and a dubbo-py provider under a Java consumer (Apache Dubbo 3.3.6, tests/peers/java/estate).

Each side has two providers of demo.Greeter, one Java and one dubbo-py (a separate process, the
quick start's provider), and its consumer's defaults: failover with the default retries (2 on
both sides), random load balance. 8 threads call back to back; after 1.5 s one provider gets
SIGKILL, with calls in flight on it. What the consumer's user notices is the count of failed
calls; the figures are in docs/compatibility.md ("Java Dubbo 3.3.6, live").

The two sides differ. dubbo-py retries a call whose connection broke under it (UNAVAILABLE is a
transport failure: the call is retried on the other provider) and loses none. Dubbo 3.3.6's
Triple invoker completes such a call *normally*, with an AppResponse holding a StatusRpcException
(CANCELLED when the stream was reset, INTERNAL "Http2 exception" when its headers met the closed
channel); FailoverClusterInvoker retries only exceptions thrown by the invoker, so the exception
reaches the caller from AsyncRpcResult.recreate in the proxy, unretried. A Java consumer loses
the calls in flight at the moment of the kill, and nothing after.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.java_estate import JavaConsumer, JavaProvider
from tests.support.kill_under_load import (
    BEFORE,
    THREADS,
    kill_under_a_dubbo_py_consumer,
    kill_under_a_peer_consumer,
    share_before_the_kill,
    start_py_providers,
)
from tests.support.processes import ProviderProcess

pytestmark = pytest.mark.zookeeper


@pytest.fixture
def version() -> str:
    """A version of this test's own: no other test's providers of demo.Greeter are found."""
    return f"faults-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def java_registry(estate_registry: str) -> str:
    """The registry as the Java peers are given it: ``session=4000`` (Dubbo's default is 60 s)
    so a killed Java provider's nodes leave ZooKeeper within seconds, and no later Java consumer
    of demo.Greeter waits on a dead instance's metadata at start-up."""
    return f"{estate_registry}?session=4000"


@pytest.fixture
def py_provider(estate_registry: str, version: str) -> Iterator[Callable[..., ProviderProcess]]:
    """Starts dubbo-py providers in their own processes (examples/quickstart/provider.py)."""
    yield from start_py_providers(estate_registry, version)


@pytest.fixture
def java_provider(java_registry: str, version: str) -> Iterator[JavaProvider]:
    """A Dubbo 3.3.6 provider (estate.Provider) of the same service."""
    with JavaProvider(
        "--registry",
        java_registry,
        "--application",
        f"java-{version}",
        "--name",
        "j1",
        "--version",
        version,
    ) as provider:
        yield provider


def test_kill9_of_a_java_provider_loses_no_call_of_a_dubbo_py_consumer(
    estate_registry: str,
    version: str,
    java_provider: JavaProvider,
    py_provider: Callable[..., ProviderProcess],
    tmp_path: Path,
) -> None:
    # Both providers warm up (Dubbo's default 10 min, from their URLs' timestamps), so the
    # random balance splits the calls about evenly and the Java one has calls in flight.
    survivor = py_provider()
    assert java_provider.proc is not None
    seen = kill_under_a_dubbo_py_consumer(
        estate_registry,
        version,
        java_provider.proc,
        {java_provider.address, survivor.address},
        tmp_path,
    )
    print(
        f"\nFIGURE dubbo-py consumer, Java provider killed: {len(seen.samples)} calls, "
        f"{len(seen.failed)} failed, {seen.retries:.0f} attempts retried; "
        f"before the kill {dict(seen.before)}, after {dict(seen.after)}"
    )
    # The Java provider had its share of the calls up to the kill (so calls were in flight on
    # it), the survivor alone answered after it, and no call failed.
    assert seen.before[java_provider.address] >= 0.2 * seen.before.total(), seen.before
    assert set(seen.after) == {survivor.address}, (seen.after, seen.failed[:3])
    assert seen.after[survivor.address] > 100, seen.after
    assert not seen.failed, seen.failed[:3]
    # ... because failover retried the attempts that met the dead provider (the calls in
    # flight when it died, and those sent to it before the consumer saw it gone).
    assert seen.retries >= 1, seen.retries


def test_kill9_of_a_dubbo_py_provider_under_a_java_consumer(
    java_registry: str,
    version: str,
    java_provider: JavaProvider,
    py_provider: Callable[..., ProviderProcess],
) -> None:
    # Both providers warm up, as in the test above, so the calls split about evenly.
    killed = py_provider()
    consumer = JavaConsumer(
        "--registry",
        java_registry,
        "--application",
        f"java-consumer-{version}",
        "--version",
        version,
    )
    with consumer as java:
        both = {java_provider.address, killed.address}
        result = kill_under_a_peer_consumer(java, both, killed.kill)
    print(f"\nFIGURE Java consumer, dubbo-py provider killed: {result}")
    ok, errors, last = result["ok"], result["errors"], result["last_ok_ms"]
    assert set(ok) == both, result
    # Up to the kill the dubbo-py provider had its share (the slices wholly before it).
    assert share_before_the_kill(result, killed.address, java_provider.address) >= 0.2, result
    # The Java provider went on answering to the end, well past the kill.
    assert last[java_provider.address] > last[killed.address] + 1000, result
    # What Dubbo 3.3.6 does: the calls in flight on the killed provider (at most one per thread,
    # and one more sent before the connection's close is seen) fail with the transport status,
    # unretried, all within the first second after the kill; every later call succeeds.
    failed = sum(errors.values())
    assert failed <= 2 * THREADS, result
    assert all("StatusRpcException" in kind for kind in errors), result
    if failed:
        assert result["error_ms"][1] < (BEFORE + 1.0) * 1000, result
