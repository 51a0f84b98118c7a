"""No silent drop: every field of a rule document that dubbo-py does not act on is named.

Each rule kind's compiler keeps, next to itself, a table of the fields its documents may hold
(:class:`Field`: acted on, or known and ignored with the reason). :func:`unread_fields` walks a
document against its kind's table and names every field that is not acted on:

* a field Dubbo knows that dubbo-py ignores (``runtime`` of a condition rule), with the reason;
* a field neither knows (a typo, another tool's field): Dubbo ignores it silently, so consumers
  accept the document too, and it is named here.

``rules validate`` / ``rules push`` print them as warnings (``--strict`` refuses), and
consumers log them once per document version and count them
(:data:`UNREAD_COUNTS`, exported as ``dubbo_py_rule_fields_unread_total``). Consumers never
refuse a document for a field named here.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "UNREAD_COUNTS",
    "Field",
    "FieldNote",
    "acted",
    "count_unread",
    "document_fields",
    "ignored",
    "note_unread",
    "unread_fields",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a rule document."""

    #: True when dubbo-py acts on the field; False when it is known (Dubbo's) and ignored.
    acted: bool = True
    #: Why an ignored field has no meaning here (said with its name).
    why: str = ""
    #: The fields of the mapping the field holds -- or of each mapping of the list it holds --
    #: when they are checked one by one; None when its value is read whole (a string, a list
    #: of strings, a free mapping of parameters).
    each: Mapping[str, Field] | None = None


def acted(**each: Field) -> Field:
    """A field dubbo-py acts on (``each``: the fields of the mapping(s) it holds)."""
    return Field(True, "", each or None)


def ignored(why: str) -> Field:
    """A field Dubbo knows and dubbo-py ignores, and why."""
    return Field(False, why)


def document_fields(**fields: Field) -> Mapping[str, Field]:
    """The table of a rule document: ``fields`` after the header every kind acts on: the
    document's ``configVersion`` and ``enabled``, and ``scope`` and ``key``, which name where
    it is stored for ``rules push`` (consumers, like Dubbo's, go by the key it is stored at)."""
    return {
        "configVersion": acted(),
        "scope": acted(),
        "key": acted(),
        "enabled": acted(),
        **fields,
    }


@dataclass(frozen=True, slots=True)
class FieldNote:
    """A field not acted on: where (``configs[0].match``), whether Dubbo knows it, and why."""

    path: str
    known: bool
    why: str = field(default="")

    @property
    def name(self) -> str:
        """The field's own name (the last part of its path, without list indexes)."""
        last = self.path.rsplit(".", 1)[-1]
        return last.split("[", 1)[0]

    @property
    def generic_path(self) -> str:
        """The path without list indexes (``configs[].match``): one metric label per field."""
        out, skipping = [], False
        for ch in self.path:
            if ch == "[":
                skipping = True
                out.append("[]")
            elif ch == "]":
                skipping = False
            elif not skipping:
                out.append(ch)
        return "".join(out)

    def message(self) -> str:
        """One line naming the field and what dubbo-py does with it."""
        if self.known:
            return f"field {self.path!r} is ignored by dubbo-py: {self.why}"
        return (
            f"field {self.path!r} is not a field of this document (Dubbo ignores it too; a typo?)"
        )


def unread_fields(data: Any, table: Mapping[str, Field]) -> list[FieldNote]:
    """Every field of ``data`` (a document's top-level mapping) that ``table`` does not mark
    as acted on, in document order."""
    return list(_walk(data, table, ""))


def _walk(data: Any, table: Mapping[str, Field], prefix: str) -> Iterator[FieldNote]:
    if isinstance(data, list):
        for i, item in enumerate(data):
            yield from _walk(item, table, f"{prefix}[{i}]")
        return
    if not isinstance(data, Mapping):
        return
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        spec = table.get(str(key))
        if spec is None:
            yield FieldNote(path, False)
        elif not spec.acted:
            yield FieldNote(path, True, spec.why)
        elif spec.each is not None:
            yield from _walk(value, spec.each, path)


#: Fields read and not acted on by this process's consumers, by (rule kind, field path
#: without indexes): one count per document version that holds the field.
UNREAD_COUNTS: Counter[tuple[str, str]] = Counter()
_seen: set[tuple[str, int]] = set()
_lock = threading.Lock()


def note_unread(kind: str, key: str, text: str, table: Mapping[str, Field] | None) -> None:
    """A consumer read the document ``text`` at config key ``key``: log the fields it does not
    act on, once per document version (its text) and key, and count them."""
    if table is None:
        return
    marker = (key, hash(text))
    with _lock:
        if marker in _seen:
            return
        if len(_seen) >= 4096:  # bounded: a long-lived consumer sees many versions
            _seen.clear()
        _seen.add(marker)
    from dubbo_py.yaml_loader import peek_yaml

    notes = unread_fields(peek_yaml(text, key), table)
    if not notes:
        return
    with _lock:
        for note in notes:
            UNREAD_COUNTS[(kind, note.generic_path)] += 1
    log.warning(
        "rule %s: %d field(s) not acted on: %s",
        key,
        len(notes),
        "; ".join(n.message() for n in notes),
    )


def count_unread(kind: str, paths: Iterable[str]) -> None:
    """Count fields not acted on that a kind names itself (configurators, whose items are
    judged one by one): ``paths`` as ``configs[0].match``, counted without their indexes."""
    with _lock:
        for path in paths:
            UNREAD_COUNTS[(kind, FieldNote(path, True).generic_path)] += 1
