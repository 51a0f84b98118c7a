"""The embedded store: one SQLite file (WAL mode) shared by the processes of one machine.

It needs no server, which is what the quick start wants. The tree is a table of nodes. Each
store instance is a *session*: a row with an expiry that a heartbeat thread renews every
``lease_seconds / 3``; ephemeral nodes name their session. Any store that finds an expired
session (at start and on every heartbeat) deletes it and its ephemeral nodes, so the nodes of a
process killed with ``-9`` vanish within about ``lease_seconds``. If this store's own session
was reaped (the process was frozen longer than its lease), a new session is opened and
listeners hear ``NEW_SESSION``, as after a ZooKeeper session expiry.

Every write bumps one change counter; watches poll it (a single ``SELECT`` every
``poll_interval``, only while some watch is registered) and re-read the watched nodes when it
moves. Lease expiry uses the wall clock, which all processes of one machine share.
"""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from dubbo_py.registry._paths import ancestors, name_of, parent_of, validate_path
from dubbo_py.registry._watch import (
    ChildrenState,
    DataState,
    Dispatcher,
    SessionListeners,
    Watch,
)
from dubbo_py.registry.store import (
    BadVersionError,
    Cancel,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionState,
    Store,
    StoreError,
)

__all__ = ["SCHEMA_VERSION", "EmbeddedStore"]

log = logging.getLogger(__name__)

T = TypeVar("T")
#: Reads the state a watch reports.
_Reader = Callable[[sqlite3.Connection], Any]

