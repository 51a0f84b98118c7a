"""Live interop with Apache Dubbo 3.3.6 on the same real Nacos server (issue 44 item 4).

One demo.Greeter service (version 1.0.0, a group of this module's own) has two providers: a
dubbo-py one (``p1``, in this process) and a Java one (``j1``, tests/peers/java/estate). A Java
consumer and a dubbo-py consumer both reference it. Java uses Dubbo's own Nacos registry
(dubbo-registry-nacos on nacos-client 2.5.1) with register-mode ``interface`` and the consumer
migration step ``FORCE_INTERFACE``; dubbo-py uses ``nacos://...?register-mode=interface``.
Interface level only here; the application level with Java on Nacos is
tests/estate/test_nacos_java_app.py.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.errors import NoNodeError, NoProviderError
from tests.support.java_estate import JavaConsumer, JavaProvider
from tests.support.nacos import NacosServer
from tests.support.processes import dubbo_py_cli

pytestmark = pytest.mark.nacos

VERSION = "1.0.0"


@pytest.fixture(scope="module")
def java_registry(nacos: NacosServer) -> str:
    """What the Java peers are given: Dubbo's plain Nacos address (registry, and config
    center through Dubbo's use of the registry as one)."""
    return f"nacos://{nacos.address}"


@pytest.fixture(scope="module")
def py_registry(nacos: NacosServer) -> str:
    """dubbo-py's address of the same server (interface-level registration only)."""
    return f"nacos://{nacos.address}?register-mode=interface"


def make_greeter(group: str) -> Any:
    """A Greeter servicer that names itself ``p1`` as the Java provider names itself ``j1``."""

    @dubbo_py.service(version=VERSION, group=group)
    class Greeter(greeter_pb2_grpc.GreeterServicer):
        address = ""

        def SayHello(self, request: Any, context: Any) -> Any:
            return greeter_pb2.HelloReply(
                message=f"p1: hello {request.name}", provider=self.address
            )

    return Greeter()


