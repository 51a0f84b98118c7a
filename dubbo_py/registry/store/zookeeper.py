"""The ZooKeeper store (kazoo): the production registry backend, shared by many machines.

The store connects in the background and keeps retrying for ever, so a consumer can start while
ZooKeeper is down and attach once it is up; operations raise :class:`StoreError` while
disconnected. Persistent watches are kept by re-reading every watched node after each
(re)connection and re-arming one-shot ZooKeeper watches after each event, because kazoo drops
its watchers when the connection is lost. Callbacks and session listeners run on one
store-owned thread, never on kazoo's threads (kazoo forbids blocking calls in its listeners).

Watches of one path (and kind) share one ZooKeeper watcher and one read per change: the
references of an application watch the same rule documents, and so do applications sharing
the store. On a change event the read is *sent* at once from kazoo's event thread (an
asynchronous request does not block it) and the store's thread only collects the reply: the
request travels while that thread wakes up, one thread hand-off less on the push -> applied
path, which is what a busy process waits on longest.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kazoo import exceptions as kz
from kazoo.client import KazooClient, KazooState
from kazoo.protocol.states import EventType, WatchedEvent
from kazoo.retry import KazooRetry
from kazoo.security import ACL, Permissions, make_acl, make_digest_acl

from dubbo_py.errors import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError, StoreError
from dubbo_py.registry.store._paths import (
    child_path,
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
    WatchSet,
)
from dubbo_py.registry.store.base import AccessControlled, Cancel, NodeAccess, SessionState, Store

__all__ = ["ZooKeeperStore"]

log = logging.getLogger(__name__)

T = TypeVar("T")
_Watcher = Callable[[WatchedEvent], None]
#: Reads a watched node's state, leaving a one-shot watcher: (full path, watcher, the reply of
#: a request already sent or None) -> state.
_Reader = Callable[[str, _Watcher, Any], T]
#: Sends a read's first request without waiting: (full path, watcher) -> its pending reply.
_Sender = Callable[[str, _Watcher], Any]

_PERMISSIONS = (
    ("read", Permissions.READ),
    ("write", Permissions.WRITE),
    ("create", Permissions.CREATE),
    ("delete", Permissions.DELETE),
    ("admin", Permissions.ADMIN),
)


def _names(perms: int) -> frozenset[str]:
    return frozenset(name for name, bit in _PERMISSIONS if perms & bit)


def _node_access(acls: list[ACL]) -> NodeAccess:
    world: frozenset[str] = frozenset()
    users: dict[str, frozenset[str]] = {}
    others: list[str] = []
    for acl in acls:
        scheme, ident = acl.id.scheme, acl.id.id
        if scheme == "world" and ident == "anyone":
            world |= _names(acl.perms)
        elif scheme == "digest":
            user = ident.split(":", 1)[0]
            users[user] = users.get(user, frozenset()) | _names(acl.perms)
        elif acl.perms:
            others.append(f"{scheme}:{ident}")
    return NodeAccess(world, tuple(sorted(users.items())), tuple(others))


#: Failures that mean "the connection is not there right now" rather than "the request is wrong".
_CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    kz.ConnectionLoss,
    kz.SessionExpiredError,  # includes ConnectionClosedError
    kz.ConnectionDropped,
    kz.OperationTimeoutError,
)


class _PathWatches(Generic[T]):
    """Every watch of one node and kind in one store (:attr:`watches`): one ZooKeeper watcher,
    one read per change, each watch offered the state.

    Reads go out from two threads -- a change's from kazoo's event thread as soon as it is
    announced, a refresh's (a watch added to a watched node, a reconnection) from the store's
    thread when its turn comes -- and are collected in turn on the store's thread, so a read
    sent later can be collected before one sent earlier. ZooKeeper answers one session's
    requests in the order they were sent, so the later-sent read holds the newer state: each
    read is numbered as it is sent, and one older than the state offered last is dropped (it
    would take every watch back to an older state until the next change)."""

    def __init__(self, store: ZooKeeperStore, full: str, read: _Reader[T], send: _Sender) -> None:
        self._client = store.kazoo_client
        self._dispatcher = store.dispatcher
        self._full = full
        self._read = read
        self._send = send
        self.watches: WatchSet[T] = WatchSet()
        # Numbers reads in the order kazoo queues them (hence the lock around the send).
        self._send_lock = threading.Lock()
        self._sent = 0
        # The number of the read whose state was offered last (the store's thread only).
        self._offered = 0

    def on_event(self, event: WatchedEvent) -> None:
        """kazoo's watcher (the same function object every time, so kazoo keeps one per path
        however often it is re-armed); runs on kazoo's event thread."""
        # Connection-state events (type NONE) carry no change: reconnection re-reads all.
        if event.type == EventType.NONE or self.watches.closed:
            return
        sent: tuple[int, Any] | None = None
        if self._client.connected:
            try:
                sent = self._send_read()
            except Exception:  # the store's thread sends it again and reports any failure
                sent = None
        self._dispatcher.submit(lambda: self.refresh(sent))

    def _send_read(self) -> tuple[int, Any]:
        """Send a read that re-arms the watcher: ``(its number, the request)``."""
        with self._send_lock:
            self._sent += 1
            return self._sent, self._send(self._full, self.on_event)

    def refresh(self, sent: tuple[int, Any] | None = None) -> None:
        """Read the state (collecting ``sent``, a numbered request already on its way, if
        any), re-arm the watcher and offer the state to every watch unless a read sent after
        this one was offered already; on the store's thread."""
        if self.watches.closed or not self._client.connected:
            return
        try:
            number, request = sent if sent is not None else self._send_read()
            state = self._read(self._full, self.on_event, request)
        except (*_CONNECTION_ERRORS, self._client.handler.timeout_exception):
            return  # read again after the reconnection
        if number < self._offered:
            return  # older than what the watches were told: the newer state stands
        self._offered = number
        self.watches.offer(state)


