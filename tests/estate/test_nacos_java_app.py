"""Live interop with Apache Dubbo 3.3.6 at the application level on the same real Nacos server
(issue 44 items 1 and 4).

One demo.Greeter service (version 1.0.0, a group of this module's own) has three providers:

* ``p1``, dubbo-py in this process, the default register mode ``all`` (both levels; its
  MetadataInfo in the metadata report, storage type ``remote``);
* ``j1``, Java (tests/peers/java/estate), register mode ``instance`` and Dubbo's default
  metadata type ``local`` (its MetadataInfo served only by its ``MetadataServiceV2``);
* ``j2``, Java, register mode ``instance`` and metadata type ``remote`` (its MetadataInfo in
  Nacos, as ``NacosMetadataReport.publishAppMetadata`` writes it: data id ``<app>`` in group
  ``<revision>``).

A Java consumer and a dubbo-py consumer, both in migration step ``FORCE_APPLICATION``, find all
three through the application level alone: the mapping (data id ``demo.Greeter`` in group
``mapping``, which each provider appends its application to), the Nacos naming service
``<app>`` in ``DEFAULT_GROUP``, and each instance's MetadataInfo. The Java providers write no
interface-level service, so a dubbo-py consumer reaching them read Java's application level.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import v2.nacos as nacos_v2
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.registry.application.instance import ServiceInstance
from dubbo_py.registry.store.address import parse_registry_address
from dubbo_py.registry.store.nacos.store import NacosStore
from tests.estate.test_nacos_java import java_served, py_served, until
from tests.support.java_estate import JavaConsumer, JavaProvider
from tests.support.nacos import NacosServer

pytestmark = pytest.mark.nacos

VERSION = "1.0.0"
PY_APP = "py-nacos-app-provider"
JAVA_LOCAL_APP = "java-nacos-app-local"
JAVA_REMOTE_APP = "java-nacos-app-remote"
EVERY_PROVIDER = {"p1", "j1", "j2"}


@pytest.fixture(scope="module")
def address(nacos: NacosServer) -> str:
    """The plain Nacos address both sides are given: to Dubbo it is registry, config center and
    metadata report at once (Dubbo uses a Nacos registry as all three unless told otherwise);
    to dubbo-py it is the store in the default register mode, ``all``."""
    return f"nacos://{nacos.address}"


@pytest.fixture(scope="module")
def py_provider(
    address: str, estate_group: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    cache = tmp_path_factory.mktemp("nacos-app-py-provider") / "cache.json"
    with dubbo_py.Application(PY_APP, address, cache_path=cache) as app:

        @dubbo_py.service(version=VERSION, group=estate_group)
        class Greeter(greeter_pb2_grpc.GreeterServicer):
            address = ""

            def SayHello(self, request: Any, context: Any) -> Any:
                return greeter_pb2.HelloReply(
                    message=f"p1: hello {request.name}", provider=self.address
                )

        greeter = Greeter()
        # Loopback only: the Java peers pin Dubbo's local host to 127.0.0.1 (Loopback.java).
        server = app.start(greeter, port=0, bind_host="127.0.0.1")
        greeter.address = server.address
        yield server.address


def java_provider(address: str, group: str, app: str, name: str, *extra: str) -> JavaProvider:
    return JavaProvider(
        "--registry", address, "--application", app, "--name", name,
        "--version", VERSION, "--group", group, "--register-mode", "instance", *extra,
    )  # fmt: skip


@pytest.fixture(scope="module")
def java_local(address: str, estate_group: str) -> Iterator[JavaProvider]:
    with java_provider(address, estate_group, JAVA_LOCAL_APP, "j1") as provider:
        yield provider


@pytest.fixture(scope="module")
def java_remote(address: str, estate_group: str) -> Iterator[JavaProvider]:
    with java_provider(
        address, estate_group, JAVA_REMOTE_APP, "j2", "--metadata-type", "remote"
    ) as provider:
        yield provider


@pytest.fixture(scope="module")
def java_consumer(address: str, estate_group: str) -> Iterator[JavaConsumer]:
    with JavaConsumer(
        "--registry", address, "--application", "java-nacos-app-consumer",
        "--version", VERSION, "--group", estate_group, "--migration", "FORCE_APPLICATION",
    ) as consumer:  # fmt: skip
        yield consumer


@pytest.fixture(scope="module")
def py_consumer(
    address: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dubbo_py.Application]:
    cache = tmp_path_factory.mktemp("nacos-app-py-consumer") / "cache.json"
    with dubbo_py.Application(
        "py-nacos-app-consumer", address, cache_path=cache, migration_step="FORCE_APPLICATION"
    ) as app:
        yield app


@pytest.fixture
def store(address: str) -> Iterator[NacosStore]:
    """A store of the test's own, to read what each side wrote (with Nacos's own API too)."""
    opened = parse_registry_address(address).new_store()
    assert isinstance(opened, NacosStore)
    assert opened.start(30), f"{opened} did not start"
    yield opened
    opened.close()


#: Calls per look: three providers here (random balance on the Java side), more than the
#: two-provider module's 20.
CALLS = 30


def test_a_java_force_application_consumer_calls_a_dubbo_py_provider_on_nacos(
    java_consumer: JavaConsumer,
    py_provider: str,
    java_local: JavaProvider,
    java_remote: JavaProvider,
) -> None:
    # The consumer subscribed before the providers joined: the mapping and the application
    # services reach it by Nacos's push. dubbo-py's instance says storage type remote, so Dubbo
    # reads p1's MetadataInfo from the metadata report (data id <app>, group <revision>) and
    # checks nothing more: its revision is taken as given.
    until(
        lambda: set(java_served(java_consumer, CALLS)) == EVERY_PROVIDER,
        "Java calls every provider at the application level",
        30,
    )


def test_a_dubbo_py_force_application_consumer_calls_java_instance_providers_on_nacos(
    py_provider: str,
    java_local: JavaProvider,
    java_remote: JavaProvider,
    py_consumer: dubbo_py.Application,
    estate_group: str,
) -> None:
    # j1's MetadataInfo comes from its MetadataServiceV2 (storage type local), j2's from Nacos
    # config (remote): both reach dubbo-py only at the application level.
    greeter = py_consumer.reference(
        greeter_pb2_grpc.GreeterStub, version=VERSION, group=estate_group, timeout=5.0
    )
    until(
        lambda: set(py_served(greeter, CALLS)) == EVERY_PROVIDER,
        "dubbo-py calls every provider at the application level",
        30,
    )
    level = py_consumer.application_level
    assert level is not None
    steps = {(c.step.value, c.level) for u, c in level.choices() if u.get_str("group")}
    assert steps == {("FORCE_APPLICATION", "application")}, steps


def test_both_sides_write_the_same_application_level_layout_on_nacos(
    py_provider: str, java_local: JavaProvider, java_remote: JavaProvider, store: NacosStore
) -> None:
    # The mapping: one data id per interface in group mapping, each provider application
    # appended (Dubbo's NacosMetadataReport.registerServiceAppMapping, a compare-and-set).
    until(
        lambda: (
            {PY_APP, JAVA_LOCAL_APP, JAVA_REMOTE_APP}
            <= set(store.get("/dubbo/mapping/demo.Greeter")[0].decode().split(","))
        ),
        "every provider application in the mapping",
    )
    # Nacos's own API: each application is a naming service of DEFAULT_GROUP, its instances'
    # metadata the instance metadata, on either side the same keys.
    keys = {}
    for app in (PY_APP, JAVA_LOCAL_APP, JAVA_REMOTE_APP):
        found = store._run(
            store._naming.list_instances(
                nacos_v2.ListInstanceParam(service_name=app, group_name="DEFAULT_GROUP",
                                           subscribe=False, healthy_only=None)
            )
        )  # fmt: skip
        [meta] = [dict(i.metadata) for i in found]
        keys[app] = meta
    wanted = {"dubbo.endpoints", "dubbo.metadata.revision", "dubbo.metadata.storage-type"}
    assert all(wanted <= set(meta) for meta in keys.values()), keys
    storage = {app: meta["dubbo.metadata.storage-type"] for app, meta in keys.items()}
    assert storage == {PY_APP: "remote", JAVA_LOCAL_APP: "local", JAVA_REMOTE_APP: "remote"}
    # Remote metadata is data id <app> in group <revision>, written by either side, and the
    # store reads Java's as its /dubbo/metadata/<app>/<revision>; a local one is not there.
    for app in (PY_APP, JAVA_REMOTE_APP):
        revision = keys[app]["dubbo.metadata.revision"]
        text = store._run(
            store._config.get_config(nacos_v2.ConfigParam(data_id=app, group=revision))
        )
        document = json.loads(text)
        assert (document["app"], document["revision"]) == (app, revision)
        assert any(key.endswith(f"demo.Greeter:{VERSION}:tri") for key in document["services"])
        assert json.loads(store.get(f"/dubbo/metadata/{app}/{revision}")[0]) == document
        assert store.children(f"/dubbo/metadata/{app}") == [revision]
    assert store.children(f"/dubbo/metadata/{JAVA_LOCAL_APP}") == []
    # The store reads a Java instance as the document the ZooKeeper layout would hold.
    [where] = store.children(f"/services/{JAVA_REMOTE_APP}")
    doc = ServiceInstance.parse(store.get(f"/services/{JAVA_REMOTE_APP}/{where}")[0])
    assert (doc.app, doc.id) == (JAVA_REMOTE_APP, java_remote.address)
    assert doc.revision == keys[JAVA_REMOTE_APP]["dubbo.metadata.revision"]
    # Neither Java provider wrote an interface-level service (register mode instance).
    providers = store.children("/dubbo/demo.Greeter/providers")
    assert all(f"application%3D{PY_APP}%26" in node for node in providers), providers


def test_dubbo_3_3_defaults_on_nacos_a_java_all_mode_provider_and_application_first_consumers(
    address: str, estate_group: str, store: NacosStore, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # Dubbo 3.3's defaults on both sides: a Java provider in register mode `all` (both levels)
    # and consumers in APPLICATION_FIRST (the Java consumer without a step, a dubbo-py
    # Application without one), in a group of their own beside a dubbo-py provider in `all`.
    group = f"{estate_group}-all"
    cache = tmp_path_factory.mktemp("nacos-app-all") / "cache.json"
    with (
        JavaProvider(
            "--registry", address, "--application", "java-nacos-app-all", "--name", "j3",
            "--version", VERSION, "--group", group,
        ) as java,
        dubbo_py.Application("py-nacos-app-all", address, cache_path=cache) as py_app,
        JavaConsumer(
            "--registry", address, "--application", "java-nacos-app-first",
            "--version", VERSION, "--group", group,
        ) as java_consumer,
        dubbo_py.Application("py-nacos-app-first", address, cache_path=cache.with_suffix(".c"))
        as consumer_app,
    ):  # fmt: skip

        @dubbo_py.service(version=VERSION, group=group)
        class Greeter(greeter_pb2_grpc.GreeterServicer):
            def SayHello(self, request: Any, context: Any) -> Any:
                return greeter_pb2.HelloReply(message=f"p3: hello {request.name}")

        py_app.start(Greeter(), port=0, bind_host="127.0.0.1")
        both = {"j3", "p3"}
        until(lambda: set(java_served(java_consumer, CALLS)) == both, "Java calls both", 30)
        greeter = consumer_app.reference(
            greeter_pb2_grpc.GreeterStub, version=VERSION, group=group, timeout=5.0
        )
        until(lambda: set(py_served(greeter, CALLS)) == both, "dubbo-py calls both", 30)
        level = consumer_app.application_level
        assert level is not None
        steps = {(c.step.value, c.level) for u, c in level.choices() if u.get_str("group")}
        assert steps == {("APPLICATION_FIRST", "application")}, steps
        # The Java provider wrote both levels: its interface-level URL and its instance.
        providers = store.children("/dubbo/demo.Greeter/providers")
        assert any(
            "application%3Djava-nacos-app-all%26" in node and java.address.split(":")[1] in node
            for node in providers
        ), providers
        assert store.children("/services/java-nacos-app-all") == [java.address]
