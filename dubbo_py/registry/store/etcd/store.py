"""The etcd v3 store: the registry tree on an etcd cluster, over etcd's gRPC API.

**Layout.** A node is the etcd key at its path (with the chroot, if any, in front): a provider
is ``/dubbo/<interface>/providers/<url-encoded URL>``, a rule
``/dubbo/config/dubbo/<key>.condition-router`` -- the keys dubbo-go's etcdv3 registry and
config centre use. A node's children are the keys one segment below it, found by a range over
the prefix ``<path>/``. etcd has no directories, so a path with keys below it but no key of its
own (dubbo-go writes such trees when its parents were not created) is an *implicit* node: it
exists, reads as empty data with version 0, and lists its children; setting its data makes it
a real key. This store itself always writes the parents it needs (``makepath``), as ZooKeeper
has them, so everything it writes is explicit.

**Versions and conditional writes.** A node's version is the key's etcd ``version`` minus one
(etcd counts the creation as 1, ZooKeeper as 0). Every write is one etcd transaction guarded by
what it read (the key's ``mod_revision``, the absence of a key, or that no key lies below a
node being deleted without ``recursive``), retried when the guard fails: create-if-absent,
set-with-version and delete-if-empty are atomic, as in ZooKeeper.

**Sessions.** A store's session is an etcd lease (``lease_ttl`` seconds) kept alive every third
of its TTL by a session thread; ephemeral nodes are keys attached to it, so they vanish when
the store closes (the lease is revoked) or ``lease_ttl`` after the process dies. A failed
keep-alive or a broken watch stream reports ``SUSPENDED``; the next keep-alive that the lease
survives reports ``RECONNECTED`` (an etcd restart keeps leases: they are persisted and renewed
when the member becomes leader again); a lease found expired is replaced by a new one and
reported as ``NEW_SESSION``, whose listeners (the registry) write their ephemeral nodes again.

**Watches.** All watches share one etcd Watch stream. The watches of one node and kind share
one etcd watcher over ``[<path>, <path>0)`` (the key and everything below it; events for
siblings that sort in between, like ``<path>-old``, are ignored) and one read per change: on an
event the node is read again and the state offered to each watch, which reports it only if it
changed. The read and the watcher are chained by revision (the watcher starts at the revision
after the read), so no change between them is missed. When the stream breaks (etcd restarted,
the connection dropped), every watched node is read again and watched afresh once etcd answers.
Callbacks and session listeners run on one store-owned thread.

**Endpoints.** ``hosts`` is ``host:port[,host:port]``: the client URLs of etcd members. The store
uses one at a time and moves to the next when it stops answering.

**Security.** ``etcds://`` addresses speak TLS (``tls``: the CA, client certificate and key); a
user and password (``credentials``, the registry identity) are traded for a token, renewed when
etcd stops honouring it (:mod:`~dubbo_py.registry.store.etcd.security`). A refused password or
TLS handshake is not an outage: :meth:`EtcdStore.start` raises it, naming the address, and
every operation repeats it until the store gets in (it keeps trying: a password or certificate
may be fixed on the etcd side).
"""

from __future__ import annotations

import functools
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import grpc

from dubbo_py.errors import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError, StoreError
from dubbo_py.registry.store._paths import (
    ancestors,
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
from dubbo_py.registry.store.base import Cancel, SessionState, Store
from dubbo_py.registry.store.etcd import _api as api
from dubbo_py.registry.store.etcd.security import (
    EtcdTls,
    TokenInterceptor,
    credentials_refused,
    stale_token,
    tls_failure,
    token_rejected,
)

__all__ = ["EtcdStore"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: gRPC status codes that mean "etcd is not reachable right now" rather than "the request is
#: wrong": the session thread is asked to check the connection when an operation sees one.
_UNREACHABLE = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.UNKNOWN,
    }
)
#: How often a write whose guard failed (someone changed the nodes it read) is tried again.
_WRITE_ATTEMPTS = 20


def _range(key: bytes, end: bytes = b"", *, keys_only: bool = False, limit: int = 0) -> Any:
    return api.RequestOp(
        request_range=api.RangeRequest(key=key, range_end=end, keys_only=keys_only, limit=limit)
    )


def _compare(key: bytes, target: int, value: int, *, end: bytes = b"") -> Any:
    field = {api.VERSION: "version", api.CREATE: "create_revision", api.MOD: "mod_revision"}
    return api.Compare(
        key=key, range_end=end, target=target, result=api.EQUAL, **{field[target]: value}
    )


class _Node:
    """What one read learnt of a node: its key (None when absent) and whether keys lie below."""

    __slots__ = ("below", "kv")

    def __init__(self, kv: Any, below: bool) -> None:
        self.kv = kv
        self.below = below

    @property
    def exists(self) -> bool:
        return self.kv is not None or self.below

    @property
    def version(self) -> int:
        """The ZooKeeper-style version: 0 after creation (and for an implicit node)."""
        return int(self.kv.version) - 1 if self.kv is not None else 0

    @property
    def data(self) -> bytes:
        return bytes(self.kv.value) if self.kv is not None else b""


