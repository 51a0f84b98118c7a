"""The gRPC health probe against real servers on 127.0.0.1."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from dubbo_py.cluster.health_probe import grpc_health_probe
from dubbo_py.cluster.quarantine import Quarantine
from dubbo_py.url import URL


def url_for(port: int) -> URL:
    return URL.parse(f"tri://127.0.0.1:{port}/demo.Greeter")


@pytest.fixture
def health_server() -> Iterator[tuple[URL, health.HealthServicer]]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield url_for(port), servicer
    finally:
        server.stop(None)


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_serving_server_is_alive(health_server: tuple[URL, health.HealthServicer]) -> None:
    url, servicer = health_server
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    assert grpc_health_probe(url, timeout=5)


def test_not_serving_server_is_dead(health_server: tuple[URL, health.HealthServicer]) -> None:
    url, servicer = health_server
    servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    assert not grpc_health_probe(url, timeout=5)


def test_closed_port_is_dead() -> None:
    assert not grpc_health_probe(url_for(closed_port()), timeout=0.5)


def test_server_without_health_service_counts_as_up() -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        assert grpc_health_probe(url_for(port), timeout=5)
    finally:
        server.stop(None)


def test_unusable_address_is_dead_not_an_error() -> None:
    assert not grpc_health_probe(URL.parse("tri://[not-an-address/x"), timeout=0.2)


def test_quarantine_revives_with_the_health_probe(
    health_server: tuple[URL, health.HealthServicer],
) -> None:
    live, servicer = health_server
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    dead = url_for(closed_port())
    quarantine = Quarantine(lambda u: grpc_health_probe(u, timeout=2))
    quarantine.add(live, "UNAVAILABLE")
    quarantine.add(dead, "UNAVAILABLE")
    assert quarantine.probe_once() == (live,)
    assert [e.url for e in quarantine.entries()] == [dead]
