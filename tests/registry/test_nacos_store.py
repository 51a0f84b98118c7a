"""The ``nacos://`` store against the real Nacos server (tests/support/nacos.py): a provider URL
registered through one store is an instance of Dubbo's service name with its parameters as
metadata and is listed (and watched) by another store; a rule is config data id
``<key>.condition-router`` in group ``dubbo`` that Nacos's own client reads; an application
instance is an instance of the Nacos service named after the application, its metadata the
instance's, read back as Curator's JSON; a MetadataInfo document is data id ``<app>`` in group
``<revision>``; paths outside Dubbo's Nacos layout are refused by name. An address's ``group``
is the Nacos group of its instances, both levels, as Dubbo's NacosRegistry and
NacosServiceDiscovery read it; config stays in Dubbo's groups whatever the registry group."""

from __future__ import annotations

import json
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import v2.nacos as nacos_v2

from dubbo_py.errors import NoNodeError, NotInLayoutError, StoreError
from dubbo_py.registry import layout
from dubbo_py.registry.application.instance import ServiceInstance
from dubbo_py.registry.application.paths import application_path, instance_path, metadata_path
from dubbo_py.registry.store.address import parse_registry_address
from dubbo_py.registry.store.nacos.store import NacosStore
from dubbo_py.url import URL
from tests.support.nacos import NacosServer

pytestmark = pytest.mark.nacos


@pytest.fixture
def make_nacos(nacos: NacosServer, tmp_path: Path) -> Iterator[Callable[..., NacosStore]]:
    opened: list[NacosStore] = []

    def make(query: str = "") -> NacosStore:
        store = parse_registry_address(f"nacos://{nacos.address}{query}").new_store()
        assert isinstance(store, NacosStore)
        opened.append(store)
        assert store.start(30), f"{store} did not start"
        return store

    yield make
    for store in reversed(opened):
        store.close()


