"""Opening a fresh embedded registry while another connection writes to it waits, not fails.

Regression: switching the database to WAL mode needs an exclusive lock, and SQLite reports
"database is locked" at once (ignoring the busy timeout) while another connection holds a write
lock, so providers started in parallel on a new registry could die at start-up.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from dubbo_py.errors import StoreError
from dubbo_py.registry.store.embedded import EmbeddedStore


def _hold_write_lock(path: Path) -> tuple[sqlite3.Connection, threading.Event]:
    """Another connection (rollback-journal mode, as a fresh file starts) in a write
    transaction on ``path``; setting the returned event commits it."""
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    release = threading.Event()

    def commit_when_released() -> None:
        release.wait(10)
        other.execute("COMMIT")
        other.close()

    threading.Thread(target=commit_when_released, daemon=True).start()
    return other, release


def test_open_waits_for_a_concurrent_writer_on_a_fresh_registry(tmp_path: Path) -> None:
    path = tmp_path / "registry.db"
    _other, release = _hold_write_lock(path)
    threading.Timer(0.3, release.set).start()
    store = EmbeddedStore(path, busy_timeout=10)
    try:
        store.create("/dubbo/x", b"ok")
        assert store.get("/dubbo/x")[0] == b"ok"
    finally:
        store.close()


def test_open_still_fails_clearly_when_the_lock_is_never_released(tmp_path: Path) -> None:
    path = tmp_path / "registry.db"
    _other, release = _hold_write_lock(path)
    try:
        with pytest.raises(StoreError, match="database is locked"):
            EmbeddedStore(path, busy_timeout=0.2)
    finally:
        release.set()
