"""A bounded history of every change the CLI makes to a rule key, kept in the registry itself.

Layout: ``/dubbo/config-history/<key>`` holds the next sequence number (allocated with a
version-checked increment, so two writers never get the same one) and one persistent child per
change, ``<seq>`` zero-padded to ten digits so names sort in order. Each child is a JSON object:
the document text after the change (``null`` when the change deleted it), the store version it
was written at, the time, the operator, the action and — on ZooKeeper with ``--auth`` — the
digest identity that wrote it (``writer``). Only the newest ``limit`` entries are kept.

Written with an identity, the folder and every entry carry the rule's ACL (that identity may
change them, anyone may read), and an authenticated rollback restores only entries a trusted
identity wrote (:func:`dubbo_py.admin.rules.acl.check_entry`).

An entry is written *after* the change succeeded, so a refused or lost write leaves no trace;
a crash between the two leaves the change without its entry (the next change is recorded
normally).
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dubbo_py.admin.rules import acl
from dubbo_py.errors import BadVersionError, NodeExistsError, NoNodeError
from dubbo_py.registry import layout
from dubbo_py.registry.store.base import Store

__all__ = ["DEFAULT_LIMIT", "History", "HistoryEntry"]

#: Entries kept per key unless told otherwise.
DEFAULT_LIMIT = 20
_ATTEMPTS = 50


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One recorded change of a rule key."""

    seq: int
    action: str
    #: The text after the change; None when the change deleted the document.
    text: str | None
    #: The store version after the change (None after a delete).
    version: int | None
    operator: str
    #: Milliseconds since the epoch.
    time_ms: int
    #: For a rollback: the entry restored.
    restored: int | None = None
    #: The digest identity that wrote the entry (None: written without one).
    writer: str | None = None

    @property
    def time_iso(self) -> str:
        """UTC time, ISO 8601 to the second."""
        moment = datetime.fromtimestamp(self.time_ms / 1000, UTC)
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")

    @property
    def deleted(self) -> bool:
        """True when the change removed the document."""
        return self.text is None

    def to_json(self) -> dict[str, Any]:
        """The entry as ``rules history --json`` prints it."""
        return {
            "seq": self.seq,
            "action": self.action,
            "time": self.time_iso,
            "time_ms": self.time_ms,
            "operator": self.operator,
            "version": self.version,
            "deleted": self.deleted,
            "restored": self.restored,
            "writer": self.writer,
            "text": self.text,
        }

    @classmethod
    def from_bytes(cls, seq: int, data: bytes) -> HistoryEntry:
        """Read an entry node; ValueError when it is not one."""
        raw = json.loads(data.decode("utf-8"))
        if not isinstance(raw, dict):
            raise ValueError("not an object")
        text = raw.get("text")
        version = raw.get("version")
        restored = raw.get("restored")
        writer = raw.get("writer")
        return cls(
            seq=seq,
            action=str(raw.get("action", "?")),
            text=text if isinstance(text, str) else None,
            version=version if isinstance(version, int) else None,
            operator=str(raw.get("operator", "")),
            time_ms=int(raw.get("time_ms", 0)),
            restored=restored if isinstance(restored, int) else None,
            writer=writer if isinstance(writer, str) and writer else None,
        )

    def to_bytes(self) -> bytes:
        """The node data."""
        body = {
            "action": self.action,
            "text": self.text,
            "version": self.version,
            "operator": self.operator,
            "time_ms": self.time_ms,
            "restored": self.restored,
        }
        if self.writer is not None:
            body["writer"] = self.writer
        return json.dumps(body, sort_keys=True).encode("utf-8")


def _name(seq: int) -> str:
    return f"{seq:010d}"


class History:
    """Record and read rule history on a store."""

    def __init__(self, store: Store, limit: int = DEFAULT_LIMIT) -> None:
        if limit < 1:
            raise ValueError("history limit must be at least 1")
        self.store = store
        self.limit = limit
        guarded = acl.controlled(store)
        #: The identity entries are written (and protected) with; None without one.
        self.identity = None if guarded is None else guarded.identity

    def record(
        self,
        key: str,
        action: str,
        text: str | None,
        version: int | None,
        operator: str,
        *,
        restored: int | None = None,
        now_ms: int | None = None,
    ) -> HistoryEntry:
        """Append an entry for ``key`` and drop the oldest beyond the limit."""
        folder = layout.history_path(key)
        seq = self._next_seq(folder)
        entry = HistoryEntry(
            seq=seq,
            action=action,
            text=text,
            version=version,
            operator=operator,
            time_ms=int(time.time() * 1000) if now_ms is None else now_ms,
            restored=restored,
            writer=self.identity,
        )
        self.store.create(
            f"{folder}/{_name(seq)}", entry.to_bytes(), protected=self.identity is not None
        )
        self._trim(folder)
        return entry

    def _next_seq(self, folder: str) -> int:
        # A version-checked increment of the folder's counter: two writers racing both retry
        # until each got its own number (ZooKeeper's sequential nodes are not in the store
        # interface, and the embedded store has none).
        for _ in range(_ATTEMPTS):
            try:
                data, version = self.store.get(folder)
            except NoNodeError:
                with contextlib.suppress(NodeExistsError):
                    self.store.create(folder, b"1", protected=self.identity is not None)
                    return 0
                continue
            try:
                current = int(data.decode("ascii") or "0")
            except ValueError:
                current = 0
            try:
                self.store.set(folder, str(current + 1).encode("ascii"), version)
                return current
            except (BadVersionError, NoNodeError):
                continue
        raise RuntimeError(
            f"could not allocate a history entry under {folder} (too much contention)"
        )

    def _trim(self, folder: str) -> None:
        names = sorted(self._names(folder))
        for name in names[: max(0, len(names) - self.limit)]:
            with contextlib.suppress(NoNodeError):
                self.store.delete(f"{folder}/{name}")

    def _names(self, folder: str) -> list[str]:
        try:
            return [n for n in self.store.children(folder) if n.isdigit()]
        except NoNodeError:
            return []

    def entries(self, key: str) -> list[HistoryEntry]:
        """The kept entries of ``key``, oldest first (unreadable nodes are skipped)."""
        folder = layout.history_path(key)
        out = []
        for name in sorted(self._names(folder)):
            try:
                data, _ = self.store.get(f"{folder}/{name}")
                out.append(HistoryEntry.from_bytes(int(name), data))
            except (NoNodeError, ValueError, UnicodeDecodeError):
                continue
        return out

    def entry(self, key: str, seq: int) -> HistoryEntry | None:
        """One entry, None when it is not (or no longer) kept."""
        try:
            data, _ = self.store.get(f"{layout.history_path(key)}/{_name(seq)}")
            return HistoryEntry.from_bytes(seq, data)
        except (NoNodeError, ValueError, UnicodeDecodeError):
            return None

    def verify(self, key: str, seq: int) -> None:
        """Refuse (:class:`~dubbo_py.admin.rules.acl.Untrusted`) to use entry ``seq`` of ``key`` for
        an authenticated write unless a trusted identity wrote it (see
        :func:`dubbo_py.admin.rules.acl.check_entry`)."""
        if self.identity is None:
            return
        try:
            data, _ = self.store.get(f"{layout.history_path(key)}/{_name(seq)}")
        except NoNodeError:
            raise acl.Untrusted(f"history entry {seq} of {key} is gone") from None
        acl.check_entry(self.store, key, seq, data)

    def keys(self) -> list[str]:
        """Every key with a history."""
        try:
            return self.store.children(layout.HISTORY_ROOT)
        except NoNodeError:
            return []