def _until(check: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def _provider(interface: str, port: int) -> URL:
    return URL.parse(
        f"tri://127.0.0.1:{port}/{interface}?interface={interface}&version=1.0.0&group=blue"
        "&side=provider&application=shop&methods=Greet"
    )


def test_provider_is_a_dubbo_named_instance_and_listed_by_another_store(
    make_nacos: Callable[..., NacosStore],
) -> None:
    interface = f"org.example.Greeter{uuid.uuid4().hex[:8]}"
    provider, consumer = make_nacos(), make_nacos()
    url = _provider(interface, 50061)
    folder = layout.category_path(interface, "providers")
    seen: list[list[str]] = []
    cancel = consumer.watch_children(folder, seen.append)
    provider.create(layout.node_path(url), ephemeral=True)
    _until(lambda: bool(seen) and seen[-1] != [])
    assert [URL.decode(n) for n in seen[-1]] == [url]
    assert [URL.decode(n) for n in consumer.children(folder)] == [url]

    # Read the service with Nacos's own API (on the store's loop: grpc's asyncio channels work
    # on one loop per process), by the name Dubbo's NacosRegistry gives it.
    found = consumer._run(
        consumer._naming.list_instances(
            nacos_v2.ListInstanceParam(
                service_name=f"providers:{interface}:1.0.0:blue", subscribe=False, healthy_only=None
            )
        )
    )
    [(ip, port, metadata)] = [(i.ip, i.port, dict(i.metadata)) for i in found]
    assert (ip, port) == ("127.0.0.1", 50061)
    assert metadata["interface"] == interface and metadata["methods"] == "Greet"
    cancel()


def test_a_deregistered_provider_leaves_the_folder(
    make_nacos: Callable[..., NacosStore],
) -> None:
    interface = f"org.example.Gone{uuid.uuid4().hex[:8]}"
    provider, consumer = make_nacos(), make_nacos()
    url = _provider(interface, 50062)
    folder = layout.category_path(interface, "providers")
    provider.create(layout.node_path(url), ephemeral=True)
    _until(lambda: consumer.children(folder) != [])
    provider.delete(layout.node_path(url))
    _until(lambda: consumer.children(folder) == [], timeout=6)


def test_rule_is_config_in_group_dubbo_and_its_watch_follows_changes(
    make_nacos: Callable[..., NacosStore],
) -> None:
    store, other = make_nacos(), make_nacos()
    path = layout.config_path(f"demo-{uuid.uuid4().hex[:8]}.condition-router")
    seen: list[bytes | None] = []
    got = threading.Event()

    def on_data(data: bytes | None, version: int) -> None:
        seen.append(data)
        got.set()

    cancel = other.watch_data(path, on_data)
    _until(got.is_set)
    assert seen == [None]
    store.create(path, b"conditions: [a]")
    _until(lambda: store.exists(path) and other.get(path)[0] == b"conditions: [a]")
    store.set(path, b"conditions: [b]")
    _until(lambda: seen[-1] == b"conditions: [b]")
    store.delete(path)
    _until(lambda: seen[-1] is None)
    with pytest.raises(NoNodeError):
        other.get(path)
    cancel()


def test_paths_outside_dubbos_nacos_layout_are_refused_by_name(
    make_nacos: Callable[..., NacosStore],
) -> None:
    store = make_nacos()
    for call in (
        lambda: store.get("/services"),
        lambda: store.children("/dubbo/metadata"),
        lambda: store.get("/anything/else"),
    ):
        with pytest.raises(StoreError, match="Dubbo's Nacos layout"):
            call()


def test_an_application_instance_is_an_instance_of_the_application_service(
    make_nacos: Callable[..., NacosStore],
) -> None:
    app = f"shop-{uuid.uuid4().hex[:8]}"
    provider, consumer = make_nacos(), make_nacos()
    path = instance_path(app, "127.0.0.1:50071")
    first = ServiceInstance(app, "127.0.0.1", 50071, {"dubbo.metadata.revision": "a" * 32})
    folders: list[list[str]] = []
    docs: list[bytes | None] = []
    cancels = [
        consumer.watch_children(application_path(app), folders.append),
        consumer.watch_data(path, lambda data, _v: docs.append(data)),
    ]
    _until(lambda: folders == [[]] and docs == [None])
    with pytest.raises(NotInLayoutError, match="ephemeral"):
        provider.create(path, first.to_json().encode())
    provider.create(path, first.to_json().encode(), ephemeral=True)
    _until(lambda: folders[-1] == ["127.0.0.1:50071"] and docs[-1] is not None)
    seen = ServiceInstance.parse(docs[-1] or b"")
    assert (seen.app, seen.id, dict(seen.metadata)) == (app, first.id, dict(first.metadata))
    assert consumer.children("/services") and app in consumer.children("/services")

    # Nacos's own API: service <app> in DEFAULT_GROUP (Dubbo's NacosServiceDiscovery), the
    # instance metadata as its metadata.
    found = consumer._run(
        consumer._naming.list_instances(
            nacos_v2.ListInstanceParam(service_name=app, subscribe=False, healthy_only=None)
        )
    )
    assert [(i.ip, i.port, dict(i.metadata)) for i in found] == [
        ("127.0.0.1", 50071, {"dubbo.metadata.revision": "a" * 32})
    ]

    # A new revision is the same instance registered again; the watches follow.
    second = ServiceInstance(app, "127.0.0.1", 50071, {"dubbo.metadata.revision": "b" * 32})
    provider.set(path, second.to_json().encode())
    _until(lambda: ServiceInstance.parse(docs[-1] or b"{}").revision == "b" * 32)
    with pytest.raises(StoreError, match="another client's"):
        consumer.set(path, first.to_json().encode())
    with pytest.raises(StoreError, match="not the one its path names"):
        provider.create(instance_path(app, "127.0.0.1:1"), first.to_json().encode(), ephemeral=True)
    provider.delete(path)
    _until(lambda: folders[-1] == [] and docs[-1] is None)
    with pytest.raises(NoNodeError):
        consumer.get(path)
    for cancel in cancels:
        cancel()


def test_a_metadata_document_is_data_id_app_in_group_revision(
    make_nacos: Callable[..., NacosStore],
) -> None:
    app, revision = f"shop-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    store = make_nacos()
    store.create(metadata_path(app, revision), b'{"app":"shop"}')
    # Where Dubbo's NacosMetadataReport.getAppMetadata reads it: getConfig(app, revision).
    text = store._run(store._config.get_config(nacos_v2.ConfigParam(data_id=app, group=revision)))
    assert text == '{"app":"shop"}'
    assert store.children(f"/dubbo/metadata/{app}") == [revision]
    # A revision's group is no rules group.
    assert revision not in store.children("/dubbo/config")


def _server_instances(nacos: NacosServer, service: str, group: str) -> list[tuple[str, int]]:
    """``(ip, port)`` of a service's instances in ``group``, from Nacos's own HTTP API (not
    through any dubbo-py store)."""
    query = urllib.parse.urlencode(
        {"namespaceId": "public", "groupName": group, "serviceName": service}
    )
    url = f"http://{nacos.address}/nacos/v3/client/ns/instance/list?{query}"
    with urllib.request.urlopen(url, timeout=10) as answer:
        return sorted((i["ip"], int(i["port"])) for i in json.loads(answer.read())["data"])


def test_the_group_parameter_is_the_naming_group_of_both_levels(
    nacos: NacosServer, make_nacos: Callable[..., NacosStore]
) -> None:
    tag = uuid.uuid4().hex[:8]
    interface, app = f"org.example.Grouped{tag}", f"shop-{tag}"
    blue, green = f"blue-{tag}", f"green-{tag}"
    provider = make_nacos(f"?group={blue}")
    same, other, default = make_nacos(f"?group={blue}"), make_nacos(f"?group={green}"), make_nacos()
    url = _provider(interface, 50081)
    provider.create(layout.node_path(url), ephemeral=True)
    instance = ServiceInstance(app, "127.0.0.1", 50082, {"dubbo.metadata.revision": "c" * 32})
    provider.create(instance_path(app, instance.id), instance.to_json().encode(), ephemeral=True)

    # In Nacos itself: both instances in the naming group the address named, none in
    # DEFAULT_GROUP (where an address without group= puts them).
    service = f"providers:{interface}:1.0.0:blue"
    _until(lambda: _server_instances(nacos, service, blue) == [("127.0.0.1", 50081)])
    _until(lambda: _server_instances(nacos, app, blue) == [("127.0.0.1", 50082)])
    assert _server_instances(nacos, service, "DEFAULT_GROUP") == []
    assert _server_instances(nacos, app, "DEFAULT_GROUP") == []

    # A store of the same group sees both; stores of another group or of none see neither.
    folder = layout.category_path(interface, "providers")
    _until(lambda: [URL.decode(n) for n in same.children(folder)] == [url])
    assert same.children(application_path(app)) == [instance.id]
    assert app in same.children("/services") and interface in same.children("/dubbo")
    for store in (other, default):
        assert store.children(folder) == []
        assert store.children(application_path(app)) == []
        assert app not in store.children("/services")
        assert interface not in store.children("/dubbo")

    # Leaving is seen in the group too (deregistered from the group it was registered in).
    seen: list[list[str]] = []
    cancel = same.watch_children(folder, seen.append)
    _until(lambda: bool(seen) and seen[-1] != [])
    provider.delete(layout.node_path(url))
    _until(lambda: seen[-1] == [])
    _until(lambda: _server_instances(nacos, service, blue) == [])
    cancel()


def test_config_stays_in_dubbos_groups_whatever_the_registry_group(
    make_nacos: Callable[..., NacosStore],
) -> None:
    # Dubbo 3.3's rule listeners name group "dubbo" themselves, the mapping is group "mapping"
    # and a MetadataInfo document group <revision>, for every registry group: a rule written
    # on one group's address is read on another's and where Dubbo reads it.
    tag = uuid.uuid4().hex[:8]
    writer, reader = make_nacos(f"?group=blue-{tag}"), make_nacos(f"?group=green-{tag}")
    rule = layout.config_path(f"demo-{tag}.condition-router")
    writer.create(rule, b"conditions: [a]")
    writer.create(f"/dubbo/mapping/org.example.M{tag}", b"shop")
    writer.create(metadata_path(f"shop-{tag}", "d" * 32), b'{"app":"shop"}')
    for data_id, group, text in (
        (f"demo-{tag}.condition-router", "dubbo", "conditions: [a]"),
        (f"org.example.M{tag}", "mapping", "shop"),
        (f"shop-{tag}", "d" * 32, '{"app":"shop"}'),
    ):
        param = nacos_v2.ConfigParam(data_id=data_id, group=group)
        assert reader._run(reader._config.get_config(param)) == text
    assert reader.get(rule)[0] == b"conditions: [a]"


def test_a_store_without_a_work_dir_removes_its_temporary_one_when_closed(
    nacos: NacosServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each store makes the SDK's cache and log folder; a long-lived process opening stores
    # (the console, the CLI in a loop) must not leave one behind per store.
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    store = NacosStore(nacos.address)
    assert store.start(timeout=20)
    made = list(tmp_path.glob("dubbo-py-nacos-client-*"))
    assert len(made) == 1
    store.close()
    assert not made[0].exists()
    unstarted = NacosStore(nacos.address)
    unstarted.close()
    assert not list(tmp_path.glob("dubbo-py-nacos-client-*"))


def test_an_overwrite_creates_replaces_and_wins_over_a_write_made_in_between(
    make_nacos: Callable[..., NacosStore],
) -> None:
    # Registry.put_config without a version: the store's last own write is replaced by one
    # compare-and-set; another writer's write in between makes it read first, not fail.
    store, other = make_nacos(), make_nacos()
    path = layout.config_path(f"demo-{uuid.uuid4().hex[:8]}.condition-router")
    store.overwrite(path, b"conditions: [a]")
    assert store.get(path)[0] == b"conditions: [a]"
    store.overwrite(path, b"conditions: [b]")
    assert store.get(path)[0] == b"conditions: [b]"
    other.set(path, b"conditions: [c]")
    version = store.overwrite(path, b"conditions: [d]")
    assert store.get(path) == (b"conditions: [d]", version)
    _until(lambda: other.get(path)[0] == b"conditions: [d]")
