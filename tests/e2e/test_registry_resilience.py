"""The registry failing around a consumer: ZooKeeper down at start, garbage nodes."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from tests.e2e.conftest import wait_until
from tests.e2e.scenarios import start_from_cache_while_zookeeper_is_down
from tests.support.processes import ProviderProcess


@pytest.mark.zookeeper
def test_consumer_starts_from_cache_while_zookeeper_is_down(tmp_path: Path) -> None:
    start_from_cache_while_zookeeper_is_down(tmp_path / "consumer-cache.json", "cache-test")


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
