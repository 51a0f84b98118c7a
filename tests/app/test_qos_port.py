"""An application's QoS port, in process on the embedded registry: the probes, /metrics for the
provider side, /offline and /online, /ls, where the port listens and how it is turned on, and
server interceptors passed to start()."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc
from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

import dubbo_py
from dubbo_py.app.observability import qos_settings
from dubbo_py.config.loader import parse_config
from dubbo_py.config.model import ConfigError
from dubbo_py.qos.metrics import MetricsCollector
from dubbo_py.registry import layout
from tests.support.waiting import wait_until

GREETER = "demo.Greeter"


@dubbo_py.service(version="1.0.0")
class Greeter(greeter_pb2_grpc.GreeterServicer):
    def SayHello(self, request: Any, context: Any) -> Any:
        if request.name == "fail":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "asked to fail")
        if request.name == "crash":
            raise RuntimeError("boom")
        return greeter_pb2.HelloReply(message=f"Hello, {request.name}!")


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text (0 when absent)."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return 0.0


@pytest.fixture
def registry(tmp_path: Path) -> str:
    return f"sqlite://{tmp_path}/registry.db"


@pytest.fixture
def provider(registry: str) -> Iterator[dubbo_py.Application]:
    app = dubbo_py.Application("greeter", registry, qos_port=0)
    yield app
    app.close()


@pytest.fixture
def consumer(registry: str, tmp_path: Path) -> Iterator[dubbo_py.Application]:
    app = dubbo_py.Application("shop", registry, cache_path=tmp_path / "c.json")
    yield app
    app.close()


def test_provider_metrics_count_calls_by_outcome(
    provider: dubbo_py.Application, consumer: dubbo_py.Application
) -> None:
    assert provider.qos is not None
    provider.start(Greeter(), port=0)
    stub = consumer.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0", retries=0)
    for _ in range(7):
        stub.SayHello(greeter_pb2.HelloRequest(name="ada"))
    for name in ("fail", "crash"):
        with pytest.raises(grpc.RpcError):
            stub.SayHello(greeter_pb2.HelloRequest(name=name))
    status, text = get(provider.qos.port, "/metrics")
    assert status == 200
    labels = {"interface": GREETER, "method": "SayHello", "version": "1.0.0", "group": ""}
    labels["application_name"] = "greeter"
    assert sample(text, "dubbo_provider_requests_total", **labels) == 9
    assert sample(text, "dubbo_provider_requests_succeed_total", **labels) == 7
    assert sample(text, "dubbo_provider_requests_business_failed_total", **labels) == 1
    assert sample(text, "dubbo_provider_requests_unknown_failed_total", **labels) == 1
    assert sample(text, "dubbo_provider_requests_failed_total", **labels) == 2
    # Health checks are the framework's traffic, not counted.
    assert "grpc.health" not in text


def test_probes_answer_like_dubbo(provider: dubbo_py.Application) -> None:
    assert provider.qos is not None
    port = provider.qos.port
    assert get(port, "/live") == (200, "true")
    assert get(port, "/startup") == (503, "false")
    assert get(port, "/ready") == (503, "false")
    provider.start(Greeter(), port=0)
    assert get(port, "/startup") == (200, "true")
    assert get(port, "/ready") == (200, "true")
    status, body = get(port, "/nothing")
    assert status == 404 and "/metrics" in body


def test_offline_unregisters_but_keeps_serving_and_online_registers_again(
    provider: dubbo_py.Application, consumer: dubbo_py.Application
) -> None:
    assert provider.qos is not None and provider.registry is not None
    port = provider.qos.port
    server = provider.start(Greeter(), port=0)
    registered = provider.registry.lookup(GREETER, layout.PROVIDERS)
    assert [u.address for u in registered] == [server.address]
    assert registered[0].get_str("qos.port") == str(port)

    status, body = get(port, "/offline")
    assert status == 200 and json.loads(body) == {"services": ["demo.Greeter:1.0.0"]}
    assert provider.registry.lookup(GREETER, layout.PROVIDERS) == []
    assert get(port, "/ready") == (503, "false")
    # Still serving: a direct call reaches it.
    with grpc.insecure_channel(server.address) as channel:
        reply = greeter_pb2_grpc.GreeterStub(channel).SayHello(
            greeter_pb2.HelloRequest(name="direct"), timeout=5
        )
    assert reply.message == "Hello, direct!"

    status, body = get(port, "/online")
    assert status == 200 and json.loads(body) == {"services": ["demo.Greeter:1.0.0"]}
    assert [u.address for u in provider.registry.lookup(GREETER, layout.PROVIDERS)] == [
        server.address
    ]
    assert get(port, "/ready") == (200, "true")
    stub = consumer.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
    assert stub.SayHello(greeter_pb2.HelloRequest(name="ada")).message == "Hello, ada!"


def test_offline_takes_a_service_pattern(provider: dubbo_py.Application) -> None:
    assert provider.qos is not None and provider.registry is not None
    provider.start(Greeter(), port=0)
    assert json.loads(get(provider.qos.port, "/offline?service=other.*")[1]) == {"services": []}
    assert len(provider.registry.lookup(GREETER, layout.PROVIDERS)) == 1
    status, body = get(provider.qos.port, "/offline?service=(")
    assert status == 400 and "regular expression" in body


def test_ls_lists_provided_and_consumed_services(
    provider: dubbo_py.Application, registry: str, tmp_path: Path
) -> None:
    assert provider.qos is not None
    server = provider.start(Greeter(), port=0)
    with dubbo_py.Application(
        "shop", registry, cache_path=tmp_path / "c2.json", qos_port=0
    ) as shop:
        assert shop.qos is not None
        stub = shop.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
        stub.SayHello(greeter_pb2.HelloRequest(name="ada"))
        listing = json.loads(get(shop.qos.port, "/ls")[1])
        assert listing["application"] == "shop"
        [consumed] = listing["consumed"]
        assert consumed["service"] == "demo.Greeter:1.0.0"
        assert [p["address"] for p in consumed["providers"]] == [server.address]
        assert consumed["providers"][0]["qos_port"] == str(provider.qos.port)
        assert consumed["quarantined"] == []
        assert shop.references[0].consumer.get_str("qos.port") == str(shop.qos.port)
    provided = json.loads(get(provider.qos.port, "/ls")[1])["provided"]
    assert provided == [
        {
            "address": server.address,
            "group": "",
            "interface": GREETER,
            "registered": True,
            "service": "demo.Greeter:1.0.0",
            "version": "1.0.0",
        }
    ]


def test_qos_listens_on_loopback_unless_foreign_ips_are_accepted(registry: str) -> None:
    with dubbo_py.Application("a", registry, qos_port=0) as app:
        assert app.qos is not None
        assert app.qos.server.host == "127.0.0.1"
    with dubbo_py.Application("b", registry, qos_port=0, qos_accept_foreign_ip=True) as app:
        assert app.qos is not None
        assert app.qos.server.host == "0.0.0.0"


def test_qos_is_off_unless_set_and_the_port_comes_from_file_or_environment(
    registry: str,
) -> None:
    with dubbo_py.Application("a", registry) as app:
        assert app.qos is None and app.metrics is None
    assert qos_settings(None, None, None, {"DUBBO_PY_QOS_PORT": "22222"}).port == 22222
    assert qos_settings(7, None, None, {"DUBBO_PY_QOS_PORT": "22222"}).port == 7
    with pytest.raises(ValueError, match="DUBBO_PY_QOS_PORT"):
        qos_settings(None, None, None, {"DUBBO_PY_QOS_PORT": "http"})
    config = parse_config("application: a\nqos: {port: 0, accept_foreign_ip: true}\n")
    assert config.qos.port == 0 and config.qos.accept_foreign_ip
    with pytest.raises(ConfigError, match=r"qos\.port"):
        parse_config("application: a\nqos: {port: 70000}\n")
    with pytest.raises(ConfigError, match=r"qos\.accept_foreign_ip"):
        parse_config("application: a\nqos: {accept_foreign_ip: 'yes'}\n")


def test_a_taken_qos_port_is_a_clear_error(registry: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            dubbo_py.Application("a", registry, qos_port=taken.getsockname()[1])


class Recording(grpc.ServerInterceptor):
    def __init__(self) -> None:
        self.methods: list[str] = []

    def intercept_service(self, continuation: Callable[..., Any], details: Any) -> Any:
        self.methods.append(details.method)
        return continuation(details)


def test_server_interceptors_run_around_calls(
    provider: dubbo_py.Application, consumer: dubbo_py.Application
) -> None:
    seen = Recording()
    provider.start(Greeter(), port=0, interceptors=[seen])
    stub = consumer.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
    stub.SayHello(greeter_pb2.HelloRequest(name="ada"))
    assert "/demo.Greeter/SayHello" in seen.methods


@dubbo_py.service(version="1.0.0")
class AsyncGreeter(greeter_pb2_grpc.GreeterServicer):
    async def SayHello(self, request: Any, context: Any) -> Any:  # type: ignore[override]
        return greeter_pb2.HelloReply(message=f"Hello, {request.name}!")


class AsyncRecording(grpc.aio.ServerInterceptor):
    def __init__(self) -> None:
        self.methods: list[str] = []

    async def intercept_service(self, continuation: Callable[..., Any], details: Any) -> Any:
        self.methods.append(details.method)
        return await continuation(details)


def test_asyncio_server_counts_calls_and_runs_interceptors(registry: str) -> None:
    seen = AsyncRecording()

    async def scenario() -> float:
        app = dubbo_py.Application("agreeter", registry, qos_port=0)
        try:
            server = await app.start_async(AsyncGreeter(), port=0, interceptors=[seen])
            async with grpc.aio.insecure_channel(server.address) as channel:
                stub = greeter_pb2_grpc.GreeterStub(channel)
                for _ in range(3):
                    await stub.SayHello(greeter_pb2.HelloRequest(name="x"), timeout=5)
            assert app.qos is not None
            _, text = await asyncio.to_thread(get, app.qos.port, "/metrics")
            await server.stop(0.1)
            return sample(text, "dubbo_provider_requests_succeed_total", method="SayHello")
        finally:
            await asyncio.to_thread(app.close)

    assert asyncio.run(scenario()) == 3
    assert seen.methods.count("/demo.Greeter/SayHello") == 3


def test_asyncio_server_without_interceptors_counts_calls(registry: str) -> None:
    async def scenario() -> str:
        app = dubbo_py.Application("agreeter", registry, metrics=True)
        try:
            server = await app.start_async(AsyncGreeter(), port=0)
            async with grpc.aio.insecure_channel(server.address) as channel:
                stub = greeter_pb2_grpc.GreeterStub(channel)
                for _ in range(4):
                    await stub.SayHello(greeter_pb2.HelloRequest(name="x"), timeout=5)
            await server.stop(0.1)
            scrape = CollectorRegistry()
            assert app.metrics is not None
            scrape.register(MetricsCollector(app.metrics))
            return generate_latest(scrape).decode()
        finally:
            await asyncio.to_thread(app.close)

    text = asyncio.run(scenario())
    labels = {"interface": GREETER, "method": "SayHello", "version": "1.0.0", "group": ""}
    assert sample(text, "dubbo_provider_requests_succeed_total", **labels) == 4
    # A method never called has no series, as before any call of it.
    assert 'method="SayHelloStream"' not in text


@dubbo_py.service(version="1.0.0", executes=1)
class SlowGreeter(greeter_pb2_grpc.GreeterServicer):
    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def SayHello(self, request: Any, context: Any) -> Any:
        self.entered.set()
        self.release.wait(10)
        return greeter_pb2.HelloReply(message="hi")


def test_provider_metrics_count_calls_an_overload_limit_shed(
    provider: dubbo_py.Application,
) -> None:
    assert provider.qos is not None
    greeter = SlowGreeter()
    server = provider.start(greeter, port=0)
    with grpc.insecure_channel(server.address) as channel, ThreadPoolExecutor(1) as pool:
        stub = greeter_pb2_grpc.GreeterStub(channel)
        held = pool.submit(stub.SayHello, greeter_pb2.HelloRequest(name="a"), timeout=10)
        assert greeter.entered.wait(10)
        with pytest.raises(grpc.RpcError) as shed:
            stub.SayHello(greeter_pb2.HelloRequest(name="b"), timeout=10)
        assert shed.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        greeter.release.set()
        held.result(10)
    _, text = get(provider.qos.port, "/metrics")
    assert sample(text, "dubbo_provider_requests_total", method="SayHello") == 2
    assert sample(text, "dubbo_provider_requests_limit_total", method="SayHello") == 1


def test_provider_start_logs_the_qos_address(
    registry: str, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level("INFO", logger="dubbo_py"),
        dubbo_py.Application("greeter", registry, qos_port=0) as app,
    ):
        app.start(Greeter(), port=0)
        assert app.qos is not None
        wait_until(lambda: any("QoS on" in r.getMessage() for r in caplog.records), 5, "log")
        [line] = [r.getMessage() for r in caplog.records if "serving" in r.getMessage()]
        assert f"QoS on 127.0.0.1:{app.qos.port}" in line


# ------------------------------------------------------------------------ the consumer side


class ClientRecording(grpc.UnaryUnaryClientInterceptor):
    def __init__(self) -> None:
        self.methods: list[str] = []

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        self.methods.append(details.method)
        return continuation(details, request)


def test_consumer_metrics_and_governance_counters(
    provider: dubbo_py.Application, registry: str, tmp_path: Path
) -> None:
    provider.start(Greeter(), port=0)
    with dubbo_py.Application("shop", registry, cache_path=tmp_path / "c", qos_port=0) as shop:
        seen = ClientRecording()
        stub = shop.reference(
            greeter_pb2_grpc.GreeterStub, version="1.0.0", retries=0, interceptors=[seen]
        )
        for _ in range(5):
            stub.SayHello(greeter_pb2.HelloRequest(name="ada"))
        with pytest.raises(grpc.RpcError):
            stub.SayHello(greeter_pb2.HelloRequest(name="fail"))
        assert shop.qos is not None
        _, text = get(shop.qos.port, "/metrics")
        labels = {"application_name": "shop", "interface": GREETER, "method": "SayHello"}
        assert sample(text, "dubbo_consumer_requests_total", version="1.0.0", **labels) == 6
        assert sample(text, "dubbo_consumer_requests_succeed_total", **labels) == 5
        assert sample(text, "dubbo_consumer_requests_business_failed_total", **labels) == 1
        assert sample(text, "dubbo_py_consumer_attempts_total", **labels) == 6
        assert sample(text, "dubbo_py_consumer_retries_total", **labels) == 0
        assert sample(text, "dubbo_py_consumer_providers", interface=GREETER) == 1
        assert sample(text, "dubbo_py_consumer_route_survivors", **labels) == 1
        assert sample(text, "dubbo_py_registry_connected") == 1
        # The client interceptor ran around every attempt.
        assert seen.methods == ["/demo.Greeter/SayHello"] * 6


def test_metrics_on_without_a_qos_port(provider: dubbo_py.Application, registry: str) -> None:
    provider.start(Greeter(), port=0)
    with dubbo_py.Application("shop", registry, metrics=True) as shop:
        assert shop.qos is None and shop.metrics is not None
        stub = shop.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
        stub.SayHello(greeter_pb2.HelloRequest(name="ada"))
        [stats] = [s for s in shop.metrics.methods() if s.key.side == "consumer"]
        assert stats.snapshot()["succeed"] == 1


class AsyncClientRecording(grpc.aio.UnaryUnaryClientInterceptor):
    def __init__(self) -> None:
        self.methods: list[str] = []

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        method = details.method  # grpc.aio hands it over as bytes
        self.methods.append(method.decode() if isinstance(method, bytes) else method)
        return await continuation(details, request)


def test_asyncio_reference_counts_calls_and_runs_interceptors(
    provider: dubbo_py.Application, registry: str
) -> None:
    provider.start(Greeter(), port=0)
    seen = AsyncClientRecording()

    async def scenario() -> float:
        app = dubbo_py.Application("ashop", registry, qos_port=0)
        try:
            stub = await app.reference_async(
                greeter_pb2_grpc.GreeterStub, version="1.0.0", interceptors=[seen]
            )
            for _ in range(3):
                await stub.SayHello(greeter_pb2.HelloRequest(name="x"))
            assert app.qos is not None
            _, text = await asyncio.to_thread(get, app.qos.port, "/metrics")
            return sample(text, "dubbo_consumer_requests_succeed_total", method="SayHello")
        finally:
            await app.aclose()

    assert asyncio.run(scenario()) == 3
    assert seen.methods == ["/demo.Greeter/SayHello"] * 3
