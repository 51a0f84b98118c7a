"""The applications of one process share one registry session per address and identity; each
one's lease still ends like a session of its own (watches stop, ephemeral nodes go)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

import dubbo_py
from dubbo_py.errors import StoreError
from dubbo_py.registry.store.base import Store
from dubbo_py.registry.store.embedded import EmbeddedStore
from dubbo_py.registry.store.shared import SharedStores, StoreLease
from dubbo_py.registry.store.zookeeper import ZooKeeperStore
from tests.support.waiting import Recorder
from tests.support.zookeeper import ZooKeeperServer


def _opener(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path, opened: list[Store]
) -> Callable[[], Store]:
    chroot = f"/shared-{uuid.uuid4().hex[:10]}"

    def open_store() -> Store:
        store: Store
        if backend == "zookeeper":
            server = request.getfixturevalue("zookeeper")
            zk = ZooKeeperStore(server.address, chroot, connect_timeout=20)
            assert zk.start()
            store = zk
        else:
            store = EmbeddedStore(tmp_path / "registry.db", poll_interval=0.01)
        opened.append(store)
        return store

    return open_store


def test_a_closed_lease_stops_its_watches_and_removes_its_ephemeral_nodes(
    request: pytest.FixtureRequest, store_backend: str, tmp_path: Path
) -> None:
    opened: list[Store] = []
    pool = SharedStores()
    open_store = _opener(request, store_backend, tmp_path, opened)
    first, second = pool.lease("k", open_store), pool.lease("k", open_store)
    assert first.shared is second.shared and len(opened) == 1

    first.create("/svc/providers/first", ephemeral=True)
    second.create("/svc/providers/second", ephemeral=True)
    seen_first, seen_second = Recorder(), Recorder()
    first.watch_children("/svc/providers", seen_first)
    second.watch_children("/svc/providers", seen_second)
    seen_first.wait_last(["first", "second"])
    seen_second.wait_last(["first", "second"])

    first.close()
    seen_second.wait_last(["second"])  # its node went, as with a session of its own
    assert seen_first.last == ["first", "second"]  # and it heard nothing more
    with pytest.raises(StoreError, match="closed"):
        first.children("/svc/providers")

    second.close()
    assert pool.open_count() == 0
    with pytest.raises(StoreError):
        opened[0].children("/svc/providers")  # the last lease closed the store


@pytest.mark.zookeeper
def test_applications_of_a_process_share_one_session_per_address_and_identity(
    zookeeper: ZooKeeperServer,
) -> None:
    address = f"zookeeper://{zookeeper.address}/apps-{uuid.uuid4().hex[:8]}"
    shop = dubbo_py.Application("shop", address)
    cart = dubbo_py.Application("cart", address)
    admin = dubbo_py.Application("admin", address, auth="ops:secret")
    try:
        assert shop.registry is not None and cart.registry is not None
        assert admin.registry is not None
        shop_store, cart_store = shop.registry.store, cart.registry.store
        admin_store = admin.registry.store
        assert isinstance(shop_store, StoreLease) and isinstance(cart_store, StoreLease)
        assert isinstance(admin_store, StoreLease)
        assert shop_store.shared is cart_store.shared
        assert admin_store.shared is not shop_store.shared  # another identity
        client_ids = {s.kazoo_client.client_id for s in (shop_store, cart_store)}
        assert len(client_ids) == 1  # one ZooKeeper session

        seen = Recorder()
        cart.registry.watch_config("demo.Greeter.condition-router", seen)
        seen.wait_last(None)
        shop.close()
        cart.registry.put_config("demo.Greeter.condition-router", "conditions: []\n")
        seen.wait_last("conditions: []\n")
    finally:
        for app in (shop, cart, admin):
            app.close()


def test_a_node_another_application_took_over_stays_when_the_first_closes(
    request: pytest.FixtureRequest, store_backend: str, tmp_path: Path
) -> None:
    """Two applications of one name registering the same URL: the later one's registration
    takes the node over (as from an old session), and outlives the earlier application."""
    pool = SharedStores()
    open_store = _opener(request, store_backend, tmp_path, [])
    first, second = pool.lease("k", open_store), pool.lease("k", open_store)
    first.create("/svc/providers/same", ephemeral=True)
    second.delete("/svc/providers/same")  # what Registry.register does on NodeExistsError
    second.create("/svc/providers/same", ephemeral=True)
    first.close()
    assert second.children("/svc/providers") == ["same"]
    second.close()
