"""The one YAML loader: every document dubbo-py reads goes through :func:`load_yaml`.

Rule documents of every kind (condition, tag, script, shard, override rules), ``route test``
scenarios and ``dubbo.yaml`` are read here, so they share one set of guarantees:

* **Positions.** PyYAML's ``safe_load`` forgets where a value came from, so "tags[1].addresses[0]
  is not an address" could not point at a line. The loader composes the node tree, builds plain
  Python values from it and keeps, for each value's path (``("tags", 1, "addresses", 0)``), the
  node it came from (its line and column, and for a scalar its style and extent) and the node of
  its key. Errors built through :meth:`YamlDocument.error` name the path and its line/column.
* **No anchors or aliases.** Documents never need them, and they are the classic way to make a
  small document expand enormously ("billion laughs"); an anchor or alias is refused at its
  position.
* **Bounds.** Nesting deeper than :data:`MAX_DEPTH` levels, text longer than ``max_chars``,
  more than one document and characters YAML does not allow are refused with a position.

The error type is the caller's (``error=``): :class:`~dubbo_py.router.base.RuleError` for rules
and scenarios, an adapter to ``ConfigError`` for ``dubbo.yaml``; anything with the signature
``error(message, *, source=, line=, column=)``.

``fast=True`` parses with libyaml when PyYAML has it (about ten times faster than the
pure-Python parser): for documents every consumer reads on every push. libyaml words and counts
some faults differently, so a caller that reports errors to users re-reads a document that
failed with ``fast=False`` (:func:`compile_yaml` does exactly that).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import yaml

from dubbo_py.errors import PositionedError

__all__ = [
    "MAX_CHARS",
    "MAX_DEPTH",
    "ErrorFactory",
    "Path",
    "YamlDocument",
    "YamlError",
    "as_boolean",
    "compile_yaml",
    "describe",
    "key_node",
    "load_yaml",
    "peek_yaml",
    "value_node",
]

#: A value's place in a document: mapping keys and sequence indices from the root.
Path = tuple[str | int, ...]

#: Deeper than this is refused (no document we read needs more than a handful of levels).
MAX_DEPTH = 32
#: Documents are small; a megabyte is already absurd, and YAML parsing is slow.
MAX_CHARS = 1024 * 1024

T = TypeVar("T")


class ErrorFactory(Protocol):
    """Builds the caller's error type from a message and a position (1-based)."""

    def __call__(
        self, message: str, *, source: str = "", line: int | None = None, column: int | None = None
    ) -> Exception:
        """The exception to raise."""
        ...


class YamlError(PositionedError):
    """The loader's own error, for callers that pass no ``error``: ``reason``, ``source`` and,
    when known, ``line``/``column`` (1-based)."""


