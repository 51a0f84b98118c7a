"""Both sides in asyncio: two ``grpc.aio`` Greeter providers and an asyncio consumer.

`python examples/asyncio/shop.py` (an embedded registry in a temporary directory; nothing to
start). The consumer spreads calls over both providers with ``leastactive``, reads a stream,
degrades to a mock answer for a method whose providers are all gone, and keeps serving while
one provider stops.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _paths  # noqa: F401  (puts the generated demo package on sys.path)
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py


@dubbo_py.service(version="1.0.0", warmup=0)
class AsyncGreeter(greeter_pb2_grpc.GreeterServicer):
    """Answers after a short await, saying which provider it is."""

    address = ""

    async def SayHello(self, request: Any, context: Any) -> Any:
        await asyncio.sleep(0.01)
        return greeter_pb2.HelloReply(message=f"Hello, {request.name}!", provider=self.address)

    async def SayHelloStream(self, request: Any, context: Any) -> AsyncIterator[Any]:
        for i in range(request.count):
            yield greeter_pb2.HelloReply(message=f"#{i} {request.name}", provider=self.address)


async def start_provider(registry: str) -> tuple[dubbo_py.Application, Any]:
    app = dubbo_py.Application("greeter-provider", registry)
    greeter = AsyncGreeter()
    server = await app.start_async(greeter)
    greeter.address = server.address
    return app, server


async def main() -> int:
    logging.basicConfig(level=logging.WARNING, format="shop %(levelname)s %(message)s")
    with tempfile.TemporaryDirectory() as tmp:
        registry = f"sqlite://{tmp}/registry.db"
        providers = [await start_provider(registry) for _ in range(2)]
        shop = dubbo_py.Application("shop", registry, cache_path=Path(tmp) / "cache.json")
        try:
            greeter = await shop.reference_async(
                greeter_pb2_grpc.GreeterStub,
                version="1.0.0",
                loadbalance="leastactive",
                check=5.0,
            )
            # Twenty concurrent calls: leastactive sends each to the provider with fewer in flight.
            replies = await asyncio.gather(
                *(greeter.SayHello(greeter_pb2.HelloRequest(name=f"n{i}")) for i in range(20))
            )
            spread = collections.Counter(r.provider for r in replies)
            # In the order the providers started, so the same run prints the same line.
            in_start_order = {server.address: spread[server.address] for _, server in providers}
            print(f"20 concurrent calls: {in_start_order}")

            parts = [
                r.message
                async for r in greeter.SayHelloStream(greeter_pb2.HelloRequest(name="s", count=3))
            ]
            print(f"stream: {parts}")

            # No provider serves version 2.0.0: the mock answers instead of an error.
            degraded = await shop.reference_async(
                greeter_pb2_grpc.GreeterStub,
                version="2.0.0",
                mock='return {"message": "busy, try later"}',
            )
            answer = await degraded.SayHello(greeter_pb2.HelloRequest())
            print(f"2.0.0 (mocked): {answer.message}")

            app, server = providers.pop()
            await server.stop(grace=1.0)  # unregisters, then drains
            await app.aclose()
            after = [await greeter.SayHello(greeter_pb2.HelloRequest(name="x")) for _ in range(10)]
            answered_by = sorted({r.provider for r in after})
            print(f"after one provider stopped: {len(after)} calls answered by {answered_by}")
            return 0
        finally:
            await shop.aclose()
            for app, server in providers:
                await server.stop(grace=0.5)
                await app.aclose()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
