"""A dubbo-py consumer calling a live dubbo-go 3.3.2 provider over Triple, through ZooKeeper.

One Go provider per module (tests/peers/go/estate) serves demo.Greeter at two versions in this
module's group; the dubbo-py side uses its ordinary generated stubs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from tests.support.go_estate import GoProvider

pytestmark = pytest.mark.zookeeper


def _provider(registry: str, name: str, service: str) -> GoProvider:
    return GoProvider(
        "--registry",
        registry,
        "--application",
        "go-estate-calls",
        "--name",
        name,
        "--register-mode",
        "interface",
        "--service",
        service,
    )


@pytest.fixture(scope="module")
def go_provider(estate_registry: str, estate_group: str) -> Iterator[GoProvider]:
    # One process per version: dubbo-go 3.3.2 keeps one service per implementation type, so a
    # second RegisterGreeterHandler of the same type at another version replaces the first.
    with (
        _provider(estate_registry, "g1", f"1.0.0:{estate_group}") as provider,
        _provider(estate_registry, "g2", f"2.0.0:{estate_group}"),
    ):
        yield provider


@pytest.fixture(scope="module")
def app(
    estate_registry: str, go_provider: GoProvider, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dubbo_py.Application]:
    cache: Path = tmp_path_factory.mktemp("go-estate") / "cache.json"
    with dubbo_py.Application("py-go-estate-consumer", estate_registry, cache_path=cache) as app:
        yield app


def greeter(
    app: dubbo_py.Application, group: str, version: str = "1.0.0"
) -> greeter_pb2_grpc.GreeterStub:
    return app.reference(greeter_pb2_grpc.GreeterStub, version=version, group=group)


def test_unary_call_reaches_the_go_provider_on_loopback(
    app: dubbo_py.Application, estate_group: str, go_provider: GoProvider
) -> None:
    reply = greeter(app, estate_group).SayHello(greeter_pb2.HelloRequest(name="py"))
    assert reply.message == f"g1 [1.0.0:{estate_group}]: hello py"
    assert reply.provider == go_provider.address
    assert go_provider.address.startswith("127.0.0.1:")


def test_version_selects_the_go_service(app: dubbo_py.Application, estate_group: str) -> None:
    reply = greeter(app, estate_group, "2.0.0").SayHello(greeter_pb2.HelloRequest(name="v2"))
    assert reply.message == f"g2 [2.0.0:{estate_group}]: hello v2"


def test_server_stream_from_the_go_provider(app: dubbo_py.Application, estate_group: str) -> None:
    replies = list(
        greeter(app, estate_group).SayHelloStream(greeter_pb2.HelloRequest(name="s", count=3))
    )
    assert [r.message for r in replies] == [
        f"g1 [1.0.0:{estate_group}]: hello s #{i}" for i in range(3)
    ]


def test_a_go_error_reaches_the_caller_with_its_message(
    app: dubbo_py.Application, estate_group: str
) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        greeter(app, estate_group).SayHello(greeter_pb2.HelloRequest(name="fail"))
    error = caught.value
    assert f"g1 [1.0.0:{estate_group}] refused fail" in (error.details() or ""), error
    assert error.code() not in (grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE), error


def test_attachments_reach_the_go_service(app: dubbo_py.Application, estate_group: str) -> None:
    stub = greeter(app, estate_group)
    reply = stub.SayHello(
        greeter_pb2.HelloRequest(name="attachments"), metadata=(("trace-id", "t-42"),)
    )
    seen = json.loads(reply.message)
    assert seen.get("trace-id") == "t-42", seen
