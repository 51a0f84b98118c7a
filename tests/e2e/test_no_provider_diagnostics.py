"""When a call finds no provider, the error says what exists: the registry is unreachable (after
a bounded wait), or the service's providers are registered under other versions or groups."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from tests.e2e.conftest import wait_until
from tests.support.processes import ProviderProcess


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unreachable_zookeeper_says_registry_unreachable_after_a_bounded_wait(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    registry = f"zookeeper://127.0.0.1:{_closed_port()}/nowhere"
    started = time.monotonic()
    with (
        caplog.at_level(logging.WARNING, logger="dubbo_py"),
        dubbo_py.Application(
            "shop", registry, cache_path=tmp_path / "c.json", connect_timeout=1.0
        ) as app,
    ):
        greeter = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0", check=1.0)
        waited = time.monotonic() - started
        with pytest.raises(grpc.RpcError) as caught:
            greeter.SayHello(greeter_pb2.HelloRequest(name="x"), timeout=1.0)
    # Bounded: the connect timeout (1 s) and the check wait (1 s), plus start-up.
    assert waited < 1.0 + 1.0 + 3.0, waited
    assert "registry unreachable" in str(caught.value)
    assert "no provider registered" not in str(caught.value)
    assert "unreachable" in caplog.text and "demo.Greeter" in caplog.text


def test_call_names_the_versions_that_are_registered(
    registry_address: str, providers: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    providers("--version", "2.0.0")
    with dubbo_py.Application("shop", registry_address, cache_path=tmp_path / "c.json") as app:
        ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0", check=5.0)
        wait_until(lambda: "2.0.0" in (ref.directory.chain.empty_reason or ""), 10, "a hint")
        with pytest.raises(grpc.RpcError) as caught:
            ref.stub.SayHello(greeter_pb2.HelloRequest(name="x"), timeout=2.0)
    message = str(caught.value)
    assert "no provider matches version=1.0.0 group=(none)" in message
    assert "registered with version=2.0.0 group=(none)" in message
