"""etcd-only behaviour: the key layout, leases, outages and prefixes, against a real etcd.

The behaviour every store shares is in test_store_behaviour.py (run on etcd too).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from dubbo_py.errors import StoreError
from dubbo_py.registry.store.address import parse_registry_address
from dubbo_py.registry.store.base import SessionState
from dubbo_py.registry.store.etcd import _api as api
from dubbo_py.registry.store.etcd.store import EtcdStore
from tests.support.etcd import EtcdServer
from tests.support.waiting import Recorder, wait_until

pytestmark = pytest.mark.etcd

PROVIDER = "tri%3A%2F%2F10.0.0.5%3A50051%2Fdemo.Greeter%3Fapplication%3Dgreeter"


@pytest.fixture
def own_etcd() -> Iterator[EtcdServer]:
    """A server of this test's own (not started), for tests that stop or delay it."""
    server = EtcdServer()
    yield server
    server.close()


@pytest.fixture
def stores() -> Iterator[list[EtcdStore]]:
    """Stores the test opens; closed afterwards."""
    opened: list[EtcdStore] = []
    yield opened
    for store in reversed(opened):
        store.close()


@pytest.fixture
def raw(etcd: EtcdServer) -> Iterator[api.EtcdStub]:
    """etcd's API on a channel of its own: what another etcd client (dubbo-go) sees and does."""
    with grpc.insecure_channel(etcd.address) as channel:
        yield api.EtcdStub(channel)


def _open(
    stores: list[EtcdStore], address: str, chroot: str | None = None, **options: Any
) -> EtcdStore:
    store = EtcdStore(
        address, f"/etcd-{uuid.uuid4().hex[:10]}" if chroot is None else chroot, **options
    )
    stores.append(store)
    return store


def _keys(stub: api.EtcdStub, prefix: str) -> dict[str, tuple[bytes, int]]:
    """Every key under ``prefix``: its value and lease."""
    key = prefix.encode()
    found = stub.Range(api.RangeRequest(key=key, range_end=api.prefix_end(key)))
    return {bytes(kv.key).decode(): (bytes(kv.value), int(kv.lease)) for kv in found.kvs}


def test_nodes_are_keys_at_their_paths_and_ephemeral_ones_hold_the_lease(
    etcd: EtcdServer, stores: list[EtcdStore], raw: api.EtcdStub
) -> None:
    """The layout dubbo-go's etcdv3 registry reads: a provider is the key
    /dubbo/<interface>/providers/<url>, parents are empty keys, rules are plain keys."""
    store = _open(stores, etcd.address, chroot="")
    assert store.start()
    interface = f"demo.Greeter{uuid.uuid4().hex[:6]}"
    store.create(f"/dubbo/{interface}/providers/{PROVIDER}", ephemeral=True)
    store.create(f"/dubbo/config/dubbo/{interface}.condition-router", b"conditions: []")

    keys = _keys(raw, f"/dubbo/{interface}")
    assert keys == {
        f"/dubbo/{interface}": (b"", 0),
        f"/dubbo/{interface}/providers": (b"", 0),
        f"/dubbo/{interface}/providers/{PROVIDER}": (b"", store.lease_id),
    }
    assert _keys(raw, f"/dubbo/config/dubbo/{interface}.")[
        f"/dubbo/config/dubbo/{interface}.condition-router"
    ] == (b"conditions: []", 0)
    assert store.lease_id != 0


def test_keys_written_without_parents_are_implicit_nodes(
    etcd: EtcdServer, stores: list[EtcdStore], raw: api.EtcdStub
) -> None:
    """A provider registered by another client without its parent keys is still found, and
    watched: its parents exist implicitly."""
    store = _open(stores, etcd.address)
    assert store.start()
    kids = Recorder()
    store.watch_children("/dubbo/demo.Greeter/providers", kids)
    kids.wait_last([])
    key = f"{store.chroot}/dubbo/demo.Greeter/providers/{PROVIDER}"
    raw.Put(api.PutRequest(key=key.encode(), value=b""))

    kids.wait_last([PROVIDER])
    assert store.exists("/dubbo/demo.Greeter")
    assert store.get("/dubbo/demo.Greeter/providers") == (b"", 0)
    assert store.children("/dubbo") == ["demo.Greeter"]
    # A node created below an implicit one needs no parent of its own (makepath=False).
    store.create("/dubbo/demo.Greeter/providers/second", makepath=False)
    kids.wait_last(["second", PROVIDER])
    raw.DeleteRange(api.DeleteRangeRequest(key=key.encode()))
    kids.wait_last(["second"])


def test_start_while_etcd_is_down_then_attach_when_it_comes_up(
    own_etcd: EtcdServer, stores: list[EtcdStore]
) -> None:
    store = _open(stores, own_etcd.address, "/late/root", retry_max_delay=0.5)
    events = Recorder()
    store.add_session_listener(events)

    assert store.start(timeout=0.5) is False
    with pytest.raises(StoreError, match=r"not connected to etcd://127\.0\.0\.1:\d+/late/root"):
        store.get("/x")
    kids = Recorder()
    store.watch_children("/", kids)  # registered while down

    own_etcd.start()

    events.wait_last(SessionState.CONNECTED)
    kids.wait_last([])
    assert store.connected
    store.create("/registered", ephemeral=True)
    kids.wait_last(["registered"])
    assert events.calls == [SessionState.CONNECTED]


