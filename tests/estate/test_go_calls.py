"""A dubbo-py consumer calling a live dubbo-go 3.3.2 provider over Triple, through ZooKeeper.

One Go provider per version per module (tests/peers/go/estate) serves demo.Greeter in this
module's group, the first also demo.Chat; tests of group-only dispatch and application-level
discovery start Go providers of their own. The dubbo-py side uses its ordinary generated stubs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import grpc
import pytest
from demo import chat_pb2, chat_pb2_grpc, greeter_pb2, greeter_pb2_grpc

import dubbo_py
from tests.support.go_estate import GoProvider
from tests.support.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.zookeeper


def _provider(
    registry: str,
    name: str,
    service: str,
    *extra: str,
    application: str = "go-estate-calls",
    mode: str = "interface",
) -> GoProvider:
    return GoProvider(
        "--registry",
        registry,
        "--application",
        application,
        "--name",
        name,
        "--register-mode",
        mode,
        "--service",
        service,
        *extra,
    )


@pytest.fixture(scope="module")
def go_provider(estate_registry: str, estate_group: str) -> Iterator[GoProvider]:
    # One process per version: dubbo-go 3.3.2 keeps one service per implementation type, so a
    # second RegisterGreeterHandler of the same type at another version replaces the first.
    with (
        _provider(estate_registry, "g1", f"1.0.0:{estate_group}") as provider,
        _provider(estate_registry, "g2", f"2.0.0:{estate_group}", "--chat", "false"),
    ):
        yield provider


@pytest.fixture(scope="module")
def app(
    estate_registry: str, go_provider: GoProvider, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dubbo_py.Application]:
    cache: Path = tmp_path_factory.mktemp("go-estate") / "cache.json"
    with dubbo_py.Application("py-go-estate-consumer", estate_registry, cache_path=cache) as app:
        yield app


def zk_children(zookeeper: ZooKeeperServer, path: str) -> list[str]:
    """The children of ``path`` in the suite's ZooKeeper, or none when it does not exist."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zookeeper.address)
    client.start(timeout=10)
    try:
        return list(client.get_children(path)) if client.exists(path) else []
    finally:
        client.stop()
        client.close()


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


def test_client_and_bidi_streams_to_go(app: dubbo_py.Application, go_provider: GoProvider) -> None:
    chat = app.reference(chat_pb2_grpc.ChatStub)
    summary = chat.Collect(iter([chat_pb2.Line(text=t) for t in ("a", "b", "c")]))
    assert (summary.count, summary.joined, summary.provider) == (3, "a,b,c", go_provider.address)
    echoed = list(chat.Echo(iter([chat_pb2.Line(text=t) for t in ("x", "y")])))
    assert [(line.text, line.provider) for line in echoed] == [
        ("x", go_provider.address),
        ("y", go_provider.address),
    ]


def test_deadline_past_a_sleeping_go_provider(app: dubbo_py.Application, estate_group: str) -> None:
    stub = app.reference(
        greeter_pb2_grpc.GreeterStub, version="1.0.0", group=estate_group, retries=0, timeout=0.3
    )
    with pytest.raises(grpc.RpcError) as raised:
        stub.SayHello(greeter_pb2.HelloRequest(name="sleep:1500"))
    assert raised.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED, raised.value


def test_a_four_megabyte_reply_from_go(app: dubbo_py.Application, estate_group: str) -> None:
    size = 4 * 1024 * 1024
    reply = greeter(app, estate_group).SayHello(greeter_pb2.HelloRequest(name=f"big:{size}"))
    assert len(reply.message) == size


def test_a_gzip_compressed_call_to_go(app: dubbo_py.Application, estate_group: str) -> None:
    # dubbo-go's Triple handler inflates gzip requests (triple_protocol registers gzip for
    # handlers by default), unlike Dubbo Java 3.3.6 (test_java_calls' strict xfail).
    reply = greeter(app, estate_group).SayHello(
        greeter_pb2.HelloRequest(name="z" * 10_000), compression=grpc.Compression.Gzip
    )
    assert reply.message == f"g1 [1.0.0:{estate_group}]: hello " + "z" * 10_000


