"""``local``-storage instances: their metadata read from the instance's MetadataServiceV2 over
Triple (a gRPC server here speaks the service as Dubbo 3.3's protobuf definition says)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest

from dubbo_py.registry.application import metadata_service
from dubbo_py.registry.application.discovery import AppLevelProviders, ApplicationDiscovery
from dubbo_py.registry.application.metadata import MetadataInfo
from dubbo_py.registry.store.base import Store
from tests.support.java_app_level import java_instance, java_metadata

StoreFactory = Callable[[], Store]


class MetadataServer:
    """A MetadataServiceV2 on loopback serving one document; notes each call's headers."""

    def __init__(self, info: MetadataInfo) -> None:
        self.calls: list[dict[str, str]] = []
        request, response = metadata_service.request_type(), metadata_service.response_type()

        def get(req: Any, context: grpc.ServicerContext) -> Any:
            self.calls.append(dict(context.invocation_metadata()))
            if req.revision != info.revision:
                context.abort(grpc.StatusCode.NOT_FOUND, "no such revision")
            return metadata_service.metadata_info_to_v2(info)

        handler = grpc.method_handlers_generic_handler(
            "org.apache.dubbo.metadata.MetadataServiceV2",
            {
                "GetMetadataInfo": grpc.unary_unary_rpc_method_handler(
                    get,
                    request_deserializer=request.FromString,
                    response_serializer=response.SerializeToString,
                )
            },
        )
        self.server = grpc.server(futures.ThreadPoolExecutor(2), handlers=[handler])
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()


@pytest.fixture
def served() -> Iterator[tuple[MetadataServer, MetadataInfo]]:
    info = MetadataInfo.parse(java_metadata("java-local", "rev9", "demo.Greeter", version="1.0.0"))
    server = MetadataServer(info)
    yield server, info
    server.server.stop(0)


def _wait(seen: list[AppLevelProviders], predicate: Callable[[AppLevelProviders], bool]) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if seen and predicate(seen[-1]):
            return
        time.sleep(0.02)
    raise AssertionError(f"not seen: {seen[-1:] or 'nothing'}")


def test_local_metadata_is_read_from_the_instances_metadata_service_v2(
    store: Store, served: tuple[MetadataServer, MetadataInfo]
) -> None:
    server, _info = served
    store.create("/dubbo/mapping/demo.Greeter", b"java-local", makepath=True)
    store.create(
        "/services/java-local/127.0.0.1:50090",
        java_instance(
            "java-local", "127.0.0.1", 50090, "rev9", storage="local", metadata_port=server.port
        ).encode(),
        makepath=True,
        ephemeral=True,
    )
    seen: list[AppLevelProviders] = []
    discovery = ApplicationDiscovery(store, local_metadata=metadata_service.fetch_metadata_v2)
    discovery.subscribe("demo.Greeter", seen.append)
    _wait(seen, lambda s: bool(s.urls))
    (url,) = seen[-1].urls
    assert (url.address, url.get_str("version")) == ("127.0.0.1:50090", "1.0.0")
    # Asked as Dubbo asks: the application as group, version 2.0.0; asked once (cached).
    assert len(server.calls) == 1
    assert server.calls[0]["tri-service-group"] == "java-local"
    assert server.calls[0]["tri-service-version"] == "2.0.0"
    discovery.close()


def test_a_v1_metadata_service_is_skipped_with_a_warning_naming_the_fix(
    store: Store,
    served: tuple[MetadataServer, MetadataInfo],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, _info = served
    monkeypatch.setattr(metadata_service, "_warned", set())  # warned once per process
    store.create("/dubbo/mapping/demo.Greeter", b"java-old", makepath=True)
    store.create(
        "/services/java-old/127.0.0.1:50091",
        java_instance(
            "java-old",
            "127.0.0.1",
            50091,
            "rev9",
            storage="local",
            metadata_port=server.port,
            meta_v="1.0.0",
        ).encode(),
        makepath=True,
        ephemeral=True,
    )
    seen: list[AppLevelProviders] = []
    discovery = ApplicationDiscovery(store, local_metadata=metadata_service.fetch_metadata_v2)
    discovery.subscribe("demo.Greeter", seen.append)
    _wait(seen, lambda s: s.read)
    assert seen[-1].urls == ()
    assert "metadata-type=remote" in caplog.text
    assert server.calls == []
    discovery.close()
