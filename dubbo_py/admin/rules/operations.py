"""Versioned writes of rule documents, each recorded in the rule's history.

Every write is conditional on the version read (or pinned with ``expect_version``): two
operators pushing at once never silently overwrite each other — the second gets a
:class:`Conflict` and re-reads. The texts written here are validated by the caller (push) or
here (enable/disable/rollback) with :func:`dubbo_py.admin.rules.documents.validate`.
"""

from __future__ import annotations

from dataclasses import dataclass

from dubbo_py.admin.rules import acl
from dubbo_py.admin.rules import documents as rules
from dubbo_py.admin.rules.history import History, HistoryEntry
from dubbo_py.errors import BadVersionError, NodeExistsError, NoNodeError, RuleError
from dubbo_py.registry.registry import ConfigDocument, Registry

__all__ = ["Conflict", "NotFound", "RuleOps", "WriteResult"]


class Conflict(Exception):
    """A versioned write lost: the key changed since it was read (or is not at the version
    the caller pinned)."""


class NotFound(LookupError):
    """No such rule (or history entry)."""


@dataclass(frozen=True, slots=True)
class WriteResult:
    """What a write did."""

    key: str
    action: str
    #: The store version now (None: the document is deleted).
    version: int | None
    #: False when the text was already there (nothing written, nothing recorded).
    changed: bool
    #: The history entry recorded (None when unchanged).
    entry: HistoryEntry | None = None

    def to_json(self) -> dict[str, object]:
        """The result as mutating commands print it with ``--json``."""
        return {
            "key": self.key,
            "action": self.action,
            "version": self.version,
            "changed": self.changed,
            "history_seq": None if self.entry is None else self.entry.seq,
        }


def _conflict(key: str, read: int) -> Conflict:
    if read < 0:
        return Conflict(f"conflict: {key} was created since read (absent); re-read and retry")
    return Conflict(f"conflict: {key} changed since read (version {read}); re-read and retry")


class RuleOps:
    """Rule writes on a registry, with history."""

    def __init__(self, registry: Registry, history: History, operator: str) -> None:
        self.registry = registry
        self.history = history
        self.operator = operator

    def read(self, key: str, expect_version: int | None = None) -> ConfigDocument | None:
        """The current document; :class:`Conflict` when ``expect_version`` is given and the key
        is not at it (``-1``: must not exist)."""
        current = self.registry.get_config(key)
        if expect_version is None:
            return current
        actual = -1 if current is None else current.version
        if actual != expect_version:
            now = "absent" if current is None else f"at version {actual}"
            want = "absent" if expect_version == -1 else f"version {expect_version}"
            raise Conflict(f"conflict: {key} is {now}, expected {want}; re-read and retry")
        return current

    def put(
        self,
        key: str,
        text: str,
        *,
        action: str = "push",
        expect_version: int | None = None,
        restored: int | None = None,
    ) -> WriteResult:
        """Write ``text`` at ``key`` if it is still at the version read (or pinned)."""
        current = self.read(key, expect_version)
        if current is not None and current.text == text:
            return WriteResult(key, action, current.version, changed=False)
        read = -1 if current is None else current.version
        # An authenticated write first makes every folder on the way the operator's.
        acl.guard(self.registry.store, key)
        try:
            version = self.registry.put_config(key, text, read)
        except (BadVersionError, NodeExistsError, NoNodeError):
            raise _conflict(key, read) from None
        entry = self.history.record(key, action, text, version, self.operator, restored=restored)
        return WriteResult(key, action, version, changed=True, entry=entry)

    def delete(
        self,
        key: str,
        *,
        action: str = "delete",
        expect_version: int | None = None,
        restored: int | None = None,
    ) -> WriteResult:
        """Delete ``key`` if it is still at the version read (or pinned)."""
        current = self.read(key, expect_version)
        if current is None:
            raise NotFound(f"no rule at {key}")
        acl.guard(self.registry.store, key)
        try:
            self.registry.delete_config(key, current.version)
        except (BadVersionError, NoNodeError):
            raise _conflict(key, current.version) from None
        entry = self.history.record(key, action, None, None, self.operator, restored=restored)
        return WriteResult(key, action, None, changed=True, entry=entry)

    def set_enabled(
        self, key: str, enabled: bool, *, expect_version: int | None = None
    ) -> WriteResult:
        """Flip the document's ``enabled`` field, keeping the rest of its text."""
        rule = rules.parse_key(key)
        current = self.read(key, expect_version)
        if current is None:
            raise NotFound(f"no rule at {key}")
        text = rules.set_enabled(current.text, enabled, key)
        rules.validate(rule, text, key)
        return self.put(
            key,
            text,
            action="enable" if enabled else "disable",
            expect_version=current.version,
        )

    def rollback_target(self, key: str, to_seq: int | None) -> HistoryEntry:
        """The entry a rollback restores: ``to_seq``, else the version before the current one.

        Repeated rollbacks walk further back, like an undo stack: when the newest entry is
        itself a rollback, the search continues below the entry it restored. When the key was
        changed outside the CLI (its text is not the newest entry's), the newest recorded
        version is restored. :class:`NotFound` when there is nothing to go back to."""
        if to_seq is not None:
            entry = self.history.entry(key, to_seq)
            if entry is None:
                raise NotFound(f"no history entry {to_seq} for {key} (see 'rules history {key}')")
            return entry
        entries = self.history.entries(key)
        if not entries:
            raise NotFound(f"no history for {key}")
        current = self.registry.get_config(key)
        now = None if current is None else current.text
        pos = len(entries) - 1
        if entries[pos].text != now:
            return entries[pos]
        index = {e.seq: i for i, e in enumerate(entries)}
        seen: set[int] = set()
        while entries[pos].action == "rollback" and pos not in seen:
            restored = entries[pos].restored
            if restored is None or restored not in index:
                break
            seen.add(pos)
            pos = index[restored]
        for entry in reversed(entries[:pos]):
            if entry.text != now:
                return entry
        hint = f" (use 'rules delete {key}' to remove it)" if current is not None else ""
        raise NotFound(f"{key} has no earlier version in its history{hint}")

    def rollback(
        self, key: str, to_seq: int | None = None, *, expect_version: int | None = None
    ) -> WriteResult:
        """Restore an earlier version (a versioned write, itself recorded as ``rollback``)."""
        rule = rules.parse_key(key)
        target = self.rollback_target(key, to_seq)
        # Never restore, under this operator's identity, what someone else wrote.
        self.history.verify(key, target.seq)
        if target.text is None:
            return self.delete(
                key, action="rollback", expect_version=expect_version, restored=target.seq
            )
        try:
            rules.validate(rule, target.text, f"{key}@{target.seq}")
        except RuleError as exc:
            raise RuleError(
                f"history entry {target.seq} is not a valid rule today: {exc.reason}",
                source=exc.source,
                line=exc.line,
                column=exc.column,
            ) from None
        return self.put(
            key, target.text, action="rollback", expect_version=expect_version, restored=target.seq
        )
