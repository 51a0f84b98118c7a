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

Damage to the file is survived (docs/failure-modes.md): a store that cannot read the file keeps
reporting what it last read (watches are not told anything) and logs once per failure and once
on recovery. A file that was deleted or replaced (its inode changed), that SQLite reports as
corrupt, or whose contents went back in time (the change counter fell, or this store's live
session vanished) is *damage*: the store reopens the path — moving a corrupt file aside as
``<name>.corrupt-<UTC time>`` first, under a lock file so that only one process does it — opens
a new session and tells its listeners ``NEW_SESSION``, so every live process registers its
ephemeral nodes again into the new file. For one lease after that, watches keep reporting the
last state they read, so that consumers do not drop providers that have yet to register again.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from dubbo_py.errors import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError, StoreError
from dubbo_py.registry.store._paths import (
    ancestors,
    name_of,
    parent_of,
    validate_deletable_path,
    validate_new_path,
    validate_path,
)
from dubbo_py.registry.store._watch import (
    ChildrenState,
    DataState,
    Dispatcher,
    SessionListeners,
    Watch,
)
from dubbo_py.registry.store.base import Cancel, SessionState, Store

__all__ = ["SCHEMA_VERSION", "EmbeddedStore"]

log = logging.getLogger(__name__)

T = TypeVar("T")
#: Reads the state a watch reports.
_Reader = Callable[[sqlite3.Connection], Any]

#: ``PRAGMA user_version`` of the database layout this module writes.
SCHEMA_VERSION = 1

#: SQLite's primary result codes that mean the file itself is damaged.
_CORRUPTION_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})


