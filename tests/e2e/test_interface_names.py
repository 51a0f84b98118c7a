"""Interface names as Java Dubbo uses them, on a real ZooKeeper: a Triple service registers
under its Java interface name (``/dubbo/com.example.Greeter/providers``, ``interface=...``)
while the URL path and the gRPC path stay the proto service's name."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.errors import StoreError
from dubbo_py.url import URL
from tests.e2e.conftest import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.zookeeper]

JAVA_NAME = "com.example.Greeter"


@pytest.fixture
def zk_registry(zookeeper: Any) -> str:
    return f"zookeeper://{zookeeper.address}/iface-{uuid.uuid4().hex[:8]}"


def make_servicer(label: str) -> Any:
    @dubbo_py.service(version="1.0.0", interface=JAVA_NAME)
    class Greeter(greeter_pb2_grpc.GreeterServicer):
        def SayHello(self, request: Any, context: Any) -> Any:
            return greeter_pb2.HelloReply(message=label)

    return Greeter()


@pytest.fixture
def provider_app(zk_registry: str) -> Iterator[dubbo_py.Application]:
    with dubbo_py.Application("greeter-provider", zk_registry) as app:
        yield app


def test_a_provider_registers_under_its_interface_name_with_the_proto_path(
    provider_app: dubbo_py.Application, zk_registry: str, tmp_path: Path
) -> None:
    server = provider_app.start(make_servicer("java-named"), port=0, unregister_wait=0)
    registry = provider_app.registry
    assert registry is not None
    (url,) = registry.lookup(JAVA_NAME)
    assert url.path == "demo.Greeter"
    assert url.get("interface") == JAVA_NAME
    assert url.port == server.port
    assert registry.lookup("demo.Greeter") == []

    with dubbo_py.Application("shop", zk_registry, cache_path=tmp_path / "c.json") as app:
        greeter = app.reference(
            greeter_pb2_grpc.GreeterStub, version="1.0.0", interface=JAVA_NAME, check=10
        )
        assert greeter.SayHello(greeter_pb2.HelloRequest(name="x")).message == "java-named"
        consumer = app.references[0].consumer
        assert consumer.get("interface") == JAVA_NAME
        assert consumer.path == JAVA_NAME
        registered = registry.lookup(JAVA_NAME, "consumers")
        assert [c.get("application") for c in registered] == ["shop"]


@pytest.fixture
def java_style_provider(zk_registry: str) -> Iterator[tuple[str, list[int]]]:
    """Two plain gRPC servers registered as Java registers a Triple service: folder and
    ``interface`` the Java name, path the proto service."""
    servers, ports = [], []
    registrar = dubbo_py.Application("java-provider", zk_registry)
    assert registrar.registry is not None
    for label in ("one", "two"):
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))

        class Greeter(greeter_pb2_grpc.GreeterServicer):
            name = label

            def SayHello(self, request: Any, context: Any) -> Any:
                return greeter_pb2.HelloReply(message=self.name)

        greeter_pb2_grpc.add_GreeterServicer_to_server(Greeter(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        ports.append(port)
        registrar.registry.register(
            URL(
                "tri",
                "127.0.0.1",
                port,
                "demo.Greeter",
                parameters={"interface": JAVA_NAME, "side": "provider", "methods": "SayHello"},
            )
        )
    try:
        yield zk_registry, ports
    finally:
        registrar.close()
        for server in servers:
            server.stop(None)


def test_rules_for_a_java_named_service_are_keyed_by_its_interface(
    java_style_provider: tuple[str, list[int]], tmp_path: Path
) -> None:
    registry_address, ports = java_style_provider
    with dubbo_py.Application("shop", registry_address, cache_path=tmp_path / "c.json") as app:
        ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, interface=JAVA_NAME, check=10)
        wait_until(lambda: len(ref.directory.providers) == 2, 10, "both providers")
        request = greeter_pb2.HelloRequest(name="x")
        assert {ref.stub.SayHello(request).message for _ in range(20)} == {"one", "two"}
        assert app.registry is not None
        app.registry.put_config(
            f"{JAVA_NAME}::.condition-router",
            f"configVersion: v3.0\nscope: service\nkey: {JAVA_NAME}\nforce: true\n"
            f"conditions:\n  - '=> port = {ports[1]}'\n",
        )
        wait_until(
            lambda: {ref.stub.SayHello(request).message for _ in range(10)} == {"two"},
            10,
            "the rule keyed by the interface name",
        )


def test_an_interface_name_with_a_slash_is_refused() -> None:
    with pytest.raises(ValueError, match="interface"):
        dubbo_py.service(interface="com/example")
    with (
        dubbo_py.Application("shop", "tri://127.0.0.1:1") as app,
        pytest.raises((ValueError, StoreError), match="interface"),
    ):
        app.reference(greeter_pb2_grpc.GreeterStub, interface="a/b")
