"""One registry session per process: the applications of a process share one store per registry.

Each :class:`~dubbo_py.Application` used to open a store of its own: a ZooKeeper session (with
its connection and threads) or an embedded-registry session (with its own poller). A process
that runs several applications on one registry -- a gateway hosting several, a test harness,
the push fan-out benchmark with ten per process -- then made ZooKeeper keep a session per
application and send each one every watch event, and made every application read every
change again. Now the applications of a process on the same registry address, chroot and
identity share one store: one session, one watch event per change, one read per change (the
stores' watches of one path share their reads).

Each application holds a :class:`StoreLease` on the shared store. The lease does what closing
the application's own session used to do when the application closes: its watches stop, its
session listeners hear nothing more, and the ephemeral nodes it created (and did not delete)
are deleted; the store itself is closed with its last lease. A lease closed, operations on it
fail as on a closed store.

Apache Dubbo shares one ZooKeeper client per address within an application (its registry,
config center and metadata report); two applications of one JVM each have their own. dubbo-py
shares across the applications of a process too (docs/registry.md says why).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

from dubbo_py.errors import StoreError
from dubbo_py.registry.store.base import Cancel, SessionState, Store

__all__ = ["SharedStores", "StoreLease", "process_stores"]


class StoreLease:
    """One application's use of a shared store: the :class:`~dubbo_py.registry.store.base.Store`
    operations, plus the store's other attributes (``address``, ``connected``, ...), read
    through."""

    def __init__(self, pool: SharedStores, key: Hashable, shared: _Shared) -> None:
        self._pool = pool
        self._key = key
        self._shared = shared
        self._store = shared.store
        self._lock = threading.Lock()
        self._cancels: dict[int, Cancel] = {}
        self._next_watch = 0
        self._closed = False

    @property
    def shared(self) -> Store:
        """The store shared by every lease on it."""
        return self._store

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def _check(self, path: str) -> None:
        if self._closed:
            raise StoreError(f"{getattr(self._store, 'address', self._store)} is closed ({path})")

    # -- operations --------------------------------------------------------------------------

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        makepath: bool = True,
        protected: bool = False,
    ) -> None:
        """Create a node; an ephemeral one is deleted when this lease closes."""
        self._check(path)
        self._store.create(path, data, ephemeral=ephemeral, makepath=makepath, protected=protected)
        if ephemeral:
            self._shared.created(path, self)

    def ensure_path(self, path: str) -> None:
        """Create the node and its missing parents."""
        self._check(path)
        self._store.ensure_path(path)

    def exists(self, path: str) -> bool:
        """Whether the node exists."""
        self._check(path)
        return self._store.exists(path)

    def get(self, path: str) -> tuple[bytes, int]:
        """The node's data and version."""
        self._check(path)
        return self._store.get(path)

    def set(self, path: str, data: bytes, version: int = -1) -> int:
        """Replace the node's data; returns the new version."""
        self._check(path)
        return self._store.set(path, data, version)

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        """Delete the node (and its subtree when ``recursive``)."""
        self._check(path)
        self._store.delete(path, version, recursive=recursive)
        self._shared.deleted(path, recursive=recursive)

    def children(self, path: str) -> list[str]:
        """The sorted names of the node's children."""
        self._check(path)
        return self._store.children(path)

    # -- watches and sessions ----------------------------------------------------------------

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> Cancel:
        """Persistent children watch, stopped when this lease closes."""
        self._check(path)
        return self._tracked(self._store.watch_children(path, callback))

    def watch_data(self, path: str, callback: Callable[[bytes | None, int], None]) -> Cancel:
        """Persistent data watch, stopped when this lease closes."""
        self._check(path)
        return self._tracked(self._store.watch_data(path, callback))

    def _tracked(self, cancel: Cancel) -> Cancel:
        with self._lock:
            number = self._next_watch
            self._next_watch += 1
            self._cancels[number] = cancel

        def untracked() -> None:
            with self._lock:
                self._cancels.pop(number, None)
            cancel()

        return untracked

    def add_session_listener(self, listener: Callable[[SessionState], None]) -> None:
        """Be told of session changes until this lease closes."""

        def while_open(state: SessionState) -> None:
            if not self._closed:
                listener(state)

        self._store.add_session_listener(while_open)

    def close(self) -> None:
        """Stop this lease's watches and listeners, delete the ephemeral nodes it created, and
        close the store if no other lease uses it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            cancels = list(self._cancels.values())
            self._cancels.clear()
        for cancel in cancels:
            cancel()
        for path in self._shared.release_nodes(self):
            with contextlib.suppress(StoreError):
                self._store.delete(path)
        self._pool.release(self._key, self._store)

    def __getattr__(self, name: str) -> Any:
        # Only called for what the lease does not define: the store's own extras.
        if name.startswith("__") or name in ("_store", "_pool", "_key", "_shared"):
            raise AttributeError(name)
        return getattr(self._store, name)

    def __repr__(self) -> str:
        return f"StoreLease({self._store!r})"


class _Shared:
    """A shared store, how many leases hold it, and which lease created each ephemeral node
    (the last one to create it: like a session taking a node over from another)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.leases = 0
        self._lock = threading.Lock()
        self._owner: dict[str, StoreLease] = {}

    def created(self, path: str, lease: StoreLease) -> None:
        with self._lock:
            self._owner[path] = lease

    def deleted(self, path: str, *, recursive: bool) -> None:
        with self._lock:
            self._owner.pop(path, None)
            if recursive:
                below = path.rstrip("/") + "/"
                for gone in [p for p in self._owner if p.startswith(below)]:
                    del self._owner[gone]

    def release_nodes(self, lease: StoreLease) -> list[str]:
        """The ephemeral nodes ``lease`` owns, forgotten: the caller deletes them."""
        with self._lock:
            mine = sorted(p for p, owner in self._owner.items() if owner is lease)
            for path in mine:
                del self._owner[path]
        return mine


class SharedStores:
    """Stores by key (registry address, chroot, identity), each with the number of its open
    leases. A forked child process starts with none (a store's threads do not survive a
    fork)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._stores: dict[Hashable, _Shared] = {}

    def lease(self, key: Hashable, open_store: Callable[[], Store]) -> StoreLease:
        """A lease on the store of ``key``, opened with ``open_store`` when none is open."""
        with self._lock:
            if os.getpid() != self._pid:
                self._pid, self._stores = os.getpid(), {}
            shared = self._stores.get(key)
            if shared is None:
                # Under the lock: applications starting together wait for one session.
                shared = self._stores[key] = _Shared(open_store())
            shared.leases += 1
        return StoreLease(self, key, shared)

    def release(self, key: Hashable, store: Store) -> None:
        """One lease on ``store`` closed; the last one closes it."""
        with self._lock:
            shared = self._stores.get(key)
            if shared is None or shared.store is not store:
                return
            shared.leases -= 1
            if shared.leases > 0:
                return
            del self._stores[key]
        store.close()

    def open_count(self) -> int:
        """How many shared stores are open now."""
        with self._lock:
            return len(self._stores)


#: The process's shared stores (what :class:`~dubbo_py.Application` leases from).
process_stores = SharedStores()


if TYPE_CHECKING:
    # mypy proves here that a lease satisfies the Store protocol.
    def _is_a_store(lease: StoreLease) -> Store:
        return lease
