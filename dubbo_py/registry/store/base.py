"""The coordination-store interface the registry is built on (docs/design.md §4).

A store is a tree of nodes addressed by ``/``-separated paths, as in ZooKeeper. Two stores
implement it: :mod:`dubbo_py.registry.store.zookeeper` (kazoo) and
:mod:`dubbo_py.registry.store.embedded` (SQLite in WAL mode, ephemeral nodes held by a heartbeat
lease). Everything above the store is shared code, tested against both.

Watches are *persistent*: a watch callback fires once at registration with the current state and
again after every change until cancelled, and survives reconnection and session expiry. A watch
on an absent node reports an empty child list / ``None`` data and fires when the node appears.
Callbacks run on a store-owned thread, must not block for long, and may see coalesced changes
(they always receive the latest state).

Clarifications both stores honour: the first call comes shortly *after* registration, on the
store's thread (with ZooKeeper, once connected). A call is made only when the state differs
from the last one reported; for a children watch, the node's creation or deletion counts as a
change even when the list stays empty. Once a cancel function has returned, its callback is
never called again (cancel waits for a call in progress on another thread; a callback may
cancel its own watch). Operations raise :class:`StoreError` while a store is disconnected or
closed.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "AccessControlled",
    "Cancel",
    "NodeAccess",
    "SessionState",
    "Store",
]


class SessionState(enum.Enum):
    """Connection events a store reports to its session listeners."""

    CONNECTED = "connected"
    #: Connection lost; the session (and its ephemeral nodes) may still be alive.
    SUSPENDED = "suspended"
    #: Reconnected within the same session: ephemeral nodes are intact.
    RECONNECTED = "reconnected"
    #: The session expired; a new one has been established and ephemeral nodes of the old
    #: session are gone. Whoever owns ephemeral nodes must create them again.
    NEW_SESSION = "new_session"


Cancel = Callable[[], None]


class Store(Protocol):
    """A tiny ZooKeeper-like coordination store."""

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        makepath: bool = True,
        protected: bool = False,
    ) -> None:
        """Create a node (parents too when ``makepath``; parents are never ephemeral).
        Raises :class:`NodeExistsError`, or :class:`NoNodeError` for a missing parent.

        ``protected``: only this store's identity may change or delete the node (and create or
        delete children of it), everyone may read it — ZooKeeper ACLs with the digest identity
        the store authenticates with; parents created on the way are protected alike. Without
        an identity (or in the embedded store, whose access control is its file's permissions)
        the node is created as usual."""
        ...

    def ensure_path(self, path: str) -> None:
        """Create the node and its parents if absent (persistent, empty data)."""
        ...

    def exists(self, path: str) -> bool:
        """Whether the node exists."""
        ...

    def get(self, path: str) -> tuple[bytes, int]:
        """The node's data and version (0 after create, +1 per set). :class:`NoNodeError`."""
        ...

    def set(self, path: str, data: bytes, version: int = -1) -> int:
        """Replace the data if the version matches (-1: any); returns the new version.
        Raises :class:`NoNodeError` or :class:`BadVersionError`."""
        ...

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        """Delete the node (and, when ``recursive``, its subtree). :class:`NoNodeError`,
        :class:`BadVersionError`, :class:`NotEmptyError`."""
        ...

    def children(self, path: str) -> list[str]:
        """The names of the node's children, sorted. :class:`NoNodeError`."""
        ...

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> Cancel:
        """Persistent children watch (see module doc); returns a function that cancels it."""
        ...

    def watch_data(self, path: str, callback: Callable[[bytes | None, int], None]) -> Cancel:
        """Persistent data watch: ``(data, version)``; ``(None, -1)`` while the node is absent."""
        ...

    def add_session_listener(self, listener: Callable[[SessionState], None]) -> None:
        """Be told of connection changes (called on a store-owned thread)."""
        ...

    def start(self, timeout: float | None = None) -> bool:
        """Open the session, waiting up to ``timeout`` seconds (the store's own default when
        None) for it to connect; False if it has not (a networked store keeps trying in the
        background)."""
        ...

    def close(self) -> None:
        """Release the session: its ephemeral nodes disappear, watches stop."""
        ...


#: Everything but reading: what "changing" a node (or its children) takes.
CHANGE = frozenset({"write", "create", "delete", "admin"})


@dataclass(frozen=True, slots=True)
class NodeAccess:
    """Who may do what to one node — a ZooKeeper ACL read back. Permissions are names from
    ``read``, ``write`` (its data), ``create`` and ``delete`` (its children), ``admin`` (its
    ACL)."""

    #: What anyone may do.
    world: frozenset[str]
    #: Digest identities (user names) and what each may do, sorted by name.
    users: tuple[tuple[str, frozenset[str]], ...] = ()
    #: Entries of other schemes (``ip``, ``sasl``, ...) as ``scheme:id``; never trusted.
    others: tuple[str, ...] = ()

    @property
    def open(self) -> bool:
        """Whether anyone may change the node, its children or its ACL."""
        return self.open_beyond(frozenset({"read"}))

    def open_beyond(self, allowed: frozenset[str]) -> bool:
        """Whether anyone (or an identity of another scheme) may do more than ``allowed``."""
        return bool(self.world - allowed) or bool(self.others)

    def may(self, user: str, permission: str) -> bool:
        """Whether the digest identity ``user`` has ``permission``."""
        return any(name == user and permission in perms for name, perms in self.users)

    @property
    def changers(self) -> frozenset[str]:
        """The digest identities that may change the node in any way."""
        return frozenset(name for name, perms in self.users if perms & CHANGE)

    def describe(self) -> str:
        """``"anyone: read; admin: all"`` — for messages."""

        def perms(p: frozenset[str]) -> str:
            return "all" if p >= CHANGE | {"read"} else ",".join(sorted(p)) or "nothing"

        parts = [f"anyone: {perms(self.world)}"] if self.world else []
        parts += [f"{name}: {perms(p)}" for name, p in self.users]
        parts += list(self.others)
        return "; ".join(parts) or "nobody"


@runtime_checkable
class AccessControlled(Store, Protocol):
    """A store whose nodes carry access-control lists (ZooKeeper). The embedded store has
    none: whoever may write its file may change anything."""

    @property
    def identity(self) -> str | None:
        """The digest identity (user name) this store authenticates as, None without one."""
        ...

    def access(self, path: str) -> NodeAccess:
        """Who may do what to the node. :class:`NoNodeError`."""
        ...

    def restrict(self, path: str, *, shared: bool = False) -> None:
        """Make the node this identity's: it may do anything, anyone may read (and, when
        ``shared``, create children — but never delete or change what others created).
        :class:`StoreError` when this identity may not change the node's ACL."""
        ...
