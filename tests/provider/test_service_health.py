"""A provider marks a service NOT_SERVING before unregistering it on purpose (offline, stop),
and empty protection's probe reads exactly that (``service_health``): how a consumer tells a
clean exit from an expired session."""

from __future__ import annotations

import asyncio
from typing import Any

from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.cluster.health_probe import service_health
from dubbo_py.provider.server import ExportPlan, export, export_async
from dubbo_py.url import URL
from tests.support.local_server import free_port


@dubbo_py.service()
class Greeter(greeter_pb2_grpc.GreeterServicer):
    def SayHello(self, request: Any, context: Any) -> Any:  # type: ignore[override]
        return greeter_pb2.HelloReply(message="hi")


@dubbo_py.service()
class AsyncGreeter(greeter_pb2_grpc.GreeterServicer):
    async def SayHello(self, request: Any, context: Any) -> Any:  # type: ignore[override]
        return greeter_pb2.HelloReply(message="hi")


def _probe(address: str) -> bool | None:
    return service_health(URL.parse(f"tri://{address}/demo.Greeter"), "demo.Greeter", 2.0)


def test_offline_and_stop_mark_the_service_not_serving_and_online_serving_again() -> None:
    server = export(ExportPlan((Greeter(),), "p"), None)
    try:
        assert _probe(server.address) is True
        server.offline()
        assert _probe(server.address) is False  # still answering, but not for the service
        server.online()
        assert _probe(server.address) is True
    finally:
        server.stop(0)
    assert _probe(server.address) is False  # gone: the connection is refused


def test_a_port_nobody_listens_on_or_a_server_of_other_services_is_not_the_provider() -> None:
    assert _probe(f"127.0.0.1:{free_port()}") is False
    server = export(ExportPlan((Greeter(),), "p"), None)
    try:
        # Another process on the port, serving other services: not the provider kept.
        url = URL.parse(f"tri://{server.address}/other.Service")
        assert service_health(url, "other.Service", 2.0) is False
    finally:
        server.stop(0)


def test_the_asyncio_provider_marks_its_services_too() -> None:
    async def main() -> list[bool | None]:
        server = await export_async(ExportPlan((AsyncGreeter(),), "p"), None)
        seen = [await asyncio.to_thread(_probe, server.address)]
        # offline() is blocking (the QoS port calls it from a thread).
        await asyncio.to_thread(server.offline)
        seen.append(await asyncio.to_thread(_probe, server.address))
        await asyncio.to_thread(server.online)
        seen.append(await asyncio.to_thread(_probe, server.address))
        await server.stop(0)
        return seen

    assert asyncio.run(main()) == [True, False, True]
