"""The Triple wire as Dubbo 3.3 speaks it, end to end on a real ZooKeeper.

* Two versions of one service on one server (a real provider process, blocking or asyncio),
  each reached by the consumers asking for it.
* Attachments with upper-case keys (Dubbo's ``traceId``) and ``bytes`` values go to the provider
  and the provider's own come back to ``with_call``, in both consumer flavours.
* A plain gRPC server that records the request metadata sees the three ``tri-`` headers and
  Dubbo's ``tri-header-convert``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.url import URL
from tests.e2e.conftest import wait_until
from tests.support.processes import start_ready

pytestmark = [pytest.mark.e2e, pytest.mark.zookeeper]

ROOT = Path(__file__).resolve().parents[2]
VERSIONED = ROOT / "tests" / "support" / "versioned_provider.py"


@pytest.fixture
def zk_registry(zookeeper: Any) -> str:
    """A fresh chroot on the session's real ZooKeeper."""
    return f"zookeeper://{zookeeper.address}/triple-{uuid.uuid4().hex[:8]}"


@pytest.fixture(params=["blocking", "asyncio"])
def versioned(request: pytest.FixtureRequest, zk_registry: str) -> Iterator[str]:
    """A provider process serving V1 (1.0.0) and V2 (2.0.0) of demo.Greeter on one server;
    yields the registry address."""
    flags = ["--aio"] if request.param == "asyncio" else []
    proc, _address = start_ready(
        [sys.executable, str(VERSIONED), "--registry", zk_registry, *flags]
    )
    try:
        yield zk_registry
    finally:
        proc.kill()
        proc.wait(10)


def hello(name: str = "ada") -> Any:
    return greeter_pb2.HelloRequest(name=name)


def test_two_versions_on_one_server_each_reach_their_own_servicer(
    versioned: str, tmp_path: Path
) -> None:
    with dubbo_py.Application("shop", versioned, cache_path=tmp_path / "c.json") as app:
        v1 = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0", check=10)
        v2 = app.reference(greeter_pb2_grpc.GreeterStub, version="2.0.0", check=10)
        for _ in range(10):
            assert v1.SayHello(hello()).message.startswith("V1 ")
            assert v2.SayHello(hello()).message.startswith("V2 ")


def test_a_consumer_of_every_version_reaches_each_under_its_own_headers(
    versioned: str, tmp_path: Path
) -> None:
    # Both provider URLs share one address: each call must carry the version of the URL it
    # was balanced to, or every call would reach the servicer first cached.
    with dubbo_py.Application("shop", versioned, cache_path=tmp_path / "c.json") as app:
        ref = app.reference_handle(
            greeter_pb2_grpc.GreeterStub, version="*", loadbalance="roundrobin", check=10
        )
        wait_until(lambda: len(ref.directory.providers) == 2, 10, "both versions listed")
        reached = [ref.stub.SayHello(hello()).message[:2] for _ in range(10)]
    assert sorted(reached) == ["V1"] * 5 + ["V2"] * 5


def test_two_versions_reach_their_own_servicer_from_asyncio(versioned: str, tmp_path: Path) -> None:
    async def run() -> list[str]:
        app = dubbo_py.Application("shop", versioned, cache_path=tmp_path / "c.json")
        try:
            v1 = await app.reference_async(greeter_pb2_grpc.GreeterStub, version="1.0.0", check=10)
            v2 = await app.reference_async(greeter_pb2_grpc.GreeterStub, version="2.0.0", check=10)
            replies = []
            for _ in range(5):
                replies.append((await v1.SayHello(hello())).message[:2])
                replies.append((await v2.SayHello(hello())).message[:2])
            return replies
        finally:
            await app.aclose()

    assert asyncio.run(run()) == ["V1", "V2"] * 5


def test_an_upper_case_attachment_key_round_trips(versioned: str, tmp_path: Path) -> None:
    with dubbo_py.Application("shop", versioned, cache_path=tmp_path / "c.json") as app:
        greeter = app.reference(
            greeter_pb2_grpc.GreeterStub,
            version="2.0.0",
            check=10,
            attachments={"traceId": "t-42"},
        )
        reply, call = greeter.SayHello.with_call(
            hello(), metadata=[("tenantId", "acme"), ("token", b"\x00\xff")]
        )
        # Plain calls, with the reference's attachment alone, work too (no INTERNAL error).
        assert greeter.SayHello(hello()).message.startswith("V2 ")
    seen = reply.message.split()[-1].split(",")
    assert {"traceId", "tenantId", "token-bin"} <= set(seen)
    assert "tri-header-convert" not in seen  # undone before the servicer looks
    trailing = dict(call.trailing_metadata())
    assert trailing["traceId"] == "t-42"
    assert trailing["spanId"] == "V2-span"
    assert trailing["token-bin"] == b"\x00\xff"
    assert call.code() == grpc.StatusCode.OK


