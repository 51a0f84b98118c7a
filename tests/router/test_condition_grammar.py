"""Condition rule grammar: what parses to what, what is refused and where, and round trips.

Known answers come from Apache Dubbo 3.3's ``ConditionStateRouter.init``/``parseRule`` and
``UrlUtilsTest.testIsMatchGlobPattern``; differences are noted where they are deliberate.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dubbo_py.errors import RuleError
from dubbo_py.router.condition import parse_rule
from dubbo_py.router.condition.matcher import glob_match, range_match
from dubbo_py.router.condition.parser import parse_side
from dubbo_py.router.condition.rule import (
    Clause,
    ConditionRule,
    Glob,
    Key,
    KeyKind,
    Range,
    Ref,
    Value,
)

HOST = Key(KeyKind.PARAM, "host")


def clause(key: Key, *values: Value, negated: bool = False) -> Clause:
    return Clause(key, negated, values)


# --------------------------------------------------------------------------- structure


def test_when_and_then_sides() -> None:
    rule = parse_rule("host = 1.1.1.1 => host = 2.2.2.2")
    assert rule.when == (clause(HOST, Glob("1.1.1.1")),)
    assert rule.then == (clause(HOST, Glob("2.2.2.2")),)


def test_comma_values_and_ampersand_clauses() -> None:
    rule = parse_rule("host = a,b & region != x,y => zone = z")
    assert rule.when == (
        clause(HOST, Glob("a"), Glob("b")),
        clause(Key(KeyKind.PARAM, "region"), Glob("x"), Glob("y"), negated=True),
    )


def test_whitespace_is_optional_and_newlines_allowed() -> None:
    assert parse_rule("host=a,b&region!=x=>zone=z") == parse_rule(
        "host = a , b\n  & region != x\n=>\n  zone = z"
    )


def test_rule_without_arrow_is_a_then_side_for_every_call() -> None:
    # Dubbo: `thenRule = i < 0 ? rule.trim() : ...`, whenRule null -> matches every call.
    assert parse_rule("host = 1.2.3.4") == parse_rule("=> host = 1.2.3.4")
    assert parse_rule("host = 1.2.3.4").when == ()


@pytest.mark.parametrize("text", ["=> host = 1", "true => host = 1", "  =>host=1"])
def test_empty_or_true_when_matches_every_call(text: str) -> None:
    assert parse_rule(text).when == ()


@pytest.mark.parametrize("text", ["host = 1 =>", "host = 1 => false", "=>", "false", "=> false"])
def test_empty_or_false_then_blocks(text: str) -> None:
    assert parse_rule(text).then is None
    assert parse_rule(text).blocks


def test_consumer_and_provider_prefixes_are_dropped_from_keys_only() -> None:
    rule = parse_rule("consumer.host = consumer.example.com => provider.region = provider.east")
    assert rule.when == (clause(HOST, Glob("consumer.example.com")),)
    assert rule.then == (clause(Key(KeyKind.PARAM, "region"), Glob("provider.east")),)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("method", Key(KeyKind.METHOD, "method")),
        ("methods", Key(KeyKind.METHOD, "methods")),
        ("arguments[0]", Key(KeyKind.ARGUMENT, "arguments", 0)),
        ("arguments[12].user.id", Key(KeyKind.ARGUMENT, "arguments", 12, ("user", "id"))),
        ("attachments[foo]", Key(KeyKind.ATTACHMENT, "foo")),
        ("attachments[dubbo.tag]", Key(KeyKind.ATTACHMENT, "dubbo.tag")),
        ("application", Key(KeyKind.PARAM, "application")),
        ("address", Key(KeyKind.PARAM, "address")),
        # Dubbo reads every key starting with "arguments"/"attachments" from the call, and one
        # without a valid index or name as "not found": never matching.
        ("argumentsFoo", Key(KeyKind.ABSENT, "argumentsFoo")),
        ("arguments", Key(KeyKind.ABSENT, "arguments")),
        ("arguments[x]", Key(KeyKind.ABSENT, "arguments[x]")),
        ("arguments[-1]", Key(KeyKind.ABSENT, "arguments[-1]")),
        ("attachments", Key(KeyKind.ABSENT, "attachments")),
        ("attachments[]", Key(KeyKind.ABSENT, "attachments[]")),
    ],
)
def test_key_kinds(text: str, key: Key) -> None:
    assert parse_rule(f"{text} = x => host = y").when[0].key == key


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1.2.3.*", Glob("1.2.3.*")),
        ("*:20881", Glob("*:20881")),
        ("$region", Ref("region")),
        ("1~100", Range(1, 100)),
        ("~100", Range(None, 100)),
        ("10~", Range(10, None)),
        ("-5~5", Range(-5, 5)),
    ],
)
def test_value_kinds(text: str, value: Value) -> None:
    assert parse_rule(f"=> k = {text}").then == (clause(Key(KeyKind.PARAM, "k"), value),)


def test_parse_side_for_yaml_match_strings() -> None:
    assert parse_side("", then=False) == ()
    assert parse_side("true", then=False) == ()
    assert parse_side("", then=True) is None
    assert parse_side("false", then=True) is None
    assert parse_side("env = gray", then=True) == (clause(Key(KeyKind.PARAM, "env"), Glob("gray")),)
    with pytest.raises(RuleError, match="'=>' is not allowed here"):
        parse_side("a = b => c = d", then=True)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("text", "line", "column", "reason"),
    [
        ("host = ", 1, 7, "expected a value after '='"),
        ("host = => x = y", 1, 8, "expected a value after '='"),
        ("host != ", 1, 8, "expected a value after '!='"),
        ("host = a, => x = y", 1, 11, "expected a value after ','"),
        ("host = a & => x = y", 1, 12, "expected a condition (key = value) after '&'"),
        ("=> = x", 1, 4, "expected a condition (key = value) after '=>'"),
        ("host 1.2.3.4 => x = y", 1, 6, "expected '=' or '!=' after 'host'"),
        ("host => x = y", 1, 5, "expected '=' or '!=' after 'host'"),
        ("host = a b => x = y", 1, 10, "values cannot contain spaces"),
        ("a = b => c = d => e = f", 1, 16, "only one '=>'"),
        ("host ! a", 1, 6, "did you mean '!='"),
        ("host == a", 1, 7, "expected a value after '='"),
        (",", 1, 1, "cannot start with ','"),
        ("a = b\n  & c = d\n  => e == f", 3, 9, "expected a value after '='"),
        ("consumer. = a => x = y", 1, 1, "names nothing after its prefix"),
        ("=> port = 1~2~3", 1, 11, "bad range"),
        ("=> port = a~b", 1, 11, "bad range"),
        ("=> port = ~", 1, 11, "bad range"),
        ("=> port = 9~1", 1, 11, "empty range"),
        ("=> region = $", 1, 13, "bad reference"),
        ("false => host = a", 1, 1, "'false' is not a when condition"),
        ("=> true", 1, 4, "'true' is not a then condition"),
    ],
)
def test_errors_name_source_line_column_and_reason(
    text: str, line: int, column: int, reason: str
) -> None:
    with pytest.raises(RuleError) as info:
        parse_rule(text, "routers/demo.Greeter")
    err = info.value
    assert (err.line, err.column) == (line, column), str(err)
    assert reason in err.reason
    assert err.source == "routers/demo.Greeter"
    assert str(err).startswith(f"routers/demo.Greeter:{line}:{column}: ")


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_rule_is_an_error(text: str) -> None:
    # Dubbo: "Illegal route rule!" for a blank rule.
    with pytest.raises(RuleError, match="empty"):
        parse_rule(text, "x")


def test_non_text_rule_is_an_error() -> None:
    with pytest.raises(RuleError, match="must be text"):
        parse_rule(42, "x")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- patterns


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        # Dubbo UrlUtilsTest.testIsMatchGlobPattern
        ("*", "value", True),
        ("", "", True),
        ("", "value", False),
        ("value", "value", True),
        ("v*", "value", True),
        ("*e", "value", True),
        ("v*e", "value", True),
        # only the last '*' is a wildcard; earlier ones are literal (isMatchGlobPattern)
        ("a*b*c", "a*b-c", True),
        ("a*b*c", "axbyc", False),
        ("10.20.*", "10.20.3.3", True),
        ("10.20.*", "10.21.3.3", False),
        ("*:20881", "10.0.0.1:20881", True),
        ("value", "", False),
    ],
)
def test_glob_match_is_dubbos(pattern: str, value: str, expected: bool) -> None:
    assert glob_match(pattern, value) is expected


@pytest.mark.parametrize(
    ("low", "high", "value", "expected"),
    [
        (1, 100, "1", True),
        (1, 100, "100", True),
        (1, 100, "101", False),
        (1, 100, "0", False),
        (None, 100, "-7", True),
        (10, None, "10", True),
        (10, None, "9", False),
        (10, None, "99999999999999999999", True),
        (None, 100, "abc", False),
        (None, 100, "1.5", False),
        (None, 100, "", False),
    ],
)
def test_range_match(low: int | None, high: int | None, value: str, expected: bool) -> None:
    assert range_match(low, high, value) is expected


# --------------------------------------------------------------------------- properties

_WORD_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789_-.:/"
_words = st.text(_WORD_CHARS, min_size=1, max_size=12)
_identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)


def _plain_param(name: str) -> bool:
    return not (
        name.startswith(("consumer.", "provider.", "arguments", "attachments"))
        or name in ("method", "methods")
    )


_keys = st.one_of(
    _words.filter(_plain_param).map(lambda n: Key(KeyKind.PARAM, n)),
    st.sampled_from(["method", "methods"]).map(lambda n: Key(KeyKind.METHOD, n)),
    st.builds(
        lambda i, p: Key(KeyKind.ARGUMENT, "arguments", i, tuple(p)),
        st.integers(0, 50),
        st.lists(_identifiers, max_size=3),
    ),
    _words.map(lambda n: Key(KeyKind.ATTACHMENT, n)),
)
_values: st.SearchStrategy[Value] = st.one_of(
    st.text(_WORD_CHARS + "*", min_size=1, max_size=12).map(Glob),
    _words.map(Ref),
    st.tuples(st.integers(-1000, 1000), st.integers(0, 1000)).map(
        lambda t: Range(t[0], t[0] + t[1])
    ),
    st.integers(-1000, 1000).map(lambda n: Range(n, None)),
    st.integers(-1000, 1000).map(lambda n: Range(None, n)),
)
_clauses = st.builds(
    Clause, _keys, st.booleans(), st.lists(_values, min_size=1, max_size=3).map(tuple)
)
_rules = st.builds(
    ConditionRule,
    st.lists(_clauses, max_size=3).map(tuple),
    st.one_of(st.none(), st.lists(_clauses, min_size=1, max_size=3).map(tuple)),
)


@settings(max_examples=300, deadline=None)
@given(_rules)
def test_canonical_text_parses_back_to_the_same_rule(rule: ConditionRule) -> None:
    assert parse_rule(rule.text(), "prop") == rule


_spacing = st.sampled_from(["", " ", "  ", "\n", "\t", " \n "])


@settings(max_examples=200, deadline=None)
@given(_rules, st.data())
def test_any_spacing_parses_to_the_same_rule(rule: ConditionRule, data: st.DataObject) -> None:
    # Re-space the canonical text between tokens: whitespace never changes the meaning.
    tokens = rule.text().split()
    spaced = "".join(data.draw(_spacing) + t for t in tokens) + data.draw(_spacing)
    respaced = spaced.replace("=>", " => ")
    assert parse_rule(respaced, "prop") == rule


_rule_alphabet = st.sampled_from([*"ab1 =!&,~$*[].>\n\t", "=>", "!=", "arguments[", "attachments["])


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(max_size=40), st.lists(_rule_alphabet, max_size=25).map("".join)))
def test_arbitrary_text_raises_only_rule_error(text: str) -> None:
    try:
        rule = parse_rule(text, "fuzz")
    except RuleError as err:
        assert err.source == "fuzz"
        if err.line is not None:
            assert 1 <= err.line <= text.count("\n") + 1
            assert err.column is not None and err.column >= 1
    else:
        assert parse_rule(rule.text(), "fuzz") == rule
