"""The one YAML loader: what every rule, scenario and dubbo.yaml reader gets from it."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from dubbo_py import yaml_loader
from dubbo_py.yaml_loader import YamlError, describe, load_yaml, peek_yaml

_KEYS = st.text(st.characters(categories=["L", "N"]), min_size=1, max_size=8)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.text(st.characters(categories=["L", "N", "P", "Zs"]), max_size=12),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=12,
)


def _paths(value: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    out = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += _paths(item, (*path, i))
    return out


@settings(max_examples=30, deadline=None)
@given(st.dictionaries(_KEYS, _VALUES, min_size=1, max_size=5), st.booleans(), st.booleans())
def test_documents_load_as_safe_load_reads_them_with_a_position_for_every_value(
    data: dict[str, Any], flow: bool, fast: bool
) -> None:
    text = yaml.safe_dump(data, default_flow_style=flow, allow_unicode=True, sort_keys=False)
    doc = load_yaml(text, "doc.yaml", fast=fast)
    assert doc.data == yaml.safe_load(text)
    lines = text.split("\n")
    for path in _paths(data):
        line, column = doc.position(path)
        assert line is not None and column is not None, describe(path)
        assert 1 <= line <= len(lines) and 1 <= column <= len(lines[line - 1]) + 1
    for path in _paths(data)[1:]:
        if isinstance(path[-1], str):
            line, column = doc.key_position(path)
            assert line is not None and column is not None
            # the key is written where its position says
            assert lines[line - 1][column - 1 :].lstrip("'\"").startswith(path[-1][:1])


_ASCII_KEYS = st.text(st.characters(min_codepoint=48, max_codepoint=122), min_size=1, max_size=8)
_ASCII_VALUES = st.recursive(
    st.none() | st.integers() | st.text(st.characters(min_codepoint=32, max_codepoint=126)),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_ASCII_KEYS, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(_ASCII_KEYS, _ASCII_VALUES, min_size=1, max_size=4))
def test_libyaml_and_the_reference_parser_give_the_same_positions(data: dict[str, Any]) -> None:
    # For ASCII text: libyaml counts the columns of some other characters differently, which is
    # why compile_yaml re-reads a failing document with the reference parser before reporting.
    text = yaml.safe_dump(data, sort_keys=False)
    fast = load_yaml(text, "d", fast=True)
    with mock.patch.object(yaml_loader, "_FAST", None):
        reference = load_yaml(text, "d", fast=True)
    assert fast.data == reference.data
    assert fast.positions() == reference.positions()


@settings(max_examples=100)
@given(st.text(max_size=60))
def test_any_text_loads_or_fails_with_the_callers_error(text: str) -> None:
    try:
        load_yaml(text, "any.yaml")
    except YamlError as exc:
        assert exc.source == "any.yaml"
        assert exc.reason


_TAGS = ["", "!!int ", "!!float ", "!!bool ", "!!timestamp ", "!!binary ", "!!str ", "!!null "]


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from(_TAGS),
    st.from_regex(r"[0-9a-zA-Z:.+\-_ ]{0,20}", fullmatch=True) | st.text(max_size=20),
)
def test_any_tagged_scalar_loads_or_fails_with_the_callers_error(tag: str, value: str) -> None:
    # PyYAML's constructors raise ValueError and friends for values their tag cannot hold
    # (2001-13-45, !!int x); the loader turns them into the caller's error at the value.
    text = f"a: {tag}{value}\n"
    try:
        load_yaml(text, "t.yaml")
    except YamlError as exc:
        assert exc.line is None or exc.line >= 1


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.from_regex(r"[a-z]{1,6}", fullmatch=True), min_size=1, max_size=6, unique=True),
    st.data(),
)
def test_an_anchor_or_alias_anywhere_is_refused_at_its_line(
    keys: list[str], draw: st.DataObject
) -> None:
    lines = [f"{key}: {i}" for i, key in enumerate(keys)]
    at = draw.draw(st.integers(0, len(lines) - 1))
    if draw.draw(st.booleans()):
        lines[at] = f"{keys[at]}: &a {at}"  # an anchor, even unused
    else:
        lines.insert(0, "_base: 1")
        lines[at + 1] = f"{keys[at]}: *_base"  # an alias (of nothing anchored: still refused)
        at += 1
    with pytest.raises(YamlError, match="anchors and aliases") as info:
        load_yaml("\n".join(lines) + "\n", "a.yaml", fast=draw.draw(st.booleans()))
    assert (info.value.line, info.value.column) == (at + 1, len(lines[at].split(":")[0]) + 3)


def test_billion_laughs_is_refused_before_it_expands() -> None:
    text = 'a: &a ["x","x"]\nb: &b [*a,*a]\nc: &c [*b,*b]\nd: [*c,*c]\n'
    with pytest.raises(YamlError, match="anchors and aliases") as info:
        load_yaml(text, "laughs.yaml", fast=True)
    assert (info.value.line, info.value.column) == (1, 4)


@pytest.mark.parametrize(
    ("text", "message", "line"),
    [
        ("a: [\n", "invalid YAML", 2),
        ("a: 1\n---\nb: 2\n", "invalid YAML", 2),
        ("a: !!python/object/apply:os.system ['true']\n", "unsupported tag", 1),
        ("a: !!python/name:os.system\n", "invalid YAML", 1),
        ("? [1, 2]\n: x\n", "mapping keys must be", 1),
        ("1: x\n", "mapping keys must be strings", 1),
        ("a: '\x07'\n", "not allowed", 1),
        ("a: '\ud800'\n", "not allowed", 1),
        ("a: 2001-13-45\n", "cannot read '2001-13-45' as tag:yaml.org,2002:timestamp", 1),
        ("a:\n  b: !!int x\n", "a.b: invalid YAML: cannot read 'x'", 2),
        ("a: {<<: 3}\n", "invalid YAML", 1),
        ("a:\n  b:\n" + "".join("  " * i + "- \n" for i in range(2, 40)), "nested deeper", None),
    ],
)
@pytest.mark.parametrize("fast", [False, True])
def test_bad_documents_name_the_problem_and_its_line(
    text: str, message: str, line: int | None, fast: bool
) -> None:
    with pytest.raises(YamlError, match=message) as info:
        load_yaml(text, "bad.yaml", fast=fast)
    assert info.value.source == "bad.yaml"
    if line is not None:
        assert info.value.line == line


def test_empty_documents_are_refused_or_loaded_as_none_as_the_caller_says() -> None:
    with pytest.raises(YamlError, match="rule is empty"):
        load_yaml("# nothing\n", "r", empty="rule is empty")
    assert load_yaml("", "r", empty=None).data is None
    assert peek_yaml("a: [") is None
    assert peek_yaml("enabled: false\n") == {"enabled": False}


def test_the_callers_error_type_is_raised() -> None:
    class Mine(Exception):
        def __init__(
            self,
            message: str,
            *,
            source: str = "",
            line: int | None = None,
            column: int | None = None,
        ) -> None:
            super().__init__(message, source, line, column)

    with pytest.raises(Mine) as info:
        load_yaml("a: *x\n", "s", error=Mine)
    assert info.value.args[2:] == (1, 4)


def test_errors_at_a_path_point_at_its_value_and_errors_in_carried_text_inside_it() -> None:
    text = "tags:\n  - name: gray\n    addresses: ['10.0.0.1:x']\nrule: |\n  a = b\n  c => d\n"
    doc = load_yaml(text, "t.yaml")
    err = doc.error(("tags", 0, "addresses", 0), "not an address")
    assert str(err) == "t.yaml:3:17: tags[0].addresses[0]: not an address"
    assert doc.fail("unknown field", ("tags", 0, "name"), at_key=True).column == 5  # type: ignore[attr-defined]
    # line 2, column 3 of the block's text is line 6, column 5 of the document
    assert doc.inner_position(("rule",), 2, 3) == (6, 5)
    one_line = load_yaml("when: 'host = 1.2.3.4 => x'\n", "w")
    assert one_line.inner_position(("when",), 1, 8) == (1, 15)


def test_documents_longer_than_the_limit_are_refused_without_parsing() -> None:
    with pytest.raises(YamlError, match="more than the 10 allowed"):
        load_yaml("a: 123456789\n", "big", max_chars=10)
