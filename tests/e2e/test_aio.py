"""The asyncio flavour: grpc.aio providers and consumers through the same governance layer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from tests.e2e.conftest import wait_until
from tests.support.processes import ProviderProcess


@dubbo_py.service(version="1.0.0")
class AsyncGreeter(greeter_pb2_grpc.GreeterServicer):
    address = ""

    async def SayHello(self, request: Any, context: Any) -> Any:  # type: ignore[override]
        return greeter_pb2.HelloReply(message=f"aio {request.name}", provider=self.address)

    async def SayHelloStream(  # type: ignore[override]
        self, request: Any, context: Any
    ) -> AsyncIterator[Any]:
        for i in range(request.count):
            yield greeter_pb2.HelloReply(message=f"aio #{i}", provider=self.address)


def test_aio_provider_and_consumer_with_failover(
    registry_address: str, providers: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    blocking_provider = providers()

    async def scenario() -> None:
        provider_app = dubbo_py.Application("aio-provider", registry_address)
        greeter = AsyncGreeter()
        server = await provider_app.start_async(greeter)
        greeter.address = server.address
        consumer = dubbo_py.Application("aio-shop", registry_address, cache_path=tmp_path / "c")
        try:
            stub = consumer.reference_async(
                greeter_pb2_grpc.GreeterStub, version="1.0.0", loadbalance="roundrobin"
            )
            directory = consumer.references[-1].directory
            await asyncio.to_thread(
                wait_until, lambda: len(directory.providers) == 2, 10, "both providers"
            )
            seen = set()
            for i in range(10):
                reply = await stub.SayHello(greeter_pb2.HelloRequest(name=str(i)))
                seen.add(reply.provider)
            assert seen == {server.address, blocking_provider.address}

            parts = [
                r.message
                async for r in stub.SayHelloStream(greeter_pb2.HelloRequest(name="s", count=3))
            ]
            assert len(parts) == 3

            blocking_provider.kill()  # every call still succeeds: failover to the aio provider
            for i in range(10):
                reply = await stub.SayHello(greeter_pb2.HelloRequest(name=f"after{i}"))
                assert reply.provider == server.address
        finally:
            await consumer.aclose()
            await server.stop(grace=0.5)
            await provider_app.aclose()

    asyncio.run(scenario())
