"""Reading rule documents (YAML) with the line and column of every value, for clear RuleErrors.

``yaml.safe_load`` forgets where a value came from, so a message like "tags[1].addresses[0] is
not an address" could not point at the line. :func:`load_rule_document` composes the node tree
with PyYAML's safe loader, builds plain Python values from it, and keeps a side table from each
value's path (``("tags", 1, "addresses", 0)``) to its position. Anchors and aliases are refused:
rules never need them and they are the classic way to make a small document expand enormously.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from dubbo_py.errors import RuleError

__all__ = ["Path", "RuleDocument", "load_rule_document", "yaml_error"]

#: A value's place in a document: mapping keys and sequence indices from the root.
Path = tuple[str | int, ...]

MAX_DEPTH = 32
#: Rule documents are small; a megabyte is already absurd, and YAML parsing is slow.
MAX_CHARS = 1024 * 1024


def describe(path: Path) -> str:
    """``tags[1].addresses[0]`` for ``("tags", 1, "addresses", 0)``; ``document`` for ``()``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "document"


@dataclass(frozen=True)
class RuleDocument:
    """A parsed rule document: ``data`` (plain dict/list/scalars) and where each value sits."""

    data: Any
    source: str
    positions: Mapping[Path, tuple[int, int]] = field(repr=False)

    def error(self, path: Path, message: str) -> RuleError:
        """A RuleError naming ``path`` and pointing at its line/column (1-based)."""
        line, column = self.positions.get(path, (None, None))
        where = describe(path)
        return RuleError(f"{where}: {message}", source=self.source, line=line, column=column)

    def mapping(self, path: Path = ()) -> dict[str, Any]:
        """The mapping at ``path``; RuleError if it is something else."""
        value = self.at(path)
        if not isinstance(value, dict):
            raise self.error(path, f"expected a mapping, got {_kind(value)}")
        return value

    def at(self, path: Path) -> Any:
        """The value at ``path`` (which must exist)."""
        value = self.data
        for part in path:
            value = value[part]
        return value

    def get_str(self, path: Path, *, required: bool = False, default: str = "") -> str:
        """A string (numbers are written as text, as Dubbo's loader does); RuleError otherwise."""
        value = self._get(path)
        if value is None:
            if required:
                raise self.error(path[:-1], f"'{path[-1]}' is required")
            return default
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int | float | str):
            text = str(value)
            if required and not text.strip():
                raise self.error(path, "must not be empty")
            return text
        raise self.error(path, f"expected a string, got {_kind(value)}")

    def get_bool(self, path: Path, default: bool) -> bool:
        """``true``/``false`` (YAML booleans or those strings, any case); RuleError otherwise."""
        value = self._get(path)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise self.error(path, f"expected true or false, got {value!r}")

    def get_int(self, path: Path, default: int) -> int:
        """An integer (or an integral string); RuleError otherwise."""
        value = self._get(path)
        if value is None:
            return default
        if isinstance(value, bool):
            raise self.error(path, f"expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise self.error(path, f"expected an integer, got {value!r}")

    def get_list(self, path: Path) -> list[Any] | None:
        """The sequence at ``path``, ``None`` when absent or null; RuleError for other kinds."""
        value = self._get(path)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self.error(path, f"expected a list, got {_kind(value)}")
        return value

    def _get(self, path: Path) -> Any:
        parent = self.at(path[:-1])
        if isinstance(parent, dict):
            return parent.get(path[-1]) if isinstance(path[-1], str) else None
        return parent[path[-1]]


def load_rule_document(text: str, source: str, *, max_chars: int = MAX_CHARS) -> RuleDocument:
    """Parse one YAML rule document; RuleError (with line/column) for bad YAML, more than one
    document, anchors/aliases, non-string keys, nesting deeper than 32 levels or a document
    longer than ``max_chars``."""
    if not isinstance(text, str):
        raise RuleError(f"rule text must be a string, got {type(text).__name__}", source=source)
    if len(text) > max_chars:
        raise RuleError(
            f"rule is {len(text)} characters, more than the {max_chars} allowed", source=source
        )
    if not text.strip():
        raise RuleError("rule is empty", source=source)
    try:
        _refuse_anchors(text, source)
        loader = yaml.SafeLoader(text)
    except yaml.YAMLError as exc:
        raise yaml_error(exc, source) from None
    try:
        try:
            node = loader.get_single_node()
        except yaml.YAMLError as exc:
            raise yaml_error(exc, source) from None
        except RecursionError as exc:
            raise RuleError(f"invalid YAML: {exc}", source=source) from None
        if node is None:
            raise RuleError("rule is empty", source=source)
        positions: dict[Path, tuple[int, int]] = {}
        data = _build(node, (), positions, loader, set(), source)
    finally:
        loader.dispose()
    return RuleDocument(data, source, positions)


def yaml_error(exc: yaml.YAMLError, source: str, error: type[RuleError] = RuleError) -> RuleError:
    """What a YAML parse failure tells the user: ``invalid YAML: <problem>`` at the line and
    column PyYAML marked (1-based), as ``error`` (a :class:`RuleError` kind) naming ``source``."""
    if not isinstance(exc, yaml.MarkedYAMLError):
        return error(f"invalid YAML: {exc}", source=source)
    mark = exc.problem_mark or exc.context_mark
    problem = exc.problem or exc.context or "malformed YAML"
    line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
    return error(f"invalid YAML: {problem}", source=source, line=line, column=column)


def _refuse_anchors(text: str, source: str) -> None:
    """Anchors and aliases point at their own position, which the composed tree forgets."""
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            mark = event.start_mark
            raise RuleError(
                "YAML anchors and aliases are not supported in rules",
                source=source,
                line=mark.line + 1 if mark else None,
                column=mark.column + 1 if mark else None,
            )


def _build(
    node: yaml.Node,
    path: Path,
    positions: dict[Path, tuple[int, int]],
    loader: yaml.SafeLoader,
    seen: set[int],
    source: str,
) -> Any:
    mark = node.start_mark
    positions[path] = (mark.line + 1, mark.column + 1)
    if id(node) in seen:
        raise RuleError(
            f"{describe(path)}: YAML anchors and aliases are not supported in rules",
            source=source,
            line=mark.line + 1,
            column=mark.column + 1,
        )
    seen.add(id(node))
    if len(path) > MAX_DEPTH:
        raise RuleError(
            f"{describe(path)}: nested deeper than {MAX_DEPTH} levels",
            source=source,
            line=mark.line + 1,
            column=mark.column + 1,
        )
    try:
        if isinstance(node, yaml.MappingNode):
            loader.flatten_mapping(node)
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                key = loader.construct_object(key_node, deep=True)
                if not isinstance(key, str):
                    kmark = key_node.start_mark
                    raise RuleError(
                        f"{describe(path)}: mapping keys must be strings, got {key!r}",
                        source=source,
                        line=kmark.line + 1,
                        column=kmark.column + 1,
                    )
                out[key] = _build(value_node, (*path, key), positions, loader, seen, source)
            return out
        if isinstance(node, yaml.SequenceNode):
            return [
                _build(item, (*path, i), positions, loader, seen, source)
                for i, item in enumerate(node.value)
            ]
        return loader.construct_object(node, deep=True)
    except yaml.MarkedYAMLError as exc:
        bad = exc.problem_mark or mark
        raise RuleError(
            f"{describe(path)}: {exc.problem or exc}",
            source=source,
            line=bad.line + 1,
            column=bad.column + 1,
        ) from None


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the string {value!r}"
    return f"{type(value).__name__} {value!r}"
