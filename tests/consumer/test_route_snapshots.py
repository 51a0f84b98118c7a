"""Router snapshots of live calls, in process over the QoS port with real gRPC servers: a retry is
recorded with the balancer's first pick, the asyncio flavour records too, a rule leaving no
provider is named, and switching off restores the plain path (call plans included). The
condition-rule case with real processes is tests/e2e/test_live_ops_e2e.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.cluster.support.context import PlainCall
from tests.app.test_qos_port import get
from tests.support.local_server import free_port

KEY = "demo.Greeter:1.0.0"


@dubbo_py.service(version="1.0.0")
class Greeter(greeter_pb2_grpc.GreeterServicer):
    def SayHello(self, request: Any, context: Any) -> Any:
        return greeter_pb2.HelloReply(message=f"Hello, {request.name}!")


@pytest.fixture
def provider() -> Iterator[str]:
    app = dubbo_py.Application("greeter", "tri://127.0.0.1:1")
    server = app.start(Greeter(), port=0)
    yield server.address
    app.close()


def qos(app: dubbo_py.Application, path: str) -> Any:
    assert app.qos is not None
    status, body = get(app.qos.port, path)
    assert status == 200, body
    return json.loads(body)


def test_a_retry_is_recorded_after_the_balancers_first_pick(provider: str) -> None:
    dead = f"127.0.0.1:{free_port()}"
    app = dubbo_py.Application("shop", f"tri://{dead},{provider}", qos_port=0)
    try:
        stub: Any = app.reference(
            greeter_pb2_grpc.GreeterStub, version="1.0.0", loadbalance="roundrobin", retries=1
        )
        assert qos(app, "/enableRouterSnapshot?service=demo.Greeter")["services"] == [KEY]
        for _ in range(2):
            stub.SayHello(greeter_pb2.HelloRequest(name="ada"), timeout=5)
        calls = qos(app, "/getRecentRouterSnapshot?service=demo.Greeter")["calls"]
        assert len(calls) == 2
        attempts = [c["attempts"] for c in calls]
        # Round robin sends one of the two calls to the dead provider first.
        assert [
            {"provider": dead, "retry": False, "outcome": "UNAVAILABLE"},
            {"provider": provider, "retry": True, "outcome": "OK"},
        ] in attempts
        assert all(c["routers"] and c["no_provider"] is None for c in calls)
    finally:
        app.close()


def test_switching_off_restores_the_plain_path(provider: str) -> None:
    app = dubbo_py.Application("shop", f"tri://{provider}", qos_port=0)
    try:
        ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0")
        ref.stub.SayHello(greeter_pb2.HelloRequest(name="a"))
        context = ref.contexts["SayHello"]
        plain_call, plain_routes = context.call, context.routes
        assert plain_routes is ref.directory and isinstance(plain_call, PlainCall)

        qos(app, "/enableRouterSnapshot?service=demo.Greeter:1.0.0")
        assert context.routes is not ref.directory and context.call is not plain_call
        assert qos(app, "/ls")["consumed"][0]["router_snapshot"] is True
        ref.stub.SayHello(greeter_pb2.HelloRequest(name="b"))

        assert qos(app, "/disableRouterSnapshot?service=demo.Greeter.*")["services"] == [KEY]
        # The provider call is plain again (a call plan may bypass it), as it was.
        assert context.routes is ref.directory and type(context.call) is type(plain_call)
        assert isinstance(context.call, PlainCall) and context.call.plain
        ref.stub.SayHello(greeter_pb2.HelloRequest(name="c"))
        recorded = qos(app, "/getRecentRouterSnapshot")["calls"]
        assert [c["arguments"][0] for c in recorded] == ["'b'"]
        assert qos(app, "/getEnabledRouterSnapshot")["services"] == []
    finally:
        app.close()


def test_a_bad_pattern_is_refused_naming_it(provider: str) -> None:
    app = dubbo_py.Application("shop", f"tri://{provider}", qos_port=0)
    try:
        app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
        assert app.qos is not None
        status, body = get(app.qos.port, "/enableRouterSnapshot?service=demo.(")
        assert status == 400 and "service: not a regular expression" in body
        assert qos(app, "/getEnabledRouterSnapshot")["services"] == []
    finally:
        app.close()


def test_the_asyncio_flavour_records_its_calls(provider: str) -> None:
    async def run() -> list[Any]:
        app = dubbo_py.Application("shop", f"tri://{provider}", qos_port=0)
        try:
            stub: Any = await app.reference_async(greeter_pb2_grpc.GreeterStub, version="1.0.0")
            await asyncio.to_thread(qos, app, "/enableRouterSnapshot?service=demo.Greeter")
            await asyncio.gather(
                *(stub.SayHello(greeter_pb2.HelloRequest(name=str(i))) for i in range(3))
            )
            answer = await asyncio.to_thread(qos, app, "/getRecentRouterSnapshot")
            return list(answer["calls"])
        finally:
            await app.aclose()

    calls = asyncio.run(run())
    assert sorted(c["arguments"][0] for c in calls) == ["'0'", "'1'", "'2'"]
    assert all(
        c["attempts"] == [{"provider": provider, "retry": False, "outcome": "OK"}] for c in calls
    )


def test_unavailable_without_snapshots_still_fails_as_before(provider: str) -> None:
    dead = f"127.0.0.1:{free_port()}"
    app = dubbo_py.Application("shop", f"tri://{dead}", qos_port=0)
    try:
        stub: Any = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0", retries=0)
        qos(app, "/enableRouterSnapshot?service=demo.Greeter")
        with pytest.raises(grpc.RpcError):
            stub.SayHello(greeter_pb2.HelloRequest(name="x"), timeout=5)
        (call,) = qos(app, "/getRecentRouterSnapshot")["calls"]
        assert call["attempts"] == [{"provider": dead, "retry": False, "outcome": "UNAVAILABLE"}]
    finally:
        app.close()


def test_a_reference_built_after_enabling_its_service_is_recorded(provider: str) -> None:
    app = dubbo_py.Application("shop", f"tri://{provider}", qos_port=0)
    try:
        first: Any = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
        qos(app, "/enableRouterSnapshot?service=demo.Greeter")
        later: Any = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
        first.SayHello(greeter_pb2.HelloRequest(name="first"))
        later.SayHello(greeter_pb2.HelloRequest(name="later"))
        recorded = qos(app, "/getRecentRouterSnapshot")["calls"]
        assert sorted(c["arguments"][0] for c in recorded) == ["'first'", "'later'"]
    finally:
        app.close()