def test_group_alone_selects_the_go_provider(
    app: dubbo_py.Application, estate_registry: str, estate_group: str
) -> None:
    # Two Go providers of demo.Greeter without a version, one group each: the group alone picks.
    with (
        _provider(estate_registry, "ga", f":{estate_group}-a", "--chat", "false"),
        _provider(estate_registry, "gb", f":{estate_group}-b", "--chat", "false"),
    ):
        for name, group in (("ga", f"{estate_group}-a"), ("gb", f"{estate_group}-b")):
            stub = app.reference(greeter_pb2_grpc.GreeterStub, group=group)
            replies = {
                stub.SayHello(greeter_pb2.HelloRequest(name="grp")).message for _ in range(8)
            }
            assert replies == {f"{name} [:{group}]: hello grp"}


def _application_provider(
    registry: str, group: str, application: str, *metadata: str
) -> GoProvider:
    # --register-mode instance: the application's mapping, instance and metadata only, no
    # interface-level node.
    return _provider(
        registry,
        "ga",
        f"3.0.0:{group}",
        "--chat",
        "false",
        *metadata,
        application=application,
        mode="instance",
    )


def test_dubbo_py_finds_a_go_provider_registered_at_application_level_only(
    estate_registry: str, estate_group: str, tmp_path: Path, zookeeper: ZooKeeperServer
) -> None:
    # A FORCE_APPLICATION consumer reads Go's mapping, instance document and metadata, the
    # latter from Go's MetadataServiceV2 on Triple (metadata-service-protocol tri).
    group = f"{estate_group}-app-tri"
    with (
        _application_provider(
            estate_registry, group, "go-estate-app-tri", "--metadata-protocol", "tri"
        ),
        dubbo_py.Application(
            "py-go-estate-migrating",
            estate_registry,
            cache_path=tmp_path / "c.json",
            migration_step="FORCE_APPLICATION",
        ) as app,
    ):
        interface_level = zk_children(zookeeper, "/dubbo/demo.Greeter/providers")
        assert not [n for n in interface_level if group in unquote(n)], interface_level
        reply = greeter(app, group, "3.0.0").SayHello(greeter_pb2.HelloRequest(name="m"))
        assert reply.message == f"ga [3.0.0:{group}]: hello m"


@pytest.mark.parametrize(
    ("metadata", "warned"),
    [
        # dubbo-go 3.3.2's defaults (metadata-type local, metadata-service-protocol dubbo)
        # serve the metadata only by the Hessian MetadataService 1.0.0 (meta-v 1.0.0).
        pytest.param((), "MetadataService 1.0.0", id="default-local-over-dubbo"),
        # dubbo-go writes remote metadata to /dubbo/<app>/<revision>; Dubbo Java (and dubbo-py,
        # which follows Java) reads /dubbo/metadata/<app>/<revision>.
        pytest.param(("--metadata-type", "remote"), "/dubbo/metadata/", id="remote"),
    ],
)
def test_go_metadata_dubbo_py_cannot_read_is_skipped_with_a_warning(
    estate_registry: str,
    estate_group: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    zookeeper: ZooKeeperServer,
    metadata: tuple[str, ...],
    warned: str,
) -> None:
    application = f"go-estate-app-{metadata[1] if metadata else 'default'}"
    group = f"{estate_group}-{application}"
    with (
        _application_provider(estate_registry, group, application, *metadata),
        dubbo_py.Application(
            "py-go-estate-migrating",
            estate_registry,
            cache_path=tmp_path / "c.json",
            migration_step="FORCE_APPLICATION",
        ) as app,
    ):
        stub = greeter(app, group, "3.0.0")
        with pytest.raises(grpc.RpcError) as raised:
            stub.SayHello(greeter_pb2.HelloRequest(name="m"))
        assert raised.value.code() == grpc.StatusCode.UNAVAILABLE, raised.value
        if metadata:  # the document is there, in dubbo-go's own place
            assert zk_children(zookeeper, f"/dubbo/{application}"), application
    warnings = [r.getMessage() for r in caplog.records if application in r.getMessage()]
    assert any(warned in w for w in warnings), warnings