def test_server_restart_suspends_then_reconnects_the_same_lease(
    own_etcd: EtcdServer, stores: list[EtcdStore]
) -> None:
    own_etcd.start()
    store = _open(stores, own_etcd.address, retry_max_delay=0.5)
    observer = _open(stores, own_etcd.address, store.chroot, retry_max_delay=0.5)
    events = Recorder()
    store.add_session_listener(events)
    assert store.start() and observer.start()
    events.wait_last(SessionState.CONNECTED)
    lease = store.lease_id
    store.create("/svc/providers/me", ephemeral=True)
    kids = Recorder()
    observer.watch_children("/svc/providers", kids)
    kids.wait_last(["me"])

    own_etcd.stop()
    events.wait_last(SessionState.SUSPENDED)
    with pytest.raises(StoreError, match="not connected"):
        store.create("/during/outage")
    own_etcd.start()

    events.wait_last(SessionState.RECONNECTED)
    assert events.calls == [
        SessionState.CONNECTED,
        SessionState.SUSPENDED,
        SessionState.RECONNECTED,
    ]
    # Same lease: the ephemeral node is still there, and the observer's watch works again.
    assert store.lease_id == lease
    wait_until(lambda: observer.connected, what="the observer to reconnect")
    assert observer.children("/svc/providers") == ["me"]
    store.create("/svc/providers/after")
    kids.wait_last(["after", "me"])


def test_an_expired_lease_gives_a_new_session_and_watches_keep_firing(
    etcd: EtcdServer, stores: list[EtcdStore], raw: api.EtcdStub
) -> None:
    store = _open(stores, etcd.address)
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
    old = store.lease_id

    # What etcd does to a lease whose keep-alives stopped (a frozen process): it ends.
    raw.LeaseRevoke(api.LeaseRevokeRequest(ID=old))
    kids.wait_last([])
    # The next keep-alive (within a third of the TTL) finds the lease gone.

    events.wait_last(SessionState.NEW_SESSION)
    assert events.calls == [
        SessionState.CONNECTED,
        SessionState.SUSPENDED,
        SessionState.NEW_SESSION,
    ]
    assert store.lease_id not in (0, old)
    kids.wait_last(["again"])
    store.create("/svc/config", b"after expiry")
    data.wait_last((b"after expiry", 0))


