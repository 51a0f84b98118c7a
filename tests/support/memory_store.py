"""An in-memory coordination store for unit tests of the code above the store (CLI logic).

A :class:`MemoryTree` is the shared "server"; each :class:`MemoryStore` on it is one session
(like one process connected to ZooKeeper): its ephemeral nodes go when it closes. Watches fire
synchronously, which is enough for command logic; the real stores are tested on their own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from dubbo_py.errors import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError, StoreError
from dubbo_py.registry.store.base import Cancel, SessionState


@dataclass
class _Node:
    data: bytes = b""
    version: int = 0
    owner: int | None = None  # session id for ephemeral nodes


@dataclass
class MemoryTree:
    """The shared node tree (what a ZooKeeper server holds)."""

    nodes: dict[str, _Node] = field(default_factory=lambda: {"/": _Node()})
    lock: threading.RLock = field(default_factory=threading.RLock)
    sessions: int = 0
    #: Called with (operation, path) before each write; tests use it to interleave writers.
    before_write: Callable[[str, str], None] | None = None


def _parent(path: str) -> str:
    head = path.rsplit("/", 1)[0]
    return head or "/"


def _check(path: str) -> None:
    if not path.startswith("/") or (path != "/" and path.endswith("/")) or "//" in path:
        raise StoreError(f"bad path {path!r}")


class MemoryStore:
    """One session on a :class:`MemoryTree`; implements the Store protocol."""

    def __init__(self, tree: MemoryTree | None = None) -> None:
        self.tree = tree or MemoryTree()
        with self.tree.lock:
            self.tree.sessions += 1
            self.session = self.tree.sessions
        self.closed = False
        self._children_watches: list[tuple[str, Callable[[list[str]], None]]] = []
        self._data_watches: list[tuple[str, Callable[[bytes | None, int], None]]] = []

    # ----------------------------------------------------------------- helpers

    def _alive(self) -> None:
        if self.closed:
            raise StoreError("store is closed")

    def _hook(self, op: str, path: str) -> None:
        hook = self.tree.before_write
        if hook is not None:
            # Not re-entered: writes the hook makes itself go straight through.
            self.tree.before_write = None
            try:
                hook(op, path)
            finally:
                if self.tree.before_write is None:
                    self.tree.before_write = hook

    def _kids(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted(
            p[len(prefix) :]
            for p in self.tree.nodes
            if p.startswith(prefix) and "/" not in p[len(prefix) :] and p != prefix
        )

    def _notify(self, path: str) -> None:
        for watched, callback in list(self._children_watches):
            if watched in (path, _parent(path)):
                node = self.tree.nodes.get(watched)
                callback(self._kids(watched) if node is not None else [])
        for watched, data_callback in list(self._data_watches):
            if watched == path:
                node = self.tree.nodes.get(path)
                if node is None:
                    data_callback(None, -1)
                else:
                    data_callback(node.data, node.version)

    def _node(self, path: str, version: int = -1) -> _Node:
        """The node at ``path`` (caller holds the tree's lock): NoNodeError when there is none,
        BadVersionError when ``version`` is given (not -1) and is not its version."""
        node = self.tree.nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        if version != -1 and version != node.version:
            raise BadVersionError(f"{path}: version {node.version}, not {version}")
        return node

    # ----------------------------------------------------------------- Store protocol

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        makepath: bool = True,
        protected: bool = False,
    ) -> None:
        """Create a node (parents when ``makepath``)."""
        self._alive()
        _check(path)
        self._hook("create", path)
        with self.tree.lock:
            if path in self.tree.nodes:
                raise NodeExistsError(path)
            parent = _parent(path)
            if parent not in self.tree.nodes:
                if not makepath:
                    raise NoNodeError(parent)
                self.ensure_path(parent)
            owner = self.session if ephemeral else None
            self.tree.nodes[path] = _Node(data, 0, owner)
        self._notify(path)

    def ensure_path(self, path: str) -> None:
        """Create the node and its parents if absent."""
        self._alive()
        _check(path)
        with self.tree.lock:
            parts = [p for p in path.split("/") if p]
            current = ""
            for part in parts:
                current = f"{current}/{part}"
                self.tree.nodes.setdefault(current, _Node())

    def exists(self, path: str) -> bool:
        """Whether the node exists."""
        self._alive()
        return path in self.tree.nodes

    def get(self, path: str) -> tuple[bytes, int]:
        """Data and version."""
        self._alive()
        with self.tree.lock:
            node = self._node(path)
            return node.data, node.version

    def set(self, path: str, data: bytes, version: int = -1) -> int:
        """Conditional write."""
        self._alive()
        self._hook("set", path)
        with self.tree.lock:
            node = self._node(path, version)
            node.data = data
            node.version += 1
            new = node.version
        self._notify(path)
        return new

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        """Delete a node (and its subtree when ``recursive``)."""
        self._alive()
        self._hook("delete", path)
        with self.tree.lock:
            self._node(path, version)  # must exist, at that version
            below = [p for p in self.tree.nodes if p.startswith(path + "/")]
            if below and not recursive:
                raise NotEmptyError(path)
            for p in below:
                del self.tree.nodes[p]
            del self.tree.nodes[path]
        self._notify(path)

    def children(self, path: str) -> list[str]:
        """Sorted child names."""
        self._alive()
        with self.tree.lock:
            if path not in self.tree.nodes:
                raise NoNodeError(path)
            return self._kids(path)

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> Cancel:
        """Fires now and after each change below ``path`` made through this session."""
        entry = (path, callback)
        self._children_watches.append(entry)
        callback(self._kids(path) if path in self.tree.nodes else [])
        return lambda: self._children_watches.remove(entry)

    def watch_data(self, path: str, callback: Callable[[bytes | None, int], None]) -> Cancel:
        """Fires now and after each change of ``path`` made through this session."""
        entry = (path, callback)
        self._data_watches.append(entry)
        node = self.tree.nodes.get(path)
        callback(None, -1) if node is None else callback(node.data, node.version)
        return lambda: self._data_watches.remove(entry)

    def add_session_listener(self, listener: Callable[[SessionState], None]) -> None:
        """Sessions never change in memory."""

    def close(self) -> None:
        """End the session: its ephemeral nodes disappear."""
        with self.tree.lock:
            for path in [p for p, n in self.tree.nodes.items() if n.owner == self.session]:
                del self.tree.nodes[path]
        self.closed = True
