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
            stub = await consumer.reference_async(
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


def test_aio_consumer_calls_a_restarted_provider_again_after_its_revival(
    registry_address: str, providers: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    # The aio consumer shares the reference's quarantine; a revived provider must get calls
    # again at once, not after gRPC's reconnect backoff on the channel that saw it die.
    p1, p2 = providers(), providers()

    async def scenario() -> None:
        consumer = dubbo_py.Application("aio-shop", registry_address, cache_path=tmp_path / "c")
        try:
            stub = await consumer.reference_async(
                greeter_pb2_grpc.GreeterStub,
                version="1.0.0",
                loadbalance="roundrobin",
                quarantine_interval=0.3,
            )
            ref = consumer.references[-1]
            await asyncio.to_thread(
                wait_until, lambda: len(ref.directory.providers) == 2, 10, "both providers"
            )

            async def spread(n: int) -> set[str]:
                seen = set()
                for i in range(n):
                    reply = await stub.SayHello(greeter_pb2.HelloRequest(name=str(i)))
                    seen.add(reply.provider)
                return seen

            assert await spread(10) == {p1.address, p2.address}
            p2.kill()
            assert await spread(20) == {p1.address}  # failover; p2 now quarantined
            assert [e.address for e in ref.quarantine.entries()] == [p2.address]
            await spread(20)  # the old channel to p2 is left in reconnect backoff
            restarted = providers(port=p2.port)

            def back() -> bool:
                # Revived by the probe, or -- if the old registration ran out first (the
                # embedded lease is 3 s) -- dropped from quarantine and registered anew.
                listed = {p.address for p in ref.directory.providers}
                return not ref.quarantine.entries() and restarted.address in listed

            await asyncio.to_thread(wait_until, back, 10, "p2 back in service")
            assert await spread(10) == {p1.address, restarted.address}
            assert not ref.quarantine.entries()
        finally:
            await consumer.aclose()

    asyncio.run(scenario())
