"""Opening the registry for one CLI run: fail fast (with one clear line) when it is unreachable.

A consumer or provider keeps retrying an unreachable ZooKeeper in the background; an operator's
command should instead say so at once, so the CLI opens stores itself rather than through
:func:`dubbo_py.rpc.application.open_store`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from dubbo_py.registry.address import RegistryAddress
from dubbo_py.registry.store import Store, StoreError

__all__ = ["RegistryUnreachable", "StoreOpener", "open_admin_store"]

#: Opens (and connects) the store of an address within a timeout in seconds.
StoreOpener = Callable[[RegistryAddress, float], Store]


class RegistryUnreachable(StoreError):
    """The registry did not answer (the message names it)."""


def _store_class(module: str, name: str) -> Any:
    # Imported by name: the store implementations live in their own modules (and pull in
    # kazoo / sqlite only when that registry is used).
    return getattr(importlib.import_module(module), name)


def open_admin_store(address: RegistryAddress, timeout: float) -> Store:
    """The connected store of ``address``; :class:`RegistryUnreachable` when it cannot be
    reached within ``timeout`` seconds, StoreError when it cannot be opened at all."""
    if address.kind == "direct":
        raise StoreError(
            f"{address} is a direct provider address, not a registry "
            "(use zookeeper://host:port or sqlite:///path)"
        )
    if address.kind == "sqlite":
        embedded = _store_class("dubbo_py.registry.embedded", "EmbeddedStore")(address.location)
        start = getattr(embedded, "start", None)
        if callable(start):
            start()
        store: Store = embedded
        return store
    zk = _store_class("dubbo_py.registry.zookeeper", "ZooKeeperStore")(
        address.location, address.chroot
    )
    if not zk.start(timeout):
        zk.close()
        raise RegistryUnreachable(f"registry {address} unreachable (waited {timeout:g}s)")
    store = zk
    return store