#: ``PRAGMA user_version`` of the database layout this module writes.
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS nodes (
    path    TEXT PRIMARY KEY,
    parent  TEXT NOT NULL,
    data    BLOB NOT NULL,
    version INTEGER NOT NULL,
    owner   TEXT            -- the session of an ephemeral node; NULL when persistent
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS nodes_by_parent ON nodes(parent);
CREATE INDEX IF NOT EXISTS nodes_by_owner ON nodes(owner) WHERE owner IS NOT NULL;
CREATE TABLE IF NOT EXISTS sessions (
    id      TEXT PRIMARY KEY,
    expires REAL NOT NULL,  -- wall-clock seconds
    pid     INTEGER NOT NULL,
    host    TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS changes (
    id      INTEGER PRIMARY KEY CHECK (id = 0),
    counter INTEGER NOT NULL
);
INSERT OR IGNORE INTO changes (id, counter) VALUES (0, 0);
INSERT OR IGNORE INTO nodes (path, parent, data, version, owner) VALUES ('/', '', x'', 0, NULL);
"""


class EmbeddedStore:
    """A :class:`~dubbo_py.registry.store.Store` in a SQLite file (see the module doc).

    The constructor opens the file (creating it and its directory if needed) and the session;
    it raises :class:`StoreError` naming the file if that is not a registry database. Safe for
    many threads of one process and many processes of one machine (on a local file system:
    SQLite's WAL mode needs shared memory, so not on a network share).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        lease_seconds: float = 3.0,
        poll_interval: float = 0.02,
        busy_timeout: float = 10.0,
    ) -> None:
        if lease_seconds <= 0 or poll_interval <= 0:
            raise ValueError("lease_seconds and poll_interval must be positive")
        self._path = Path(path).expanduser().absolute()
        self._lease = lease_seconds
        self._poll_interval = poll_interval
        self._busy_timeout = busy_timeout
        # One connection shared by all threads of this store, one statement group at a time.
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._session = ""
        self._closed = False
        self._listeners = SessionListeners()
        self._dispatcher = Dispatcher(
            f"dubbo-sqlite-events[{self._path.name}]",
            tick=self._poll,
            tick_interval=poll_interval,
        )
        self._watches_lock = threading.Lock()
        self._watches: dict[Watch[Any], _Reader] = {}
        self._seen_counter = -1
        self._heartbeat_stop = threading.Event()
        self._heartbeat_now = threading.Event()
        self._heartbeat: threading.Thread | None = None
        self._heartbeat_failing = False
        self._open_session()

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def address(self) -> str:
        """``sqlite:///absolute/path.db``."""
        return f"sqlite://{self._path.as_posix()}"

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    @property
    def session_id(self) -> str:
        """This store's current session (ephemeral nodes it creates belong to it)."""
        return self._session

    def start(self, timeout: float | None = None) -> bool:
        """True while the store is open (the constructor opened it); for symmetry with
        :meth:`ZooKeeperStore.start <dubbo_py.registry.zookeeper.ZooKeeperStore.start>`."""
        if self._closed:
            raise StoreError(f"{self.address} is closed")
        return True

    def _open_session(self) -> None:
        with self._lock:
            self._conn = self._open()
            try:
                self._new_session()
                self._reap()
                self._seen_counter = self._counter()
            except Exception:
                self._conn.close()
                self._conn = None
                raise
        self._dispatcher.start()
        self._dispatcher.submit(lambda: self._listeners.emit(SessionState.CONNECTED))
        self._heartbeat = threading.Thread(
            target=self._heartbeat_loop, name=f"dubbo-sqlite-lease[{self._path.name}]", daemon=True
        )
        self._heartbeat.start()

    def close(self) -> None:
        """Delete this session and its ephemeral nodes at once, and stop all watches."""
        with self._watches_lock:
            if self._closed:
                return
            self._closed = True
            watches = list(self._watches)
            self._watches.clear()
        for watch in watches:
            watch.cancel()
        self._listeners.clear()
        self._heartbeat_stop.set()
        self._heartbeat_now.set()
        if self._heartbeat is not None and self._heartbeat is not threading.current_thread():
            self._heartbeat.join(5.0)
        self._dispatcher.close()
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is None:
                return
            try:
                with self._transaction(conn, "/", write=True):
                    removed = conn.execute(
                        "DELETE FROM nodes WHERE owner = ?", (self._session,)
                    ).rowcount
                    conn.execute("DELETE FROM sessions WHERE id = ?", (self._session,))
                    if removed:
                        self._bump(conn)
            except StoreError:
                log.warning("%s: could not remove this session's nodes", self.address)
            finally:
                conn.close()

    def add_session_listener(self, listener: Callable[[SessionState], None]) -> None:
        """Be told of session changes, on the store's event thread: ``CONNECTED`` after
        :meth:`start`; ``SUSPENDED`` when the heartbeat cannot reach the file and
        ``RECONNECTED`` when it can again; ``NEW_SESSION`` when this store's session had
        expired and been reaped (its ephemeral nodes are gone) and a new one was opened. A
        listener added while connected is told ``CONNECTED`` at once."""
        self._dispatcher.submit(lambda: self._listeners.add(listener))

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
        """Create a node (see :class:`~dubbo_py.registry.store.Store`). ``protected`` has no
        effect here: who may write the embedded registry is who may write its file."""
        validate_path(path)
        if path == "/":
            raise NodeExistsError(f"node / already exists in {self.address}")
        with self._write(path) as conn:
            if self._row(conn, path) is not None:
                raise NodeExistsError(f"node {path} already exists in {self.address}")
            parent = parent_of(path)
            parent_row = self._row(conn, parent)
            if parent_row is None:
                if not makepath:
                    raise NoNodeError(
                        f"cannot create {path} in {self.address}: no parent node {parent}"
                    )
                for ancestor in ancestors(path):
                    row = self._row(conn, ancestor)
                    if row is None:
                        self._insert(conn, ancestor, b"", None)
                    elif row[2] is not None:
                        raise self._ephemeral_parent(path, ancestor)
            elif parent_row[2] is not None:
                raise self._ephemeral_parent(path, parent)
            owner = None
            if ephemeral:
                owner = self._session
                alive = conn.execute("SELECT 1 FROM sessions WHERE id = ?", (owner,)).fetchone()
                if alive is None:
                    self._heartbeat_now.set()  # open a new session promptly
                    raise StoreError(
                        f"cannot create ephemeral {path}: the session of {self.address} "
                        "expired; a new session is being opened"
                    )
            self._insert(conn, path, bytes(data), owner)
            self._bump(conn)

    def ensure_path(self, path: str) -> None:
        """Create the node and its missing parents."""
        validate_path(path)
        if path == "/":
            return
        with self._write(path) as conn:
            created = False
            for node in [*ancestors(path), path]:
                row = self._row(conn, node)
                if row is None:
                    self._insert(conn, node, b"", None)
                    created = True
                elif row[2] is not None and node != path:
                    raise self._ephemeral_parent(path, node)
            if created:
                self._bump(conn)

    def exists(self, path: str) -> bool:
        """Whether the node exists."""
        validate_path(path)
        with self._read(path) as conn:
            return self._row(conn, path) is not None

    def get(self, path: str) -> tuple[bytes, int]:
        """The node's data and version."""
        validate_path(path)
        with self._read(path) as conn:
            row = self._row(conn, path)
        if row is None:
            raise NoNodeError(f"no node {path} in {self.address}")
        return bytes(row[0]), int(row[1])

    def set(self, path: str, data: bytes, version: int = -1) -> int:
        """Replace the data if the version matches; returns the new version."""
        validate_path(path)
        with self._write(path) as conn:
            current = self._checked_version(conn, path, version)
            conn.execute(
                "UPDATE nodes SET data = ?, version = ? WHERE path = ?",
                (bytes(data), current + 1, path),
            )
            self._bump(conn)
            return current + 1

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        """Delete the node (and its subtree when ``recursive``), atomically."""
        validate_path(path)
        if path == "/":
            raise StoreError(f"cannot delete the root of {self.address}")
        with self._write(path) as conn:
            self._checked_version(conn, path, version)
            # Every descendant's path lies in [path + "/", path + "0"): "0" follows "/".
            below = (path + "/", path + "0")
            if recursive:
                conn.execute("DELETE FROM nodes WHERE path >= ? AND path < ?", below)
            elif conn.execute("SELECT 1 FROM nodes WHERE parent = ? LIMIT 1", (path,)).fetchone():
                raise NotEmptyError(f"node {path} in {self.address} has children")
            conn.execute("DELETE FROM nodes WHERE path = ?", (path,))
            self._bump(conn)

    def children(self, path: str) -> list[str]:
        """The sorted names of the node's children."""
        validate_path(path)
        with self._read(path) as conn:
            names = self._children(conn, path)
        if names is None:
            raise NoNodeError(f"no node {path} in {self.address}")
        return names

    # -- watches -----------------------------------------------------------------------------

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> Cancel:
        """Persistent children watch; the first call (with the current children, [] while the
        node is absent) comes from the store's event thread shortly after registration."""
        validate_path(path)
        watch: Watch[ChildrenState] = Watch(path, lambda state: callback(list(state[1])))

        def read(conn: sqlite3.Connection) -> ChildrenState:
            names = self._children(conn, path)
            return (False, []) if names is None else (True, names)

        return self._add_watch(watch, read)

    def watch_data(self, path: str, callback: Callable[[bytes | None, int], None]) -> Cancel:
        """Persistent data watch: ``(data, version)``, ``(None, -1)`` while the node is absent."""
        validate_path(path)
        watch: Watch[DataState] = Watch(path, lambda state: callback(*state))

        def read(conn: sqlite3.Connection) -> DataState:
            row = self._row(conn, path)
            return (None, -1) if row is None else (bytes(row[0]), int(row[1]))

        return self._add_watch(watch, read)

    def _add_watch(self, watch: Watch[T], read: Callable[[sqlite3.Connection], T]) -> Cancel:
        with self._watches_lock:
            if self._closed:
                raise StoreError(f"{self.address} is closed")
            self._watches[watch] = read
        self._dispatcher.submit(lambda: self._refresh([(watch, read)]))

        def cancel() -> None:
            watch.cancel()
            with self._watches_lock:
                self._watches.pop(watch, None)

        return cancel

    def _poll(self) -> None:
        """One poll of the change counter (dispatcher thread); re-read watches if it moved."""
        with self._watches_lock:
            watches = list(self._watches.items())
        if not watches:
            return
        try:
            counter = self._counter()
        except StoreError:
            log.warning("%s: cannot poll for changes", self.address, exc_info=True)
            return
        if counter != self._seen_counter:
            # The counter is read first: a change after that moves it again, seen next time.
            self._seen_counter = counter
            self._refresh(watches)

    def _refresh(self, watches: list[tuple[Watch[Any], _Reader]]) -> None:
        # One read transaction, so all watches see one snapshot; callbacks run after it.
        states: list[tuple[Watch[Any], object]] = []
        try:
            with self._read("/") as conn:
                for watch, read in watches:
                    if not watch.cancelled:
                        states.append((watch, read(conn)))
        except StoreError:
            log.warning("%s: cannot read watched nodes", self.address, exc_info=True)
            return
        for watch, state in states:
            watch.offer(state)

    # -- sessions ------------------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        while not self._heartbeat_stop.is_set():
            self._heartbeat_now.wait(self._lease / 3)
            self._heartbeat_now.clear()
            if self._heartbeat_stop.is_set():
                return
            try:
                with self._lock:
                    renewed = self._renew()
                    if not renewed:
                        self._new_session()
                    self._reap()
            except StoreError:
                log.warning("%s: heartbeat failed", self.address, exc_info=True)
                if not self._heartbeat_failing:
                    self._heartbeat_failing = True
                    self._dispatcher.submit(lambda: self._listeners.emit(SessionState.SUSPENDED))
                continue
            if not renewed:
                log.warning("%s: session expired; opened %s", self.address, self._session)
                self._heartbeat_failing = False
                self._dispatcher.submit(lambda: self._listeners.emit(SessionState.NEW_SESSION))
            elif self._heartbeat_failing:
                self._heartbeat_failing = False
                self._dispatcher.submit(lambda: self._listeners.emit(SessionState.RECONNECTED))

    def _new_session(self) -> None:
        self._session = uuid.uuid4().hex
        with self._write("/") as conn:
            conn.execute(
                "INSERT INTO sessions (id, expires, pid, host) VALUES (?, ?, ?, ?)",
                (self._session, time.time() + self._lease, os.getpid(), socket.gethostname()),
            )

    def _renew(self) -> bool:
        """Extend this session's lease; False if it is gone (expired and reaped)."""
        with self._write("/") as conn:
            cursor = conn.execute(
                "UPDATE sessions SET expires = ? WHERE id = ?",
                (time.time() + self._lease, self._session),
            )
            return cursor.rowcount == 1

    def _reap(self) -> None:
        """Delete expired sessions and every ephemeral node whose session is gone."""
        with self._write("/") as conn:
            conn.execute("DELETE FROM sessions WHERE expires < ?", (time.time(),))
            removed = conn.execute(
                "DELETE FROM nodes WHERE owner IS NOT NULL "
                "AND owner NOT IN (SELECT id FROM sessions)"
            ).rowcount
            if removed:
                self._bump(conn)

    # -- database helpers ------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the directory of {self._path}: {exc}") from exc
        try:
            conn = sqlite3.connect(
                self._path,
                timeout=self._busy_timeout,
                isolation_level=None,  # we issue BEGIN/COMMIT ourselves
                check_same_thread=False,  # guarded by self._lock
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open embedded registry {self._path}: {exc}") from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
            mode = self._enable_wal(conn)
            if str(mode).lower() != "wal":
                raise StoreError(f"cannot use WAL mode for {self._path} (got {mode})")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = OFF")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self._path} was written by a newer dubbo-py (layout {version}, "
                    f"this one reads {SCHEMA_VERSION})"
                )
            if version < SCHEMA_VERSION:
                self._check_foreign(conn)
                # executescript commits first, so the transaction is part of the script.
                conn.executescript(
                    f"BEGIN IMMEDIATE;{_SCHEMA}PRAGMA user_version = {SCHEMA_VERSION};COMMIT;"
                )
        except sqlite3.Error as exc:
            conn.close()
            raise StoreError(f"cannot open embedded registry {self._path}: {exc}") from exc
        except StoreError:
            conn.close()
            raise
        return conn

    def _enable_wal(self, conn: sqlite3.Connection) -> str:
        """Switch to WAL mode, waiting up to the busy timeout for other connections' locks.

        The switch needs an exclusive lock, and SQLite answers SQLITE_BUSY at once, without
        consulting the busy timeout, while another connection holds a write lock — which is what
        happens when several processes open a fresh registry at the same moment (a script
        starting providers in parallel). So the wait is ours.
        """
        deadline = time.monotonic() + self._busy_timeout
        while True:
            try:
                return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            except sqlite3.OperationalError as exc:
                busy = getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_BUSY
                if not busy or time.monotonic() >= deadline:
                    raise
                time.sleep(0.005)

    def _check_foreign(self, conn: sqlite3.Connection) -> None:
        """Refuse a SQLite file that holds other tables: it is not ours to change."""
        tables = {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        if tables - {"nodes", "sessions", "changes"}:
            raise StoreError(
                f"{self._path} is a SQLite database but not a dubbo-py registry "
                f"(tables: {', '.join(sorted(tables))})"
            )

    def _require(self, path: str) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"{self.address} is closed ({path})")
        return self._conn

    @contextmanager
    def _write(self, path: str) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._require(path)
            with self._transaction(conn, path, write=True):
                yield conn

    @contextmanager
    def _read(self, path: str) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._require(path)
            with self._transaction(conn, path, write=False):
                yield conn

    @contextmanager
    def _transaction(self, conn: sqlite3.Connection, path: str, *, write: bool) -> Iterator[None]:
        # IMMEDIATE takes the write lock up front, so two writers serialise (waiting up to the
        # busy timeout) instead of failing on a lock upgrade.
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        except sqlite3.Error as exc:
            raise StoreError(f"{path} in {self.address}: {exc}") from exc
        try:
            yield
        except BaseException as exc:
            with suppress(sqlite3.Error):  # SQLite may have rolled back already
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"{path} in {self.address}: {exc}") from exc
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise StoreError(f"{path} in {self.address}: {exc}") from exc

    def _counter(self) -> int:
        with self._lock:
            conn = self._require("/")
            try:
                row = conn.execute("SELECT counter FROM changes WHERE id = 0").fetchone()
            except sqlite3.Error as exc:
                raise StoreError(f"polling {self.address}: {exc}") from exc
        return int(row[0])

    @staticmethod
    def _bump(conn: sqlite3.Connection) -> None:
        conn.execute("UPDATE changes SET counter = counter + 1 WHERE id = 0")

    @staticmethod
    def _row(conn: sqlite3.Connection, path: str) -> tuple[bytes, int, str | None] | None:
        row = conn.execute(
            "SELECT data, version, owner FROM nodes WHERE path = ?", (path,)
        ).fetchone()
        return None if row is None else (row[0], row[1], row[2])

    @staticmethod
    def _children(conn: sqlite3.Connection, path: str) -> list[str] | None:
        if conn.execute("SELECT 1 FROM nodes WHERE path = ?", (path,)).fetchone() is None:
            return None
        rows = conn.execute("SELECT path FROM nodes WHERE parent = ?", (path,)).fetchall()
        return sorted(name_of(row[0]) for row in rows)

    @staticmethod
    def _insert(conn: sqlite3.Connection, path: str, data: bytes, owner: str | None) -> None:
        conn.execute(
            "INSERT INTO nodes (path, parent, data, version, owner) VALUES (?, ?, ?, 0, ?)",
            (path, parent_of(path), data, owner),
        )

    def _checked_version(self, conn: sqlite3.Connection, path: str, version: int) -> int:
        row = self._row(conn, path)
        if row is None:
            raise NoNodeError(f"no node {path} in {self.address}")
        if version != -1 and row[1] != version:
            raise BadVersionError(
                f"bad version for {path} in {self.address}: expected {version}, found {row[1]}"
            )
        return int(row[1])

    def _ephemeral_parent(self, path: str, parent: str) -> StoreError:
        return StoreError(
            f"cannot create {path} in {self.address}: ephemeral {parent} cannot have children"
        )

    def __repr__(self) -> str:
        return f"EmbeddedStore({self.address!r})"


if TYPE_CHECKING:
    # mypy proves here that the class satisfies the Store protocol.
    def _is_a_store(store: EmbeddedStore) -> Store:
        return store
