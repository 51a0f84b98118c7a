"""ZooKeeper-only behaviour: sessions, outages and chroots, against a real ZooKeeper server."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient

from dubbo_py.errors import StoreError
from dubbo_py.registry.store.base import SessionState
from dubbo_py.registry.store.zookeeper import ZooKeeperStore
from tests.support.waiting import Recorder, wait_until
from tests.support.zookeeper import ZooKeeperServer, expire_session

pytestmark = pytest.mark.zookeeper


@pytest.fixture
def own_zookeeper() -> Iterator[ZooKeeperServer]:
    """A server of this test's own (not started), for tests that stop or delay it."""
    server = ZooKeeperServer()
    yield server
    server.close()


@pytest.fixture
def stores() -> Iterator[list[ZooKeeperStore]]:
    """Stores the test opens; closed afterwards."""
    opened: list[ZooKeeperStore] = []
    yield opened
    for store in reversed(opened):
        store.close()


def _open(
    stores: list[ZooKeeperStore], address: str, chroot: str = "", **options: Any
) -> ZooKeeperStore:
    """A store on a fresh chroot (unless given). Session expiry is forced in these tests, never
    waited for, so the session timeout need not be short."""
    options.setdefault("session_timeout", 10.0)
    store = ZooKeeperStore(address, chroot or f"/zk-{uuid.uuid4().hex[:10]}", **options)
    stores.append(store)
    return store


def test_session_expiry_gives_a_new_session_and_watches_keep_firing(
    zookeeper: ZooKeeperServer, stores: list[ZooKeeperStore]
) -> None:
    store = _open(stores, zookeeper.address)
    events = Recorder()
    store.add_session_listener(events)

    # What a provider does: register again whenever the session is new.
    def reregister(state: SessionState) -> None:
        if state is SessionState.NEW_SESSION:
            store.create("/svc/providers/again", ephemeral=True)

    store.add_session_listener(reregister)
    assert store.start()
    events.wait_last(SessionState.CONNECTED)
    store.create("/svc/providers/me", ephemeral=True)
    kids, data = Recorder(), Recorder()
    store.watch_children("/svc/providers", kids)
    store.watch_data("/svc/config", data)
    kids.wait_last(["me"])
    data.wait_last((None, -1))

    expire_session(store)

    events.wait_last(SessionState.NEW_SESSION)
    # (Forcing the expiry may bounce the connection once more before it takes, hence no exact
    # sequence in the middle.)
    assert events.calls[0] is SessionState.CONNECTED
    assert events.calls[-2:] == [SessionState.SUSPENDED, SessionState.NEW_SESSION]
    assert events.calls.count(SessionState.NEW_SESSION) == 1
    kids.wait_last(["again"])  # the old ephemeral node went with the old session
    other = _open(stores, zookeeper.address, store.chroot)
    assert other.start()
    other.create("/svc/providers/other")
    other.create("/svc/config", b"after expiry")
    kids.wait_last(["again", "other"])
    data.wait_last((b"after expiry", 0))


def test_start_while_zookeeper_is_down_then_attach_when_it_comes_up(
    own_zookeeper: ZooKeeperServer, stores: list[ZooKeeperStore]
) -> None:
    store = _open(stores, own_zookeeper.address, "/late/root", retry_max_delay=0.5)
    events = Recorder()
    store.add_session_listener(events)

    assert store.start(timeout=0.5) is False
    with pytest.raises(
        StoreError, match=r"not connected to zookeeper://127\.0\.0\.1:\d+/late/root"
    ):
        store.get("/x")
    kids = Recorder()
    store.watch_children("/", kids)  # registered while down

    own_zookeeper.start()

    events.wait_last(SessionState.CONNECTED)
    kids.wait_last([])
    assert store.connected
    store.create("/registered")
    kids.wait_last(["registered"])
    assert events.calls == [SessionState.CONNECTED]


def test_server_restart_suspends_then_reconnects_the_same_session(
    own_zookeeper: ZooKeeperServer, stores: list[ZooKeeperStore]
) -> None:
    own_zookeeper.start()
    store = _open(stores, own_zookeeper.address, session_timeout=40.0, retry_max_delay=0.5)
    observer = _open(stores, own_zookeeper.address, store.chroot)
    events = Recorder()
    store.add_session_listener(events)
    assert store.start() and observer.start()
    events.wait_last(SessionState.CONNECTED)
    store.create("/svc/providers/me", ephemeral=True)
    kids = Recorder()
    observer.watch_children("/svc/providers", kids)
    kids.wait_last(["me"])

    own_zookeeper.stop()
    events.wait_last(SessionState.SUSPENDED)
    with pytest.raises(StoreError, match="not connected"):
        store.create("/during/outage")
    own_zookeeper.start()

    events.wait_last(SessionState.RECONNECTED)
    assert events.calls == [
        SessionState.CONNECTED,
        SessionState.SUSPENDED,
        SessionState.RECONNECTED,
    ]
    # Same session: the ephemeral node is still there, and watches work again.
    assert store.children("/svc/providers") == ["me"]
    store.create("/svc/providers/after")
    kids.wait_last(["after", "me"])


