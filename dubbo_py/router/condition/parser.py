"""Condition rule text -> :class:`ConditionRule`, with errors that say what and where.

The grammar lives in ``grammar.lark`` (LALR, so parsing is linear and fast). Keys and values are
single tokens in the grammar and are checked here, so an error can name the key or value at
fault. Every failure is a :class:`~dubbo_py.router.base.RuleError` carrying the rule's source
and the 1-based line and column of the problem.

Decisions that follow Apache Dubbo 3.3 (``ConditionStateRouter.init``/``parseRule``):

* the text is split at the first ``=>``; with no ``=>`` at all the whole text is the then side
  (the rule applies to every invocation);
* an empty or ``true`` when side matches every invocation; an empty or ``false`` then side
  selects no provider;
* ``consumer.`` and ``provider.`` are dropped from keys (Dubbo drops them anywhere in the text;
  we drop them only as key prefixes so values such as ``consumer.example.com`` survive).
"""

from __future__ import annotations

import re
import threading
from functools import cache
from importlib.resources import files
from weakref import WeakValueDictionary

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from dubbo_py.errors import RuleError
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

__all__ = ["parse_key", "parse_rule", "parse_side", "parse_value"]

_KEY_PREFIXES = ("consumer.", "provider.")
_ARGUMENT_KEY = re.compile(r"arguments\[(\d+)\]((?:\.[A-Za-z_][A-Za-z0-9_]*)*)")
_ATTACHMENT_KEY = re.compile(r"attachments\[([^\[\]]+)\]")
_RANGE = re.compile(r"([+-]?\d+)?~([+-]?\d+)?")
_REF_NAME = re.compile(r"[^~$]+")

_TERMINALS = {
    "ARROW": "'=>'",
    "NE": "'!='",
    "EQ": "'='",
    "AMP": "'&'",
    "COMMA": "','",
    "WORD": "a key or value",
    "$END": "end of rule",
}


#: Rules parsed and still in use somewhere, by text: the same text gives the same object (a
#: rule is immutable and binds per consumer and snapshot), so a fleet of services carrying the
#: same rules keeps one parsed copy of each. Weak: a rule no router holds any more is dropped.
_SHARED: WeakValueDictionary[str, ConditionRule] = WeakValueDictionary()
_SHARED_LOCK = threading.Lock()


@cache
def _parser() -> Lark:
    grammar = files("dubbo_py.router.condition").joinpath("grammar.lark").read_text("utf-8")
    return Lark(grammar, parser="lalr", lexer="basic")


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, column


def _error(text: str, source: str, pos: int, reason: str) -> RuleError:
    line, column = _line_col(text, pos)
    return RuleError(reason, source=source, line=line, column=column)


def parse_rule(text: str, source: str = "") -> ConditionRule:
    """Parse ``when => then`` rule text; raises :class:`RuleError` (never anything else).

    A text already parsed, whose rule is still held somewhere, gives that same rule object
    (errors are never kept: a bad text raises, naming ``source``, every time)."""
    if not isinstance(text, str):
        raise RuleError(f"a rule must be text, not {type(text).__name__}", source=source)
    with _SHARED_LOCK:
        shared = _SHARED.get(text)
    if shared is not None:
        return shared
    rule = _parse_rule(text, source)
    with _SHARED_LOCK:
        # Two threads parsing the same text at once: the first one stored wins.
        return _SHARED.setdefault(text, rule)


def _parse_rule(text: str, source: str) -> ConditionRule:
    if not text.strip():
        raise RuleError("the rule is empty", source=source)
    tree = _parse_tree(text, source)
    if tree.data == "bare_rule":
        # Dubbo: no "=>" means the whole text is the then side, applying to every invocation.
        return ConditionRule((), _then_side(_subtree(tree.children[0]), text, source))
    when: Tree[Token] | None = None
    then: Tree[Token] | None = None
    seen_arrow = False
    for child in tree.children:
        if isinstance(child, Token):
            seen_arrow = True
        elif seen_arrow:
            then = child
        else:
            when = child
    return ConditionRule(
        _when_side(when, text, source) if when is not None else (),
        _then_side(then, text, source) if then is not None else None,
    )


