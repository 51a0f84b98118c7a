"""Matching: how a key's sample value is read and how it is tested against a clause's values.

Semantics follow Apache Dubbo 3.3's ``AbstractConditionMatcher``, ``WildcardValuePattern``
(``UrlUtils.isMatchGlobPattern``) and ``RangeValuePattern``:

* a key whose value is missing never matches, whatever the operator;
* clauses on the same key are merged, as Dubbo's parser does: the ``=`` values of all of them
  are alternatives, the ``!=`` values are all excluded, and an excluded value wins;
* ``$name`` is the consumer URL's ``name`` (resolved once, when the router is bound).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from dubbo_py.invocation import Invocation, field_names
from dubbo_py.router.condition.rule import Clause, Glob, Key, KeyKind, Range, Ref, Value
from dubbo_py.url import URL

__all__ = [
    "Matcher",
    "all_match",
    "argument_text",
    "glob_match",
    "invocation_reader",
    "merge_clauses",
    "range_match",
    "read_invocation",
    "reads_invocation",
    "request_field_reader",
    "sample_value",
    "url_sample",
]

_INTEGER = re.compile(r"[+-]?\d+")


def glob_match(pattern: str, value: str) -> bool:
    """Dubbo's ``isMatchGlobPattern``: ``*`` alone matches anything; otherwise only the *last*
    ``*`` is a wildcard (prefix ``a*``, suffix ``*a`` or ``pre*suf``), and a pattern without
    one must equal the value. An empty pattern matches only an empty value."""
    if pattern == "*":
        return True
    if not pattern or not value:
        return not pattern and not value
    star = pattern.rfind("*")
    if star < 0:
        return value == pattern
    if star == len(pattern) - 1:
        return value.startswith(pattern[:star])
    if star == 0:
        return value.endswith(pattern[1:])
    return value.startswith(pattern[:star]) and value.endswith(pattern[star + 1 :])


def range_match(low: int | None, high: int | None, value: str) -> bool:
    """True when ``value`` is an integer within the inclusive bounds (``None`` is open)."""
    text = value.strip()
    if not _INTEGER.fullmatch(text):
        return False
    number = int(text)
    return (low is None or number >= low) and (high is None or number <= high)


def url_sample(url: URL) -> dict[str, str]:
    """What conditions read from a URL: its parameters plus the special keys protocol,
    username, password, host, port, path and address (Dubbo's ``toOriginalMap``).

    ``application`` is the URL's own application; a URL that was merged the Dubbo 2.7 way (the
    consumer's application written over the provider's, the provider's kept as
    ``remote.application``) still reads the provider's, as Dubbo 3's ``ServiceAddressURL`` does.
    """
    sample = url.to_map()
    remote = url.parameters.get("remote.application")
    if remote:
        sample["application"] = remote
    return sample


def sample_value(url: URL, name: str) -> str | None:
    """``url_sample(url).get(name)`` without building the whole sample (binding a rule to many
    providers reads one key of each)."""
    params = url.parameters
    if name == "application":
        return params.get("remote.application") or params.get("application")
    if name in ("protocol", "username", "password", "host", "path"):
        return getattr(url, name) or params.get(name)
    if name == "port":
        return str(url.port) if url.port else params.get(name)
    if name == "address":
        return url.address if url.host else params.get(name)
    return params.get(name)


def argument_text(value: Any) -> str | None:
    """An argument as a condition sees it: Java's ``String.valueOf`` spelling for booleans
    (``true``/``false``), UTF-8 text for bytes, ``str()`` otherwise; ``None`` is missing."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


def _walk(value: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        if value is None:
            return None
        value = value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)
    return value


def _argument(invocation: Invocation, key: Key) -> str | None:
    arguments = invocation.arguments
    if key.index >= len(arguments):
        return None
    return argument_text(_walk(arguments[key.index], key.path))


def read_invocation(invocation: Invocation, key: Key) -> str | None:
    """The invocation's value for an invocation-reading key (``None`` when missing)."""
    if key.kind is KeyKind.METHOD:
        return invocation.method
    if key.kind is KeyKind.ARGUMENT:
        try:
            return _argument(invocation, key)
        except Exception:  # a request whose fields cannot be read is a missing value
            return None
    if key.kind is KeyKind.ATTACHMENT:
        value = invocation.attachments.get(key.name)
        return None if value is None else str(value)
    if key.kind is KeyKind.ABSENT:
        return None
    raise ValueError(f"{key.text()} does not read the invocation")


