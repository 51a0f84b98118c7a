"""dubbo.yaml drives a provider and a consumer end to end, and code overrides the file."""

from __future__ import annotations

from pathlib import Path

import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.errors import ConfigError
from examples.quickstart.provider import make_greeter
from tests.e2e.conftest import wait_until


def test_provider_and_consumer_from_dubbo_yaml(tmp_path: Path) -> None:
    registry = f"sqlite://{tmp_path}/registry.db"
    (tmp_path / "provider.yaml").write_text(
        f"application: greeter-from-file\nregistry: {{address: '{registry}'}}\n"
        "services:\n  demo.Greeter: {version: 2.0.0, weight: 7, tags: {env: gray}}\n"
    )
    (tmp_path / "consumer.yaml").write_text(
        f"application: shop-from-file\nregistry: '{registry}'\n"
        "references:\n  demo.Greeter:\n    version: 2.0.0\n    loadbalance: roundrobin\n"
        "    timeout: 2.5\n    attachments: {dubbo.tag: gray}\n"
    )
    provider = dubbo_py.Application.from_config(tmp_path / "provider.yaml", environ={})
    # The decorator says version 1.0.0; the file's services section wins.
    server = provider.start(make_greeter("1.0.0", None, None))
    try:
        (url,) = server.urls
        assert (url.get("version"), url.get("weight"), url.get("dubbo.tag")) == (
            "2.0.0",
            "7",
            "gray",
        )
        consumer = dubbo_py.Application.from_config(tmp_path / "consumer.yaml", environ={})
        with consumer:
            ref = consumer.reference_handle(greeter_pb2_grpc.GreeterStub)
            assert ref.consumer.get("version") == "2.0.0"
            assert ref.consumer.get("timeout") == "2500"
            wait_until(lambda: len(ref.directory.providers) == 1, 10, "the provider")
            reply = ref.stub.SayHello(greeter_pb2.HelloRequest(name="file"))
            assert reply.message == "Hello, file!"

            overridden = consumer.reference_handle(greeter_pb2_grpc.GreeterStub, timeout=0.5)
            assert overridden.consumer.get("timeout") == "500"

            with pytest.raises(ConfigError, match="loadbalance"):
                consumer.reference(greeter_pb2_grpc.GreeterStub, loadbalance="fastest")
            with pytest.raises(TypeError, match="colour"):
                consumer.reference(greeter_pb2_grpc.GreeterStub, colour="red")
    finally:
        provider.close()