@pytest.fixture(scope="module")
def py_provider(
    py_registry: str, estate_group: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    cache = tmp_path_factory.mktemp("nacos-py-provider") / "cache.json"
    with dubbo_py.Application("py-nacos-provider", py_registry, cache_path=cache) as app:
        greeter = make_greeter(estate_group)
        # Loopback only: the Java peer pins Dubbo's local host to 127.0.0.1 (Loopback.java).
        server = app.start(greeter, port=0, bind_host="127.0.0.1")
        greeter.address = server.address
        yield server.address


@pytest.fixture(scope="module")
def java_provider(java_registry: str, estate_group: str) -> Iterator[JavaProvider]:
    with JavaProvider(
        "--registry", java_registry, "--application", "java-nacos-provider", "--name", "j1",
        "--version", VERSION, "--group", estate_group, "--register-mode", "interface",
    ) as provider:  # fmt: skip
        yield provider


@pytest.fixture(scope="module")
def java_consumer(java_registry: str, estate_group: str) -> Iterator[JavaConsumer]:
    with JavaConsumer(
        "--registry", java_registry, "--application", "java-nacos-consumer",
        "--version", VERSION, "--group", estate_group, "--migration", "FORCE_INTERFACE",
    ) as consumer:  # fmt: skip
        yield consumer


@pytest.fixture(scope="module")
def py_consumer(
    py_registry: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dubbo_py.Application]:
    cache = tmp_path_factory.mktemp("nacos-py-consumer") / "cache.json"
    with dubbo_py.Application("py-nacos-consumer", py_registry, cache_path=cache) as app:
        yield app


@pytest.fixture(scope="module")
def py_greeter(py_consumer: dubbo_py.Application, estate_group: str) -> Any:
    return py_consumer.reference(
        greeter_pb2_grpc.GreeterStub, version=VERSION, group=estate_group, timeout=5.0
    )


def until(check: Callable[[], bool], what: str, seconds: float = 15.0) -> None:
    """Wait for ``check()``; fail naming ``what``."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.1)


def java_served(java: JavaConsumer, calls: int = 20) -> Counter[str]:
    """Who answered the Java consumer's calls (``p1`` or ``j1``); failed calls count under
    ``error`` (a provider may not have been pushed to the consumer yet)."""
    result = java.call(calls, name="n")
    served = Counter(result["ok"])
    if result["errors"]:
        served["error"] = sum(result["errors"].values())
    return served


def py_served(greeter: Any, calls: int = 20) -> Counter[str]:
    """Who answered the dubbo-py consumer's calls; failed calls count under ``error``."""
    served: Counter[str] = Counter()
    for _ in range(calls):
        try:
            reply = greeter.SayHello(greeter_pb2.HelloRequest(name="n"))
        except (grpc.RpcError, NoProviderError):
            served["error"] += 1
        else:
            served[reply.message.split(":", 1)[0]] += 1
    return served


def test_a_java_consumer_calls_a_dubbo_py_provider_on_nacos(
    java_consumer: JavaConsumer, py_provider: str, java_provider: JavaProvider
) -> None:
    # The Java consumer starts first (fixtures are set up in this order), so both providers
    # join after it subscribed: it learns of them through Nacos's naming push. Dubbo's
    # NacosRegistry builds a tri:// URL from the metadata of the dubbo-py instance of
    # providers:demo.Greeter:1.0.0:<group>; random balancing reaches both providers.
    until(lambda: set(java_served(java_consumer)) == {"p1", "j1"}, "Java calls both providers")


def test_a_dubbo_py_consumer_calls_a_java_provider_on_nacos(
    py_provider: str, java_provider: JavaProvider, py_greeter: Any
) -> None:
    until(lambda: set(py_served(py_greeter)) == {"p1", "j1"}, "dubbo-py calls both providers")


def keep_p1_rule(group: str, port: str) -> str:
    """A condition rule (Dubbo 3 v3.0 YAML) that keeps every SayHello on the provider at
    ``port``."""
    return (
        "configVersion: v3.0\nscope: service\n"
        f"key: {group}/demo.Greeter:{VERSION}\nenabled: true\nforce: true\n"
        f"conditions:\n  - 'method = SayHello => port = {port}'\n"
    )


@pytest.mark.parametrize(
    "writer",
    [
        "cli",
        "registry",
        "java",
    ],
)
def test_a_condition_rule_steers_java_and_dubbo_py_consumers_alike(
    writer: str,
    py_provider: str,
    java_provider: JavaProvider,
    java_consumer: JavaConsumer,
    py_consumer: dubbo_py.Application,
    py_greeter: Any,
    java_registry: str,
    estate_group: str,
    tmp_path: Path,
) -> None:
    # Java's condition router reads <interface>:<version>:<group>.condition-router in config
    # group dubbo (NacosDynamicConfiguration, a push listener); dubbo-py writes that very data
    # id, with `dubbo-py rules push` or its Registry API, and polls it back; a rule Dubbo
    # itself publishes there steers both the same way.
    until(lambda: set(java_served(java_consumer)) == {"p1", "j1"}, "Java calls both providers")
    until(lambda: set(py_served(py_greeter)) == {"p1", "j1"}, "dubbo-py calls both providers")
    key = f"demo.Greeter:{VERSION}:{estate_group}.condition-router"
    text = keep_p1_rule(estate_group, py_provider.rsplit(":", 1)[1])
    registry = py_consumer.registry
    assert registry is not None
    try:
        if writer == "cli":
            rule = tmp_path / "keep-p1.yaml"
            rule.write_text(text, encoding="utf-8")
            assert key in dubbo_py_cli(java_registry, "rules", "push", str(rule))
        elif writer == "java":
            # Dubbo's own DynamicConfiguration.publishConfig, as a Java tool would write it.
            assert java_consumer.publish(key, "dubbo", text)
        else:
            registry.put_config(key, text)
        until(lambda: set(java_served(java_consumer)) == {"p1"}, "Java obeys the rule")
        until(lambda: set(py_served(py_greeter)) == {"p1"}, "dubbo-py obeys the rule")
        assert set(java_served(java_consumer)) == {"p1"}
        assert set(py_served(py_greeter)) == {"p1"}
        if writer == "cli":
            dubbo_py_cli(java_registry, "rules", "delete", key)
        elif writer == "java":
            assert java_consumer.unpublish(key, "dubbo")
        else:
            registry.delete_config(key)
    finally:
        # A failed step leaves no rule behind for the next test (Nacos reads may lag a write,
        # so an already deleted key can still be seen once: its removal is then a no-op).
        with contextlib.suppress(NoNodeError):
            registry.delete_config(key)
    until(lambda: set(java_served(java_consumer)) == {"p1", "j1"}, "Java sees the rule gone")
    until(lambda: set(py_served(py_greeter)) == {"p1", "j1"}, "dubbo-py sees the rule gone")