def invocation_reader(key: Key) -> Callable[[Invocation], str | None]:
    """A function reading ``key`` from an invocation, with :func:`read_invocation`'s result.

    Rules run their readers on every call, so each is specialised here: the method is a
    C-level attribute read, and ``arguments[N]`` remembers per request message type which field
    it is and reads that one field, instead of building the whole argument tuple."""
    if key.kind is KeyKind.METHOD:
        return attrgetter("method")
    if key.kind is KeyKind.ATTACHMENT:
        name = key.name

        def attachment(invocation: Invocation) -> str | None:
            value = invocation.attachments.get(name)
            return value if value is None or type(value) is str else str(value)

        return attachment
    if key.kind is not KeyKind.ARGUMENT:
        return lambda invocation: read_invocation(invocation, key)
    index, path = key.index, key.path
    #: Message type -> the name of its field ``index`` (learnt on a type's first call).
    field_of: dict[type, str] = {}

    def argument(invocation: Invocation) -> str | None:
        request = invocation.request
        name = field_of.get(type(request))
        if name is None or invocation.explicit_arguments is not None:
            names = field_names(request)
            if names is not None and index < len(names):
                field_of[type(request)] = names[index]
            return read_invocation(invocation, key)
        try:
            value = getattr(request, name)
            if path:
                value = _walk(value, path)
        except Exception:  # as read_invocation: an unreadable field is a missing value
            return None
        return value if type(value) is str else argument_text(value)

    return argument


def _repeated(field: Any) -> bool:
    flag = getattr(field, "is_repeated", None)  # protobuf 6+; `label` is gone in 7
    if flag is None:
        return bool(field.label == field.LABEL_REPEATED)
    return bool(flag)


def request_field_reader(request_type: type, key: Key) -> Callable[[Any], Any] | None:
    """A C-level reader (an ``attrgetter``) of ``arguments[N].path`` for requests of
    ``request_type`` that gives what :func:`read_invocation` gives, or ``None`` when no plain
    attribute read does: that needs a protobuf message whose field N and each field along the
    path exist and are singular, the last one a string."""
    if key.kind is not KeyKind.ARGUMENT:
        return None
    descriptor = getattr(request_type, "DESCRIPTOR", None)
    fields = getattr(descriptor, "fields", None)
    if fields is None or key.index >= len(fields):
        return None
    field = fields[key.index]
    names = [field.name]
    for name in key.path:
        message = field.message_type
        if message is None or _repeated(field) or name not in message.fields_by_name:
            return None
        field = message.fields_by_name[name]
        names.append(name)
    if field.type != field.TYPE_STRING or _repeated(field):
        return None
    return attrgetter(".".join(names))


def reads_invocation(key: Key, *, when: bool) -> bool:
    """True when ``key`` is read from the invocation rather than a URL.

    ``method``/``methods`` read the invoked method on the when side and the provider URL's
    parameter on the then side, as in Dubbo (where the then side gets no invocation).
    """
    if key.kind is KeyKind.METHOD:
        return when
    return key.kind in (KeyKind.ARGUMENT, KeyKind.ATTACHMENT, KeyKind.ABSENT)


@dataclass(frozen=True, slots=True)
class Matcher:
    """All the clauses of one side on one key, merged; ``$`` references already resolved."""

    key: Key
    matches: tuple[Glob | Range, ...]
    mismatches: tuple[Glob | Range, ...]

    def test(self, value: str | None) -> bool:
        """Does ``value`` (``None`` = the key is missing) satisfy this key's clauses?"""
        if value is None:
            return False
        for pattern in self.mismatches:
            if _value_match(pattern, value):
                return False
        if not self.matches:
            return bool(self.mismatches)
        return any(_value_match(pattern, value) for pattern in self.matches)


def _value_match(pattern: Glob | Range, value: str) -> bool:
    if isinstance(pattern, Range):
        return range_match(pattern.low, pattern.high, value)
    return glob_match(pattern.pattern, value)


def _resolve(value: Value, consumer: Mapping[str, str]) -> Glob | Range:
    if isinstance(value, Ref):
        # Dubbo: a reference the consumer URL lacks becomes an empty pattern, which matches
        # only an empty value.
        return Glob(consumer.get(value.name, ""))
    return value


def merge_clauses(clauses: Iterable[Clause], consumer: Mapping[str, str]) -> tuple[Matcher, ...]:
    """One :class:`Matcher` per distinct key, in order of first appearance, with ``$``
    references resolved against the consumer's URL sample."""
    matches: dict[Key, list[Glob | Range]] = {}
    mismatches: dict[Key, list[Glob | Range]] = {}
    for clause in clauses:
        target = mismatches if clause.negated else matches
        matches.setdefault(clause.key, [])
        mismatches.setdefault(clause.key, [])
        target[clause.key].extend(_resolve(v, consumer) for v in clause.values)
    return tuple(Matcher(k, tuple(matches[k]), tuple(mismatches[k])) for k in matches)


def all_match(matchers: Sequence[Matcher], sample: Mapping[str, str]) -> bool:
    """Do all URL-reading matchers hold for a URL sample?"""
    return all(m.test(sample.get(m.key.name)) for m in matchers)