def parse_side(text: str, source: str = "", *, then: bool) -> tuple[Clause, ...] | None:
    """Parse one side on its own (the ``match:`` strings of a v3.1 YAML rule).

    Empty text gives ``()`` for a when side (every invocation) and ``None`` for a then side
    (no provider), as do ``true`` and ``false`` respectively.
    """
    if not isinstance(text, str):
        raise RuleError(f"a condition must be text, not {type(text).__name__}", source=source)
    if not text.strip():
        return None if then else ()
    tree = _parse_tree(text, source)
    if tree.data != "bare_rule":
        arrow = next(t for t in tree.children if isinstance(t, Token))
        raise _error(text, source, arrow.start_pos or 0, "'=>' is not allowed here")
    side = _subtree(tree.children[0])
    return _then_side(side, text, source) if then else _when_side(side, text, source)


def _parse_tree(text: str, source: str) -> Tree[Token]:
    try:
        tree: Tree[Token] = _parser().parse(text)
    except UnexpectedCharacters as exc:
        pos = exc.pos_in_stream or 0
        char = text[pos] if pos < len(text) else ""
        hint = " (did you mean '!='?)" if char == "!" else ""
        raise _error(text, source, pos, f"unexpected character {char!r}{hint}") from None
    except UnexpectedToken as exc:
        raise _token_error(text, source, exc) from None
    except UnexpectedInput as exc:  # pragma: no cover - the LALR parser raises the two above
        raise RuleError(f"cannot parse the rule: {exc}", source=source) from None
    return tree


def _subtree(node: Tree[Token] | Token) -> Tree[Token]:
    assert isinstance(node, Tree)
    return node


def _token_error(text: str, source: str, exc: UnexpectedToken) -> RuleError:
    token = exc.token
    at_end = token.type == "$END"
    pos = len(text.rstrip()) if at_end else (token.start_pos or 0)
    found = "the end of the rule" if at_end else repr(str(token.value))
    before = text[:pos].rstrip()
    if before.endswith("!="):
        reason = f"expected a value after '!=', found {found}"
    elif before.endswith("=>"):
        reason = f"expected a condition (key = value) after '=>', found {found}"
    elif before.endswith("="):
        reason = f"expected a value after '=', found {found}"
    elif before.endswith(","):
        reason = f"expected a value after ',', found {found}"
    elif before.endswith("&"):
        reason = f"expected a condition (key = value) after '&', found {found}"
    elif token.type == "ARROW":
        reason = "a rule has only one '=>'"
    elif token.type == "WORD" and "EQ" in exc.expected:
        word = before.split()[-1] if before.split() else ""
        reason = f"expected '=' or '!=' after {word!r}, found {found}"
    elif token.type == "WORD":
        reason = f"expected ',', '&' or '=>' before {found} (values cannot contain spaces)"
    elif not before:
        reason = f"a rule cannot start with {found}"
    else:
        expected = ", ".join(sorted(_TERMINALS.get(t, t) for t in exc.expected))
        reason = f"unexpected {found}; expected {expected}"
    return _error(text, source, pos, reason)


def _when_side(side: Tree[Token], text: str, source: str) -> tuple[Clause, ...]:
    refusal = "'false' is not a when condition (to disable a rule, set enabled=false)"
    if _accepted_constant(side, text, source, "true", refused="false", refusal=refusal):
        return ()
    return _clauses(side, text, source)


def _then_side(side: Tree[Token], text: str, source: str) -> tuple[Clause, ...] | None:
    refusal = "'true' is not a then condition (leave the when side empty or omit the rule)"
    if _accepted_constant(side, text, source, "false", refused="true", refusal=refusal):
        return None
    return _clauses(side, text, source)


