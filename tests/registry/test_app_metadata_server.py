"""A dubbo-py provider serves its application's MetadataInfo as Dubbo 3.3's
``MetadataServiceV2`` on its own port, and its instance names that service
(``meta-v``, ``dubbo.metadata-service.url-params``), which is how a dubbo-go consumer reads it
(tests/estate/test_go_consumer.py). The calls here are the ones dubbo-py makes to a Java
provider's MetadataServiceV2 (:func:`~dubbo_py.registry.application.metadata_service.
fetch_metadata_v2`), over real gRPC on loopback, against a real embedded registry."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import grpc
import pytest
from demo import greeter_pb2_grpc

import dubbo_py
from dubbo_py.registry.application import metadata_service
from dubbo_py.registry.application.instance import ServiceInstance
from dubbo_py.registry.application.metadata import MetadataInfo
from dubbo_py.registry.application.metadata_server import SERVED, ServedMetadata
from dubbo_py.registry.store.embedded import EmbeddedStore

APP = "py-meta-provider"


@dubbo_py.service(version="1.0.0")
class Greeter(greeter_pb2_grpc.GreeterServicer):
    pass


@dubbo_py.service(version="1.0.0")
class AsyncGreeter(greeter_pb2_grpc.GreeterServicer):
    async def SayHello(self, request: Any, context: Any) -> Any:
        raise NotImplementedError


def _published(db: Path, address: str) -> tuple[ServiceInstance, MetadataInfo]:
    """The instance node at ``address`` and the document its revision names in the report."""
    store = EmbeddedStore(db)
    try:
        data, _ = store.get(f"/services/{APP}/{address}")
        instance = ServiceInstance.parse(data)
        document, _ = store.get(f"/dubbo/metadata/{APP}/{instance.revision}")
        return instance, MetadataInfo.parse(document)
    finally:
        store.close()


def _call(address: str, revision: str) -> Any:
    with grpc.insecure_channel(address) as channel:
        call: Any = channel.unary_unary(
            metadata_service.METHOD,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=metadata_service.response_type().FromString,
        )
        return call(metadata_service.request_type()(revision=revision), timeout=5)


def test_the_instance_names_a_metadata_service_v2_that_serves_the_reports_document(
    tmp_path: Path,
) -> None:
    db = tmp_path / "registry.db"
    with dubbo_py.Application(
        APP, f"sqlite://{db}", cache_path=tmp_path / "c.json", register_mode="instance"
    ) as app:
        server = app.start(Greeter(), port=0, bind_host="127.0.0.1", host="127.0.0.1")
        instance, document = _published(db, server.address)
        # Storage stays remote (Java reads the report); the service is named beside it.
        assert instance.storage_type == "remote"
        assert instance.metadata["meta-v"] == "2.0.0"
        params = json.loads(instance.metadata["dubbo.metadata-service.url-params"])
        assert params == {
            "version": "2.0.0",
            "side": "provider",
            "port": str(instance.port),
            "protocol": "tri",
        }
        served = metadata_service.fetch_metadata_v2(instance)
        assert served == document, (served, document)
        with pytest.raises(grpc.RpcError) as raised:
            _call(server.address, "no-such-revision")
        assert raised.value.code() == grpc.StatusCode.NOT_FOUND
        assert APP in str(raised.value.details())
    # Closed: no instance names the revision any more, so it is not served.
    assert SERVED.get(APP, instance.revision) is None


def test_an_asyncio_server_serves_it_too(tmp_path: Path) -> None:
    db = tmp_path / "registry.db"

    async def main() -> None:
        with dubbo_py.Application(
            APP, f"sqlite://{db}", cache_path=tmp_path / "c.json", register_mode="instance"
        ) as app:
            server = await app.start_async(
                AsyncGreeter(), port=0, bind_host="127.0.0.1", host="127.0.0.1"
            )
            instance, document = await asyncio.to_thread(_published, db, server.address)
            served = await asyncio.to_thread(metadata_service.fetch_metadata_v2, instance)
            assert served == document, (served, document)
            await server.stop(0)

    asyncio.run(main())


def test_a_revision_is_served_while_some_instance_publishes_it() -> None:
    served = ServedMetadata()
    info = MetadataInfo("app", {}, "r1")
    served.hold(info)
    served.hold(info)  # a second address with the same services
    served.release("app", "r1")
    assert served.get("app", "r1") is info
    served.release("app", "r1")
    assert served.get("app", "r1") is None
    served.release("app", "r1")  # not held: nothing to do
    assert served.get("other", "r1") is None
