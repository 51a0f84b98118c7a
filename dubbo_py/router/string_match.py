"""String matchers of Dubbo 3 rules (``exact``, ``prefix``, ``regex``, ``wildcard``, ``empty``,
``noempty``), as used by tag rules' ``match`` conditions.

Semantics follow Apache Dubbo's ``StringMatch`` and ``ParamMatch``
(dubbo-cluster, router/mesh/rule/virtualservice/match and router/tag/model):

- ``exact``: equal; ``prefix``: starts with; ``regex``: the *whole* value matches (Java's
  ``String.matches``; here RE2 syntax, matched in linear time: see
  :mod:`dubbo_py.router.rule_regex` for what is refused);
- ``wildcard``: only ``*`` is a wildcard (matches any value); any other pattern must be equal;
- ``empty``: the value is missing or empty; ``noempty``: present and non-empty;
- a :class:`ParamMatch` hands a *missing* parameter to its matcher as Dubbo's does (both
  ``ParamMatch`` classes pass the URL's value, null included): ``empty`` matches it, every
  other matcher does not (Dubbo 3.3.6's own routers, tests/router/test_java_router_oracle.py).

Dubbo picks the first set field when several are given; here a matcher must name exactly one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from dubbo_py.router.rule_regex import RegexError, RulePattern, compile_rule_regex

__all__ = ["MATCH_KINDS", "ParamMatch", "StringMatch", "parse_string_match"]

MatchKind = Literal["exact", "prefix", "regex", "wildcard", "empty", "noempty"]
#: The matcher names, in the order Dubbo tries them.
MATCH_KINDS: tuple[MatchKind, ...] = ("exact", "prefix", "regex", "wildcard", "empty", "noempty")


@dataclass(frozen=True)
class StringMatch:
    """One string condition; build with :func:`parse_string_match`."""

    kind: MatchKind
    pattern: str
    _regex: RulePattern | None = field(default=None, compare=False, repr=False)

    def matches(self, value: str | None) -> bool:
        """Whether ``value`` (``None`` = absent) satisfies this condition."""
        if self.kind == "empty":
            return not value
        if value is None:
            return False
        if self.kind == "exact":
            return value == self.pattern
        if self.kind == "prefix":
            return value.startswith(self.pattern)
        if self.kind == "regex":
            assert self._regex is not None
            return self._regex.fullmatch(value)
        if self.kind == "wildcard":
            return self.pattern == "*" or value == self.pattern
        return value != ""  # noempty


def parse_string_match(spec: Mapping[str, object]) -> StringMatch:
    """Read ``{exact: v}`` / ``{prefix: v}`` / ... ; ValueError naming the problem."""
    if not isinstance(spec, Mapping):
        raise ValueError(f"expected a mapping with one of {', '.join(MATCH_KINDS)}")
    kinds = [k for k in MATCH_KINDS if spec.get(k) is not None]
    unknown = sorted(str(k) for k in spec if k not in MATCH_KINDS)
    if unknown:
        names = ", ".join(MATCH_KINDS)
        raise ValueError(f"unknown matcher {', '.join(unknown)} (use one of {names})")
    if len(kinds) != 1:
        raise ValueError(f"give exactly one of {', '.join(MATCH_KINDS)}")
    kind = kinds[0]
    raw = spec[kind]
    if isinstance(raw, bool):
        pattern = "true" if raw else "false"
    elif isinstance(raw, str | int | float):
        pattern = str(raw)
    else:
        raise ValueError(f"{kind}: expected a string, got {type(raw).__name__}")
    compiled = None
    if kind == "regex":
        try:
            compiled = compile_rule_regex(pattern)
        except RegexError as exc:
            raise ValueError(str(exc)) from None
    return StringMatch(kind, pattern, compiled)


@dataclass(frozen=True)
class ParamMatch:
    """``key`` of a provider's URL parameters must satisfy ``value`` (absent: only ``empty``
    matches)."""

    key: str
    value: StringMatch

    def matches(self, parameters: Mapping[str, str]) -> bool:
        """Whether the parameter ``key`` is present and satisfies the condition."""
        return self.value.matches(parameters.get(self.key))
