"""Embedded-store behaviour across real processes: leases, crashes, frozen owners, races, and
files that are not (or no longer) registry databases."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dubbo_py.errors import BadVersionError, StoreError
from dubbo_py.registry.store.base import SessionState
from dubbo_py.registry.store.embedded import SCHEMA_VERSION, EmbeddedStore
from tests.support.waiting import PATIENCE, Recorder, wait_until

ROOT = Path(__file__).resolve().parents[2]
Spawn = Callable[..., "subprocess.Popen[str]"]
LEASE = 1.0

# A provider process: registers an ephemeral node, re-registers it whenever its session is new
# (as a real provider does), says "ready", then lives until killed.
PROVIDER_SCRIPT = textwrap.dedent(
    """
    import sys, threading
    from dubbo_py.registry.store.embedded import EmbeddedStore
    from dubbo_py.registry.store.base import SessionState

    store = EmbeddedStore(sys.argv[1], lease_seconds=float(sys.argv[2]))
    node = "/svc/providers/" + sys.argv[3]

    def on_session(state):
        if state is SessionState.NEW_SESSION:
            store.create(node, ephemeral=True)
            print("re-registered", flush=True)

    store.add_session_listener(on_session)
    store.start()
    store.create(node, b"", ephemeral=True)
    print("ready", flush=True)
    threading.Event().wait()
    """
)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "registry.db"


@pytest.fixture
def stores() -> Iterator[list[EmbeddedStore]]:
    opened: list[EmbeddedStore] = []
    yield opened
    for store in reversed(opened):
        store.close()


def _open(stores: list[EmbeddedStore], path: Path, **options: float) -> EmbeddedStore:
    store = EmbeddedStore(path, lease_seconds=LEASE, poll_interval=0.01, **options)
    stores.append(store)
    store.start()
    return store


@pytest.fixture
def spawn_provider(db: Path) -> Iterator[Spawn]:
    """Start provider processes on ``db``; returns a function ``(name, lease) -> Popen`` that
    returns once the process has registered. Kills leftovers afterwards."""
    processes: list[subprocess.Popen[str]] = []

    def spawn(name: str, lease: float = LEASE) -> subprocess.Popen[str]:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        process = subprocess.Popen(
            [sys.executable, "-c", PROVIDER_SCRIPT, str(db), str(lease), name],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        processes.append(process)
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
        return process

    yield spawn
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait(PATIENCE)
        if process.stdout is not None:
            process.stdout.close()


def test_a_provider_killed_with_sigkill_loses_its_ephemeral_node(
    db: Path, stores: list[EmbeddedStore], spawn_provider: Spawn
) -> None:
    observer = _open(stores, db)
    provider = spawn_provider("doomed")
    survivor = spawn_provider("survivor", lease=10.0)  # not at risk of a slow heartbeat
    seen = Recorder()
    observer.watch_children("/svc/providers", seen)
    seen.wait_last(["doomed", "survivor"])

    provider.send_signal(signal.SIGKILL)
    provider.wait(PATIENCE)

    # Within a few lease periods the lease runs out and the observer's heartbeat reaps it.
    seen.wait_last(["survivor"], timeout=10 * LEASE + PATIENCE)
    assert survivor.poll() is None
    assert observer.children("/svc/providers") == ["survivor"]


def test_a_frozen_provider_is_reaped_then_registers_again_in_a_new_session(
    db: Path, stores: list[EmbeddedStore], spawn_provider: Spawn
) -> None:
    observer = _open(stores, db)
    provider = spawn_provider("sleepy")
    seen = Recorder()
    observer.watch_children("/svc/providers", seen)
    seen.wait_last(["sleepy"])

    provider.send_signal(signal.SIGSTOP)  # like a long GC pause or a suspended laptop
    try:
        seen.wait_last([], timeout=10 * LEASE + PATIENCE)
    finally:
        provider.send_signal(signal.SIGCONT)

    # On its next heartbeat it finds its session gone, opens a new one, tells its listener.
    assert provider.stdout is not None
    assert provider.stdout.readline().strip() == "re-registered"
    seen.wait_last(["sleepy"])


def test_a_closed_store_removes_its_ephemeral_nodes_at_once(
    db: Path, stores: list[EmbeddedStore]
) -> None:
    owner = EmbeddedStore(db, lease_seconds=3600)  # the lease could not be what removes them
    owner.start()
    owner.create("/e/node", ephemeral=True)
    owner.close()
    assert _open(stores, db).children("/e") == []


def test_the_constructor_opens_the_store(db: Path) -> None:
    store = EmbeddedStore(db)
    events = Recorder()
    try:
        store.create("/usable/at/once")
        store.add_session_listener(events)
        events.wait_last(SessionState.CONNECTED)
        assert store.start() is True
        assert store.address == f"sqlite://{db}"
    finally:
        store.close()
    with pytest.raises(StoreError, match="closed"):
        store.start()


def test_the_directory_of_the_file_is_created(tmp_path: Path, stores: list[EmbeddedStore]) -> None:
    path = tmp_path / "not" / "yet" / "there.db"
    store = _open(stores, path)
    store.create("/x")
    assert path.is_file()


def test_a_corrupt_file_gives_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.db"
    path.write_bytes(b"this is not a SQLite database, just some bytes\n" * 100)
    with pytest.raises(StoreError, match=str(path)):
        EmbeddedStore(path)


def test_a_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER)")
    conn.close()
    with pytest.raises(StoreError, match="not a dubbo-py registry"):
        EmbeddedStore(path)
    with sqlite3.connect(path) as conn:  # and it was left alone
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("invoices",)]
    conn.close()


def test_a_database_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer"):
        EmbeddedStore(path)


def _racer(path: str, barrier: object, results: object) -> None:
    """One of two processes: read the version, wait for the other, then write conditionally."""
    store = EmbeddedStore(path)
    store.start()
    try:
        _, version = store.get("/contended")
        barrier.wait()  # type: ignore[attr-defined]
        try:
            store.set("/contended", str(os.getpid()).encode(), version=version)
            results.put("won")  # type: ignore[attr-defined]
        except BadVersionError:
            results.put("lost")  # type: ignore[attr-defined]
    finally:
        store.close()


def _incrementer(path: str, rounds: int) -> None:
    """Increment a counter node ``rounds`` times with compare-and-set, retrying lost races."""
    store = EmbeddedStore(path)
    store.start()
    try:
        for _ in range(rounds):
            while True:
                data, version = store.get("/counter")
                try:
                    store.set("/counter", str(int(data) + 1).encode(), version=version)
                    break
                except BadVersionError:
                    continue
    finally:
        store.close()


def test_two_processes_writing_the_same_version_one_gets_bad_version(
    db: Path, stores: list[EmbeddedStore]
) -> None:
    store = _open(stores, db)
    store.create("/contended", b"start")
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    results = ctx.Queue()
    racers = [ctx.Process(target=_racer, args=(str(db), barrier, results)) for _ in range(2)]
    for racer in racers:
        racer.start()
    outcome = sorted(results.get(timeout=PATIENCE) for _ in racers)
    for racer in racers:
        racer.join(PATIENCE)
        assert racer.exitcode == 0
    assert outcome == ["lost", "won"]
    assert store.get("/contended")[1] == 1


def test_compare_and_set_from_two_processes_loses_no_update(
    db: Path, stores: list[EmbeddedStore]
) -> None:
    store = _open(stores, db)
    store.create("/counter", b"0")
    ctx = multiprocessing.get_context("spawn")
    rounds = 40
    workers = [ctx.Process(target=_incrementer, args=(str(db), rounds)) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(PATIENCE * 3)
        assert worker.exitcode == 0
    assert store.get("/counter") == (str(2 * rounds).encode(), 2 * rounds)


def test_watches_in_one_process_see_threads_writing_concurrently(
    db: Path, stores: list[EmbeddedStore]
) -> None:
    store = _open(stores, db)
    seen = Recorder()
    store.watch_children("/t", seen)
    seen.wait_count(1)

    def writer(prefix: str) -> None:
        for i in range(20):
            store.create(f"/t/{prefix}{i:02d}")

    threads = [threading.Thread(target=writer, args=(p,)) for p in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = sorted(f"{p}{i:02d}" for p in "ab" for i in range(20))
    seen.wait_last(expected)
    wait_until(lambda: store.children("/t") == expected)


def test_a_file_that_lost_recent_changes_gets_them_back_without_a_watcher_seeing_the_loss(
    db: Path, stores: list[EmbeddedStore]
) -> None:
    # What a garbled WAL or a restored backup does: the file goes back to an earlier state in
    # which the provider's session exists but its node does not. Nobody may report the
    # provider gone, and it must register again by itself.
    provider = _open(stores, db)
    sessions = Recorder()

    def on_session(state: SessionState) -> None:
        if state is SessionState.NEW_SESSION:
            if not provider.exists("/svc/providers/p1"):
                provider.create("/svc/providers/p1", ephemeral=True)
            sessions(state)

    provider.add_session_listener(on_session)
    provider.create("/svc/providers/p1", ephemeral=True)
    consumer = _open(stores, db)
    seen = Recorder()
    consumer.watch_children("/svc/providers", seen)
    seen.wait_last(["p1"])

    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM nodes WHERE path = '/svc/providers/p1'")
        conn.execute("UPDATE changes SET counter = 0")
    conn.close()

    sessions.wait_count(1, timeout=10 * LEASE + PATIENCE)
    wait_until(lambda: consumer.children("/svc/providers") == ["p1"], PATIENCE, "p1 back")
    time.sleep(2 * LEASE)  # past the consumer's grace: it reports what the file holds
    assert seen.calls[seen.calls.index(["p1"]) :] == [["p1"]], seen.calls
    # The node belongs to a live session: it outlives several leases.
    time.sleep(2 * LEASE)
    assert consumer.children("/svc/providers") == ["p1"]