def test_an_upper_case_attachment_key_round_trips_in_asyncio(
    versioned: str, tmp_path: Path
) -> None:
    async def run() -> tuple[Any, Any]:
        app = dubbo_py.Application("shop", versioned, cache_path=tmp_path / "c.json")
        try:
            greeter = await app.reference_async(
                greeter_pb2_grpc.GreeterStub, version="1.0.0", check=10
            )
            plain = await greeter.SayHello(hello(), metadata=[("traceId", "t-7")])
            assert plain.message.startswith("V1 ")
            return await greeter.SayHello.with_call(hello(), metadata=[("traceId", "t-7")])
        finally:
            await app.aclose()

    reply, call = asyncio.run(run())
    assert "traceId" in reply.message.split()[-1].split(",")
    trailing = dict(call.trailing_metadata())
    assert trailing["traceId"] == "t-7"
    assert trailing["spanId"] == "V1-span"


class _Recorder(greeter_pb2_grpc.GreeterServicer):
    """A plain gRPC servicer (no dubbo-py) that records each call's request metadata."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def SayHello(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.seen.append(dict(context.invocation_metadata()))
        return greeter_pb2.HelloReply(message="recorded")


@pytest.fixture
def recorder(zk_registry: str) -> Iterator[tuple[_Recorder, str]]:
    """A recording gRPC server registered (by hand) as demo.Greeter 1.0.0 in group blue."""
    recording = _Recorder()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    greeter_pb2_grpc.add_GreeterServicer_to_server(recording, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    url = URL(
        "tri",
        "127.0.0.1",
        port,
        "demo.Greeter",
        parameters={
            "interface": "demo.Greeter",
            "version": "1.0.0",
            "group": "blue",
            "side": "provider",
            "methods": "SayHello,SayHelloStream",
        },
    )
    registrar = dubbo_py.Application("recorder", zk_registry)
    assert registrar.registry is not None
    registrar.registry.register(url)
    try:
        yield recording, zk_registry
    finally:
        registrar.close()
        server.stop(None)


def _check_headers(seen: dict[str, Any]) -> None:
    assert seen["tri-service-version"] == "1.0.0"
    assert seen["tri-service-group"] == "blue"
    assert seen["tri-consumer-appname"] == "shop"
    assert seen["traceid"] == "t-1"
    assert json.loads(seen["tri-header-convert"]) == {"traceid": "traceId"}


def test_a_recording_server_sees_the_three_tri_headers(
    recorder: tuple[_Recorder, str], tmp_path: Path
) -> None:
    recording, registry = recorder
    with dubbo_py.Application("shop", registry, cache_path=tmp_path / "c.json") as app:
        greeter = app.reference(
            greeter_pb2_grpc.GreeterStub, version="1.0.0", group="blue", check=10
        )
        greeter.SayHello(hello())  # a plain call (a compiled call plan) carries them too
        greeter.SayHello(hello())
        greeter.SayHello(hello(), metadata=[("traceId", "t-1")])
    assert len(recording.seen) == 3
    for seen in recording.seen:
        assert seen["tri-service-version"] == "1.0.0"
        assert seen["tri-service-group"] == "blue"
        assert seen["tri-consumer-appname"] == "shop"
    _check_headers(recording.seen[-1])


def test_a_recording_server_sees_the_three_tri_headers_from_asyncio(
    recorder: tuple[_Recorder, str], tmp_path: Path
) -> None:
    recording, registry = recorder

    async def run() -> None:
        app = dubbo_py.Application("shop", registry, cache_path=tmp_path / "c.json")
        try:
            greeter = await app.reference_async(
                greeter_pb2_grpc.GreeterStub,
                version="1.0.0",
                group="blue",
                check=10,
                attachments={"traceId": "t-1"},
            )
            await greeter.SayHello(hello())
        finally:
            await app.aclose()

    asyncio.run(run())
    (seen,) = recording.seen
    _check_headers(seen)
