"""One instance of a provider application changes: only the services it serves see it.

A consumer of 50 services of one application (instances written as dubbo-py's publisher and
Java write them: instance node, metadata document per revision, mapping node per service); one
instance joins serving 10 of them, changes revision to serve an 11th, and leaves. Every service
sees the right providers after each step, and the services whose list did not change are not
notified at all. On ZooKeeper and the embedded store (``make_store``)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

import pytest

from dubbo_py.errors import NodeExistsError
from dubbo_py.registry.application.discovery import AppLevelProviders, ApplicationDiscovery
from dubbo_py.registry.application.instance import REVISION, STORAGE_TYPE, ServiceInstance
from dubbo_py.registry.application.metadata import MetadataInfo
from dubbo_py.registry.application.paths import instance_path, mapping_path, metadata_path
from dubbo_py.registry.store.base import Store
from dubbo_py.url import URL
from tests.support.memory_store import MemoryStore, MemoryTree
from tests.support.waiting import wait_until

APP = "fleet"
SERVICES = [f"demo.Service{i:02d}" for i in range(50)]
StoreFactory = Callable[[], Store]


def service_url(host: str, port: int, service: str) -> URL:
    params = {"application": APP, "interface": service, "side": "provider", "methods": "Call"}
    return URL("tri", host, port, service, parameters=params)


def write_instance(store: Store, host: str, port: int, services: list[str]) -> None:
    """The instance node (written or replaced), its revision's document and the mappings."""
    info = MetadataInfo.of(APP, [service_url(host, port, s) for s in services])
    with contextlib.suppress(NodeExistsError):
        store.create(metadata_path(APP, info.revision), info.to_json().encode(), makepath=True)
    for service in services:
        with contextlib.suppress(NodeExistsError):
            store.create(mapping_path(service), APP.encode(), makepath=True)
    metadata = {REVISION: info.revision, STORAGE_TYPE: "remote"}
    data = ServiceInstance(APP, host, port, metadata, registration_time_ms=1).to_json().encode()
    path = instance_path(APP, f"{host}:{port}")
    if store.exists(path):
        store.set(path, data)
    else:
        store.create(path, data, makepath=True)


class Listener:
    """Every state one service's listener was called with."""

    def __init__(self) -> None:
        self.states: list[AppLevelProviders] = []

    def __call__(self, state: AppLevelProviders) -> None:
        self.states.append(state)

    def addresses(self) -> set[str]:
        return {u.address for u in self.states[-1].urls} if self.states else set()


@pytest.mark.parametrize(
    "store_backend", [pytest.param("zookeeper", marks=pytest.mark.zookeeper), "embedded"]
)
def test_one_instance_changing_notifies_only_the_services_it_serves(
    make_store: StoreFactory,
) -> None:
    provider, consumer = make_store(), make_store()
    base = {f"127.0.0.{i}:50051" for i in (2, 3, 4)}
    for address in sorted(base):
        write_instance(provider, address.split(":")[0], 50051, SERVICES)
    discovery = ApplicationDiscovery(consumer)
    listeners = {s: Listener() for s in SERVICES}
    for service, listener in listeners.items():
        discovery.subscribe(service, listener)
    wait_until(
        lambda: all(lst.addresses() == base for lst in listeners.values()), 15, "every service read"
    )
    time.sleep(0.3)

    now = {s: base for s in SERVICES}

    def step(change: Callable[[], None], changed: dict[str, set[str]], what: str) -> None:
        """Make ``change``: the services in ``changed`` get those addresses, with one listener
        call each; every other service keeps its list and gets no call."""
        calls = {s: len(lst.states) for s, lst in listeners.items()}
        now.update(changed)
        expected = now
        change()
        wait_until(lambda: all(listeners[s].addresses() == a for s, a in changed.items()), 15, what)
        time.sleep(0.5)  # anything late would land now
        for service, listener in listeners.items():
            assert listener.addresses() == expected[service], (service, what)
            if service not in changed:
                # Not served by the changed instance: its listener was not called.
                assert len(listener.states) == calls[service], (service, what)
            else:
                assert len(listener.states) == calls[service] + 1, (service, what)

    joined = base | {"127.0.0.9:50051"}
    step(
        lambda: write_instance(provider, "127.0.0.9", 50051, SERVICES[:10]),
        {s: joined for s in SERVICES[:10]},
        "the instance joining 10 services",
    )
    # Its revision changes to serve an 11th service: only that one is notified (the 10 others'
    # URLs are equal and kept).
    before = {s: listeners[s].states[-1].urls for s in SERVICES[:10]}
    step(
        lambda: write_instance(provider, "127.0.0.9", 50051, SERVICES[:11]),
        {SERVICES[10]: joined},
        "the instance's new revision",
    )
    assert all(listeners[s].states[-1].urls is before[s] for s in SERVICES[:10])
    # The patched state says what changed.
    last = listeners[SERVICES[10]].states[-1]
    assert last.patched and [u.address for u in last.arrived] == ["127.0.0.9:50051"]
    assert last.departed == ()
    step(
        lambda: provider.delete(instance_path(APP, "127.0.0.9:50051")),
        {s: base for s in SERVICES[:11]},
        "the instance leaving",
    )
    gone = listeners[SERVICES[0]].states[-1]
    assert [u.address for u in gone.departed] == ["127.0.0.9:50051"] and gone.arrived == ()
    discovery.close()


