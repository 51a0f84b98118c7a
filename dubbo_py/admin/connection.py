"""Opening the registry for one CLI run: fail fast (with one clear line) when it is unreachable.

A consumer or provider keeps retrying an unreachable ZooKeeper in the background; an operator's
command should instead say so at once, so the CLI opens stores itself rather than through
:func:`dubbo_py.app.application.open_store`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dubbo_py.errors import StoreError
from dubbo_py.registry.store.address import RegistryAddress
from dubbo_py.registry.store.advice import start_advice
from dubbo_py.registry.store.base import Store

__all__ = ["RegistryUnreachable", "StoreOpener", "open_admin_store"]

#: Opens (and connects) the store of an address within a timeout in seconds.
StoreOpener = Callable[[RegistryAddress, float], Store]


class RegistryUnreachable(StoreError):
    """The registry did not answer (the message names it)."""


def open_admin_store(
    address: RegistryAddress,
    timeout: float,
    auth: tuple[str, str] | None = None,
    *,
    create: bool = True,
) -> Store:
    """The connected store of ``address``; :class:`RegistryUnreachable` when it cannot be
    reached within ``timeout`` seconds, StoreError when it cannot be opened at all (an etcd
    refusing the password or the certificate). ``auth`` is the registry identity ``(user,
    password)``: a ZooKeeper digest, an etcd user. Without ``create``, an embedded registry
    whose file does not exist is :class:`RegistryUnreachable` rather than a new empty one."""
    if address.kind == "direct":
        raise StoreError(
            f"{address} is a direct provider address, not a registry "
            "(use zookeeper://host:port, etcd://host:port, etcds://host:port or sqlite:///path)"
        )
    if not create and address.kind == "sqlite":
        _check_embedded_exists(address)
    store = address.new_store(auth=auth, connect_timeout=timeout)
    try:
        started = store.start(timeout)
    except BaseException:  # refused (an etcd password, a certificate): said as it is
        store.close()
        raise
    if not started and address.networked:
        # What the store last heard, when it says (etcd: gRPC's reason, and a hint for plain
        # text sent to a TLS etcd).
        failure = getattr(store, "last_failure", None)
        store.close()
        # Else what to do about it (ZooKeeper here: installed or not, running or not).
        said = f": {failure}" if failure else f": {start_advice(str(address))}"
        raise RegistryUnreachable(f"registry {address} unreachable (waited {timeout:g}s){said}")
    return store


def _check_embedded_exists(address: RegistryAddress) -> None:
    path = Path(address.location)
    if not path.parent.is_dir():
        raise RegistryUnreachable(
            f"no embedded registry at {address}: the folder {path.parent} does not exist "
            "(check --registry / $DUBBO_PY_REGISTRY)"
        )
    if not path.is_file():
        raise RegistryUnreachable(
            f"no embedded registry at {address}: {path.name} does not exist in {path.parent} "
            "(check --registry / $DUBBO_PY_REGISTRY; providers create it when they start)"
        )
