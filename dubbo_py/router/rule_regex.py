"""Regular expressions written in rules, compiled for RE2 (linear-time matching).

Dubbo evaluates a rule's ``regex`` with Java's backtracking engine, where a pattern such as
``((.+)+)+Q`` against a long value takes exponential time; in a consumer that would hold the
notification thread (and the GIL) for good. dubbo-py compiles every rule regex with RE2
(PyPI ``google-re2``), whose matching time is linear in the input whatever the pattern.

RE2's syntax is Java's for everything rules use in practice (classes, ``\\d \\w \\s``, ``\\p{L}``,
anchors, ``{n,m}``, ``(?i)``, named groups ``(?<name>...)``, ``\\Q...\\E``). What it lacks needs
backtracking; such a pattern is refused with a :class:`RegexError` naming the construct and its
column (1-based, within the pattern), instead of being accepted and left to spin:

- backreferences (``\\1``, ``\\k<name>``, ``(?P=name)``),
- lookaround (``(?=``, ``(?!``, ``(?<=``, ``(?<!``),
- atomic groups ``(?>...)`` and possessive quantifiers (``a++``, ``a*+``, ``a?+``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import re2

__all__ = ["MAX_PATTERN_CHARS", "RegexError", "RulePattern", "compile_rule_regex"]

#: A rule regex longer than this is refused (RE2 would also refuse a program past its memory
#: budget; this gives the reason in plain words first).
MAX_PATTERN_CHARS = 4096

#: RE2's memory budget for one compiled rule regex (its default is 8 MiB).
_MAX_MEM = 8 << 20

# Constructs RE2 lacks, with what to call them in an error. Order matters: longer first.
_UNSUPPORTED: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\(\?<[=!]"), "a lookbehind"),
    (re.compile(r"\(\?[=!]"), "a lookahead"),
    (re.compile(r"\(\?>"), "an atomic group"),
    (re.compile(r"\(\?P=\w+\)"), "a backreference"),
    (re.compile(r"\\k<\w*>"), "a backreference"),
    (re.compile(r"\\[1-9]"), "a backreference"),
    (re.compile(r"(?:[*+?}])\+"), "a possessive quantifier"),
)


class RegexError(ValueError):
    """A rule regex that cannot be used; ``column`` is 1-based within the pattern, if known."""

    def __init__(self, pattern: str, reason: str, column: int | None = None) -> None:
        self.pattern = pattern
        self.reason = reason
        self.column = column
        where = f" at column {column}" if column is not None else ""
        shown = pattern if len(pattern) <= 80 else pattern[:77] + "..."
        super().__init__(f"regex {shown!r}{where}: {reason}")


@dataclass(frozen=True, eq=False)
class RulePattern:
    """A compiled rule regex; :meth:`fullmatch` is Java's ``String.matches``."""

    pattern: str
    _compiled: Any

    def fullmatch(self, value: str) -> bool:
        """Whether the whole of ``value`` matches (linear in ``len(value)``)."""
        return self._compiled.fullmatch(value) is not None


def _escaped_at(pattern: str, index: int) -> bool:
    """Whether ``pattern[index]`` is preceded by an odd number of backslashes."""
    count = 0
    while index - count - 1 >= 0 and pattern[index - count - 1] == "\\":
        count += 1
    return count % 2 == 1


def _unsupported(pattern: str) -> tuple[str, int] | None:
    """The first construct RE2 lacks (its name and 1-based column), outside ``[...]``."""
    found: list[tuple[int, str]] = []
    for regex, name in _UNSUPPORTED:
        for match in regex.finditer(pattern):
            start = match.start()
            if name.startswith("a possessive"):
                start += 1  # point at the second quantifier character
                if _escaped_at(pattern, match.start()):
                    continue
            elif _escaped_at(pattern, start):
                continue
            found.append((start, name))
            break
    if not found:
        return None
    start, name = min(found)
    return name, start + 1


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # the RegexError carries the reason; no stray stderr lines
    options.max_mem = _MAX_MEM
    return options


def compile_rule_regex(pattern: str) -> RulePattern:
    """Compile a rule regex for RE2; :class:`RegexError` naming what is wrong and where."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise RegexError(pattern, f"longer than {MAX_PATTERN_CHARS} characters")
    try:
        compiled = re2.compile(pattern, options=_options())
    except re2.error as exc:
        lacking = _unsupported(pattern)
        if lacking is not None:
            name, column = lacking
            raise RegexError(
                pattern,
                f"{name} is not supported: rule regexes run on RE2, which matches in linear "
                "time and has no backtracking constructs",
                column,
            ) from None
        raise RegexError(pattern, _reason(exc), _column(pattern, exc)) from None
    return RulePattern(pattern, compiled)


def _reason(exc: Exception) -> str:
    message = exc.args[0] if exc.args else str(exc)
    if isinstance(message, bytes):
        message = message.decode("utf-8", "replace")
    return f"does not compile: {message}"


def _column(pattern: str, exc: Exception) -> int | None:
    """RE2 names the offending fragment after the last ': '; find it in the pattern."""
    message = _reason(exc)
    _, sep, fragment = message.rpartition(": ")
    if not sep or not fragment:
        return None
    index = pattern.find(fragment)
    return index + 1 if index >= 0 else None
