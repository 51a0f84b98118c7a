"""Shared fixtures: a real ZooKeeper, etcd and Nacos for the test session, and stores on each
backend (ZooKeeper, embedded SQLite, etcd; Nacos where a test file asks for it)."""

from __future__ import annotations

import compileall
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dubbo_py.registry.store.base import Store
from dubbo_py.registry.store.embedded import EmbeddedStore
from dubbo_py.registry.store.etcd.store import EtcdStore
from dubbo_py.registry.store.nacos.store import NacosStore
from dubbo_py.registry.store.zookeeper import ZooKeeperStore
from tests.support.etcd import EtcdServer
from tests.support.nacos import NacosServer
from tests.support.zookeeper import ZooKeeperServer

if TYPE_CHECKING:
    from tests.support.netfault import NetFaults

#: Generous sessions and leases: these tests never wait for them to run out (tests of expiry force
#: it or set their own), and a loaded machine must not expire a session by accident.
ZK_SESSION_TIMEOUT = 10.0
EMBEDDED_LEASE = 3.0
ETCD_LEASE_TTL = 10
#: Nacos watches poll; quick polls keep watch tests short.
NACOS_POLL = 0.05

StoreFactory = Callable[[], Store]

#: The checkout's Python sources that provider, consumer, CLI and console processes import.
_ROOT = Path(__file__).resolve().parents[1]
_CHILD_SOURCES = ("dubbo_py", "examples", "scripts", "tests/support")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Byte-compile the checkout's sources once when the environment forbids Python to write
    them (``PYTHONDONTWRITEBYTECODE``, set on the shared test machines): every provider, CLI
    and console process of the suite (hundreds) otherwise compiles ~150 modules afresh,
    ~0.5 s of CPU each, on two cores. Python still reads an up-to-date ``__pycache__`` under
    that setting and ignores a stale one; the folders are git-ignored; only modules whose
    source changed are compiled again."""
    if not sys.dont_write_bytecode:
        return  # every process writes its own compiled modules as it imports them
    for folder in _CHILD_SOURCES:
        compileall.compile_dir(_ROOT / folder, quiet=2, workers=1)


@pytest.fixture(scope="session")
def zookeeper() -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper server for the whole test session (started on first use)."""
    server = ZooKeeperServer()
    server.start()
    yield server
    server.close()


@pytest.fixture(scope="session")
def etcd() -> Iterator[EtcdServer]:
    """One real etcd server for the whole test session (started on first use)."""
    server = EtcdServer()
    server.start()
    yield server
    server.close()


@pytest.fixture(scope="session")
def nacos() -> Iterator[NacosServer]:
    """One real Nacos server (standalone, embedded Derby) for the session (started on first use)."""
    server = NacosServer()
    server.start()
    yield server
    server.close()


@pytest.fixture(
    params=[
        pytest.param("zookeeper", marks=pytest.mark.zookeeper),
        "embedded",
        pytest.param("etcd", marks=pytest.mark.etcd),
    ],
)
def store_backend(request: pytest.FixtureRequest) -> str:
    """The backend a store test runs against."""
    return str(request.param)


@pytest.fixture
def make_store(
    request: pytest.FixtureRequest, store_backend: str, tmp_path: Path
) -> Iterator[StoreFactory]:
    """Open further started stores on this test's backend and namespace (each one a separate
    session, like another process); all are closed after the test. On ``nacos`` (a backend
    only the files that hold Dubbo-layout paths ask for) the namespace is a Nacos namespace of
    the test's own."""
    opened: list[ZooKeeperStore | EmbeddedStore | EtcdStore | NacosStore] = []
    chroot = f"/test-{uuid.uuid4().hex[:12]}"
    db = tmp_path / "registry.db"

    def make() -> Store:
        store: ZooKeeperStore | EmbeddedStore | EtcdStore | NacosStore
        if store_backend == "nacos":
            nacos: NacosServer = request.getfixturevalue("nacos")
            store = NacosStore(
                nacos.address,
                namespace=chroot[1:],
                connect_timeout=20,
                poll_interval=NACOS_POLL,
                work_dir=tmp_path / f"nacos-client-{len(opened)}",
            )
        elif store_backend == "zookeeper":
            server: ZooKeeperServer = request.getfixturevalue("zookeeper")
            store = ZooKeeperStore(
                server.address, chroot, session_timeout=ZK_SESSION_TIMEOUT, connect_timeout=20
            )
        elif store_backend == "etcd":
            etcd: EtcdServer = request.getfixturevalue("etcd")
            store = EtcdStore(etcd.address, chroot, lease_ttl=ETCD_LEASE_TTL, connect_timeout=20)
        else:
            store = EmbeddedStore(db, lease_seconds=EMBEDDED_LEASE, poll_interval=0.01)
        opened.append(store)
        assert store.start(), f"{store} did not start"
        return store

    yield make
    for store in reversed(opened):
        store.close()


@pytest.fixture
def store(make_store: StoreFactory) -> Store:
    """A started store, isolated to this test."""
    return make_store()


@pytest.fixture(scope="session")
def _netfault_chains() -> Iterator[None]:
    """Session-level cleanup of the fault chains: those of killed test runs before the session,
    and every one of this run after it (each test removes its own already)."""
    from tests.support.netfault import remove_stale_chains

    remove_stale_chains()
    yield
    remove_stale_chains()


@pytest.fixture
def netfaults(_netfault_chains: None) -> Iterator[NetFaults]:
    """Network faults on loopback (tests/support/netfault.py), in a chain of the test's own,
    removed after the test whatever happened; the test is skipped, saying why, where iptables
    cannot be used (not installed, not root, no netfilter in the kernel or container)."""
    from tests.support.netfault import NetFaults, NetFaultsUnavailable

    try:
        faults = NetFaults()
    except NetFaultsUnavailable as exc:
        pytest.skip(f"network faults need iptables: {exc}")
    try:
        yield faults
    finally:
        faults.close()