def test_ephemeral_nodes_of_a_killed_process_go_when_its_lease_runs_out(
    etcd: EtcdServer, stores: list[EtcdStore], tmp_path: Any
) -> None:
    observer = _open(stores, etcd.address)
    assert observer.start()
    script = (
        "import sys, time\n"
        "from dubbo_py.registry.store.etcd.store import EtcdStore\n"
        "s = EtcdStore(sys.argv[1], sys.argv[2], lease_ttl=2)\n"
        "assert s.start(20)\n"
        "s.create('/svc/providers/killed', ephemeral=True)\n"
        "print('ready', flush=True)\n"
        "time.sleep(600)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, etcd.address, observer.chroot],
        stdout=subprocess.PIPE,
        cwd=os.getcwd(),
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == b"ready"
        kids = Recorder()
        observer.watch_children("/svc/providers", kids)
        kids.wait_last(["killed"])
        child.kill()
        kids.wait_last([], timeout=20)
    finally:
        child.kill()
        child.wait()


def test_a_prefix_isolates_namespaces(
    etcd: EtcdServer, stores: list[EtcdStore], raw: api.EtcdStub
) -> None:
    base = f"/iso-{uuid.uuid4().hex[:8]}"
    first = _open(stores, etcd.address, f"{base}/one")
    second = _open(stores, etcd.address, f"{base}/two")
    assert first.start() and second.start()
    first.create("/dubbo/a", b"1")
    second.create("/dubbo/b", b"2")
    assert first.children("/dubbo") == ["a"]
    assert second.children("/dubbo") == ["b"]
    assert first.children("/") == ["dubbo"]
    assert _keys(raw, base)[f"{base}/one/dubbo/a"] == (b"1", 0)
    assert first.address == f"etcd://{etcd.address}{base}/one"


def test_siblings_sorting_inside_a_watched_range_do_not_wake_its_watch(
    etcd: EtcdServer, stores: list[EtcdStore]
) -> None:
    """A watcher covers [path, path0): '/svc/providers-old' lies in it but is not below."""
    store = _open(stores, etcd.address)
    assert store.start()
    kids = Recorder()
    store.watch_children("/svc/providers", kids)
    kids.wait_last([])
    store.create("/svc/providers-old/x")
    store.create("/svc/providers.bak")
    store.create("/svc/providers/a")
    kids.wait_last(["a"])
    assert kids.calls == [[], ["a"]]


@pytest.mark.parametrize("hosts", ["", "127.0.0.1:2379/prefix", "127.0.0.1:notaport", "a:1,"])
def test_bad_hosts_are_refused(hosts: str) -> None:
    with pytest.raises(StoreError, match="invalid etcd hosts"):
        EtcdStore(hosts)


def test_close_while_never_connected_returns(own_etcd: EtcdServer) -> None:
    store = EtcdStore(own_etcd.address, retry_max_delay=0.2)
    assert store.start(timeout=0.2) is False
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.exists("/")
    assert not store.connected


def test_a_second_endpoint_is_used_when_the_first_does_not_answer(
    etcd: EtcdServer, own_etcd: EtcdServer, stores: list[EtcdStore]
) -> None:
    """own_etcd is never started: its endpoint refuses connections."""
    store = _open(stores, f"{own_etcd.address},{etcd.address}", retry_max_delay=0.2)
    assert store.start(timeout=20)
    store.create("/reached", b"x")
    assert store.get("/reached") == (b"x", 0)


def test_watches_of_one_node_share_one_read_per_change(
    etcd: EtcdServer, stores: list[EtcdStore]
) -> None:
    """Ten references of one application watch the same rule document: a push costs etcd one
    read, not ten."""
    store = _open(stores, etcd.address)
    assert store.start()
    reads: list[str] = []
    plain_read = store._read

    def counted(path: str, ops: Any) -> Any:
        reads.append(path)
        return plain_read(path, ops)

    store._read = counted  # type: ignore[method-assign]
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
    # The set itself reads once (its guard); the watches share one more.
    assert len(reads) - before == 2


@pytest.mark.parametrize(
    ("text", "hosts", "chroot"),
    [
        ("etcd://127.0.0.1:2379", ("127.0.0.1:2379",), ""),
        ("etcd://e1,e2:2380", ("e1:2379", "e2:2380"), ""),
        ("etcd://e1:2379/dubbo-prod/", ("e1:2379",), "/dubbo-prod"),
    ],
)
def test_etcd_addresses_parse(text: str, hosts: tuple[str, ...], chroot: str) -> None:
    address = parse_registry_address(text)
    assert (address.kind, address.hosts, address.chroot) == ("etcd", hosts, chroot)
    assert address.networked
    assert str(address) == f"etcd://{','.join(hosts)}{chroot}"


def test_the_vendored_api_descriptor_matches_the_protos() -> None:
    """dubbo_py/registry/store/etcd/_descriptor.py is what scripts/gen_etcd_api.py makes of
    protos/etcd/ (compared by messages and fields: protoc versions may order bytes alike but
    add options differently)."""
    pytest.importorskip("grpc_tools")
    import base64
    import importlib.util
    from pathlib import Path

    from google.protobuf import descriptor_pb2

    from dubbo_py.registry.store.etcd._descriptor import FILE_DESCRIPTOR_SET

    script = Path(__file__).resolve().parents[2] / "scripts" / "gen_etcd_api.py"
    spec = importlib.util.spec_from_file_location("gen_etcd_api", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fresh_text = module.render()
    namespace: dict[str, Any] = {}
    exec(fresh_text, namespace)

    def shape(encoded: str) -> set[tuple[str, str, int, int, str]]:
        files = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(encoded))
        out = set()
        for file in files.file:
            for message in file.message_type:
                for field in message.field:
                    out.add(
                        (
                            f"{file.package}.{message.name}",
                            field.name,
                            field.number,
                            field.type,
                            field.type_name,
                        )
                    )
            for service in file.service:
                for method in service.method:
                    out.add((f"{file.package}.{service.name}", method.name, 0, 0, ""))
        return out

    assert shape(FILE_DESCRIPTOR_SET) == shape(namespace["FILE_DESCRIPTOR_SET"])


def test_a_provider_folder_larger_than_grpcs_default_message_limit_is_read_and_watched(
    etcd: EtcdServer, stores: list[EtcdStore], raw: api.EtcdStub
) -> None:
    # 20 000 provider URLs of one service are ~6.6 MB of keys: one Range reply over gRPC's
    # default 4 MB receive limit. 400 keys of 12 KB each stand for them (quick to write).
    store = _open(stores, etcd.address)
    assert store.start(10)
    folder = "/dubbo/demo.Greeter/providers"
    names = [f"{PROVIDER}%26methods%3D{i:04d}{'x' * 12_000}" for i in range(400)]
    for name in names:
        raw.Put(api.PutRequest(key=f"{store.chroot}{folder}/{name}".encode()))
    assert store.children(folder) == sorted(names)
    seen = Recorder()
    store.watch_children(folder, seen)
    assert seen.wait_for(lambda names: len(names) == 400, timeout=10) == sorted(names)
    raw.Put(api.PutRequest(key=f"{store.chroot}{folder}/{PROVIDER}-new".encode()))
    assert len(seen.wait_for(lambda names: len(names) == 401, timeout=10)) == 401
