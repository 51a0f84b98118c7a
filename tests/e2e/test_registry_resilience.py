"""The registry failing around a consumer: ZooKeeper down at start, garbage nodes."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from tests.e2e.conftest import wait_until
from tests.support.processes import ProviderProcess
from tests.support.zookeeper import ZooKeeperServer


@pytest.mark.zookeeper
def test_consumer_starts_from_cache_while_zookeeper_is_down(tmp_path: Path) -> None:
    cache = tmp_path / "consumer-cache.json"
    with ZooKeeperServer() as zk:  # a server of its own: this test stops it
        registry = f"zookeeper://{zk.address}/cache-test"
        provider = ProviderProcess(registry).start()
        try:
            with dubbo_py.Application("shop", registry, cache_path=cache) as app:
                ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0")
                wait_until(lambda: len(ref.directory.providers) == 1, 10, "the provider")
                ref.stub.SayHello(greeter_pb2.HelloRequest(name="warm"))
            assert cache.exists()

            zk.stop()
            # A fresh consumer: ZooKeeper does not answer, the cache file does.
            with dubbo_py.Application(
                "shop", registry, cache_path=cache, connect_timeout=1.0
            ) as app:
                greeter = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0", check=1.0)
                replies = [greeter.SayHello(greeter_pb2.HelloRequest(name="c")) for _ in range(5)]
                assert {r.provider for r in replies} == {provider.address}
        finally:
            provider.kill()


def test_garbage_provider_node_is_skipped_with_a_warning(
    registry_address: str,
    providers: Callable[..., ProviderProcess],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = providers()
    garbage = "tri%3A%2F%2F10.0.0.9%3Anotaport%2Fdemo.Greeter"
    with dubbo_py.Application("shop", registry_address, cache_path=tmp_path / "c.json") as app:
        assert app.registry is not None
        app.registry.store.create(f"/dubbo/demo.Greeter/providers/{garbage}")
        with caplog.at_level(logging.WARNING, logger="dubbo_py.registry.registry"):
            ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0")
            wait_until(lambda: len(ref.directory.providers) == 1, 10, "the good provider")
            replies = {
                ref.stub.SayHello(greeter_pb2.HelloRequest(name="g")).provider for _ in "abc"
            }
        assert replies == {good.address}
        assert any(garbage in r.getMessage() for r in caplog.records), caplog.text