def test_chroot_is_created_and_isolates_namespaces(
    zookeeper: ZooKeeperServer, stores: list[ZooKeeperStore]
) -> None:
    base = f"/iso-{uuid.uuid4().hex[:8]}"
    first = _open(stores, zookeeper.address, f"{base}/one")
    second = _open(stores, zookeeper.address, f"{base}/two")
    assert first.start() and second.start()
    first.create("/dubbo/a", b"1")
    second.create("/dubbo/b", b"2")
    assert first.children("/dubbo") == ["a"]
    assert second.children("/dubbo") == ["b"]

    raw = KazooClient(hosts=zookeeper.address)
    raw.start(timeout=20)
    try:
        assert raw.get(f"{base}/one/dubbo/a")[0] == b"1"
        assert sorted(raw.get_children(base)) == ["one", "two"]
    finally:
        raw.stop()
        raw.close()


def test_empty_chroot_chroot_slash_and_address(
    zookeeper: ZooKeeperServer, stores: list[ZooKeeperStore]
) -> None:
    store = ZooKeeperStore(zookeeper.address, "/")
    stores.append(store)
    assert store.address == f"zookeeper://{zookeeper.address}"
    assert store.start()
    assert "zookeeper" in store.children("/")  # ZooKeeper's own node at the real root


def test_digest_auth_connects(zookeeper: ZooKeeperServer, stores: list[ZooKeeperStore]) -> None:
    store = _open(stores, zookeeper.address, auth=("admin", "secret"))
    assert store.start()
    store.create("/with/auth", b"x")
    assert store.get("/with/auth") == (b"x", 0)


@pytest.mark.parametrize("hosts", ["", "127.0.0.1:2181/chroot", "127.0.0.1:notaport"])
def test_bad_hosts_are_refused(hosts: str) -> None:
    with pytest.raises(StoreError, match="invalid ZooKeeper hosts"):
        ZooKeeperStore(hosts)


def test_close_while_never_connected_returns(own_zookeeper: ZooKeeperServer) -> None:
    store = ZooKeeperStore(own_zookeeper.address, retry_max_delay=0.2)
    assert store.start(timeout=0.2) is False
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.exists("/")
    wait_until(lambda: not store.connected)


def test_watches_of_one_node_share_one_read_per_change(
    zookeeper: ZooKeeperServer, stores: list[ZooKeeperStore]
) -> None:
    """Ten references of one application watch the same rule document: a push costs
    ZooKeeper one read, not ten."""
    store = _open(stores, zookeeper.address)
    assert store.start()
    client = store.kazoo_client
    reads: list[str] = []
    plain_get = client.get_async

    def counted(path: str, watch: Any = None) -> Any:
        reads.append(path)
        return plain_get(path, watch=watch)

    client.get_async = counted
    recorders = [Recorder() for _ in range(10)]
    for recorder in recorders:
        store.watch_data("/rule", recorder)
    store.create("/rule", b"v0")
    for recorder in recorders:
        recorder.wait_last((b"v0", 0))
    drained = threading.Event()  # the first reads of the ten watches are behind us
    store.dispatcher.submit(drained.set)
    assert drained.wait(10)
    before = len(reads)
    store.set("/rule", b"v1")
    for recorder in recorders:
        recorder.wait_last((b"v1", 1))
    assert len(reads) - before == 1


def test_a_watch_never_goes_back_to_an_older_state(
    zookeeper: ZooKeeperServer, stores: list[ZooKeeperStore]
) -> None:
    """A change's read is sent from kazoo's event thread at once, and collected in turn on the
    store's thread; a read the store's thread sends itself (a watch added to a watched node, a
    reconnection) is sent when its turn comes. A read sent later must win over one sent
    earlier but collected after it: every watch reports states in the order they happened."""
    store = _open(stores, zookeeper.address)
    assert store.start()
    writer = _open(stores, zookeeper.address, store.chroot)
    assert writer.start()
    client = store.kazoo_client
    # A read counts once kazoo holds it: counted before get_async returned, the test could
    # wait on the previous read's answer and write v2 before this read went out (it would
    # then read v2 and set no watch that v2 could fire).
    answers: list[Any] = []
    plain_get = client.get_async

    def counted(path: str, watch: Any = None) -> Any:
        answer = plain_get(path, watch=watch)
        answers.append(answer)
        return answer

    client.get_async = counted
    first, second = Recorder(), Recorder()
    store.create("/rule", b"v0")
    store.watch_data("/rule", first)
    first.wait_last((b"v0", 0))
    gate = threading.Event()
    store.dispatcher.submit(lambda: gate.wait(30))  # the store's thread waits here
    store.watch_data("/rule", second)  # its read is queued, not sent yet
    for version in (1, 2):
        before = len(answers)
        writer.set("/rule", f"v{version}".encode())
        # The change's read went out from kazoo's event thread (collected later, in turn).
        wait_until(lambda before=before: len(answers) > before, what=f"the v{version} read")  # type: ignore[misc]
        # ZooKeeper's watches fire once: the next write fires again only once this read (which
        # sets the watch again) has been answered. Without this wait a busy machine could write
        # v2 first, and the v1 read would read v2 with no second read sent.
        wait_until(answers[-1].ready, what=f"the v{version} read's answer")
    gate.set()  # now the second watch's read is sent: it reads v2, before v1's is collected
    first.wait_last((b"v2", 2))
    second.wait_last((b"v2", 2))
    drained = threading.Event()
    store.dispatcher.submit(drained.set)
    assert drained.wait(10)
    for recorder in (first, second):
        versions = [version for _data, version in recorder.calls]
        assert versions == sorted(versions), recorder.calls
