"""Live interop with Apache Dubbo 3.3.6 on a Nacos registry *group* (issue 44 item 1).

Java's providers and consumers are given ``nacos://host:port?group=<G>`` (the group in the
address, as ``new RegistryConfig(address)`` takes it), dubbo-py's side
``nacos://host:port?register-mode=interface&group=<G>``. Dubbo 3.3's NacosRegistry registers
and looks up in Nacos group ``<G>``; its rule listeners read config group ``dubbo`` whatever the
registry group. So: Java's instance is in Nacos group ``<G>`` (read through Nacos's HTTP API),
each side calls the other's provider there, and a rule pushed with ``dubbo-py rules push`` on
the grouped address steers the Java consumer and the dubbo-py one alike.

At the application level (issue 44 item 4), on the same grouped addresses without
``register-mode=interface``: a Java provider in register mode ``all`` and a dubbo-py one in its
default ``all`` register their applications as Nacos services of group ``<G>``
(``NacosServiceDiscovery`` reads the registry group too); a Java consumer and a dubbo-py one in
migration step ``APPLICATION_FIRST`` call both, and dubbo-py chooses the application level.
"""

from __future__ import annotations

import contextlib
import json
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from demo import greeter_pb2_grpc

import dubbo_py
from tests.estate.test_nacos_java import (
    VERSION,
    java_served,
    keep_p1_rule,
    make_greeter,
    py_served,
    until,
)
from tests.support.java_estate import JavaConsumer, JavaProvider
from tests.support.nacos import NacosServer
from tests.support.processes import dubbo_py_cli

pytestmark = pytest.mark.nacos


@pytest.fixture(scope="module")
def naming_group() -> str:
    """The registry group of this module (a Nacos group no other test uses)."""
    return f"estate-g-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def java_registry(nacos: NacosServer, naming_group: str) -> str:
    return f"nacos://{nacos.address}?group={naming_group}"


@pytest.fixture(scope="module")
def py_registry(nacos: NacosServer, naming_group: str) -> str:
    return f"nacos://{nacos.address}?register-mode=interface&group={naming_group}"


