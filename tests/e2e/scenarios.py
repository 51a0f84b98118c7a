"""Scenarios more than one end-to-end test runs, at the interface and the application level.

Each one drives real provider processes and a real registry through the public API; the tests
choose the level (register mode, migration step) and add their own checks around them.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from pathlib import Path
from typing import Any

from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from tests.e2e.conftest import wait_until
from tests.support.processes import ProviderProcess
from tests.support.zookeeper import ZooKeeperServer


def kill9_and_restart(
    app: dubbo_py.Application,
    providers: Callable[..., ProviderProcess],
    gone: Callable[[str], bool] | None = None,
) -> None:
    """Two providers under round robin; one is killed with SIGKILL halfway through 200 calls.

    Every call succeeds, the dead provider leaves (``gone(address)``, by default: leaves the
    consumer's directory), and a provider restarted on its port gets calls at once (a
    re-registered address gets a new channel).
    """
    p1, p2 = providers(), providers()
    ref = app.reference_handle(
        greeter_pb2_grpc.GreeterStub, version="1.0.0", loadbalance="roundrobin", timeout=5.0
    )

    def addresses() -> set[str]:
        return {u.address for u in ref.directory.providers}

    wait_until(lambda: len(addresses()) == 2, 10, "both providers")
    served: collections.Counter[str] = collections.Counter()
    for i in range(200):
        if i == 100:
            p1.kill()
        reply = ref.stub.SayHello(greeter_pb2.HelloRequest(name=f"n{i}"))
        served[reply.provider] += 1
    assert sum(served.values()) == 200
    assert served[p1.address] >= 40 and served[p2.address] >= 100, served

    # The crashed provider's ephemeral node goes with its session / lease.
    left = gone or (lambda address: address not in addresses())
    wait_until(lambda: left(p1.address), 15, "the dead provider gone")
    restarted = providers(port=p1.port)
    wait_until(lambda: restarted.address in addresses(), 10, "the restarted provider")
    back = collections.Counter(
        ref.stub.SayHello(greeter_pb2.HelloRequest(name="again")).provider for _ in range(40)
    )
    assert back[restarted.address] > 0, back


def start_from_cache_while_zookeeper_is_down(cache: Path, chroot: str, **options: Any) -> None:
    """A consumer that has seen a provider writes its cache file; ZooKeeper then stops, and a
    fresh consumer starts from the cache and calls that provider (``options``: the consumer
    application's, e.g. ``migration_step``)."""
    with ZooKeeperServer() as zk:  # a server of its own: this scenario stops it
        registry = f"zookeeper://{zk.address}/{chroot}"
        provider = ProviderProcess(registry).start()
        try:
            with dubbo_py.Application("shop", registry, cache_path=cache, **options) as app:
                ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0")
                wait_until(lambda: len(ref.directory.providers) == 1, 10, "the provider")
                ref.stub.SayHello(greeter_pb2.HelloRequest(name="warm"))
            assert cache.exists()

            zk.stop()
            # A fresh consumer: ZooKeeper does not answer, the cache file does.
            with dubbo_py.Application(
                "shop", registry, cache_path=cache, connect_timeout=1.0, **options
            ) as app:
                greeter = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0", check=1.0)
                replies = [greeter.SayHello(greeter_pb2.HelloRequest(name="c")) for _ in range(5)]
                assert {r.provider for r in replies} == {provider.address}
        finally:
            provider.kill()
