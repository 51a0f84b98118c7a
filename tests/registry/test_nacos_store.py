"""The ``nacos://`` store against the real Nacos server (tests/support/nacos.py): a provider URL
registered through one store is an instance of Dubbo's service name with its parameters as
metadata and is listed (and watched) by another store; a rule is config data id
``<key>.condition-router`` in group ``dubbo`` that Nacos's own client reads; paths outside
Dubbo's Nacos layout are refused by name."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import v2.nacos as nacos_v2

from dubbo_py.errors import NoNodeError, StoreError
from dubbo_py.registry import layout
from dubbo_py.registry.store.address import parse_registry_address
from dubbo_py.registry.store.nacos.store import NacosStore
from dubbo_py.url import URL
from tests.support.nacos import NacosServer

pytestmark = pytest.mark.nacos


@pytest.fixture
def make_nacos(nacos: NacosServer, tmp_path: Path) -> Iterator[Callable[[], NacosStore]]:
    opened: list[NacosStore] = []

    def make() -> NacosStore:
        store = parse_registry_address(f"nacos://{nacos.address}").new_store()
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
    make_nacos: Callable[[], NacosStore],
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
    make_nacos: Callable[[], NacosStore],
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
    make_nacos: Callable[[], NacosStore],
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
    make_nacos: Callable[[], NacosStore],
) -> None:
    store = make_nacos()
    for call in (
        lambda: store.create("/services/shop/127.0.0.1:1", b"x", ephemeral=True),
        lambda: store.children("/dubbo/metadata"),
        lambda: store.get("/anything/else"),
    ):
        with pytest.raises(StoreError, match="Dubbo's Nacos layout"):
            call()