class _PathWatches(Generic[T]):
    """Every watch of one node and kind (:attr:`watches`): one etcd watcher, one read per
    change."""

    def __init__(self, store: EtcdStore, kind: str, path: str, read: Callable[[str], T]) -> None:
        self._store = store
        self.kind = kind
        self.path = path
        self._read = read
        self.start, self.end, self._key, self._below = store.watch_range(path)
        self.watches: WatchSet[T] = WatchSet()
        self._refresh_pending = False
        #: The etcd watcher id while armed (0: none).
        self.watch_id = 0

    def relevant(self, key: bytes) -> bool:
        """Whether a change of ``key`` can change this node's state."""
        return key == self._key or key.startswith(self._below)

    def schedule_refresh(self) -> None:
        """Read again on the store's thread (once, however many events came meanwhile)."""
        if not self._refresh_pending and not self.watches.closed:
            self._refresh_pending = True
            self._store.dispatcher.submit(self.refresh)

    def refresh(self) -> None:
        """Read the state and offer it to every watch; on the store's thread."""
        self._refresh_pending = False
        if self.watches.closed:
            return
        try:
            state = self._read(self.path)
        except StoreError:
            return  # read again once the watch stream is back
        self.watches.offer(state)

    def arm(self, generation: int) -> None:
        """Read the state, offer it, and watch for changes from the revision after the read
        on the watch stream of ``generation``; on the store's thread."""
        if self.watches.closed or generation != self._store.stream_generation:
            return
        try:
            state, revision = self._store.read_at_revision(lambda: self._read(self.path))
        except StoreError:
            return  # armed again with the next stream
        self.watches.offer(state)
        self._store.create_watcher(self, revision + 1, generation)


#: The largest reply read from etcd: clientv3's default (``math.MaxInt32``).
_MAX_REPLY_BYTES = 2**31 - 1


