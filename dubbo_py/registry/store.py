"""The coordination-store interface the registry is built on (design §4).

A store is a tree of nodes addressed by ``/``-separated paths, as in ZooKeeper. Two stores
implement it: :mod:`dubbo_py.registry.zookeeper` (kazoo) and :mod:`dubbo_py.registry.embedded`
(SQLite in WAL mode, ephemeral nodes held by a heartbeat lease). Everything above the store is
shared code, tested against both.

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
from typing import Protocol

__all__ = [
    "BadVersionError",
    "Cancel",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "SessionState",
    "Store",
    "StoreError",
]


class StoreError(Exception):
    """A store operation failed (the message names the path)."""


class NoNodeError(StoreError):
    """The node does not exist."""


class NodeExistsError(StoreError):
    """The node already exists."""


class BadVersionError(StoreError):
    """A conditional write lost a race: the node's version is not the one given."""


class NotEmptyError(StoreError):
    """A non-recursive delete of a node that has children."""


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

    def close(self) -> None:
        """Release the session: its ephemeral nodes disappear, watches stop."""
        ...
