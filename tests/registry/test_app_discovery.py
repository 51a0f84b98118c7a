"""Application-level discovery on a real store (ZooKeeper and embedded): the mapping's
conditional-update merge, a provider's published nodes, a consumer's URLs and migration."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable

import pytest

from dubbo_py.registry.application import mapping
from dubbo_py.registry.application.discovery import AppLevelProviders, ApplicationDiscovery
from dubbo_py.registry.application.instance import ServiceInstance
from dubbo_py.registry.application.metadata import MetadataInfo
from dubbo_py.registry.application.migration import (
    MigrationRule,
    MigrationRuleError,
    MigrationRules,
    MigrationSubscriber,
    choose,
)
from dubbo_py.registry.application.modes import (
    MigrationStep,
    ModeRegistry,
    RegisterMode,
    resolve_migration_step,
    resolve_register_mode,
)
from dubbo_py.registry.application.paths import migration_path
from dubbo_py.registry.application.publisher import InstancePublisher
from dubbo_py.registry.registry import Registry
from dubbo_py.registry.store.base import Store
from dubbo_py.url import URL
from tests.support.java_app_level import write_java_provider

StoreFactory = Callable[[], Store]


def provider(host: str = "127.0.0.1", port: int = 50051, **params: str) -> URL:
    base = {
        "application": "greeter",
        "interface": "demo.Greeter",
        "methods": "SayHello",
        "side": "provider",
        "version": "1.0.0",
        "timestamp": "1",
        "pid": "9",
    }
    base.update(params)
    return URL("tri", host, port, "demo.Greeter", parameters=base)


def consumer(**params: str) -> URL:
    base = {"application": "shop", "interface": "demo.Greeter", "version": "1.0.0"}
    base.update(params)
    return URL("consumer", "127.0.0.1", 0, "demo.Greeter", parameters=base)


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class Seen:
    """Collects application-level notifications."""

    def __init__(self) -> None:
        self.last: AppLevelProviders | None = None

    def __call__(self, state: AppLevelProviders) -> None:
        self.last = state

    def addresses(self) -> set[str]:
        return {u.address for u in self.last.urls} if self.last else set()


def test_concurrent_applications_all_end_up_in_the_mapping(make_store: StoreFactory) -> None:
    stores = [make_store() for _ in range(4)]
    apps = [f"app{i}" for i in range(8)]
    barrier = threading.Barrier(len(apps))
    results: list[bool] = []

    def add(i: int) -> None:
        barrier.wait()
        results.append(mapping.add_application(stores[i % 4], "demo.Greeter", apps[i], wait_ms=20))

    threads = [threading.Thread(target=add, args=(i,)) for i in range(len(apps))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(results)
    assert mapping.read_applications(stores[0], "demo.Greeter") == frozenset(apps)
    # Adding again changes nothing (no duplicate).
    assert mapping.add_application(stores[0], "demo.Greeter", "app3")
    data, _ = stores[0].get("/dubbo/mapping/demo.Greeter")
    assert sorted(data.decode().split(",")) == sorted(apps)


def test_provider_publishes_instance_metadata_and_mapping(store: Store) -> None:
    publisher = InstancePublisher(store, "greeter")
    with publisher.batch():
        publisher.add(provider())
        publisher.add(provider(version="2.0.0"))
    assert len(publisher.instances()) == 1
    node, _ = store.get("/services/greeter/127.0.0.1:50051")
    read = ServiceInstance.parse(node)
    assert read.metadata["dubbo.metadata.storage-type"] == "remote"
    assert read.endpoints() == {"tri": 50051}
    # One revision for the batch: both services are in its one document.
    assert store.children("/dubbo/metadata/greeter") == [read.revision]
    doc, _ = store.get(f"/dubbo/metadata/greeter/{read.revision}")
    info = MetadataInfo.parse(doc)
    assert sorted(info.services) == ["demo.Greeter:1.0.0:tri", "demo.Greeter:2.0.0:tri"]
    assert mapping.read_applications(store, "demo.Greeter") == {"greeter"}
    publisher.remove(provider(version="2.0.0"))

    def revision() -> str:
        return ServiceInstance.parse(store.get("/services/greeter/127.0.0.1:50051")[0]).revision

    wait_for(lambda: revision() != read.revision, "the instance's new revision")
    publisher.remove(provider())
    assert not store.exists("/services/greeter/127.0.0.1:50051")


def test_a_stopping_server_writes_no_revision_per_service(store: Store) -> None:
    publisher = InstancePublisher(store, "greeter")
    urls = [provider(version=f"{v}.0.0") for v in range(1, 4)]
    with publisher.batch():
        for url in urls:
            publisher.add(url)
    assert len(store.children("/dubbo/metadata/greeter")) == 1
    for url in urls:  # as ExportedServer.stop unregisters them
        publisher.remove(url)
    assert not store.exists("/services/greeter/127.0.0.1:50051")
    time.sleep(0.5)
    assert len(store.children("/dubbo/metadata/greeter")) == 1


def test_consumer_builds_urls_from_instances_and_follows_them(make_store: StoreFactory) -> None:
    provider_store, consumer_store = make_store(), make_store()
    publisher = InstancePublisher(provider_store, "greeter")
    publisher.add(provider(port=50051))
    discovery = ApplicationDiscovery(consumer_store)
    seen = Seen()
    cancel = discovery.subscribe("demo.Greeter", seen)
    wait_for(lambda: seen.addresses() == {"127.0.0.1:50051"}, "the first instance")
    assert seen.last is not None and seen.last.read and seen.last.applications == {"greeter"}
    (url,) = seen.last.urls
    assert url.get_str("version") == "1.0.0" and url.protocol == "tri"
    publisher.add(provider(port=50052))
    wait_for(lambda: len(seen.addresses()) == 2, "the second instance")
    # A new revision on a running instance (a service added) is followed too.
    publisher.add(provider(port=50051, version="2.0.0"))
    wait_for(lambda: seen.last is not None and len(seen.last.urls) == 3, "the new revision")
    publisher.remove(provider(port=50052))
    wait_for(lambda: seen.addresses() == {"127.0.0.1:50051"}, "the instance gone")
    cancel()
    discovery.close()


def test_java_written_nodes_are_found(make_store: StoreFactory) -> None:
    java, ours = make_store(), make_store()
    write_java_provider(java, "java-app", "10.9.9.9", 50070, "demo.Greeter", version="1.0.0")
    seen = Seen()
    discovery = ApplicationDiscovery(ours)
    discovery.subscribe("demo.Greeter", seen)
    wait_for(lambda: seen.addresses() == {"10.9.9.9:50070"}, "the Java instance")
    discovery.close()


def test_local_metadata_instances_are_skipped_with_a_warning_naming_the_fix(
    make_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    java, ours = make_store(), make_store()
    write_java_provider(java, "java-local", "10.9.9.8", 50071, "demo.Greeter", storage="local")
    seen = Seen()
    discovery = ApplicationDiscovery(ours)
    discovery.subscribe("demo.Greeter", seen)
    wait_for(lambda: seen.last is not None and seen.last.read, "the application read")
    assert seen.addresses() == set()
    assert "metadata-type=remote" in caplog.text
    discovery.close()


def test_register_modes_choose_the_levels(store: Store) -> None:
    base = Registry(store)
    time.sleep(0.3)  # the store's first session event reaches the new registry first
    for mode, interface_nodes, instance in (
        (RegisterMode.INTERFACE, 1, False),
        (RegisterMode.INSTANCE, 0, True),
        (RegisterMode.ALL, 1, True),
    ):
        app = f"app-{mode.value}"
        url = provider(application=app, port=50060)
        registry = (
            ModeRegistry(base, InstancePublisher(store, app), mode)
            if mode is not RegisterMode.INTERFACE
            else base
        )
        registry.register(url)
        assert len([u for u in base.lookup("demo.Greeter") if u == url]) == interface_nodes
        assert store.exists(f"/services/{app}/127.0.0.1:50060") is instance
        registry.unregister(url)
        assert url not in base.lookup("demo.Greeter")
        assert not store.exists(f"/services/{app}/127.0.0.1:50060")


def test_modes_and_steps_come_from_code_then_environment() -> None:
    assert resolve_register_mode(None, {}) is RegisterMode.ALL
    assert resolve_register_mode(None, {"DUBBO_APPLICATION_REGISTER_MODE": "instance"}) is (
        RegisterMode.INSTANCE
    )
    assert resolve_register_mode("interface", {"DUBBO_PY_REGISTER_MODE": "instance"}) is (
        RegisterMode.INTERFACE
    )
    assert resolve_migration_step(None, {}) is MigrationStep.APPLICATION_FIRST
    assert resolve_migration_step(None, {"DUBBO_PY_MIGRATION_STEP": "force_application"}) is (
        MigrationStep.FORCE_APPLICATION
    )
    with pytest.raises(ValueError, match=r"\$DUBBO_PY_REGISTER_MODE.*bogus"):
        resolve_register_mode(None, {"DUBBO_PY_REGISTER_MODE": "bogus"})


def test_migration_rule_reads_dubbos_document() -> None:
    rule = MigrationRule.parse(
        "key: shop\nstep: FORCE_APPLICATION\nthreshold: 0.5\n"
        "interfaces:\n  - serviceKey: demo.Greeter:1.0.0\n    step: FORCE_INTERFACE\n"
        "applications:\n  - serviceKey: greeter\n    step: APPLICATION_FIRST\n    force: true\n"
    )
    assert rule.step_for(consumer(), (), MigrationStep.APPLICATION_FIRST) is (
        MigrationStep.FORCE_INTERFACE
    )
    other = consumer(interface="demo.Other")
    assert rule.step_for(other, {"greeter"}, MigrationStep.FORCE_INTERFACE) is (
        MigrationStep.APPLICATION_FIRST
    )
    assert rule.step_for(other, (), MigrationStep.FORCE_INTERFACE) is (
        MigrationStep.FORCE_APPLICATION
    )
    assert rule.threshold_for(other, ()) == 0.5
    assert rule.force_for(other, {"greeter"})


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("step: SIDEWAYS", "step"),
        ("threshold: lots", "threshold"),
        ("interfaces: {a: 1}", "interfaces"),
        ("interfaces:\n  - step: FORCE_INTERFACE", "interfaces[0]"),
        ("step: [", ":1:"),
        ("key: &k shop\napplications:\n  *k : {step: FORCE_INTERFACE}", ":1:6: YAML anchors"),
    ],
)
def test_bad_migration_rules_say_where(text: str, where: str) -> None:
    with pytest.raises(MigrationRuleError, match=rf"shop\.migration.*{re.escape(where)}"):
        MigrationRule.parse(text, "shop.migration")


def test_application_first_prefers_the_application_level_when_it_has_providers() -> None:
    def count(urls: list[URL]) -> int:
        return len(urls)

    one, two = [provider()], [provider(), provider(port=2)]
    assert choose(MigrationStep.APPLICATION_FIRST, one, [], count, 0.0) == "interface"
    assert choose(MigrationStep.APPLICATION_FIRST, [], one, count, 0.0) == "application"
    assert choose(MigrationStep.APPLICATION_FIRST, two, one, count, 0.0) == "application"
    assert choose(MigrationStep.APPLICATION_FIRST, two, one, count, 0.8) == "interface"
    assert choose(MigrationStep.FORCE_INTERFACE, [], one, count, 0.0) == "interface"
    assert choose(MigrationStep.FORCE_APPLICATION, one, [], count, 0.0) == "application"


def test_migration_rule_switches_a_consumer_live(make_store: StoreFactory) -> None:
    provider_store, consumer_store = make_store(), make_store()
    base = Registry(provider_store)
    # Interface level: one provider on :1; application level: one instance on :2.
    base.register(provider(port=1))
    InstancePublisher(provider_store, "greeter").add(provider(port=2))
    registry = Registry(consumer_store)
    rules = MigrationRules(consumer_store, "shop")
    subscriber = MigrationSubscriber(
        registry,
        ApplicationDiscovery(consumer_store),
        rules,
        consumer(),
        MigrationStep.APPLICATION_FIRST,
    )
    seen: dict[str, list[URL]] = {}
    cancel = subscriber("demo.Greeter", lambda c, urls: seen.__setitem__(c, urls))

    def addresses() -> set[str]:
        return {u.address for u in seen.get("providers", []) if u.protocol != "empty"}

    wait_for(lambda: addresses() == {"127.0.0.1:2"}, "the application level (APPLICATION_FIRST)")
    assert {"routers", "configurators"} <= set(seen)
    consumer_store.create(migration_path("shop"), b"step: FORCE_INTERFACE\n", makepath=True)
    wait_for(lambda: addresses() == {"127.0.0.1:1"}, "the interface level (FORCE_INTERFACE)")
    assert subscriber.choice().step is MigrationStep.FORCE_INTERFACE
    # A broken rule is logged and the last good one stays.
    consumer_store.set(migration_path("shop"), b"step: [")
    wait_for(lambda: rules.error is not None, "the broken rule noticed")
    assert addresses() == {"127.0.0.1:1"}
    consumer_store.set(migration_path("shop"), b"step: FORCE_APPLICATION\n")
    wait_for(lambda: addresses() == {"127.0.0.1:2"}, "the application level (FORCE_APPLICATION)")
    # Forcing the interface level while it has no provider is refused without force: true.
    base.unregister(provider(port=1))
    wait_for(lambda: subscriber.choice().interface_providers == 0, "the interface level empty")
    consumer_store.set(migration_path("shop"), b"step: FORCE_INTERFACE\n")
    time.sleep(0.5)
    assert subscriber.choice().step is MigrationStep.FORCE_APPLICATION
    assert addresses() == {"127.0.0.1:2"}
    cancel()
    rules.close()


@pytest.mark.zookeeper
def test_instance_comes_back_after_the_providers_session_expires(
    make_store: StoreFactory, store_backend: str
) -> None:
    if store_backend != "zookeeper":
        pytest.skip("session expiry is forced on ZooKeeper")
    from tests.support.zookeeper import expire_session

    provider_store, consumer_store = make_store(), make_store()
    InstancePublisher(provider_store, "greeter").add(provider(port=50077))
    discovery = ApplicationDiscovery(consumer_store)
    seen = Seen()
    discovery.subscribe("demo.Greeter", seen)
    wait_for(lambda: seen.addresses() == {"127.0.0.1:50077"}, "the instance")
    expire_session(provider_store)
    # The expired session took the ephemeral node; the publisher writes it again.
    wait_for(
        lambda: consumer_store.exists("/services/greeter/127.0.0.1:50077"),
        "the instance node written again",
    )
    wait_for(lambda: seen.addresses() == {"127.0.0.1:50077"}, "the instance seen again")
    discovery.close()