@pytest.fixture(scope="module")
def py_provider(
    py_registry: str, estate_group: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    cache = tmp_path_factory.mktemp("nacos-group-py-provider") / "cache.json"
    with dubbo_py.Application("py-nacos-g-provider", py_registry, cache_path=cache) as app:
        greeter = make_greeter(estate_group)
        server = app.start(greeter, port=0, bind_host="127.0.0.1")
        greeter.address = server.address
        yield server.address


@pytest.fixture(scope="module")
def java_provider(java_registry: str, estate_group: str) -> Iterator[JavaProvider]:
    with JavaProvider(
        "--registry", java_registry, "--application", "java-nacos-g-provider", "--name", "j1",
        "--version", VERSION, "--group", estate_group, "--register-mode", "interface",
    ) as provider:  # fmt: skip
        yield provider


@pytest.fixture(scope="module")
def java_consumer(java_registry: str, estate_group: str) -> Iterator[JavaConsumer]:
    with JavaConsumer(
        "--registry", java_registry, "--application", "java-nacos-g-consumer",
        "--version", VERSION, "--group", estate_group, "--migration", "FORCE_INTERFACE",
    ) as consumer:  # fmt: skip
        yield consumer


@pytest.fixture(scope="module")
def py_greeter(
    py_registry: str, estate_group: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    cache = tmp_path_factory.mktemp("nacos-group-py-consumer") / "cache.json"
    with dubbo_py.Application("py-nacos-g-consumer", py_registry, cache_path=cache) as app:
        yield app.reference(
            greeter_pb2_grpc.GreeterStub, version=VERSION, group=estate_group, timeout=5.0
        )


def _ports_in_group(nacos: NacosServer, service: str, group: str) -> set[int]:
    """Ports of a service's instances in a Nacos group, from Nacos's own HTTP API."""
    query = urllib.parse.urlencode(
        {"namespaceId": "public", "groupName": group, "serviceName": service}
    )
    url = f"http://{nacos.address}/nacos/v3/client/ns/instance/list?{query}"
    with urllib.request.urlopen(url, timeout=10) as answer:
        return {int(i["port"]) for i in json.loads(answer.read())["data"]}


def test_java_and_dubbo_py_register_in_the_group_and_call_each_other(
    nacos: NacosServer,
    naming_group: str,
    estate_group: str,
    java_consumer: JavaConsumer,
    py_provider: str,
    java_provider: JavaProvider,
    py_greeter: Any,
) -> None:
    service = f"providers:demo.Greeter:{VERSION}:{estate_group}"
    py_port = int(py_provider.rsplit(":", 1)[1])
    until(
        lambda: len(_ports_in_group(nacos, service, naming_group)) == 2,
        "Java's and dubbo-py's providers in the registry's Nacos group",
    )
    assert py_port in _ports_in_group(nacos, service, naming_group)
    assert _ports_in_group(nacos, service, "DEFAULT_GROUP") == set()
    until(lambda: set(java_served(java_consumer)) == {"p1", "j1"}, "Java calls both providers")
    until(lambda: set(py_served(py_greeter)) == {"p1", "j1"}, "dubbo-py calls both providers")


def test_a_rule_pushed_on_the_grouped_address_steers_java_and_dubbo_py(
    py_registry: str,
    estate_group: str,
    py_provider: str,
    java_provider: JavaProvider,
    java_consumer: JavaConsumer,
    py_greeter: Any,
    tmp_path: Path,
) -> None:
    until(lambda: set(java_served(java_consumer)) == {"p1", "j1"}, "Java calls both providers")
    until(lambda: set(py_served(py_greeter)) == {"p1", "j1"}, "dubbo-py calls both providers")
    key = f"demo.Greeter:{VERSION}:{estate_group}.condition-router"
    rule = tmp_path / "keep-p1.yaml"
    rule.write_text(keep_p1_rule(estate_group, py_provider.rsplit(":", 1)[1]), encoding="utf-8")
    try:
        assert key in dubbo_py_cli(py_registry, "rules", "push", str(rule))
        until(lambda: set(java_served(java_consumer)) == {"p1"}, "Java obeys the rule")
        until(lambda: set(py_served(py_greeter)) == {"p1"}, "dubbo-py obeys the rule")
    finally:
        # A failed step leaves no rule behind (the CLI fails when it is already gone).
        with contextlib.suppress(AssertionError):
            dubbo_py_cli(py_registry, "rules", "delete", key)
    until(lambda: set(java_served(java_consumer)) == {"p1", "j1"}, "Java sees the rule gone")
    until(lambda: set(py_served(py_greeter)) == {"p1", "j1"}, "dubbo-py sees the rule gone")


# ---------------------------------------------------------------- application level (item 4)

PY_APP = "py-nacos-g-app-provider"
JAVA_APP = "java-nacos-g-app-provider"


@pytest.fixture(scope="module")
def app_service_group() -> str:
    """The Dubbo service group of the application-level providers (not the interface-level
    ones' above, so each test sees only its own pair)."""
    return f"estate-ga-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def py_app_registry(nacos: NacosServer, naming_group: str) -> str:
    """dubbo-py's grouped address in the default register mode, ``all``."""
    return f"nacos://{nacos.address}?group={naming_group}"


@pytest.fixture(scope="module")
def py_app_provider(
    py_app_registry: str, app_service_group: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    cache = tmp_path_factory.mktemp("nacos-group-py-app-provider") / "cache.json"
    with dubbo_py.Application(PY_APP, py_app_registry, cache_path=cache) as app:
        greeter = make_greeter(app_service_group)
        server = app.start(greeter, port=0, bind_host="127.0.0.1")
        greeter.address = server.address
        yield server.address


@pytest.fixture(scope="module")
def java_app_provider(java_registry: str, app_service_group: str) -> Iterator[JavaProvider]:
    with JavaProvider(
        "--registry", java_registry, "--application", JAVA_APP, "--name", "j1",
        "--version", VERSION, "--group", app_service_group, "--register-mode", "all",
    ) as provider:  # fmt: skip
        yield provider


@pytest.fixture(scope="module")
def java_app_consumer(java_registry: str, app_service_group: str) -> Iterator[JavaConsumer]:
    with JavaConsumer(
        "--registry", java_registry, "--application", "java-nacos-g-app-consumer",
        "--version", VERSION, "--group", app_service_group, "--migration", "APPLICATION_FIRST",
    ) as consumer:  # fmt: skip
        yield consumer


@pytest.fixture(scope="module")
def py_app_consumer(
    py_app_registry: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dubbo_py.Application]:
    cache = tmp_path_factory.mktemp("nacos-group-py-app-consumer") / "cache.json"
    with dubbo_py.Application(
        "py-nacos-g-app-consumer",
        py_app_registry,
        cache_path=cache,
        migration_step="APPLICATION_FIRST",
    ) as app:
        yield app


def test_application_level_in_the_group_java_and_dubbo_py_call_each_other(
    nacos: NacosServer,
    naming_group: str,
    app_service_group: str,
    java_app_consumer: JavaConsumer,
    py_app_provider: str,
    java_app_provider: JavaProvider,
    py_app_consumer: dubbo_py.Application,
) -> None:
    py_port = int(py_app_provider.rsplit(":", 1)[1])
    # Both applications are Nacos services of the registry's group, not of DEFAULT_GROUP.
    until(
        lambda: bool(_ports_in_group(nacos, JAVA_APP, naming_group)),
        "Java's application instance in the registry's Nacos group",
    )
    assert _ports_in_group(nacos, PY_APP, naming_group) == {py_port}
    assert _ports_in_group(nacos, JAVA_APP, "DEFAULT_GROUP") == set()
    assert _ports_in_group(nacos, PY_APP, "DEFAULT_GROUP") == set()
    until(
        lambda: set(java_served(java_app_consumer)) == {"p1", "j1"},
        "the APPLICATION_FIRST Java consumer calls both providers",
        30,
    )
    greeter = py_app_consumer.reference(
        greeter_pb2_grpc.GreeterStub, version=VERSION, group=app_service_group, timeout=5.0
    )
    until(
        lambda: set(py_served(greeter)) == {"p1", "j1"},
        "the APPLICATION_FIRST dubbo-py consumer calls both providers",
        30,
    )
    level = py_app_consumer.application_level
    assert level is not None
    chosen = {c.level for u, c in level.choices() if u.get_str("group") == app_service_group}
    assert chosen == {"application"}, chosen
