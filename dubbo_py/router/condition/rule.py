"""The parsed form of a condition rule (``when => then``) and its canonical text.

A rule is two sides; each side is a conjunction of clauses ``key = v1,v2`` or ``key != v1,v2``.
The values of one clause are alternatives (OR); the clauses of one side must all hold (AND).
``ConditionRule.then is None`` means "no provider" (an empty or ``false`` then side); an empty
``when`` means "every invocation" (an empty or ``true`` when side), as in Apache Dubbo.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

__all__ = [
    "Clause",
    "ConditionRule",
    "Glob",
    "Key",
    "KeyKind",
    "Range",
    "Ref",
    "Value",
]


class KeyKind(Enum):
    """Where a key's sample value comes from."""

    #: A URL parameter or a special URL key (host, port, address, protocol, path, application).
    PARAM = "param"
    #: ``method`` / ``methods``: the invoked method in a when side, a URL parameter in a then side.
    METHOD = "method"
    #: ``arguments[N]`` (optionally ``.field.field``): the call's N-th argument.
    ARGUMENT = "argument"
    #: ``attachments[name]``: a call attachment.
    ATTACHMENT = "attachment"
    #: ``arguments`` or ``attachments`` without a valid index or name (``arguments``,
    #: ``arguments[x]``, ``attachments[]``): accepted, as Dubbo accepts it, and like Dubbo's
    #: "not found" value it never matches.
    ABSENT = "absent"


@dataclass(frozen=True, slots=True)
class Key:
    """A condition key. ``name`` is the parameter/attachment name (or ``method``/``methods``);
    ``index`` and ``path`` locate an argument (``arguments[index].path[0].path[1]``)."""

    kind: KeyKind
    name: str = ""
    index: int = 0
    path: tuple[str, ...] = ()

    def text(self) -> str:
        """The key as written in canonical rule text."""
        if self.kind is KeyKind.ARGUMENT:
            return f"arguments[{self.index}]" + "".join(f".{p}" for p in self.path)
        if self.kind is KeyKind.ATTACHMENT:
            return f"attachments[{self.name}]"
        return self.name


@dataclass(frozen=True, slots=True)
class Glob:
    """A literal or a pattern with ``*`` (Dubbo's ``UrlUtils.isMatchGlobPattern``)."""

    pattern: str

    def text(self) -> str:
        """The value as written."""
        return self.pattern


@dataclass(frozen=True, slots=True)
class Ref:
    """``$name``: the consumer URL's value of ``name``, then matched as a glob."""

    name: str

    def text(self) -> str:
        """The value as written."""
        return f"${self.name}"


@dataclass(frozen=True, slots=True)
class Range:
    """``low~high``, ``~high`` or ``low~``: an inclusive integer range (a bound may be open)."""

    low: int | None
    high: int | None

    def text(self) -> str:
        """The value as written."""
        low = "" if self.low is None else str(self.low)
        high = "" if self.high is None else str(self.high)
        return f"{low}~{high}"


Value = Glob | Ref | Range


@dataclass(frozen=True, slots=True)
class Clause:
    """``key = values`` (``negated`` False) or ``key != values`` (``negated`` True)."""

    key: Key
    negated: bool
    values: tuple[Value, ...]

    def text(self) -> str:
        """The clause in canonical text."""
        op = "!=" if self.negated else "="
        return f"{self.key.text()} {op} {','.join(v.text() for v in self.values)}"


@dataclass(frozen=True, slots=True, weakref_slot=True)
class ConditionRule:
    """A parsed rule. ``when == ()`` matches every invocation; ``then is None`` blocks.

    Immutable, so one object serves every router of the same text: :func:`parse_rule
    <dubbo_py.router.condition.parser.parse_rule>` hands out the rule already parsed while one
    is in use (a consumer of 1 000 services with the same 20 rules holds 20, not 20 000).
    """

    when: tuple[Clause, ...]
    then: tuple[Clause, ...] | None
    #: What binding derives from the rule alone, whatever the consumer (filled by the router
    #: on first bind, for a rule without ``$`` references: its merged matchers and call probe).
    memo: dict[str, Any] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        if self.then == ():
            raise ValueError("a then side has at least one clause; use None to block")

    @property
    def references(self) -> bool:
        """True when a value is a ``$`` reference (the rule then reads per consumer)."""
        sides = (self.when, self.then or ())
        return any(isinstance(v, Ref) for side in sides for c in side for v in c.values)

    @property
    def blocks(self) -> bool:
        """True when the then side selects no provider at all (empty or ``false``)."""
        return self.then is None

    def text(self) -> str:
        """Canonical text: parses back to an equal rule."""
        when = " & ".join(c.text() for c in self.when)
        then = "false" if self.then is None else " & ".join(c.text() for c in self.then)
        return f"{when} => {then}".strip()