class _Damage(Exception):
    """The file under the store was deleted, replaced, corrupted or rolled back (``reason``)."""

    def __init__(self, reason: str, *, corrupt: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        #: Whether SQLite called the file itself corrupt (then it is moved aside).
        self.corrupt = corrupt


def _damage_of(exc: BaseException) -> _Damage | None:
    """The damage a SQLite error reveals, None for ordinary failures (busy, locked, I/O)."""
    while exc is not None and not isinstance(exc, sqlite3.Error):
        exc = exc.__cause__  # type: ignore[assignment]
    if exc is None:
        return None
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if code in _CORRUPTION_CODES:
        return _Damage(f"the file is corrupt ({exc})", corrupt=True)
    if isinstance(exc, sqlite3.OperationalError) and "no such table" in str(exc):
        return _Damage(f"the registry tables are gone ({exc})")
    return None


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
    """A :class:`~dubbo_py.registry.store.base.Store` in a SQLite file (see the module doc).

    The constructor opens the file (creating it and its directory if needed) and the session;
    it raises :class:`StoreError` naming the file if that is not a registry database. Safe for
    many threads of one process and many processes of one machine (on a local file system:
    SQLite's WAL mode needs shared memory, so not on a network share).
    """

    @classmethod
    def from_address(
        cls,
        address: RegistryAddress,
        *,
        auth: tuple[str, str] | None = None,
        connect_timeout: float | None = None,
    ) -> EmbeddedStore:
        """The store of a ``sqlite://`` address (the store table's constructor). The embedded
        registry is a file of this machine: it has no identities (``auth``) and no connection
        to time out."""
        del auth, connect_timeout
        return cls(address.location)

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
        # Each watch with (its kind and path, its reader): watches of one node share a read.
        self._watches: dict[Watch[Any], tuple[tuple[str, str], _Reader]] = {}
        self._seen_counter = -1
        self._heartbeat_stop = threading.Event()
        self._heartbeat_now = threading.Event()
        self._heartbeat: threading.Thread | None = None
        self._heartbeat_failing = False
        self._reopen_pending = False
        #: Bumped each time the file is reopened after damage.
        self._generation = 0
        #: The highest change counter this store has read from the file: the counter only
        #: grows, so a lower one means the file lost changes.
        self._high_water = -1
        self._pending_high: int | None = None
        #: (st_dev, st_ino) of the file opened: a change means it was deleted or replaced.
        self._identity: tuple[int, int] | None = None
        #: Wall-clock time until which this store's session is surely alive (renewed on time).
        self._lease_valid_until = 0.0
        #: Until this (monotonic) time, watches keep their last state (see the module doc).
        self._grace_until = 0.0
        #: The failure being reported (logged once until it clears).
        self._poll_failure: str | None = None
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
        :meth:`ZooKeeperStore.start <dubbo_py.registry.store.zookeeper.ZooKeeperStore.start>`."""
        if self._closed:
            raise StoreError(f"{self.address} is closed")
        return True

    def _open_session(self) -> None:
        with self._lock:
            try:
                self._path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the directory of {self._path}: {exc}") from exc
            with self._file_lock():
                self._clear_orphans()
                self._conn = self._open()
            try:
                self._identity = self._file_identity()
                self._new_session()
                self._reap()
                self._seen_counter = self._high_water = self._counter()
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
        """Create a node (see :class:`~dubbo_py.registry.store.base.Store`). ``protected`` has no
        effect here: who may write the embedded registry is who may write its file."""
        validate_new_path(path, self.address)
        with self._connection(path, write=True) as conn:
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
        with self._connection(path, write=True) as conn:
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
        with self._connection(path, write=False) as conn:
            return self._row(conn, path) is not None

    def get(self, path: str) -> tuple[bytes, int]:
        """The node's data and version."""
        validate_path(path)
        with self._connection(path, write=False) as conn:
            row = self._row(conn, path)
        if row is None:
            raise NoNodeError(f"no node {path} in {self.address}")
        return bytes(row[0]), int(row[1])

    def set(self, path: str, data: bytes, version: int = -1) -> int:
        """Replace the data if the version matches; returns the new version."""
        validate_path(path)
        with self._connection(path, write=True) as conn:
            current = self._checked_version(conn, path, version)
            conn.execute(
                "UPDATE nodes SET data = ?, version = ? WHERE path = ?",
                (bytes(data), current + 1, path),
            )
            self._bump(conn)
            return current + 1

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        """Delete the node (and its subtree when ``recursive``), atomically."""
        validate_deletable_path(path, self.address)
        with self._connection(path, write=True) as conn:
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
        with self._connection(path, write=False) as conn:
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

        return self._add_watch(("children", path), watch, read)

    def watch_data(self, path: str, callback: Callable[[bytes | None, int], None]) -> Cancel:
        """Persistent data watch: ``(data, version)``, ``(None, -1)`` while the node is absent."""
        validate_path(path)
        watch: Watch[DataState] = Watch(path, lambda state: callback(*state))

        def read(conn: sqlite3.Connection) -> DataState:
            row = self._row(conn, path)
            return (None, -1) if row is None else (bytes(row[0]), int(row[1]))

        return self._add_watch(("data", path), watch, read)

    def _add_watch(
        self, key: tuple[str, str], watch: Watch[T], read: Callable[[sqlite3.Connection], T]
    ) -> Cancel:
        with self._watches_lock:
            if self._closed:
                raise StoreError(f"{self.address} is closed")
            self._watches[watch] = (key, read)
        self._dispatcher.submit(lambda: self._refresh([(watch, (key, read))]))

        def cancel() -> None:
            watch.cancel()
            with self._watches_lock:
                self._watches.pop(watch, None)

        return cancel

    def _poll(self) -> None:
        """One poll of the change counter (dispatcher thread); re-read watches if it moved.

        Damage found here is repaired before any watch could report what the damaged file
        says (see the module doc)."""
        with self._watches_lock:
            watches = list(self._watches.items())
        if not watches or self._closed:
            return
        generation = self._generation
        try:
            counter = self._checked_counter()
        except _Damage as damage:
            self._recover(damage, generation)
            return
        except StoreError as exc:
            self._failing(f"cannot poll for changes: {exc}")
            return
        self._recovered()
        if time.monotonic() < self._grace_until:
            return  # after a repair, live processes are still registering again
        if counter != self._seen_counter:
            # The counter is read first: a change after that moves it again, seen next time.
            self._seen_counter = counter
            self._refresh(watches)

    def _checked_counter(self) -> int:
        """The change counter, checking on the way that the file is still the one opened,
        readable, and not rolled back; :class:`_Damage` otherwise."""
        self._check_identity()
        with self._lock:
            conn = self._require("/")
            try:
                conn.execute("BEGIN")
                try:
                    row = conn.execute("SELECT counter FROM changes WHERE id = 0").fetchone()
                    mine = conn.execute(
                        "SELECT 1 FROM sessions WHERE id = ?", (self._session,)
                    ).fetchone()
                finally:
                    conn.execute("ROLLBACK")
            except sqlite3.Error as exc:
                damage = _damage_of(exc)
                if damage is not None:
                    raise damage from exc
                raise StoreError(f"polling {self.address}: {exc}") from exc
            if row is None or int(row[0]) < max(self._seen_counter, self._high_water):
                raise _Damage("its change counter went back: the file lost recent changes")
            self._high_water = max(self._high_water, int(row[0]))
            if mine is None and time.time() < self._lease_valid_until:
                raise _Damage("this process's live session vanished from it")
            return int(row[0])

    def _refresh(self, watches: list[tuple[Watch[Any], tuple[tuple[str, str], _Reader]]]) -> None:
        # One read transaction, so all watches see one snapshot; callbacks run after it. A node
        # watched several times (by several references or applications) is read once.
        states: list[tuple[Watch[Any], object]] = []
        read_once: dict[tuple[str, str], object] = {}
        generation = self._generation
        try:
            with self._connection("/", write=False) as conn:
                for watch, (key, read) in watches:
                    if not watch.cancelled:
                        if key not in read_once:
                            read_once[key] = read(conn)
                        states.append((watch, read_once[key]))
        except StoreError as exc:
            # The watches keep what they last reported: consumers keep their providers.
            damage = _damage_of(exc)
            if damage is not None:
                self._recover(damage, generation)
            else:
                self._failing(f"cannot read watched nodes: {exc}")
            return
        for watch, state in states:
            watch.offer(state)

    # -- damage --------------------------------------------------------------------------------

    def _failing(self, what: str) -> None:
        """Log a failure once until it clears."""
        if self._poll_failure is None:
            log.warning(
                "%s: %s; watches keep their last state until the file can be read again",
                self.address,
                what,
            )
        self._poll_failure = what

    def _recovered(self) -> None:
        if self._poll_failure is not None:
            self._poll_failure = None
            log.warning("%s: the registry file can be read again", self.address)

    def _file_identity(self) -> tuple[int, int]:
        """(st_dev, st_ino) of the path now; :class:`_Damage` when it is gone."""
        try:
            st = os.stat(self._path)
        except FileNotFoundError:
            raise _Damage("the file was deleted") from None
        except OSError as exc:
            raise StoreError(f"cannot stat {self._path}: {exc}") from exc
        return st.st_dev, st.st_ino

    def _check_identity(self) -> None:
        if self._file_identity() != self._identity:
            raise _Damage("the file was replaced by another one")

    def _recover(self, damage: _Damage, generation: int) -> None:
        """Reopen the path after damage: move a corrupt file aside, open (or create) the file
        now at the path, open a new session, and tell listeners ``NEW_SESSION``.

        ``generation`` is :attr:`_generation` when the damage was seen: if another thread has
        reopened the file since, this one does nothing (one new session per repair)."""
        with self._lock:
            if self._closed or generation != self._generation:
                return
            old_identity = self._identity
            if self._conn is not None:
                with suppress(sqlite3.Error):
                    self._conn.close()
            self._conn = None
            try:
                with self._file_lock():
                    now = self._identity_or_none()
                    if damage.corrupt and now == old_identity:
                        self._move_aside(damage)
                    else:
                        self._clear_orphans()
                        log.error(
                            "%s: the registry file was damaged: %s; reopening it, and every "
                            "live process registers its providers and consumers again",
                            self.address,
                            damage.reason,
                        )
                    conn = self._open()
                    self._conn = conn
                    self._identity = self._file_identity()
                # In a file that went back in time this session may still be there, owning
                # some of our nodes: keep it (the nodes stay ours); else open a new one.
                if not self._renew_quietly():
                    self._new_session()
                self._reap()
                self._high_water = self._counter()
                self._seen_counter = -1  # re-read every watch once the grace is over
            except (StoreError, _Damage) as exc:
                # Tried again at the next poll or heartbeat; until then the store is "closed".
                self._failing(f"cannot reopen after damage ({damage.reason}): {exc}")
                if self._conn is not None:
                    with suppress(sqlite3.Error):
                        self._conn.close()
                    self._conn = None
                self._reopen_pending = True
                return
            self._reopen_pending = False
            self._generation += 1
            self._grace_until = time.monotonic() + self._lease
        self._heartbeat_failing = False
        self._dispatcher.submit(lambda: self._listeners.emit(SessionState.NEW_SESSION))

    def _clear_orphans(self) -> None:
        """With the file lock held: when the file is missing, remove the WAL and its index
        left beside it — they belong to the deleted file, and SQLite would replay or trust
        them for the new one."""
        if self._identity_or_none() is None:
            for suffix in ("-wal", "-shm"):
                with suppress(FileNotFoundError):
                    os.unlink(f"{self._path}{suffix}")

    def _identity_or_none(self) -> tuple[int, int] | None:
        try:
            return self._file_identity()
        except _Damage:
            return None

    def _move_aside(self, damage: _Damage) -> None:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
        aside = self._path.with_name(f"{self._path.name}.corrupt-{stamp}")
        for suffix in ("", "-wal"):
            with suppress(FileNotFoundError):
                os.replace(f"{self._path}{suffix}", f"{aside}{suffix}")
        with suppress(FileNotFoundError):
            os.unlink(f"{self._path}-shm")  # an index of the old WAL: useless, even harmful
        log.error(
            "%s: THE REGISTRY FILE IS CORRUPT (%s). It was moved aside to %s and a new, empty "
            "registry created in its place: live processes register their providers and "
            "consumers again; rules and history it held must be pushed again (inspect the "
            "old file with sqlite3).",
            self.address,
            damage.reason,
            aside,
        )

    @contextmanager
    def _file_lock(self) -> Iterator[None]:
        """An exclusive lock on ``<file>.lock`` across processes, so that one process moves a
        corrupt file aside and the others open the new one."""
        lock_path = self._path.with_name(self._path.name + ".lock")
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StoreError(f"cannot open {lock_path}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    # -- sessions ------------------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        while not self._heartbeat_stop.is_set():
            self._heartbeat_now.wait(self._lease / 3)
            self._heartbeat_now.clear()
            if self._heartbeat_stop.is_set():
                return
            generation = self._generation
            try:
                with self._lock:
                    if self._reopen_pending or self._conn is None:
                        raise _Damage("the file could not be reopened yet")
                    self._check_identity()
                    # Processes that watch nothing (providers) check for lost changes here.
                    counter = self._counter()
                    if counter < self._high_water:
                        raise _Damage("its change counter went back: the file lost recent changes")
                    self._high_water = counter
                    renewed = self._renew()
                    if not renewed:
                        self._new_session()
                    self._reap()
            except _Damage as damage:
                self._recover(damage, generation)
                continue
            except StoreError as exc:
                found = _damage_of(exc)
                if found is not None:
                    self._recover(found, generation)
                    continue
                if not self._heartbeat_failing:
                    log.warning("%s: heartbeat failed: %s", self.address, exc)
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
        now = time.time()
        with self._connection("/", write=True) as conn:
            conn.execute(
                "INSERT INTO sessions (id, expires, pid, host) VALUES (?, ?, ?, ?)",
                (self._session, now + self._lease, os.getpid(), socket.gethostname()),
            )
        # Less than the lease: a session is reaped only once its expiry has passed.
        self._lease_valid_until = now + self._lease * 0.9

    def _renew_quietly(self) -> bool:
        """Renew this session if the file holds it; never calls it damage."""
        with self._connection("/", write=True) as conn:
            cursor = conn.execute(
                "UPDATE sessions SET expires = ? WHERE id = ?",
                (time.time() + self._lease, self._session),
            )
            renewed = cursor.rowcount == 1
        if renewed:
            self._lease_valid_until = time.time() + self._lease * 0.9
        return renewed

    def _renew(self) -> bool:
        """Extend this session's lease; False if it is gone (expired and reaped)."""
        now = time.time()
        with self._connection("/", write=True) as conn:
            cursor = conn.execute(
                "UPDATE sessions SET expires = ? WHERE id = ?",
                (now + self._lease, self._session),
            )
            renewed = cursor.rowcount == 1
        if renewed:
            self._lease_valid_until = now + self._lease * 0.9
        elif now < self._lease_valid_until:
            # Nobody may reap a session before it expires: the file lost it.
            raise _Damage("this process's live session vanished from it")
        return renewed

    def _reap(self) -> None:
        """Delete expired sessions and every ephemeral node whose session is gone."""
        with self._connection("/", write=True) as conn:
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
    def _connection(self, path: str, *, write: bool) -> Iterator[sqlite3.Connection]:
        """The open connection, held under the lock, in a transaction about ``path``."""
        with self._lock:
            conn = self._require(path)
            with self._transaction(conn, path, write=write):
                yield conn

    @contextmanager
    def _transaction(self, conn: sqlite3.Connection, path: str, *, write: bool) -> Iterator[None]:
        # IMMEDIATE takes the write lock up front, so two writers serialise (waiting up to the
        # busy timeout) instead of failing on a lock upgrade.
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        except sqlite3.Error as exc:
            raise StoreError(f"{path} in {self.address}: {exc}") from exc
        self._pending_high = None
        try:
            yield
        except BaseException as exc:
            self._pending_high = None
            with suppress(sqlite3.Error):  # SQLite may have rolled back already
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"{path} in {self.address}: {exc}") from exc
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._pending_high = None
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise StoreError(f"{path} in {self.address}: {exc}") from exc
        if self._pending_high is not None:
            self._high_water = max(self._high_water, self._pending_high)
            self._pending_high = None

    def _counter(self) -> int:
        with self._lock:
            conn = self._require("/")
            try:
                row = conn.execute("SELECT counter FROM changes WHERE id = 0").fetchone()
            except sqlite3.Error as exc:
                raise StoreError(f"polling {self.address}: {exc}") from exc
        return int(row[0])

    def _bump(self, conn: sqlite3.Connection) -> None:
        conn.execute("UPDATE changes SET counter = counter + 1 WHERE id = 0")
        row = conn.execute("SELECT counter FROM changes WHERE id = 0").fetchone()
        # Our own writes raise the high-water mark too, once committed (see _transaction).
        self._pending_high = int(row[0])

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
    from dubbo_py.registry.store.address import RegistryAddress

    # mypy proves here that the class satisfies the Store protocol.
    def _is_a_store(store: EmbeddedStore) -> Store:
        return store