def test_a_listener_never_goes_back_to_an_older_list() -> None:
    """Two changes made on two threads: the first thread's listener call is held up (a slow
    listener before it) while the second thread's change is made and delivered. The second
    listener must end with the newer list, not be handed the older one last."""
    # One session: the in-memory store fires watches on the writing thread, for its own writes.
    writer = consumer = MemoryStore(MemoryTree())
    write_instance(writer, "127.0.0.2", 50051, SERVICES[:1])
    discovery = ApplicationDiscovery(consumer)
    held = threading.Event()
    newer_seen = threading.Event()

    def slow(state: AppLevelProviders) -> None:
        if threading.current_thread().name == "first" and not held.is_set():
            held.set()
            newer_seen.wait(1.0)  # the old code delivers the newer list meanwhile

    last = Listener()

    def record(state: AppLevelProviders) -> None:
        last(state)
        if "127.0.0.4:50051" in {u.address for u in state.urls}:
            newer_seen.set()

    discovery.subscribe(SERVICES[0], slow)
    discovery.subscribe(SERVICES[0], record)
    assert last.addresses() == {"127.0.0.2:50051"}
    first = threading.Thread(
        target=write_instance, args=(writer, "127.0.0.3", 50051, SERVICES[:1]), name="first"
    )
    first.start()
    assert held.wait(5)
    second = threading.Thread(
        target=write_instance, args=(writer, "127.0.0.4", 50051, SERVICES[:1]), name="second"
    )
    second.start()
    first.join(10)
    second.join(10)
    assert last.addresses() == {"127.0.0.2:50051", "127.0.0.3:50051", "127.0.0.4:50051"}
    discovery.close()


def test_the_directory_is_handed_the_change_and_patches_its_providers() -> None:
    """Through the migration subscriber (what a reference's directory subscribes with), a
    patched application-level list is handed as a change of the list handed before
    (``ChangedURLs``): the directory's provider list takes it without a pass over the fleet,
    and ends with the right providers after a join and a leave."""
    from dubbo_py.registry import layout
    from dubbo_py.registry.application.migration import MigrationSubscriber
    from dubbo_py.registry.application.modes import MigrationStep
    from dubbo_py.registry.directory import RegistryDirectory
    from dubbo_py.registry.registry import ChangedURLs, Registry
    from dubbo_py.router import factory

    store = MemoryStore(MemoryTree())
    for i in range(2, 12):
        write_instance(store, f"127.0.0.{i}", 50051, SERVICES[:2])
    registry = Registry(store)
    consumer = URL(
        "consumer",
        "127.0.0.1",
        0,
        SERVICES[0],
        parameters={"application": "shop", "interface": SERVICES[0]},
    )
    subscriber = MigrationSubscriber(
        registry, ApplicationDiscovery(store), None, consumer, MigrationStep.FORCE_APPLICATION
    )
    handed: list[list[URL]] = []

    def subscribe(
        interface: str, listener: Callable[[str, list[URL]], None], categories: object
    ) -> Callable[[], None]:
        def recording(category: str, urls: list[URL]) -> None:
            if category == layout.PROVIDERS:
                handed.append(urls)
            listener(category, urls)

        return subscriber(interface, recording, categories)  # type: ignore[arg-type]

    directory = RegistryDirectory(
        consumer,
        registry,
        factory.new_rulebook(),
        assemble=factory.chain_routers,
        subscribe=subscribe,
    )
    directory.start(wait=5)
    assert len(directory.providers) == 10
    first = handed[-1]
    assert isinstance(first, ChangedURLs)
    write_instance(store, "127.0.0.20", 50051, SERVICES[:2])
    joined = handed[-1]
    assert isinstance(joined, ChangedURLs) and joined.base == first.serial
    assert [u.address for u in joined.arrived] == ["127.0.0.20:50051"] and joined.departed == []
    assert "127.0.0.20:50051" in {u.address for u in directory.providers}
    store.delete(instance_path(APP, "127.0.0.20:50051"))
    left = handed[-1]
    assert isinstance(left, ChangedURLs) and left.base == joined.serial
    assert [u.address for u in left.departed] == ["127.0.0.20:50051"]
    assert {u.address for u in directory.providers} == {f"127.0.0.{i}:50051" for i in range(2, 12)}
    directory.close()