class ZooKeeperStore:
    """A :class:`~dubbo_py.registry.store.base.Store` on a ZooKeeper ensemble.

    ``hosts`` is kazoo's ``"h:p[,h:p]"``; every path is taken relative to ``chroot`` (created
    when missing). ``session_timeout`` is the ZooKeeper session timeout asked for (the server
    clamps it to its ``min/maxSessionTimeout``); ``connect_timeout`` is how long :meth:`start`
    waits by default. ``auth`` is a digest ``(user, password)`` sent on every connection.
    ``retry_max_delay`` caps the back-off between reconnection attempts, which never stop.
    """

    @classmethod
    def from_address(
        cls,
        address: RegistryAddress,
        *,
        auth: tuple[str, str] | None = None,
        connect_timeout: float | None = None,
    ) -> ZooKeeperStore:
        """The store of a ``zookeeper://`` address (the store table's constructor); the
        address's ``session`` parameter (Dubbo's, in ms) sets the session timeout."""
        options: dict[str, float] = {}
        if connect_timeout is not None:
            options["connect_timeout"] = connect_timeout
        if address.parameters.session_timeout is not None:
            options["session_timeout"] = address.parameters.session_timeout
        return cls(address.location, address.chroot, auth=auth, **options)

    def __init__(
        self,
        hosts: str,
        chroot: str = "",
        *,
        session_timeout: float = 10.0,
        connect_timeout: float = 5.0,
        auth: tuple[str, str] | None = None,
        retry_max_delay: float = 2.0,
    ) -> None:
        if not hosts or "/" in hosts:
            raise StoreError(
                f"invalid ZooKeeper hosts {hosts!r}: expected 'host:port[,host:port]' "
                "(pass the chroot separately)"
            )
        self._hosts = hosts
        self._chroot = "" if chroot in ("", "/") else validate_path(chroot)
        self._connect_timeout = connect_timeout
        # An operation waits at most this long for its reply; beyond it the connection is
        # considered lost (kazoo would notice too, after 2/3 of the session timeout).
        self._op_timeout = max(session_timeout, connect_timeout)
        auth_data = [("digest", f"{auth[0]}:{auth[1]}")] if auth else None
        # Rules and providers written by an authenticated store: its identity may do anything,
        # the world (every consumer) may only read.
        self._protected_acl = (
            [make_digest_acl(auth[0], auth[1], all=True), make_acl("world", "anyone", read=True)]
            if auth
            else None
        )
        self._shared_acl = (
            [
                make_digest_acl(auth[0], auth[1], all=True),
                make_acl("world", "anyone", read=True, create=True),
            ]
            if auth
            else None
        )
        self._identity = auth[0] if auth else None
        try:
            self._client = KazooClient(
                hosts=hosts,
                timeout=session_timeout,
                auth_data=auth_data,
                connection_retry=KazooRetry(
                    max_tries=-1, delay=0.1, backoff=2, max_delay=retry_max_delay
                ),
            )
        except (ValueError, kz.KazooException) as exc:
            raise StoreError(f"invalid ZooKeeper hosts {hosts!r}: {exc}") from exc
        self._dispatcher = Dispatcher(f"dubbo-zk-events[{self.address}]")
        self._listeners = SessionListeners()
        self._lock = threading.Lock()
        # The watches of each (kind, path), sharing one ZooKeeper watcher and one read.
        self._groups: dict[tuple[str, str], _PathWatches[Any]] = {}
        self._live: threading.Event | None = None
        self._started = False
        self._closed = False
        # Session bookkeeping, touched on the dispatcher thread only.
        self._ever_connected = False
        self._session_lost = False
        self._suspended = False

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def address(self) -> str:
        """``zookeeper://hosts[/chroot]``, as used in messages and configuration."""
        return f"zookeeper://{self._hosts}{self._chroot}"

    @property
    def chroot(self) -> str:
        """The chroot all paths are relative to (``""`` for none)."""
        return self._chroot

    @property
    def connected(self) -> bool:
        """Whether the store is connected right now."""
        return bool(self._client.connected)

    @property
    def dispatcher(self) -> Dispatcher:
        """The store-owned thread that runs watch callbacks and session listeners."""
        return self._dispatcher

    @property
    def kazoo_client(self) -> Any:
        """The underlying :class:`kazoo.client.KazooClient` (for tests and diagnostics; paths
        on it are not chrooted)."""
        return self._client

    def start(self, timeout: float | None = None) -> bool:
        """Start connecting (in the background, retrying for ever) and wait up to ``timeout``
        seconds (default: ``connect_timeout``) for the connection. Returns whether it is
        connected; never raises because ZooKeeper is unreachable."""
        with self._lock:
            if self._closed:
                raise StoreError(f"{self.address} is closed")
            if not self._started:
                self._started = True
                self._dispatcher.start()
                self._client.add_listener(self._on_kazoo_state)
                self._live = self._client.start_async()
        live = self._client.connected or self._wait_connected(
            self._connect_timeout if timeout is None else timeout
        )
        if live:
            try:
                self._ensure_chroot()
            except StoreError:
                log.warning("%s: could not create the chroot yet", self.address, exc_info=True)
        return bool(self._client.connected)

    def close(self) -> None:
        """Close the session (its ephemeral nodes disappear at once) and stop all watches."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            groups = list(self._groups.values())
            self._groups.clear()
        for group in groups:
            group.watches.close()
        self._listeners.clear()
        self._client.remove_listener(self._on_kazoo_state)
        if self._started:
            try:
                self._client.stop()
                self._client.close()
            except Exception:
                log.warning("%s: error while closing", self.address, exc_info=True)
        self._dispatcher.close()

    def add_session_listener(self, listener: Callable[[SessionState], None]) -> None:
        """Be told of connection changes, on the store's event thread. ``CONNECTED`` comes on
        the first connection; a lost session reports ``SUSPENDED`` (if not already) and then
        ``NEW_SESSION`` once a new one is established. A listener added while connected is
        told ``CONNECTED`` at once."""
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
        """Create a node (see :class:`~dubbo_py.registry.store.base.Store`); ``protected`` nodes
        get the ACL "our digest identity: all; anyone: read"."""
        validate_new_path(path, self.address)
        acl = self._protected_acl if protected else None
        self._call(
            path,
            lambda: self._client.create_async(
                self._full(path), bytes(data), acl=acl, ephemeral=ephemeral, makepath=makepath
            ),
        )

    def ensure_path(self, path: str) -> None:
        """Create the node and its missing parents."""
        validate_path(path)
        self._call(path, lambda: self._client.ensure_path_async(self._full(path)))

    def exists(self, path: str) -> bool:
        """Whether the node exists."""
        validate_path(path)
        return self._call(path, lambda: self._client.exists_async(self._full(path))) is not None

    def get(self, path: str) -> tuple[bytes, int]:
        """The node's data and version."""
        validate_path(path)
        data, stat = self._call(path, lambda: self._client.get_async(self._full(path)))
        return bytes(data or b""), int(stat.version)

    def set(self, path: str, data: bytes, version: int = -1) -> int:
        """Replace the data if the version matches; returns the new version."""
        validate_path(path)
        stat = self._call(
            path, lambda: self._client.set_async(self._full(path), bytes(data), version)
        )
        return int(stat.version)

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        """Delete the node (and its subtree when ``recursive``)."""
        validate_deletable_path(path, self.address)
        if recursive:
            if version != -1:
                _, current = self.get(path)
                if current != version:
                    raise BadVersionError(
                        f"bad version for {path} in {self.address}: "
                        f"expected {version}, found {current}"
                    )
            for name in self.children(path):
                self._delete_tree(child_path(path, name))
        self._call(path, lambda: self._client.delete_async(self._full(path), version))

    def children(self, path: str) -> list[str]:
        """The sorted names of the node's children."""
        validate_path(path)
        names = self._call(path, lambda: self._client.get_children_async(self._full(path)))
        return sorted(names)

    # -- access control ----------------------------------------------------------------------

    @property
    def identity(self) -> str | None:
        """The digest identity (user name) this store authenticates as."""
        return self._identity

    def access(self, path: str) -> NodeAccess:
        """Who may do what to the node (its ACL)."""
        validate_path(path)
        acls, _stat = self._call(path, lambda: self._client.get_acls_async(self._full(path)))
        return _node_access(list(acls))

    def restrict(self, path: str, *, shared: bool = False) -> None:
        """Set the node's ACL to "this identity: all; anyone: read" (``shared``: anyone may
        also create children)."""
        validate_path(path)
        acl = self._shared_acl if shared else self._protected_acl
        if acl is None:
            raise StoreError(f"cannot protect {path} in {self.address}: no identity (--auth)")
        self._call(path, lambda: self._client.set_acls_async(self._full(path), acl))

    # -- watches -----------------------------------------------------------------------------

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> Cancel:
        """Persistent children watch; the first call (with the current children, [] while the
        node is absent) comes once connected."""
        validate_path(path)
        watch: Watch[ChildrenState] = Watch(path, lambda state: callback(list(state[1])))
        return self._add_watch("children", watch, self._read_children, self._send_children)

    def watch_data(self, path: str, callback: Callable[[bytes | None, int], None]) -> Cancel:
        """Persistent data watch: ``(data, version)``, ``(None, -1)`` while the node is absent."""
        validate_path(path)
        watch: Watch[DataState] = Watch(path, lambda state: callback(*state))
        return self._add_watch("data", watch, self._read_data, self._send_data)

    def _add_watch(self, kind: str, watch: Watch[T], read: _Reader[T], send: _Sender) -> Cancel:
        """Register ``watch`` in the group of its path and kind (made on first use); the group
        reads again so that the new watch gets the current state (the others, told only of
        changes, hear nothing new)."""
        key = (kind, watch.path)
        with self._lock:
            if self._closed:
                raise StoreError(f"{self.address} is closed")
            group = self._groups.get(key)
            if group is None:
                group = _PathWatches(self, self._full(watch.path), read, send)
                self._groups[key] = group
            group.watches.add(watch)
        self._dispatcher.submit(group.refresh)

        def cancel() -> None:
            watch.cancel()
            with self._lock:
                if group.watches.remove(watch) and self._groups.get(key) is group:
                    del self._groups[key]
                    group.watches.close()

        return cancel

    def _read_children(self, full: str, watcher: _Watcher, sent: Any = None) -> ChildrenState:
        while True:
            try:
                request = (
                    sent
                    if sent is not None
                    else self._client.get_children_async(full, watch=watcher)
                )
                sent = None
                names = request.get(timeout=self._op_timeout)
                return True, sorted(names)
            except kz.NoNodeError:
                # ZooKeeper keeps no children watch on an absent node: an exists-watch tells
                # us when it appears.
                stat = self._client.exists_async(full, watch=watcher).get(timeout=self._op_timeout)
                if stat is None:
                    return False, []

    def _read_data(self, full: str, watcher: _Watcher, sent: Any = None) -> DataState:
        while True:
            try:
                request = sent if sent is not None else self._client.get_async(full, watch=watcher)
                sent = None
                data, stat = request.get(timeout=self._op_timeout)
                return bytes(data or b""), int(stat.version)
            except kz.NoNodeError:
                stat = self._client.exists_async(full, watch=watcher).get(timeout=self._op_timeout)
                if stat is None:
                    return None, -1

    def _send_children(self, full: str, watcher: _Watcher) -> Any:
        return self._client.get_children_async(full, watch=watcher)

    def _send_data(self, full: str, watcher: _Watcher) -> Any:
        return self._client.get_async(full, watch=watcher)

    def _refresh_all(self) -> None:
        with self._lock:
            groups = list(self._groups.values())
        for group in groups:
            group.refresh()

    # -- session -----------------------------------------------------------------------------

    def _on_kazoo_state(self, state: str) -> bool:
        # Runs on kazoo's connection thread: only hand over.
        self._dispatcher.submit(lambda: self._handle_state(state))
        return False

    def _handle_state(self, state: str) -> None:
        if self._closed:
            return
        if state == KazooState.CONNECTED:
            if not self._ever_connected:
                event = SessionState.CONNECTED
            elif self._session_lost:
                event = SessionState.NEW_SESSION
            else:
                event = SessionState.RECONNECTED
            self._ever_connected = True
            self._session_lost = False
            self._suspended = False
            try:
                self._ensure_chroot()
            except StoreError:
                log.warning("%s: could not create the chroot", self.address, exc_info=True)
            self._listeners.emit(event)
            self._refresh_all()
            return
        if state == KazooState.LOST:
            self._session_lost = True
        if self._ever_connected and not self._suspended:
            self._suspended = True
            self._listeners.emit(SessionState.SUSPENDED)

    # -- helpers -----------------------------------------------------------------------------

    def _wait_connected(self, timeout: float) -> bool:
        # The event start_async returned is set while connected.
        return self._live is not None and bool(self._live.wait(timeout))

    def _ensure_chroot(self) -> None:
        if self._chroot:
            self._call("/", lambda: self._client.ensure_path_async(self._chroot))

    def _full(self, path: str) -> str:
        if path == "/":
            return self._chroot or "/"
        return self._chroot + path

    def _delete_tree(self, path: str) -> None:
        try:
            for name in self.children(path):
                self._delete_tree(child_path(path, name))
            self._call(path, lambda: self._client.delete_async(self._full(path)))
        except NoNodeError:
            pass  # someone else deleted it meanwhile: that is what we wanted

    def _call(self, path: str, op: Callable[[], Any]) -> Any:
        """Run one kazoo operation, translating its failures to store errors naming ``path``."""
        if self._closed:
            raise StoreError(f"{self.address} is closed ({path})")
        if not self._client.connected:
            raise StoreError(f"not connected to {self.address} ({path})")
        where = f"{path} in {self.address}"
        try:
            return op().get(timeout=self._op_timeout)
        except kz.NoNodeError as exc:
            raise NoNodeError(f"no node {path} (or a parent of it) in {self.address}") from exc
        except kz.NodeExistsError as exc:
            raise NodeExistsError(f"node {where} already exists") from exc
        except kz.BadVersionError as exc:
            raise BadVersionError(f"bad version for {where}") from exc
        except kz.NotEmptyError as exc:
            raise NotEmptyError(f"node {where} has children") from exc
        except kz.NoChildrenForEphemeralsError as exc:
            raise StoreError(
                f"cannot create {where}: ephemeral {parent_of(path)} cannot have children"
            ) from exc
        except kz.NoAuthError as exc:
            raise StoreError(
                f"not authorised to change {where}: it is protected; authenticate as its owner "
                "(--auth user:password, or DUBBO_PY_REGISTRY_AUTH)"
            ) from exc
        except (*_CONNECTION_ERRORS, self._client.handler.timeout_exception) as exc:
            raise StoreError(f"not connected to {self.address} ({path}): {exc!r}") from exc
        except kz.KazooException as exc:
            raise StoreError(f"{where}: {exc!r}") from exc

    def __repr__(self) -> str:
        return f"ZooKeeperStore({self.address!r})"


if TYPE_CHECKING:
    from dubbo_py.registry.store.address import RegistryAddress

    # mypy proves here that the class satisfies the Store protocol.
    def _is_a_store(store: ZooKeeperStore) -> Store:
        return store

    def _is_access_controlled(store: ZooKeeperStore) -> AccessControlled:
        return store