def _accepted_constant(
    side: Tree[Token], text: str, source: str, accepted: str, *, refused: str, refusal: str
) -> bool:
    """Whether ``side`` is the lone word ``accepted``; False when it is clauses. Any other lone
    word is an error: ``refused`` (the other constant) with ``refusal``, else a word that
    lacks its operator."""
    if side.data != "constant":
        return False
    word = side.children[0]
    assert isinstance(word, Token)
    if str(word) == accepted:
        return True
    if str(word) == refused:
        raise _error(text, source, word.start_pos or 0, refusal)
    raise _missing_operator(word, text, source)


def _missing_operator(word: Token, text: str, source: str) -> RuleError:
    return _error(
        text,
        source,
        (word.start_pos or 0) + len(word),
        f"expected '=' or '!=' after {str(word)!r}",
    )


def _clauses(side: Tree[Token], text: str, source: str) -> tuple[Clause, ...]:
    clauses: list[Clause] = []
    for clause in side.children:
        if not isinstance(clause, Tree):
            continue  # the '&' tokens
        key_token, op_tree, values_tree = clause.children
        assert isinstance(key_token, Token) and isinstance(op_tree, Tree)
        assert isinstance(values_tree, Tree)
        op = op_tree.children[0]
        assert isinstance(op, Token)
        key = _key(key_token, text, source)
        values = tuple(
            _value(v, text, source)
            for v in values_tree.children
            if isinstance(v, Token) and v.type == "WORD"
        )
        clauses.append(Clause(key, op.type == "NE", values))
    return tuple(clauses)


def _key(token: Token, text: str, source: str) -> Key:
    try:
        return parse_key(str(token))
    except ValueError as exc:
        raise _error(text, source, token.start_pos or 0, str(exc)) from None


def _value(token: Token, text: str, source: str) -> Value:
    try:
        return parse_value(str(token))
    except ValueError as exc:
        raise _error(text, source, token.start_pos or 0, str(exc)) from None


def parse_key(raw: str) -> Key:
    """Classify one key token; raises ``ValueError`` with the reason when it is malformed."""
    key = raw
    while key.startswith(_KEY_PREFIXES):
        key = key.split(".", 1)[1]
    if not key:
        raise ValueError(f"key {raw!r} names nothing after its prefix")
    if key in ("method", "methods"):
        return Key(KeyKind.METHOD, key)
    # Dubbo hands every key starting with "arguments" / "attachments" to its argument /
    # attachment matcher, which reads a key without a valid index or name as "not found".
    if key.startswith("arguments"):
        match = _ARGUMENT_KEY.fullmatch(key)
        if match is None:
            return Key(KeyKind.ABSENT, key)
        path = tuple(p for p in match.group(2).split(".") if p)
        return Key(KeyKind.ARGUMENT, "arguments", int(match.group(1)), path)
    if key.startswith("attachments"):
        match = _ATTACHMENT_KEY.fullmatch(key)
        if match is None:
            return Key(KeyKind.ABSENT, key)
        return Key(KeyKind.ATTACHMENT, match.group(1))
    return Key(KeyKind.PARAM, key)


def parse_value(raw: str) -> Value:
    """Classify one value token; raises ``ValueError`` with the reason when it is malformed.

    As in Dubbo, a value containing ``~`` is a range (``RangeValuePattern`` is consulted before
    the wildcard pattern), a value starting with ``$`` is a consumer-URL reference, and anything
    else is a glob.
    """
    if "~" in raw:
        match = _RANGE.fullmatch(raw)
        if match is None or (match.group(1) is None and match.group(2) is None):
            raise ValueError(
                f"bad range {raw!r}: expected low~high, ~high or low~ with integer bounds"
            )
        low = None if match.group(1) is None else int(match.group(1))
        high = None if match.group(2) is None else int(match.group(2))
        if low is not None and high is not None and low > high:
            raise ValueError(f"empty range {raw!r}: the low bound is above the high bound")
        return Range(low, high)
    if raw.startswith("$"):
        name = raw[1:]
        if not _REF_NAME.fullmatch(name):
            raise ValueError(f"bad reference {raw!r}: expected $ followed by a parameter name")
        return Ref(name)
    return Glob(raw)