def describe(path: Path) -> str:
    """``tags[1].addresses[0]`` for ``("tags", 1, "addresses", 0)``; ``document`` for ``()``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "document"


@dataclass(frozen=True)
class YamlDocument:
    """A loaded document: ``data`` (plain dicts, lists and scalars) and where each value sits.

    ``nodes`` maps each value's path to its YAML node, ``key_nodes`` each mapping entry's path
    (the path of its value) to the node of its key; ``root`` is the root node (None for an
    empty document, when the caller allowed one)."""

    data: Any
    source: str
    text: str
    root: yaml.Node | None = field(repr=False)
    nodes: Mapping[Path, yaml.Node] = field(repr=False)
    key_nodes: Mapping[Path, yaml.Node] = field(repr=False)
    make_error: ErrorFactory = field(repr=False)

    # ------------------------------------------------------------------ positions

    def position(self, path: Path) -> tuple[int | None, int | None]:
        """Line and column (1-based) where the value at ``path`` starts; (None, None) when the
        path is not in the document."""
        node = self.nodes.get(path)
        return _position(node)

    def key_position(self, path: Path) -> tuple[int | None, int | None]:
        """Line and column of the key of the entry at ``path`` (else of the value)."""
        node = self.key_nodes.get(path) or self.nodes.get(path)
        return _position(node)

    def positions(self) -> dict[Path, tuple[int, int]]:
        """Every value's position by path."""
        out: dict[Path, tuple[int, int]] = {}
        for path, node in self.nodes.items():
            out[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
        return out

    def inner_position(self, path: Path, line: int, column: int) -> tuple[int, int] | None:
        """Where ``line``/``column`` (1-based) of the text of the scalar at ``path`` is in the
        document, when that can be told exactly (see :meth:`locate`); None otherwise."""
        node = self.nodes.get(path)
        return None if node is None else self.locate(node, line, column)

    def locate(self, node: yaml.Node, line: int, column: int) -> tuple[int, int] | None:
        """Where ``line``/``column`` (1-based) of a scalar's text is in the document, when that
        can be told exactly: a one-line plain or quoted scalar written as it reads (no
        escapes), or a ``|`` block whose lines are the document's lines less their indentation.
        None otherwise (the caller then points at the scalar itself). For errors found in text
        a document carries (a condition, a script, a rule inside a scenario)."""
        if not isinstance(node, yaml.ScalarNode):
            return None
        start, end, style = node.start_mark, node.end_mark, node.style
        if style in (None, "'", '"'):
            quote = 1 if style else 0
            raw = self.text[start.index + quote : end.index - quote]
            if raw == node.value and "\n" not in raw and line == 1:
                return start.line + 1, start.column + quote + column
            return None
        if style != "|":
            return None
        rule_lines = str(node.value).split("\n")
        doc_lines = self.text.split("\n")
        first = start.line + 1  # the line after the ``|`` indicator
        target = first + line - 1
        if target >= len(doc_lines) or line > len(rule_lines) or not rule_lines[line - 1]:
            return None
        opening = doc_lines[first]
        indent = len(opening) - len(opening.lstrip(" "))
        if doc_lines[target][indent:] != rule_lines[line - 1]:
            return None
        return target + 1, indent + column

    # ------------------------------------------------------------------ errors

    def fail(self, message: str, path: Path | None = None, *, at_key: bool = False) -> Exception:
        """An error with ``message`` as is, at the value at ``path`` (at its key with
        ``at_key``); without a path, at no position."""
        if path is None:
            return self.make_error(message, source=self.source)
        line, column = self.key_position(path) if at_key else self.position(path)
        return self.make_error(message, source=self.source, line=line, column=column)

    def error(self, path: Path, message: str) -> Exception:
        """An error ``<path>: <message>`` (``tags[1].addresses[0]: ...``) at the value at
        ``path``."""
        return self.fail(f"{describe(path)}: {message}", path)

    # ------------------------------------------------------------------ typed reads

    def at(self, path: Path) -> Any:
        """The value at ``path`` (which must exist)."""
        value = self.data
        for part in path:
            value = value[part]
        return value

    def mapping(self, path: Path = ()) -> dict[str, Any]:
        """The mapping at ``path``; an error if it is something else."""
        value = self.at(path)
        if not isinstance(value, dict):
            raise self.error(path, f"expected a mapping, got {kind_of(value)}")
        return value

    def get_str(self, path: Path, *, required: bool = False, default: str = "") -> str:
        """A string (numbers and booleans are written as text, as Dubbo's loader does); an
        error for other kinds, or when ``required`` and absent or blank."""
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
        raise self.error(path, f"expected a string, got {kind_of(value)}")

    def get_bool(self, path: Path, default: bool) -> bool:
        """``true``/``false`` (YAML booleans or those strings, any case); an error otherwise."""
        value = self._get(path)
        if value is None:
            return default
        flag = as_boolean(value)
        if flag is None:
            raise self.error(path, f"expected true or false, got {value!r}")
        return flag

    def get_int(self, path: Path, default: int) -> int:
        """An integer (or an integral string); an error otherwise."""
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
        """The sequence at ``path``, ``None`` when absent or null; an error for other kinds."""
        value = self._get(path)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self.error(path, f"expected a list, got {kind_of(value)}")
        return value

    def _get(self, path: Path) -> Any:
        parent = self.at(path[:-1])
        if isinstance(parent, dict):
            return parent.get(path[-1]) if isinstance(path[-1], str) else None
        return parent[path[-1]]


def load_yaml(
    text: str,
    source: str,
    *,
    error: ErrorFactory = YamlError,
    empty: str | None = "the document is empty",
    string_keys: bool = True,
    max_chars: int = MAX_CHARS,
    fast: bool = False,
) -> YamlDocument:
    """Load one YAML document with the position of every value (see the module doc).

    Raises ``error`` (with line/column where known) for text that is not a string, longer than
    ``max_chars``, bad YAML, more than one document, anchors or aliases, nesting deeper than
    :data:`MAX_DEPTH`, and -- with ``string_keys`` -- mapping keys that are not strings. An
    empty document raises ``empty`` as its message, or loads as ``data=None`` when ``empty``
    is None."""
    if not isinstance(text, str):
        raise error(f"a document must be text, not {type(text).__name__}", source=source)
    if len(text) > max_chars:
        raise error(
            f"the document is {len(text)} characters, more than the {max_chars} allowed",
            source=source,
        )
    loader_type: type[yaml.SafeLoader] | type[yaml.CSafeLoader] = (
        _FAST if fast and _FAST is not None else yaml.SafeLoader
    )
    try:
        _refuse_anchors(text, source, error)
        loader = loader_type(text)
    except yaml.YAMLError as exc:
        raise yaml_error(exc, source, error, text) from None
    except RecursionError:
        raise error("invalid YAML: nested too deeply", source=source) from None
    try:
        try:
            root = loader.get_single_node()
        except yaml.YAMLError as exc:
            raise yaml_error(exc, source, error, text) from None
        except RecursionError:
            raise error("invalid YAML: nested too deeply", source=source) from None
        if root is None or _blank(root):
            if empty is not None:
                raise error(empty, source=source)
            if root is None:
                return YamlDocument(None, source, text, None, {}, {}, error)
        builder = _Builder(loader, source, error, string_keys)
        data = builder.build(root, ())
    finally:
        loader.dispose()
    return YamlDocument(data, source, text, root, builder.nodes, builder.key_nodes, error)


def compile_yaml(
    text: str,
    source: str,
    build: Callable[[YamlDocument], T],
    *,
    error: ErrorFactory = YamlError,
    empty: str | None = "the document is empty",
    max_chars: int = MAX_CHARS,
) -> T:
    """``build(load_yaml(text, ...))``, parsed with libyaml first; when loading or ``build``
    fails, the document is read again with PyYAML's reference parser so the error's words and
    positions are the reference ones (the common case -- a valid document -- pays libyaml's
    price only)."""
    if _FAST is not None:
        try:
            return build(
                load_yaml(text, source, error=error, empty=empty, max_chars=max_chars, fast=True)
            )
        except Exception:
            pass
    return build(load_yaml(text, source, error=error, empty=empty, max_chars=max_chars))


def peek_yaml(text: str, source: str = "") -> Any:
    """The document's data, or None when it is not valid YAML for :func:`load_yaml`: for
    looking at a document (its ``enabled`` flag, its ``scope``) where its faults are reported
    elsewhere."""
    try:
        return load_yaml(text, source, empty=None, string_keys=False).data
    except YamlError:
        return None


def yaml_error(
    exc: yaml.YAMLError, source: str, error: ErrorFactory = YamlError, text: str = ""
) -> Exception:
    """What a YAML parse failure tells the user: ``invalid YAML: <problem>`` at the line and
    column PyYAML marked (1-based)."""
    if isinstance(exc, yaml.reader.ReaderError):
        position = exc.position
        line = text.count("\n", 0, position) + 1
        column = position - (text.rfind("\n", 0, position) + 1) + 1
        char = chr(exc.character) if isinstance(exc.character, int) else exc.character
        return error(
            f"invalid YAML: character {char!r} is not allowed",
            source=source,
            line=line,
            column=column,
        )
    if not isinstance(exc, yaml.MarkedYAMLError):
        return error(f"invalid YAML: {exc}", source=source)
    mark = exc.problem_mark or exc.context_mark
    problem = "; ".join(p for p in (exc.context, exc.problem) if p) or "malformed YAML"
    if mark is None:
        return error(f"invalid YAML: {problem}", source=source)
    line, column = mark.line + 1, mark.column + 1
    return error(f"invalid YAML: {problem}", source=source, line=line, column=column)


def key_node(node: yaml.Node | None, key: object) -> yaml.Node | None:
    """The node of ``key`` in a mapping node (the last of repeated keys: its value is the one
    loaded), else ``node`` itself: where an error about that key points."""
    if isinstance(node, yaml.MappingNode):
        for k, _ in reversed(node.value):
            if isinstance(k, yaml.ScalarNode) and k.value == str(key):
                found: yaml.Node = k
                return found
    return node


def value_node(node: yaml.Node | None, key: str) -> yaml.Node | None:
    """The node of ``key``'s value in a mapping node (the last of repeated keys), else None."""
    if isinstance(node, yaml.MappingNode):
        for k, v in reversed(node.value):
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                found: yaml.Node = v
                return found
    return None


def as_boolean(value: object) -> bool | None:
    """A document's boolean: a YAML boolean, or the text ``true`` or ``false`` in any case
    (Dubbo's ``Boolean.parseBoolean`` reads other text as false; it is refused here rather than
    read as false); ``None`` for any other value."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "false"):
            return text == "true"
    return None


def kind_of(value: object) -> str:
    """How an error names a value's kind: ``a mapping``, ``the string 'x'``, ``null``..."""
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


# --------------------------------------------------------------------------- internals

#: Mappings and sequences built as plain dicts and lists; any other tag on them is refused
#: (``!!python/object/apply`` and friends, but also ``!!set``/``!!omap``: documents never
#: need them).
_PLAIN_COLLECTIONS = frozenset({"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"})

#: libyaml's safe loader when PyYAML was built with it.
_FAST: type[yaml.CSafeLoader] | None = getattr(yaml, "CSafeLoader", None)


def _position(node: yaml.Node | None) -> tuple[int | None, int | None]:
    if node is None:
        return None, None
    return node.start_mark.line + 1, node.start_mark.column + 1


def _blank(root: yaml.Node) -> bool:
    # "~" or "null" alone: a document that says nothing.
    return isinstance(root, yaml.ScalarNode) and root.tag == "tag:yaml.org,2002:null"


def _refuse_anchors(text: str, source: str, error: ErrorFactory) -> None:
    """Anchors and aliases, at their position (the composed tree forgets them). libyaml's event
    scan is cheap; the reference parser scans again only when it finds something (an anchor or
    a fault), so the error reported, and its position, are the reference parser's."""
    if _FAST is not None:
        try:
            if not any(_is_anchor(event) for event in yaml.parse(text, Loader=_FAST)):
                return
        except (yaml.YAMLError, UnicodeError):  # e.g. lone surrogates libyaml cannot encode
            pass
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if _is_anchor(event):
            mark = event.start_mark
            raise error(
                "YAML anchors and aliases are not supported",
                source=source,
                line=mark.line + 1 if mark else None,
                column=mark.column + 1 if mark else None,
            )


def _is_anchor(event: yaml.Event) -> bool:
    return isinstance(event, yaml.AliasEvent) or bool(getattr(event, "anchor", None))


@dataclass(frozen=True, eq=False)
class _Builder:
    """Plain values from a node tree, recording each value's node by path."""

    loader: yaml.SafeLoader | yaml.CSafeLoader
    source: str
    error: ErrorFactory
    string_keys: bool
    nodes: dict[Path, yaml.Node] = field(default_factory=dict)
    key_nodes: dict[Path, yaml.Node] = field(default_factory=dict)
    seen: set[int] = field(default_factory=set)

    def fail(self, path: Path, message: str, node: yaml.Node) -> Exception:
        mark = node.start_mark
        return self.error(
            f"{describe(path)}: {message}",
            source=self.source,
            line=mark.line + 1,
            column=mark.column + 1,
        )

    def build(self, node: yaml.Node, path: Path) -> Any:
        self.nodes[path] = node
        if id(node) in self.seen:  # an alias the event scan missed: never expand it twice
            raise self.fail(path, "YAML anchors and aliases are not supported", node)
        self.seen.add(id(node))
        if len(path) > MAX_DEPTH:
            raise self.fail(path, f"nested deeper than {MAX_DEPTH} levels", node)
        if isinstance(node, yaml.CollectionNode) and node.tag not in _PLAIN_COLLECTIONS:
            raise self.fail(path, f"invalid YAML: unsupported tag {node.tag!r}", node)
        if isinstance(node, yaml.MappingNode):
            return self.mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        return self.scalar(node, path)

    def scalar(self, node: yaml.Node, path: Path) -> Any:
        try:
            return self.loader.construct_object(node, deep=True)
        except yaml.MarkedYAMLError as exc:
            bad = exc.problem_mark or node.start_mark
            raise self.error(
                f"invalid YAML: {describe(path)}: {exc.problem or exc}",
                source=self.source,
                line=bad.line + 1,
                column=bad.column + 1,
            ) from None
        except Exception as exc:
            # PyYAML's constructors raise ValueError, KeyError, IndexError, ... for values
            # their tag cannot hold (``2001-13-45`` as a timestamp, ``!!int x``, ``!!bool``
            # with no value): bad input, not a crash.
            raise self.fail(
                path, f"invalid YAML: cannot read {node.value!r} as {node.tag}: {exc}", node
            ) from None

    def mapping(self, node: yaml.MappingNode, path: Path) -> dict[Any, Any]:
        try:
            self.loader.flatten_mapping(node)  # "<<" merge keys (without anchors: inline maps)
        except yaml.MarkedYAMLError as exc:
            raise self.fail(path, f"invalid YAML: {exc.problem or exc}", node) from None
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.CollectionNode):
                raise self.fail(path, "mapping keys must be scalars", key_node)
            key = self.scalar(key_node, path)
            if self.string_keys and not isinstance(key, str):
                raise self.fail(path, f"mapping keys must be strings, got {key!r}", key_node)
            part = key if isinstance(key, str) else str(key)
            self.key_nodes[(*path, part)] = key_node
            out[key] = self.build(value_node, (*path, part))
        return out
