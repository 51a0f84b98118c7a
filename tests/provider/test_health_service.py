"""The provider's ``grpc.health.v1.Health`` service (dubbo_py/provider/health.py): Check and
Watch as the standard service answers them, and no deadlock when health watches start and end
while the provider's status changes (grpcio-health-checking's servicer stopped the whole server
so: every later call timed out)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

import dubbo_py
from dubbo_py.provider.server import ExportedServer, ExportPlan, export

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@dubbo_py.service()
class Greeter(greeter_pb2_grpc.GreeterServicer):
    def SayHello(self, request: Any, context: Any) -> Any:  # type: ignore[override]
        return greeter_pb2.HelloReply(message="hi")


@pytest.fixture
def server() -> Iterator[ExportedServer]:
    exported = export(ExportPlan((Greeter(),), "p"), None)
    yield exported
    exported.stop(0)


@pytest.fixture
def channel(server: ExportedServer) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(server.address) as opened:
        yield opened


def test_check_answers_each_services_status_and_not_found_for_others(
    server: ExportedServer, channel: grpc.Channel
) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    ask = health_pb2.HealthCheckRequest
    assert health.Check(ask(service=""), timeout=5).status == SERVING
    assert health.Check(ask(service="demo.Greeter"), timeout=5).status == SERVING
    server.offline()
    assert health.Check(ask(service="demo.Greeter"), timeout=5).status == NOT_SERVING
    with pytest.raises(grpc.RpcError) as refused:
        health.Check(ask(service="no.Such"), timeout=5)
    assert refused.value.code() is grpc.StatusCode.NOT_FOUND


def test_watch_sends_the_status_then_each_change(
    server: ExportedServer, channel: grpc.Channel
) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    watch = health.Watch(health_pb2.HealthCheckRequest(service="demo.Greeter"), timeout=10)
    unknown = health.Watch(health_pb2.HealthCheckRequest(service="no.Such"), timeout=10)
    try:
        assert next(watch).status == SERVING
        assert next(unknown).status == health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
        server.offline()
        assert next(watch).status == NOT_SERVING
        server.online()
        assert next(watch).status == SERVING
    finally:
        watch.cancel()
        unknown.cancel()


def test_watches_ending_while_the_status_changes_never_stop_the_server(
    server: ExportedServer, channel: grpc.Channel
) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    until = time.monotonic() + 3.0

    def watch_and_cancel() -> None:
        while time.monotonic() < until:
            call = health.Watch(health_pb2.HealthCheckRequest(service="demo.Greeter"))
            with contextlib.suppress(grpc.RpcError):
                next(call)
            call.cancel()

    def flip() -> None:
        serving = False
        while time.monotonic() < until:
            server.online() if serving else server.offline()
            serving = not serving
        server.online()

    workers = [threading.Thread(target=watch_and_cancel, daemon=True) for _ in range(6)]
    workers.append(threading.Thread(target=flip, daemon=True))
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + 20
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
    assert not [w for w in workers if w.is_alive()], "watches or status changes stuck"
    # The server still answers its calls and its health checks.
    greeter = greeter_pb2_grpc.GreeterStub(channel)
    assert greeter.SayHello(greeter_pb2.HelloRequest(name="x"), timeout=5).message == "hi"
    check = health.Check(health_pb2.HealthCheckRequest(service="demo.Greeter"), timeout=5)
    assert check.status == SERVING
