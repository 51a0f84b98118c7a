"""Providers serve gRPC server reflection by default, and not when turned off; the admin's
reflection client turns what they serve into message classes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import dubbo_py
from dubbo_py.admin.reflect import ReflectionError, describe_service
from dubbo_py.url import URL
from tests.support.processes import ROOT

pytest.importorskip("grpc_reflection")

import sys

sys.path.insert(0, str(ROOT / "examples"))
import _paths  # noqa: F401
from demo import greeter_pb2_grpc


class Greeter(greeter_pb2_grpc.GreeterServicer):
    pass


@pytest.fixture
def serve() -> Iterator[object]:
    apps: list[dubbo_py.Application] = []

    def start(**options: object) -> URL:
        app = dubbo_py.Application("refl", "tri://127.0.0.1:1")
        apps.append(app)
        server = app.start(Greeter(), port=0, **options)  # type: ignore[arg-type]
        return URL("tri", "127.0.0.1", server.port, "demo.Greeter")

    yield start
    for app in apps:
        app.close()


def test_provider_describes_its_service(serve: object) -> None:
    url = serve()  # type: ignore[operator]
    shape = describe_service([url], "demo.Greeter")
    assert [m.name for m in shape.methods] == ["SayHello", "SayHelloStream"]
    hello = shape.method("SayHello")
    assert hello.unary and hello.request_type == "demo.HelloRequest"
    assert [f.name for f in hello.request_fields()] == ["name", "count", "key"]
    assert hello.request_class(name="x").name == "x"


def test_reflection_can_be_turned_off(serve: object) -> None:
    url = serve(reflection=False)  # type: ignore[operator]
    with pytest.raises(ReflectionError, match="serves no gRPC reflection"):
        describe_service([url], "demo.Greeter", timeout=5)


def test_unknown_service_names_what_the_provider_serves(serve: object) -> None:
    url = serve()  # type: ignore[operator]
    with pytest.raises(ReflectionError, match=r"serves no demo\.Nope .*demo\.Greeter"):
        describe_service([url], "demo.Nope")


class AsyncGreeter(greeter_pb2_grpc.GreeterServicer):
    async def SayHello(self, request: object, context: object) -> object:  # type: ignore[override]
        from demo import greeter_pb2

        return greeter_pb2.HelloReply(message="hi")


def test_an_asyncio_provider_serves_reflection_health_and_its_service() -> None:
    """On a grpc.aio server health and reflection are generic handlers only (not registered
    methods, which would cost every application call; dubbo_py.provider.server.GenericOnly):
    they must still answer, beside the service's own calls."""
    import asyncio

    import grpc
    from demo import greeter_pb2
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    async def main() -> tuple[list[str], int, str]:
        app = dubbo_py.Application("refl-aio", "tri://127.0.0.1:1")
        server = await app.start_async(AsyncGreeter(), port=0)
        try:
            url = URL("tri", "127.0.0.1", server.port, "demo.Greeter")
            shape = await asyncio.to_thread(describe_service, [url], "demo.Greeter")
            async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                check = health_pb2_grpc.HealthStub(channel).Check
                status = (await check(health_pb2.HealthCheckRequest(service="demo.Greeter"))).status
                reply = await greeter_pb2_grpc.GreeterStub(channel).SayHello(
                    greeter_pb2.HelloRequest(name="x")
                )
            return [m.name for m in shape.methods], status, reply.message
        finally:
            await server.stop(0)

    methods, status, message = asyncio.run(main())
    assert methods == ["SayHello", "SayHelloStream"]
    assert status == health_pb2.HealthCheckResponse.SERVING
    assert message == "hi"
