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
    with pytest.raises(RegistryAddressError, match="zookeeper, etcd, etcds, nacos, sqlite or tri"):
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


def test_a_direct_address_is_no_store() -> None:
    with pytest.raises(RegistryAddressError, match="direct provider address"):
        parse_registry_address("tri://127.0.0.1:50051").new_store()


def test_an_identity_on_etcd_is_its_user_and_password() -> None:
    store = parse_registry_address("etcd://127.0.0.1:1").new_store(auth=("u", "p"))
    try:
        assert store._credentials == ("u", "p")  # type: ignore[attr-defined]
    finally:
        store.close()


def test_etcds_takes_the_tls_files_as_options_and_round_trips() -> None:
    text = "etcds://e1:2379,e2/dubbo?key=/k.pem&ca=/ca.pem&cert=/c.pem"
    address = parse_registry_address(text)
    assert (address.kind, address.location, address.chroot) == (
        "etcds",
        "e1:2379,e2:2379",
        "/dubbo",
    )
    assert address.option("ca") == "/ca.pem" and address.option("key") == "/k.pem"
    assert parse_registry_address(str(address)) == address
    assert parse_registry_address("etcds://e1").location == "e1:2379"


def test_a_nacos_address_names_its_namespace() -> None:
    address = parse_registry_address("nacos://n1,n2:9848?namespace=prod&register-mode=interface")
    assert (address.kind, address.location, address.option("namespace")) == (
        "nacos",
        "n1:8848,n2:9848",
        "prod",
    )
    assert parse_registry_address(str(address)) == address
    assert parse_registry_address("nacos://n1").option("namespace") is None


def test_a_nacos_group_is_its_naming_group_not_a_root() -> None:
    # Dubbo's NacosRegistry reads the registry URL's group as the Nacos group of its service
    # instances; on zookeeper:// the same parameter is the root, and only /dubbo is taken.
    address = parse_registry_address("nacos://n1?namespace=prod&group=blue")
    assert (address.option("namespace"), address.option("group")) == ("prod", "blue")
    assert address != parse_registry_address("nacos://n1?namespace=prod&group=green")
    assert parse_registry_address(str(address)) == address
    store = address.new_store()
    assert (
        store.naming_group == "blue" and str(store) == "nacos://n1:8848?namespace=prod&group=blue"
    )
    assert parse_registry_address("nacos://n1").new_store().naming_group == "DEFAULT_GROUP"
    # group=dubbo is Dubbo's default root elsewhere, but on Nacos the group "dubbo" (as Dubbo).
    assert parse_registry_address("nacos://n1?group=dubbo").new_store().naming_group == "dubbo"
    with pytest.raises(RegistryAddressError, match="group=blue asks for the registry root"):
        parse_registry_address("zookeeper://z1?group=blue")
    with pytest.raises(StoreError, match="group='a b' is no Nacos group name"):
        parse_registry_address("nacos://n1?group=a b").new_store()
    with pytest.raises(RegistryAddressError, match="option 'group' needs a value"):
        parse_registry_address("nacos://n1?group=")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("etcd://e1?ca=/ca.pem", "option 'ca' is a TLS option: it needs etcds://"),
        ("zookeeper://z1?ca=/ca.pem", "option 'ca' is a TLS option: it needs etcds://"),
        (
            "zookeeper://z1?namespace=prod",
            "option 'namespace' is a Nacos option: it needs nacos://",
        ),
        ("nacos://n1?ca=/ca.pem", "option 'ca' is a TLS option: it needs etcds://"),
        ("etcds://e1?ca=", "option 'ca' needs a value"),
        ("etcds://e1?ca=/a&ca=/b", "option 'ca' given twice"),
        # Neither a TLS option nor one of Dubbo's registry parameters.
        ("etcds://e1?passwd=x", "unknown registry parameter 'passwd'"),
        # Dubbo's spelling of a Nacos identity (its value hidden in the message).
        ("etcds://e1?password=x", r"'etcds://e1\?password=\*\*\*': option 'password' is a Nacos"),
    ],
)
def test_bad_options_name_the_address_and_the_option(text: str, message: str) -> None:
    with pytest.raises(RegistryAddressError, match=message):
        parse_registry_address(text)


def test_unreadable_tls_files_are_named_at_once(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(StoreError, match=f"etcds://e1:2379: cannot read the ca= file {missing}"):
        parse_registry_address(f"etcds://e1?ca={missing}").new_store()
    not_pem = tmp_path / "ca.txt"
    not_pem.write_text("hello")
    with pytest.raises(StoreError, match=r"the ca= file .* is not PEM"):
        parse_registry_address(f"etcds://e1?ca={not_pem}").new_store()
    with pytest.raises(StoreError, match="needs both cert= and key= \\(got only cert\\)"):
        parse_registry_address(f"etcds://e1?cert={not_pem}").new_store()
