"""Application-level service discovery end to end, with real provider processes.

A provider application registered only at the application level in Java's exact format is
found by a default consumer; a dubbo-py provider's application-level nodes read with Java's
field names and serve a FORCE_APPLICATION consumer; kill -9 fails over with no failed call.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.registry.store.zookeeper import ZooKeeperStore
from tests.e2e.scenarios import kill9_and_restart, start_from_cache_while_zookeeper_is_down
from tests.support.java_app_level import write_java_provider
from tests.support.processes import ProviderProcess
from tests.support.zookeeper import ZooKeeperServer

SERVICE = "demo.Greeter"


@pytest.fixture
def instance_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """Provider processes started from now on register at the application level only."""
    monkeypatch.setenv("DUBBO_PY_REGISTER_MODE", "instance")


@pytest.fixture
def zk_registry(zookeeper: ZooKeeperServer) -> Iterator[tuple[str, ZooKeeperStore]]:
    """A fresh chroot on the test ZooKeeper, and a store on it (a 'Java process')."""
    chroot = f"/appdisc-{uuid.uuid4().hex[:8]}"
    store = ZooKeeperStore(zookeeper.address, chroot)
    assert store.start(20)
    yield f"zookeeper://{zookeeper.address}{chroot}", store
    store.close()


@pytest.mark.zookeeper
def test_java_application_level_provider_is_called_by_a_default_consumer(
    zk_registry: tuple[str, ZooKeeperStore], tmp_path: Path
) -> None:
    address, java = zk_registry
    # The provider serves Greeter but registers in a registry of its own, so the only trace of
    # it in ZooKeeper is what a Java provider in register-mode=instance would write.
    with ProviderProcess(f"sqlite://{tmp_path}/elsewhere.db") as served:
        host, port = served.address.rsplit(":", 1)
        write_java_provider(java, "java-greeter", host, int(port), SERVICE, version="1.0.0")
        assert not java.exists(f"/dubbo/{SERVICE}/providers")
        with dubbo_py.Application("shop", address, cache_path=tmp_path / "c.json") as app:
            ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0")
            replies = {
                ref.stub.SayHello(greeter_pb2.HelloRequest(name=f"n{i}")).provider for i in range(5)
            }
            assert replies == {served.address}
            level = app.application_level
            assert level is not None
            ((_consumer, choice),) = level.choices()
            assert (choice.step.value, choice.level) == ("APPLICATION_FIRST", "application")


@pytest.mark.zookeeper
def test_dubbo_py_instance_nodes_read_with_javas_names_and_serve_force_application(
    zk_registry: tuple[str, ZooKeeperStore],
    tmp_path: Path,
    instance_mode: None,
) -> None:
    address, java = zk_registry
    with ProviderProcess(address, "--application", "py-greeter") as served:
        assert not java.exists(f"/dubbo/{SERVICE}/providers") or not java.children(
            f"/dubbo/{SERVICE}/providers"
        )
        data, _ = java.get(f"/services/py-greeter/{served.address}")
        node = json.loads(data)
        host, port = served.address.rsplit(":", 1)
        assert (node["name"], node["id"], node["address"], node["port"]) == (
            "py-greeter",
            served.address,
            host,
            int(port),
        )
        assert node["serviceType"] == "DYNAMIC" and node["sslPort"] is None
        payload = node["payload"]
        assert payload["@class"] == "org.apache.dubbo.registry.zookeeper.ZookeeperInstance"
        assert (payload["id"], payload["name"]) == (served.address, "py-greeter")
        metadata = payload["metadata"]
        assert metadata["dubbo.metadata.storage-type"] == "remote"
        assert json.loads(metadata["dubbo.endpoints"]) == [{"port": int(port), "protocol": "tri"}]
        revision = metadata["dubbo.metadata.revision"]
        doc = json.loads(java.get(f"/dubbo/metadata/py-greeter/{revision}")[0])
        assert (doc["app"], doc["revision"]) == ("py-greeter", revision)
        service = doc["services"][f"{SERVICE}:1.0.0:tri"]
        assert {k: service[k] for k in ("name", "version", "protocol", "port", "path")} == {
            "name": SERVICE,
            "version": "1.0.0",
            "protocol": "tri",
            "port": int(port),
            "path": SERVICE,
        }
        assert service["params"]["methods"] and "pid" not in service["params"]
        mapped = java.get(f"/dubbo/mapping/{SERVICE}")[0].decode().split(",")
        assert "py-greeter" in mapped
        with dubbo_py.Application(
            "shop", address, cache_path=tmp_path / "c.json", migration_step="FORCE_APPLICATION"
        ) as app:
            greeter = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
            reply = greeter.SayHello(greeter_pb2.HelloRequest(name="ada"))
            assert reply.provider == served.address


def test_kill9_fails_over_with_no_failed_call_at_the_application_level(
    registry_address: str,
    providers: Callable[..., ProviderProcess],
    tmp_path: Path,
    instance_mode: None,
) -> None:
    with dubbo_py.Application(
        "shop", registry_address, cache_path=tmp_path / "c.json", migration_step="FORCE_APPLICATION"
    ) as app:
        kill9_and_restart(app, providers)


@pytest.mark.zookeeper
def test_consumer_starts_from_cached_application_level_providers_while_zookeeper_is_down(
    tmp_path: Path, instance_mode: None
) -> None:
    start_from_cache_while_zookeeper_is_down(tmp_path / "consumer-cache.json", "app-cache")
