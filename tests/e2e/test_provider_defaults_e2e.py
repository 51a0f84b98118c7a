"""A provider's registered ``timeout`` and ``retries`` govern consumers that set none."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from tests.e2e.conftest import wait_until


def _slow(timeout_ms: int) -> Any:
    @dubbo_py.service(version="1.0.0", timeout=timeout_ms)
    class Slow(greeter_pb2_grpc.GreeterServicer):
        def SayHello(self, request: Any, context: Any) -> Any:
            time.sleep(1.0)
            return greeter_pb2.HelloReply(message="late")

    return Slow()


def _unavailable(retries: int | None, calls: list[str]) -> Any:
    extra = {} if retries is None else {"retries": retries}
    lock = threading.Lock()

    @dubbo_py.service(version="2.0.0", **extra)
    class Down(greeter_pb2_grpc.GreeterServicer):
        def SayHello(self, request: Any, context: Any) -> Any:
            with lock:
                calls.append(request.name)
            context.abort(grpc.StatusCode.UNAVAILABLE, "down for maintenance")

    return Down()


def test_the_providers_timeout_applies_unless_the_consumer_sets_one(
    registry_address: str, tmp_path: Path
) -> None:
    with dubbo_py.Application("greeter", registry_address) as provider:
        provider.start(_slow(200))
        with dubbo_py.Application("shop", registry_address, cache_path=tmp_path / "c") as app:
            bare = app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0")
            wait_until(lambda: len(bare.directory.providers) == 1, 10, "the provider")
            with pytest.raises(grpc.RpcError) as raised:
                bare.stub.SayHello(greeter_pb2.HelloRequest(name="a"))
            assert raised.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            patient = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0", timeout=5.0)
            assert patient.SayHello(greeter_pb2.HelloRequest(name="b")).message == "late"


@pytest.mark.parametrize(("provider_retries", "attempts"), [(0, 1), (None, 3)])
def test_the_providers_retries_apply_unless_the_consumer_sets_them(
    registry_address: str, tmp_path: Path, provider_retries: int | None, attempts: int
) -> None:
    calls: list[str] = []
    with dubbo_py.Application("greeter", registry_address) as provider:
        for _ in range(3):
            provider.start(_unavailable(provider_retries, calls))
        with dubbo_py.Application("shop", registry_address, cache_path=tmp_path / "c") as app:
            ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version="2.0.0")
            wait_until(lambda: len(ref.directory.providers) == 3, 10, "three providers")
            with pytest.raises(grpc.RpcError):
                ref.stub.SayHello(greeter_pb2.HelloRequest(name="first"))
            assert calls.count("first") == attempts
            # A consumer's own retries win over the provider's.
            own = app.reference(greeter_pb2_grpc.GreeterStub, version="2.0.0", retries=1)
            with pytest.raises(grpc.RpcError):
                own.SayHello(greeter_pb2.HelloRequest(name="second"))
            assert calls.count("second") == 2