class EtcdStore:
    """A :class:`~dubbo_py.registry.store.base.Store` on etcd (see the module doc).

    ``hosts`` is ``"h:p[,h:p]"`` (etcd client endpoints); every path is taken relative to
    ``chroot`` (a key prefix; none by default, as dubbo-go writes). ``lease_ttl`` is the
    session's lease in whole seconds (etcd raises one below 1.5 election timeouts to that);
    ``connect_timeout`` is how long :meth:`start` waits by default; ``retry_max_delay`` caps
    the back-off between reconnection attempts, which never stop. ``tls`` makes every
    connection a TLS one; ``credentials`` is an etcd ``(user, password)``.
    """

    @classmethod
    def from_address(
        cls,
        address: RegistryAddress,
        *,
        auth: tuple[str, str] | None = None,
        connect_timeout: float | None = None,
    ) -> EtcdStore:
        """The store of an ``etcd://`` or ``etcds://`` address (the store table's
        constructor); ``auth`` is the etcd user and password."""
        tls = (
            EtcdTls.from_options(str(address), dict(address.options))
            if address.kind == "etcds"
            else None
        )
        options: dict[str, Any] = {}
        if connect_timeout is not None:
            options["connect_timeout"] = connect_timeout
        session = address.parameters.session_timeout
        if session is not None:
            # Dubbo's session (ms) is how long the registry keeps what a silent client wrote:
            # for etcd, the lease's time to live (whole seconds, at least one).
            options["lease_ttl"] = max(1, round(session))
        return cls(address.location, address.chroot, tls=tls, credentials=auth, **options)

    def __init__(
        self,
        hosts: str,
        chroot: str = "",
        *,
        lease_ttl: int = 10,
        connect_timeout: float = 5.0,
        retry_max_delay: float = 2.0,
        tls: EtcdTls | None = None,
        credentials: tuple[str, str] | None = None,
    ) -> None:
        endpoints = [h.strip() for h in hosts.split(",")] if hosts else []
        if not endpoints or any(
            not h or "/" in h or not h.rpartition(":")[2].isdigit() for h in endpoints
        ):
            raise StoreError(
                f"invalid etcd hosts {hosts!r}: expected 'host:port[,host:port]' "
                "(pass the chroot separately)"
            )
        if lease_ttl < 1:
            raise ValueError("lease_ttl must be at least one second")
        self._hosts = ",".join(endpoints)
        self._endpoints = endpoints
        self._chroot = "" if chroot in ("", "/") else validate_path(chroot)
        self._scheme = "etcd" if tls is None else "etcds"
        self._tls = None if tls is None else tls.channel_credentials(self.address)
        self._credentials = credentials
        #: The token etcd gave for ``credentials`` ("" before it did, or once it refused it).
        self._token = ""
        self._token_lock = threading.Lock()
        #: etcd answered that authentication is off: the credentials are not used.
        self._auth_disabled = False
        #: Why etcd refuses this store (a password or TLS handshake); None while it does not.
        self._refused: StoreError | None = None
        #: What the last failed attempt to reach etcd said (None once it answered).
        self.last_failure: str | None = None
        self._lease_ttl = int(lease_ttl)
        self._connect_timeout = connect_timeout
        self._retry_max_delay = retry_max_delay
        # A request waits at most this long for its reply; beyond it etcd is taken as gone.
        self._op_timeout = max(5.0, connect_timeout)
        self._channel_options = [
            # Reconnect promptly after an outage (gRPC's defaults back off to two minutes).
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", max(100, int(retry_max_delay * 1000))),
            # A provider folder's keys come back in one Range reply: 20 000 provider URLs are
            # ~6.6 MB, over gRPC's default 4 MB receive limit, and the read would fail for
            # good. etcd's own client (clientv3) receives up to 2 GiB; so do we.
            ("grpc.max_receive_message_length", _MAX_REPLY_BYTES),
        ]
        self._endpoint_index = 0
        self._channel, self._stub = self._open_channel(endpoints[0])
        self._dispatcher = Dispatcher(f"dubbo-etcd-events[{self.address}]")
        self._listeners = SessionListeners()
        self._lock = threading.Lock()
        # The watches of each (kind, path), sharing one etcd watcher and one read.
        self._groups: dict[tuple[str, str], _PathWatches[Any]] = {}
        self._by_watch_id: dict[int, _PathWatches[Any]] = {}
        self._watch_ids = itertools.count(1)
        self._started = False
        self._closed = False
        self._stop = threading.Event()
        #: Set while etcd answers and this store holds a live lease.
        self._live = threading.Event()
        #: Wakes the session thread to check the connection now.
        self._wake = threading.Event()
        self._lease = 0
        self._session_thread: threading.Thread | None = None
        self._watch_thread: threading.Thread | None = None
        # The watch stream: its request queue and generation (bumped on every new stream).
        self._watch_requests: queue.SimpleQueue[Any] | None = None
        self._watch_call: Any = None
        #: The token the watch stream was opened with (etcd checks it per watcher created).
        self._stream_token = ""
        self.stream_generation = 0

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def address(self) -> str:
        """``etcd://hosts[/chroot]`` (``etcds://`` with TLS), as used in messages."""
        return f"{self._scheme}://{self._hosts}{self._chroot}"

    @property
    def chroot(self) -> str:
        """The key prefix all paths are relative to (``""`` for none)."""
        return self._chroot

    @property
    def connected(self) -> bool:
        """Whether etcd answers and this store's lease is alive right now."""
        return self._live.is_set()

    @property
    def lease_id(self) -> int:
        """The etcd lease ephemeral nodes are attached to (0 before the first connection)."""
        return self._lease

    @property
    def lease_ttl(self) -> int:
        """The lease's time to live, in seconds."""
        return self._lease_ttl

    @property
    def dispatcher(self) -> Dispatcher:
        """The store-owned thread that runs watch callbacks and session listeners."""
        return self._dispatcher

    def start(self, timeout: float | None = None) -> bool:
        """Start connecting (in the background, retrying for ever) and wait up to ``timeout``
        seconds (default: ``connect_timeout``) for the connection. Returns whether it is
        connected; never raises because etcd is unreachable, but raises StoreError (naming the
        address) when etcd refuses the password or the TLS handshake fails."""
        with self._lock:
            if self._closed:
                raise StoreError(f"{self.address} is closed")
            if not self._started:
                self._started = True
                self._dispatcher.start()
                self._session_thread = threading.Thread(
                    target=self._session_loop, name=f"dubbo-etcd-lease[{self._hosts}]", daemon=True
                )
                self._watch_thread = threading.Thread(
                    target=self._watch_loop, name=f"dubbo-etcd-watch[{self._hosts}]", daemon=True
                )
                self._session_thread.start()
                self._watch_thread.start()
        wait = self._connect_timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        while not self._live.wait(min(0.05, max(0.0, deadline - time.monotonic()))):
            if self._refused is not None:
                raise self._refused
            if time.monotonic() >= deadline:
                return False
        return True

    def close(self) -> None:
        """Revoke the lease (its ephemeral nodes disappear at once) and stop all watches."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            groups = list(self._groups.values())
            self._groups.clear()
            self._by_watch_id.clear()
        for group in groups:
            group.watches.close()
        self._listeners.clear()
        self._stop.set()
        self._wake.set()
        live, lease = self._live.is_set(), self._lease
        self._live.clear()
        self._end_watch_stream()
        if live and lease:
            try:
                self._stub.LeaseRevoke(api.LeaseRevokeRequest(ID=lease), timeout=2.0)
            except grpc.RpcError as exc:
                log.warning("%s: could not revoke lease %x: %s", self.address, lease, exc.code())
        for thread in (self._session_thread, self._watch_thread):
            if thread is not None and thread is not threading.current_thread():
                thread.join(5.0)
        self._dispatcher.close()
        self._channel.close()

    def add_session_listener(self, listener: Callable[[SessionState], None]) -> None:
        """Be told of connection changes, on the store's event thread: ``CONNECTED`` on the
        first connection, ``SUSPENDED`` when etcd stops answering, ``RECONNECTED`` when it
        answers again and the lease lived, ``NEW_SESSION`` when the lease had expired and a new
        one was granted. A listener added while connected is told ``CONNECTED`` at once."""
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
        effect: etcd's access control (users and roles on key ranges) is not managed by this
        store."""
        validate_new_path(path, self.address)
        self._write_node(path, bytes(data), ephemeral=ephemeral, makepath=makepath, exist_ok=False)

    def ensure_path(self, path: str) -> None:
        """Create the node and its missing parents."""
        validate_path(path)
        if path != "/":
            self._write_node(path, b"", ephemeral=False, makepath=True, exist_ok=True)

    def exists(self, path: str) -> bool:
        """Whether the node exists (as a key, or implicitly with keys below it)."""
        validate_path(path)
        if path == "/":
            self._require(path)
            return True
        return self._read_node(path).exists

    def get(self, path: str) -> tuple[bytes, int]:
        """The node's data and version."""
        validate_path(path)
        if path == "/":
            self._require(path)
            return b"", 0
        node = self._read_node(path)
        if not node.exists:
            raise NoNodeError(f"no node {path} in {self.address}")
        return node.data, node.version

    def _existing(self, path: str, version: int) -> _Node:
        """The node at ``path``, which must exist and, unless ``version`` is -1, be at
        ``version`` (what set and delete check before writing)."""
        node = self._read_node(path)
        if not node.exists:
            raise NoNodeError(f"no node {path} in {self.address}")
        if version != -1 and version != node.version:
            raise BadVersionError(
                f"bad version for {path} in {self.address}: "
                f"expected {version}, found {node.version}"
            )
        return node

    def set(self, path: str, data: bytes, version: int = -1) -> int:
        """Replace the data if the version matches; returns the new version."""
        validate_path(path)
        if path == "/":
            raise StoreError(f"cannot set the data of the root of {self.address}")
        key = self._key(path)
        for _ in range(_WRITE_ATTEMPTS):
            node = self._existing(path, version)
            if node.kv is None:  # an implicit node becomes a key of its own
                guard = _compare(key, api.VERSION, 0)
                put = api.PutRequest(key=key, value=bytes(data))
            else:  # the same key, still attached to its lease (an ephemeral node stays one)
                guard = _compare(key, api.MOD, node.kv.mod_revision)
                put = api.PutRequest(key=key, value=bytes(data), ignore_lease=True)
            if self._txn(path, [guard], [api.RequestOp(request_put=put)]).succeeded:
                return node.version + 1 if node.kv is not None else 0
        raise self._contended(path)

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        """Delete the node (and its subtree when ``recursive``)."""
        validate_deletable_path(path, self.address)
        key, below = self._key(path), self._below(path)
        for _ in range(_WRITE_ATTEMPTS):
            node = self._existing(path, version)
            if node.below and not recursive:
                raise NotEmptyError(f"node {path} in {self.address} has children")
            guards = [
                _compare(key, api.MOD, node.kv.mod_revision)
                if node.kv is not None
                else _compare(key, api.VERSION, 0)
            ]
            ops = [api.RequestOp(request_delete_range=api.DeleteRangeRequest(key=key))]
            if recursive:
                ops.append(
                    api.RequestOp(
                        request_delete_range=api.DeleteRangeRequest(
                            key=below, range_end=api.prefix_end(below)
                        )
                    )
                )
            else:  # still nothing below it
                guards.append(_compare(below, api.CREATE, 0, end=api.prefix_end(below)))
            if self._txn(path, guards, ops).succeeded:
                return
        raise self._contended(path)

    def children(self, path: str) -> list[str]:
        """The sorted names of the node's children (the keys one segment below it)."""
        validate_path(path)
        exists, names = self._read_children(path)
        if not exists:
            raise NoNodeError(f"no node {path} in {self.address}")
        return names

    # -- watches -----------------------------------------------------------------------------

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> Cancel:
        """Persistent children watch; the first call (with the current children, [] while the
        node is absent) comes once connected."""
        validate_path(path)
        watch: Watch[ChildrenState] = Watch(path, lambda state: callback(list(state[1])))
        return self._add_watch("children", watch, self._read_children)

    def watch_data(self, path: str, callback: Callable[[bytes | None, int], None]) -> Cancel:
        """Persistent data watch: ``(data, version)``, ``(None, -1)`` while the node is absent."""
        validate_path(path)
        watch: Watch[DataState] = Watch(path, lambda state: callback(*state))
        return self._add_watch("data", watch, self._read_data)

    def _add_watch(self, kind: str, watch: Watch[T], read: Callable[[str], T]) -> Cancel:
        """Register ``watch`` in the group of its path and kind (made, and armed when the
        stream is up, on first use); an existing group reads again so that the new watch gets
        the current state (the others, told only of changes, hear nothing new)."""
        key = (kind, watch.path)
        with self._lock:
            if self._closed:
                raise StoreError(f"{self.address} is closed")
            group = self._groups.get(key)
            fresh = group is None
            if group is None:
                group = _PathWatches(self, kind, watch.path, read)
                self._groups[key] = group
            group.watches.add(watch)
            generation = self.stream_generation
        if fresh:
            self._dispatcher.submit(lambda: group.arm(generation))
        elif group.watch_id:
            self._dispatcher.submit(group.refresh)

        def cancel() -> None:
            watch.cancel()
            with self._lock:
                if not group.watches.remove(watch) or self._groups.get(key) is not group:
                    return
                del self._groups[key]
                group.watches.close()
                watch_id, group.watch_id = group.watch_id, 0
                self._by_watch_id.pop(watch_id, None)
            if watch_id:
                self._send_watch_request(
                    api.WatchRequest(cancel_request=api.WatchCancelRequest(watch_id=watch_id)),
                    self.stream_generation,
                )

        return cancel

    def watch_range(self, path: str) -> tuple[bytes, bytes, bytes, bytes]:
        """``(start, end, key, below)``: the etcd watch range of a node (its key and
        everything below it), its key and the prefix of the keys below it."""
        key, below = self._key(path), self._below(path)
        return key or below, api.prefix_end(below), key, below

    def read_at_revision(self, read: Callable[[], T]) -> tuple[T, int]:
        """Run ``read`` (one or more reads of this store on this thread) and return its result
        with the etcd revision the first of them saw: a watcher from the next revision on
        misses nothing that happened after it."""
        holder = _RevisionHolder()
        self._revisions.holder = holder
        try:
            result = read()
        finally:
            self._revisions.holder = None
        return result, holder.revision

    def create_watcher(
        self, group: _PathWatches[Any], start_revision: int, generation: int
    ) -> None:
        """Ask etcd to watch ``group``'s range from ``start_revision`` on the stream of
        ``generation`` (replacing the group's previous watcher)."""
        with self._lock:
            if group.watches.closed or generation != self.stream_generation:
                return
            old = group.watch_id
            if old:
                self._by_watch_id.pop(old, None)
            group.watch_id = next(self._watch_ids)
            self._by_watch_id[group.watch_id] = group
        if old:
            self._send_watch_request(
                api.WatchRequest(cancel_request=api.WatchCancelRequest(watch_id=old)), generation
            )
        self._send_watch_request(
            api.WatchRequest(
                create_request=api.WatchCreateRequest(
                    key=group.start,
                    range_end=group.end,
                    start_revision=start_revision,
                    watch_id=group.watch_id,
                )
            ),
            generation,
        )

    def _read_children(self, path: str) -> ChildrenState:
        below = self._below(path)
        ops = [_range(below, api.prefix_end(below), keys_only=True)]
        if path != "/":
            ops.append(_range(self._key(path), keys_only=True))
        responses = self._read(path, ops)
        kvs = responses[0].response_range.kvs
        exists = path == "/" or bool(kvs) or bool(responses[1].response_range.kvs)
        names = {bytes(kv.key)[len(below) :].split(b"/", 1)[0] for kv in kvs}
        return exists, sorted(n.decode("utf-8", "replace") for n in names if n)

    def _read_data(self, path: str) -> DataState:
        if path == "/":
            return b"", 0
        node = self._read_node(path)
        return (node.data, node.version) if node.exists else (None, -1)

    # -- the watch stream ----------------------------------------------------------------------

    def _watch_loop(self) -> None:
        """Keep one Watch stream open while connected, re-arming every group on each new one."""
        while not self._stop.is_set():
            if not self._live.wait(0.5):
                continue
            requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
            with self._lock:
                if self._closed:
                    return
                self.stream_generation += 1
                generation = self.stream_generation
                self._watch_requests = requests
                self._by_watch_id.clear()
                groups = list(self._groups.values())
                for group in groups:
                    group.watch_id = 0
                # Under the lock, so that close() finds the call to cancel.
                self._stream_token = self._token
                call = self._watch_call = self._stub.Watch(_drain(requests))
            for group in groups:
                self._dispatcher.submit(functools.partial(group.arm, generation))
            try:
                for response in call:
                    self._on_watch_response(response, generation)
            except grpc.RpcError as exc:
                if not self._stop.is_set():
                    log.info("%s: watch stream ended: %s", self.address, exc.code())
            finally:
                requests.put(None)
            if self._stop.is_set():
                return
            # The stream broke: have the session thread check etcd before a new one is opened.
            self._wake.set()
            self._stop.wait(0.1)

    def _on_watch_response(self, response: Any, generation: int) -> None:
        if response.canceled and stale_token(response.cancel_reason) and self._credentials:
            # The token this stream was opened with expired (etcd answers with watcher -1):
            # every watcher asked for since is refused; a new stream carries a new token.
            token = self._stream_token
            self._dispatcher.submit(lambda: self._renew_stream(token, generation))
            return
        with self._lock:
            group = self._by_watch_id.get(response.watch_id)
        if group is None or group.watches.closed:
            return
        if response.canceled and "permission denied" in response.cancel_reason:
            self._dispatcher.submit(lambda: self._watch_denied(group, generation))
            return
        if response.canceled or response.compact_revision:
            # The revision it started from was compacted away (or etcd dropped the watcher):
            # read again and watch from now.
            log.info(
                "%s: watcher of %s cancelled by etcd (%s); watching it again",
                self.address,
                group.path,
                response.cancel_reason or f"compacted at {response.compact_revision}",
            )
            self._dispatcher.submit(lambda: group.arm(generation))
            return
        if any(group.relevant(bytes(event.kv.key)) for event in response.events):
            group.schedule_refresh()

    def _watch_denied(self, group: _PathWatches[Any], generation: int) -> None:
        """etcd refused to watch ``group``'s node: either this stream's token is stale (the
        auth store changed since it was opened; a new stream carries the current token) or
        the user may not read the node (said once; the watch waits for the next stream)."""
        if group.watches.closed or generation != self.stream_generation:
            return
        try:
            self._read(group.path, [_range(group.start, group.end, keys_only=True, limit=1)])
        except StoreError as exc:
            log.error("%s: cannot watch %s: %s", self.address, group.path, exc)
            return
        self._renew_stream(None, generation)

    def _renew_stream(self, stale: str | None, generation: int) -> None:
        """Open a new watch stream (with a new token, when ``stale`` is still the current
        one): etcd refused a watcher for the token of the stream of ``generation``."""
        with self._lock:
            call = self._watch_call if generation == self.stream_generation else None
        if call is None:
            return
        if stale is not None:
            try:
                self._renew_token(stale)
            except grpc.RpcError as exc:
                log.warning("%s: could not renew the token: %s", self.address, exc.code().name)
                self._wake.set()
        log.info("%s: the watch stream's token is stale; opening a new stream", self.address)
        call.cancel()

    def _send_watch_request(self, request: Any, generation: int) -> None:
        with self._lock:
            requests = self._watch_requests
            current = generation == self.stream_generation
        if requests is not None and current:
            requests.put(request)

    def _end_watch_stream(self) -> None:
        with self._lock:
            requests, self._watch_requests = self._watch_requests, None
            call, self._watch_call = self._watch_call, None
        if requests is not None:
            requests.put(None)
        if call is not None:
            call.cancel()

    # -- the session ---------------------------------------------------------------------------

    def _session_loop(self) -> None:
        ever_connected = False
        suspended = False
        reported = False  # that etcd does not answer (logged once per outage)
        delay = 0.1
        token_retried = False  # a rejected token is renewed at once, once
        while not self._stop.is_set():
            event: SessionState | None = None
            try:
                if self._credentials and not self._token and not self._auth_disabled:
                    self._authenticate()
                if self._lease and self._keep_alive(self._lease):
                    if suspended:
                        event = SessionState.RECONNECTED
                else:
                    if self._lease:
                        log.warning("%s: lease %x expired", self.address, self._lease)
                        if not suspended:
                            self._dispatcher.submit(
                                lambda: self._listeners.emit(SessionState.SUSPENDED)
                            )
                    self._live.clear()
                    granted = self._stub.LeaseGrant(
                        api.LeaseGrantRequest(TTL=self._lease_ttl), timeout=self._op_timeout
                    )
                    self._lease = int(granted.ID)
                    event = SessionState.NEW_SESSION if ever_connected else SessionState.CONNECTED
            except grpc.RpcError as exc:
                if self._credentials and token_rejected(exc) and not token_retried:
                    token_retried = True
                    self._token = ""  # authenticate again, now
                    continue
                refused = self._refusal(exc)
                if refused is not None:
                    if self._refused is None or str(self._refused) != str(refused):
                        log.error("%s; retrying", refused)
                    self._refused = refused
                    reported = True
                else:
                    hint = (
                        " (if this etcd speaks TLS, use etcds://)"
                        if self._tls is None and "Socket closed" in str(exc.details())
                        else ""
                    )
                    self.last_failure = f"{exc.code().name}: {exc.details()}{hint}"
                    if not reported:
                        reported = True
                        log.warning(
                            "%s: etcd does not answer (%s)%s; retrying",
                            self.address,
                            exc.code().name,
                            hint,
                        )
                self._live.clear()
                self._end_watch_stream()
                if ever_connected and not suspended:
                    suspended = True
                    self._dispatcher.submit(lambda: self._listeners.emit(SessionState.SUSPENDED))
                self._next_endpoint()
                self._stop.wait(delay)
                delay = min(delay * 2, self._retry_max_delay)
                continue
            delay = 0.1
            reported = False
            token_retried = False
            self._refused = None
            self.last_failure = None
            ever_connected = True
            suspended = False
            self._live.set()
            if event is not None:
                if event is not SessionState.RECONNECTED:
                    log.info("%s: %s (lease %x)", self.address, event.value, self._lease)
                self._dispatcher.submit(functools.partial(self._listeners.emit, event))
            # Renew at a third of the TTL, or at once when something saw etcd fail.
            self._wake.wait(self._lease_ttl / 3)
            self._wake.clear()

    def _authenticate(self) -> None:
        """Trade the credentials for a token (the session thread, or a request whose token
        etcd stopped honouring)."""
        assert self._credentials is not None
        user, password = self._credentials
        try:
            reply = self._stub.Authenticate(
                api.AuthenticateRequest(name=user, password=password), timeout=self._op_timeout
            )
        except grpc.RpcError as exc:
            if exc.code() is grpc.StatusCode.FAILED_PRECONDITION and "not enabled" in str(
                exc.details()
            ):
                # Nothing to prove: etcd lets everyone in. Said once, since an operator who
                # gave a password expects it to matter.
                log.warning(
                    "%s: etcd's authentication is not enabled; user %r is not used",
                    self.address,
                    user,
                )
                self._auth_disabled = True
                return
            raise
        self._token = str(reply.token)

    def _renew_token(self, rejected: str) -> None:
        """Authenticate again unless another thread already replaced ``rejected``."""
        with self._token_lock:
            if self._token == rejected:
                self._authenticate()

    def _refusal(self, exc: grpc.RpcError) -> StoreError | None:
        """The error to report when etcd refuses this store (rather than not answering)."""
        if credentials_refused(exc) and self._credentials is not None:
            return StoreError(
                f"{self.address}: etcd refused user {self._credentials[0]!r}: "
                f"{_etcd_text(exc)} (check the registry identity: --auth, "
                "$DUBBO_PY_REGISTRY_AUTH or auth: in dubbo.yaml)"
            )
        reason = tls_failure(exc)
        if reason is not None:
            hint = (
                "check ca=, cert= and key= of the etcds:// address"
                if self._tls is not None
                else "does this etcd speak TLS? use etcds://"
            )
            return StoreError(f"{self.address}: TLS handshake failed ({hint}): {reason}")
        return None

    def _keep_alive(self, lease: int) -> bool:
        """Renew the lease once; False when etcd no longer has it."""
        responses = self._stub.LeaseKeepAlive(
            iter([api.LeaseKeepAliveRequest(ID=lease)]), timeout=self._op_timeout
        )
        try:
            for response in responses:
                return int(response.TTL) > 0
        finally:
            responses.cancel()
        return False

    def _next_endpoint(self) -> None:
        if len(self._endpoints) < 2 or self._stop.is_set():
            return
        with self._lock:
            self._endpoint_index = (self._endpoint_index + 1) % len(self._endpoints)
            old = self._channel
            self._channel, self._stub = self._open_channel(self._endpoints[self._endpoint_index])
        old.close()

    def _open_channel(self, endpoint: str) -> tuple[grpc.Channel, api.EtcdStub]:
        """A channel to ``endpoint`` (TLS for etcds://) and the stub on it (adding the token
        to every call when the store authenticates)."""
        channel = (
            grpc.insecure_channel(endpoint, options=self._channel_options)
            if self._tls is None
            else grpc.secure_channel(endpoint, self._tls, options=self._channel_options)
        )
        if self._credentials is None:
            return channel, api.EtcdStub(channel)
        intercepted = grpc.intercept_channel(channel, TokenInterceptor(lambda: self._token))
        return channel, api.EtcdStub(intercepted)

    # -- reads and writes ----------------------------------------------------------------------

    _revisions = threading.local()

    def _read_node(self, path: str) -> _Node:
        below = self._below(path)
        responses = self._read(
            path,
            [
                _range(self._key(path)),
                _range(below, api.prefix_end(below), keys_only=True, limit=1),
            ],
        )
        kvs = responses[0].response_range.kvs
        return _Node(kvs[0] if kvs else None, bool(responses[1].response_range.kvs))

    def _read(self, path: str, ops: Sequence[Any]) -> Sequence[Any]:
        """Run read-only range requests in one transaction (one revision, one round trip)."""
        response = self._txn(path, [], ops)
        holder: _RevisionHolder | None = getattr(self._revisions, "holder", None)
        if holder is not None and not holder.revision:
            holder.revision = int(response.header.revision)
        return list(response.responses)

    def _write_node(
        self, path: str, data: bytes, *, ephemeral: bool, makepath: bool, exist_ok: bool
    ) -> None:
        """Create ``path`` (with its missing parents when ``makepath``) in one guarded
        transaction: nothing it read may have changed meanwhile."""
        key, below = self._key(path), self._below(path)
        parent = parent_of(path)
        chain = ancestors(path)
        for _ in range(_WRITE_ATTEMPTS):
            lease = self._lease
            if ephemeral and not (lease and self._live.is_set()):
                raise StoreError(f"not connected to {self.address} ({path}): no live lease")
            ops = [_range(self._key(a), keys_only=True) for a in chain]
            ops.append(_range(key, keys_only=True))
            ops.append(_range(below, api.prefix_end(below), keys_only=True, limit=1))
            if parent != "/":  # the root always exists (and reading all of it needs a right
                # to read every key, which an etcd user limited to its prefixes lacks)
                parent_below = self._below(parent)
                ops.append(
                    _range(parent_below, api.prefix_end(parent_below), keys_only=True, limit=1)
                )
            responses = self._read(path, ops)
            found = [r.response_range.kvs[0] if r.response_range.kvs else None for r in responses]
            ancestor_kvs, own, own_below = (
                found[: len(chain)],
                found[len(chain)],
                found[len(chain) + 1],
            )
            parent_below_any = found[len(chain) + 2] if parent != "/" else None
            for name, kv in zip(chain, ancestor_kvs, strict=True):
                if kv is not None and kv.lease:
                    raise StoreError(
                        f"cannot create {path} in {self.address}: "
                        f"ephemeral {name} cannot have children"
                    )
            if own is not None or own_below is not None:
                if exist_ok:
                    return
                raise NodeExistsError(f"node {path} already exists in {self.address}")
            parent_exists = parent == "/" or ancestor_kvs[-1] is not None or parent_below_any
            if not parent_exists and not makepath:
                raise NoNodeError(
                    f"cannot create {path} in {self.address}: no parent node {parent}"
                )
            guards = [_compare(key, api.VERSION, 0)]
            guards.append(_compare(below, api.CREATE, 0, end=api.prefix_end(below)))
            puts = []
            for name, kv in zip(chain, ancestor_kvs, strict=True):
                ancestor_key = self._key(name)
                if kv is not None:
                    guards.append(_compare(ancestor_key, api.MOD, kv.mod_revision))
                elif makepath:
                    guards.append(_compare(ancestor_key, api.VERSION, 0))
                    puts.append(
                        api.RequestOp(request_put=api.PutRequest(key=ancestor_key, value=b""))
                    )
            puts.append(
                api.RequestOp(
                    request_put=api.PutRequest(key=key, value=data, lease=lease if ephemeral else 0)
                )
            )
            if self._txn(path, guards, puts).succeeded:
                return
        raise self._contended(path)

    def _txn(self, path: str, guards: Sequence[Any], ops: Sequence[Any]) -> Any:
        """One etcd transaction, its failures translated to store errors naming ``path``."""
        self._require(path)
        request = api.TxnRequest(compare=guards, success=ops)
        try:
            token = self._token
            try:
                return self._stub.Txn(request, timeout=self._op_timeout)
            except grpc.RpcError as exc:
                if not (self._credentials and not self._auth_disabled and token_rejected(exc)):
                    raise
                self._renew_token(token)
                return self._stub.Txn(request, timeout=self._op_timeout)
        except grpc.RpcError as exc:
            code = exc.code()
            refused = self._refusal(exc)
            if refused is not None:
                self._wake.set()
                raise StoreError(f"{refused} ({path})") from exc
            if code in _UNREACHABLE:
                self._wake.set()  # let the session thread find out what is wrong
                raise StoreError(f"not connected to {self.address} ({path}): {code.name}") from exc
            if code is grpc.StatusCode.NOT_FOUND:  # "requested lease not found": it expired
                self._wake.set()
            if code is grpc.StatusCode.PERMISSION_DENIED:
                who = f"user {self._credentials[0]!r}" if self._credentials else "this client"
                raise StoreError(
                    f"not authorised to {_verb(ops)} {path} in {self.address}: etcd's roles "
                    f"for {who} do not permit it ({_etcd_text(exc)})"
                ) from exc
            if token_rejected(exc) and not self._credentials:
                raise StoreError(
                    f"{path} in {self.address}: etcd's authentication is enabled; give a user "
                    "and password (--auth user:password, $DUBBO_PY_REGISTRY_AUTH or auth: in "
                    f"dubbo.yaml) ({_etcd_text(exc)})"
                ) from exc
            raise StoreError(f"{path} in {self.address}: {exc.details()}") from exc

    def _require(self, path: str) -> None:
        """Raise :class:`StoreError` unless the store is open and connected."""
        if self._closed:
            raise StoreError(f"{self.address} is closed ({path})")
        if not self._live.is_set():
            if self._refused is not None:
                raise StoreError(f"{self._refused} ({path})")
            raise StoreError(f"not connected to {self.address} ({path})")

    def _contended(self, path: str) -> StoreError:
        return StoreError(
            f"{path} in {self.address}: gave up after {_WRITE_ATTEMPTS} attempts "
            "(the nodes it depends on kept changing)"
        )

    def _key(self, path: str) -> bytes:
        """The etcd key of a node (the root's is the chroot, empty without one)."""
        return (self._chroot if path == "/" else self._chroot + path).encode()

    def _below(self, path: str) -> bytes:
        """The prefix of the keys below a node."""
        return self._key(path) + b"/"

    def __repr__(self) -> str:
        return f"EtcdStore({self.address!r})"


def _etcd_text(exc: grpc.RpcError) -> str:
    """etcd's message without its ``etcdserver:`` prefix."""
    return str(exc.details() or exc.code().name).removeprefix("etcdserver: ")


def _verb(ops: Sequence[Any]) -> str:
    """What a transaction does, for an error message: read, write or delete."""
    kinds = {op.WhichOneof("request") for op in ops}
    if kinds <= {"request_range"}:
        return "read"
    return "delete" if "request_delete_range" in kinds else "write"


class _RevisionHolder:
    """The revision a read saw (set by the first read of :meth:`EtcdStore.read_at_revision`)."""

    __slots__ = ("revision",)

    def __init__(self) -> None:
        self.revision = 0


def _drain(requests: queue.SimpleQueue[Any]) -> Iterator[Any]:
    """The requests of one watch stream, until ``None``."""
    while True:
        request = requests.get()
        if request is None:
            return
        yield request


if TYPE_CHECKING:
    from dubbo_py.registry.store.address import RegistryAddress

    # mypy proves here that the class satisfies the Store protocol.
    def _is_a_store(store: EtcdStore) -> Store:
        return store
