"""One line saying what a rule change changed, for ``rules history``.

Rule documents are YAML, so the comparison is of their values, field by field
(``force: false -> true; conditions[0]: 'a => b' -> 'a => c'``), not of their lines; a
document that is not YAML mapping (it was written by another tool, or broken) falls back to
counting the lines added and removed.
"""

from __future__ import annotations

import difflib
from typing import Any

from dubbo_py.yaml_loader import peek_yaml

__all__ = ["change_summary"]

#: Longest summary printed; longer ones end with "(+N more)".
MAX_WIDTH = 100
_VALUE_WIDTH = 40


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a.b[0]": scalar}`` for every leaf of a YAML value (empty containers are leaves)."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for index, item in enumerate(value):
            out.update(_flatten(item, f"{prefix}[{index}]"))
        return out
    return {prefix: value}


def _show(value: Any) -> str:
    if isinstance(value, str):
        text = repr(value)
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif value is None:
        text = "null"
    else:
        text = str(value)
    return text if len(text) <= _VALUE_WIDTH else text[: _VALUE_WIDTH - 3] + "..."


def _load(text: str) -> dict[str, Any] | None:
    data = peek_yaml(text)
    if data is None:
        return None
    return data if isinstance(data, dict) else None


def _line_counts(before: str, after: str) -> str:
    added = removed = 0
    for line in difflib.ndiff(before.splitlines(), after.splitlines()):
        if line.startswith("+ "):
            added += 1
        elif line.startswith("- "):
            removed += 1
    return f"+{added} -{removed} lines"


def _join(parts: list[str]) -> str:
    out = ""
    for index, part in enumerate(parts):
        candidate = f"{out}; {part}" if out else part
        rest = len(parts) - index - 1
        suffix = f" (+{rest} more)" if rest else ""
        if len(candidate) + len(suffix) > MAX_WIDTH and out:
            return f"{out} (+{len(parts) - index} more)"
        out = candidate
    return out


def change_summary(before: str | None, after: str | None, *, first: bool = False) -> str:
    """What changed from ``before`` to ``after`` (``None``: absent / deleted), in one line.

    ``first`` says ``before`` is unknown because earlier entries were not kept."""
    if after is None:
        return "deleted"
    if before is None:
        lines = len([ln for ln in after.splitlines() if ln.strip()])
        return f"{'(earliest kept) ' if first else 'created: '}{lines} lines"
    if before == after:
        return "no change to the text"
    old, new = _load(before), _load(after)
    if old is None or new is None:
        return _line_counts(before, after)
    flat_old, flat_new = _flatten(old), _flatten(new)
    parts = []
    for path in list(flat_old) + [p for p in flat_new if p not in flat_old]:
        if path not in flat_new:
            parts.append(f"-{path}")
        elif path not in flat_old:
            parts.append(f"+{path}: {_show(flat_new[path])}")
        elif flat_old[path] != flat_new[path]:
            parts.append(f"{path}: {_show(flat_old[path])} -> {_show(flat_new[path])}")
    if not parts:
        return "same values, " + _line_counts(before, after) + " (comments or layout)"
    return _join(parts)
