"""The store kinds: one table from an address's scheme to its store class.

The table is data (names, not imports): each backend pulls in its own dependencies (kazoo,
sqlite3, etcd's API), so a store's module is imported only when an address of its kind is
opened (:meth:`~dubbo_py.registry.store.address.RegistryAddress.new_store`). Address parsing,
applications and the CLI all read this table: a new backend is one row here and a
``from_address`` class method on its store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["DEFAULT_UNREGISTER_NOTICE", "STORES", "StoreKind"]

#: :attr:`StoreKind.unregister_notice` of a store whose watches fire at once.
DEFAULT_UNREGISTER_NOTICE = 0.5


@dataclass(frozen=True, slots=True)
class StoreKind:
    """One kind of registry store."""

    #: The address scheme (``zookeeper://``) and the kind's name.
    scheme: str
    #: Where the store class lives, as ``"module:Class"``.
    target: str
    #: The port a host without one gets; ``None`` for a store that is not a network server.
    default_port: int | None
    #: The ``?name=value`` options its addresses take (``etcds://``: the TLS files;
    #: ``nacos://``: the namespace and the naming group).
    options: frozenset[str] = frozenset()
    #: How long a provider waits, once unregistered, before it stops serving: the time its
    #: consumers may take to see it gone. A ZooKeeper or etcd watch fires within
    #: milliseconds; a Nacos consumer hears the naming push or polls the service (every
    #: 0.5 s), and a push took up to ~1.4 s under load here (docs/registry.md, "Nacos").
    unregister_notice: float = DEFAULT_UNREGISTER_NOTICE

    @property
    def networked(self) -> bool:
        """Whether the store is a server reached over the network (it may be down when an
        application starts)."""
        return self.default_port is not None


STORES: Mapping[str, StoreKind] = MappingProxyType(
    {
        kind.scheme: kind
        for kind in (
            StoreKind("zookeeper", "dubbo_py.registry.store.zookeeper:ZooKeeperStore", 2181),
            StoreKind("etcd", "dubbo_py.registry.store.etcd.store:EtcdStore", 2379),
            # etcd over TLS: its options are the "tls" rows of the parameter table
            # (dubbo_py/registry/store/parameters.py).
            StoreKind(
                "etcds",
                "dubbo_py.registry.store.etcd.store:EtcdStore",
                2379,
                frozenset({"ca", "cert", "key"}),
            ),
            # Nacos 2.x/3.x: Dubbo's Nacos layout, not a tree (dubbo_py/registry/store/nacos).
            # ``group`` is its naming group (Dubbo's NacosRegistry), not the root it is on the
            # other stores; ``username``/``password`` its identity as Dubbo writes it (the
            # address parser makes them the ``auth`` setting: they are not kept as options).
            StoreKind(
                "nacos",
                "dubbo_py.registry.store.nacos.store:NacosStore",
                8848,
                frozenset({"namespace", "group", "username", "password"}),
                unregister_notice=2.0,
            ),
            StoreKind("sqlite", "dubbo_py.registry.store.embedded:EmbeddedStore", None),
        )
    }
)
