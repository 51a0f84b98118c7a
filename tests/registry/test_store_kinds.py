"""The store table: one row per backend, read by address parsing, applications and the CLI."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from dubbo_py.errors import RegistryAddressError, StoreError
from dubbo_py.registry.store.address import parse_registry_address
from dubbo_py.registry.store.kinds import STORES


@pytest.mark.parametrize("scheme", sorted(STORES))
def test_every_row_names_a_store_class_with_a_constructor_from_an_address(scheme: str) -> None:
    module, _, name = STORES[scheme].target.partition(":")
    store_class = getattr(importlib.import_module(module), name)
    assert callable(store_class.from_address)


def test_networked_kinds_take_their_default_port_from_the_table() -> None:
    assert parse_registry_address("zookeeper://127.0.0.1").location == "127.0.0.1:2181"
    assert parse_registry_address("etcd://127.0.0.1/p").location == "127.0.0.1:2379"
    assert parse_registry_address("etcd://127.0.0.1").networked
    assert not parse_registry_address("sqlite:///tmp/x.db").networked


def test_an_unknown_scheme_lists_the_table() -> None:
    with pytest.raises(RegistryAddressError, match="zookeeper, etcd, sqlite or tri"):
        parse_registry_address("consul://127.0.0.1:8500")


def test_new_store_opens_the_class_of_the_kind(tmp_path: Path) -> None:
    store = parse_registry_address(f"sqlite://{tmp_path}/r.db").new_store()
    try:
        assert type(store).__name__ == "EmbeddedStore"
        assert store.start(5.0)
    finally:
        store.close()
    zk = parse_registry_address("zookeeper://127.0.0.1:1/chroot").new_store(connect_timeout=0.1)
    assert type(zk).__name__ == "ZooKeeperStore"
    zk.close()


def test_a_direct_address_is_no_store_and_etcd_refuses_a_zookeeper_identity() -> None:
    with pytest.raises(RegistryAddressError, match="direct provider address"):
        parse_registry_address("tri://127.0.0.1:50051").new_store()
    with pytest.raises(StoreError, match="etcd store does not authenticate"):
        parse_registry_address("etcd://127.0.0.1:1").new_store(auth=("u", "p"))
