"""Rule regexes run on RE2: catastrophic patterns match in linear time, backtracking-only
constructs are refused with the construct and its column."""

from __future__ import annotations

import pytest

from dubbo_py.errors import RuleError
from dubbo_py.router.rule_regex import RegexError, compile_rule_regex
from dubbo_py.router.tag_rule import parse_tag_rule


def _tag_rule(regex: str) -> str:
    return (
        "configVersion: v3.0\nkey: shop\ntags:\n  - name: gray\n    match:\n"
        f"      - key: env\n        value: {{regex: '{regex}'}}\n"
    )


def test_catastrophic_pattern_matches_a_long_value_at_once() -> None:
    # ((.+)+)+Q against 200 000 characters: exponential in a backtracking engine.
    pattern = compile_rule_regex("((.+)+)+Q")
    assert not pattern.fullmatch("a" * 200_000)
    assert pattern.fullmatch("a" * 200_000 + "Q")


@pytest.mark.parametrize(
    ("regex", "construct", "column"),
    [
        (r"(a)\1", "a backreference", 4),
        (r"(?<n>a)\k<n>", "a backreference", 8),
        (r"(?P<n>a)(?P=n)", "a backreference", 9),
        ("ab(?=c)", "a lookahead", 3),
        ("ab(?!c)", "a lookahead", 3),
        ("(?<=a)b", "a lookbehind", 1),
        ("(?<!a)b", "a lookbehind", 1),
        ("(?>ab)", "an atomic group", 1),
        ("xa++", "a possessive quantifier", 4),
        ("a*+", "a possessive quantifier", 3),
    ],
)
def test_constructs_re2_lacks_are_refused_with_their_column(
    regex: str, construct: str, column: int
) -> None:
    with pytest.raises(RegexError) as caught:
        compile_rule_regex(regex)
    assert caught.value.column == column
    assert construct in str(caught.value)
    assert "RE2" in str(caught.value)


def test_java_syntax_rules_use_still_compiles() -> None:
    for regex in [r"v\d+\.\d+", r"(?i)gray|blue", r"[a-z]{2,8}-\w+", r"(?<zone>\p{L}+)-\d", ".*"]:
        compile_rule_regex(regex)
    assert compile_rule_regex(r"\Qa.b\E").fullmatch("a.b")
    assert not compile_rule_regex(r"\Qa.b\E").fullmatch("axb")


def test_tag_rule_names_source_line_and_pattern_column() -> None:
    with pytest.raises(RuleError) as caught:
        parse_tag_rule(_tag_rule("ab(?=c)"), "/dubbo/config/dubbo/shop.tag-router")
    text = str(caught.value)
    assert text.startswith("/dubbo/config/dubbo/shop.tag-router:7:")
    assert "tags[0].match[0].value" in text
    assert "column 3" in text and "lookahead" in text


def test_tag_rule_with_catastrophic_regex_is_accepted_and_harmless() -> None:
    rule = parse_tag_rule(_tag_rule("((.+)+)+Q"), "shop.tag-router")
    condition = rule.tags[0].match
    assert condition is not None
    assert not condition[0].matches({"env": "x" * 100_000})
