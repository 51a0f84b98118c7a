"""The ``match`` condition of a Dubbo 3 configurator item (``configVersion: v3.0``).

Follows Apache Dubbo 3.3's ``ConditionMatch`` (dubbo-cluster, configurator/parser/model) and the
matchers it reads (router/mesh/rule/virtualservice/match)::

    match:
      address: {cird: 10.0.0.0/8}          # the host the rule is judged for (see below)
      providerAddress: {exact: "10.0.0.5:20880"}   # the provider URL's host:port
      service: {oneof: [{exact: demo.Greeter}]}    # the URL's service key group/interface:version
      app: {oneof: [{prefix: shop-}]}              # the URL's application
      param:                                       # URL parameters, every one must match
        - key: zone
          value: {exact: a}

Every condition given must hold. ``address`` is matched against a *host* (the provider's host
for a provider-side item, the consumer's own host for a consumer-side one), never ``host:port``,
as in Dubbo. String matches are Dubbo's ``StringMatch`` (:mod:`dubbo_py.router.string_match`:
exact, prefix, regex -- RE2, whole value --, wildcard, empty, noempty); when a matcher names
several kinds Dubbo uses the first in that order, and so does this module (the others are
reported as not acted on). Unlike the tag router's, a ``param`` condition hands a *missing*
parameter to the matcher as Dubbo's configurator does, so ``empty`` matches a parameter that is
not set. Address matches are Dubbo's ``AddressMatch``: ``cird`` (an address expression: CIDR,
``10.0.0.*``, ``10.0.0.1-9``, with an optional port; :mod:`dubbo_py.router.address_pattern`),
else ``wildcard`` (``*`` / ``0.0.0.0`` anything, else Dubbo's one-star glob), else ``exact``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dubbo_py.router.address_pattern import AddressPattern, parse_address_pattern
from dubbo_py.router.string_match import MATCH_KINDS, StringMatch, parse_string_match

__all__ = [
    "AddressMatch",
    "ConditionMatch",
    "ListStringMatch",
    "MatchError",
    "ParamCondition",
    "glob_matches",
    "parse_condition_match",
]

#: The fields of a ``match`` mapping, as Dubbo's ``ConditionMatch`` has them.
MATCH_FIELDS = ("address", "providerAddress", "service", "app", "param")
_ADDRESS_KINDS = ("cird", "wildcard", "exact")
_ANY = ("*", "0.0.0.0")


class MatchError(ValueError):
    """A ``match`` that cannot be read; ``where`` is the path below ``match``
    (``("param", 0, "value")``)."""

    def __init__(self, where: tuple[str | int, ...], message: str) -> None:
        self.where = where
        self.message = message
        super().__init__(message)


def glob_matches(pattern: str, value: str) -> bool:
    """Dubbo's ``UrlUtils.isMatchGlobPattern`` without ``$`` references: ``*`` matches
    anything; otherwise the *last* ``*`` splits the pattern into a prefix (up to the first
    ``*``) and a suffix the value must start and end with; no ``*``: equal."""
    if pattern == "*":
        return True
    if not pattern or not value:
        return not pattern and not value
    last = pattern.rfind("*")
    if last == -1:
        return value == pattern
    if last == len(pattern) - 1:
        return value.startswith(pattern[:last])
    if last == 0:
        return value.endswith(pattern[1:])
    return value.startswith(pattern[: pattern.find("*")]) and value.endswith(pattern[last + 1 :])


@dataclass(frozen=True, slots=True)
class AddressMatch:
    """Dubbo's ``AddressMatch``: the first of ``cird``, ``wildcard``, ``exact`` given decides."""

    kind: str  # "cird" | "wildcard" | "exact"
    pattern: str
    cird: AddressPattern | None = None

    def matches(self, value: str | None) -> bool:
        """Whether ``value`` (a host, or ``host:port``; None: unknown) is covered."""
        if value is None:
            return False
        if self.kind == "cird":
            if value == self.pattern:
                return True
            assert self.cird is not None
            host, port = _split_address(value)
            return self.cird.matches(host, port)
        if self.kind == "wildcard":
            return self.pattern in _ANY or glob_matches(self.pattern, value)
        return value == self.pattern


def _split_address(value: str) -> tuple[str, int]:
    """``host:port`` (IPv6 bracketed) into host and port; a bare host gets port 0, which an
    expression without a port matches (Dubbo's ``NetUtils.matchIpExpression``)."""
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif value.count(":") == 1:
        host, _, port = value.partition(":")
    else:
        host, port = value, ""
    return host, int(port) if port.isdigit() else 0


@dataclass(frozen=True, slots=True)
class ListStringMatch:
    """Dubbo's ``ListStringMatch``: any of ``oneof`` matches."""

    oneof: tuple[StringMatch, ...]

    def matches(self, value: str | None) -> bool:
        """Whether one of the alternatives matches ``value``."""
        return any(m.matches(value) for m in self.oneof)


@dataclass(frozen=True, slots=True)
class ParamCondition:
    """One ``param`` entry: the URL parameter ``key`` (None when missing) must match."""

    key: str
    value: StringMatch

    def matches(self, parameters: Mapping[str, str]) -> bool:
        """Whether the parameter satisfies the condition (a missing one is handed on as None,
        so ``empty`` matches it)."""
        return self.value.matches(parameters.get(self.key))


@dataclass(frozen=True, slots=True)
class ConditionMatch:
    """A parsed ``match``; fields left out are not checked."""

    address: AddressMatch | None = None
    provider_address: AddressMatch | None = None
    service: ListStringMatch | None = None
    app: ListStringMatch | None = None
    param: tuple[ParamCondition, ...] = ()
    #: Fields and matcher kinds read but not acted on (``match.zone``, ``param[0].value.prefix``).
    unacted: tuple[str, ...] = ()

    def matches(
        self,
        host: str,
        address: str,
        service_key: str,
        application: str | None,
        parameters: Mapping[str, str],
    ) -> bool:
        """Dubbo's ``ConditionMatch.isMatch(host, url)``: ``host`` is what ``address`` is
        matched against, the rest are the configured URL's address, service key, application
        and parameters."""
        if self.address is not None and not self.address.matches(host):
            return False
        if self.provider_address is not None and not self.provider_address.matches(address):
            return False
        if self.service is not None and not self.service.matches(service_key):
            return False
        if self.app is not None and not self.app.matches(application):
            return False
        return all(p.matches(parameters) for p in self.param)


def parse_condition_match(data: object) -> ConditionMatch:
    """Read a ``match`` mapping; :class:`MatchError` naming the field for one that cannot be
    used (Dubbo's would fail when matched, or match nothing)."""
    if not isinstance(data, Mapping):
        raise MatchError((), "must be a mapping of address, providerAddress, service, app, param")
    unacted = [f"match.{k}" for k in data if k not in MATCH_FIELDS]
    address = _address(data, "address", unacted)
    provider_address = _address(data, "providerAddress", unacted)
    service = _list_string(data, "service", unacted)
    app = _list_string(data, "app", unacted)
    params: list[ParamCondition] = []
    raw = data.get("param")
    if raw is not None:
        if not isinstance(raw, list):
            raise MatchError(("param",), "must be a list of {key, value} entries")
        for i, entry in enumerate(raw):
            params.append(_param(entry, i, unacted))
    return ConditionMatch(address, provider_address, service, app, tuple(params), tuple(unacted))


def _address(data: Mapping[object, object], name: str, unacted: list[str]) -> AddressMatch | None:
    spec = data.get(name)
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise MatchError((name,), "must be a mapping with one of cird, wildcard, exact")
    given = [k for k in _ADDRESS_KINDS if spec.get(k) is not None]
    unacted.extend(f"match.{name}.{k}" for k in spec if k not in _ADDRESS_KINDS)
    if not given:
        raise MatchError((name,), "give one of cird, wildcard, exact")
    unacted.extend(f"match.{name}.{k} (Dubbo reads {given[0]} first)" for k in given[1:])
    kind = given[0]
    pattern = _text(spec[kind], (name, kind))
    if kind != "cird":
        return AddressMatch(kind, pattern)
    try:
        return AddressMatch(kind, pattern, parse_address_pattern(pattern))
    except ValueError as exc:
        raise MatchError((name, kind), str(exc)) from None


def _list_string(
    data: Mapping[object, object], name: str, unacted: list[str]
) -> ListStringMatch | None:
    spec = data.get(name)
    if spec is None:
        return None
    if not isinstance(spec, Mapping) or not isinstance(spec.get("oneof"), list):
        raise MatchError((name,), "must be {oneof: [<string match>, ...]}")
    unacted.extend(f"match.{name}.{k}" for k in spec if k != "oneof")
    matches = tuple(
        _string_match(m, (name, "oneof", i), unacted) for i, m in enumerate(spec["oneof"])
    )
    return ListStringMatch(matches)


def _param(entry: object, i: int, unacted: list[str]) -> ParamCondition:
    where: tuple[str | int, ...] = ("param", i)
    if not isinstance(entry, Mapping):
        raise MatchError(where, "must be a mapping {key, value}")
    key, value = entry.get("key"), entry.get("value")
    # Dubbo's ParamMatch matches nothing without both: the item would never apply, which is
    # never what its author meant, so it is refused here.
    if key is None or value is None:
        raise MatchError(where, "needs both key and value")
    unacted.extend(f"match.param[{i}].{k}" for k in entry if k not in ("key", "value"))
    return ParamCondition(
        _text(key, (*where, "key")), _string_match(value, (*where, "value"), unacted)
    )


def _string_match(spec: object, where: tuple[str | int, ...], unacted: list[str]) -> StringMatch:
    if not isinstance(spec, Mapping):
        raise MatchError(where, f"must be a mapping with one of {', '.join(MATCH_KINDS)}")
    given = [k for k in MATCH_KINDS if spec.get(k) is not None]
    path = _path(where)
    unacted.extend(f"match.{path}.{k}" for k in spec if k not in MATCH_KINDS)
    unacted.extend(f"match.{path}.{k} (Dubbo reads {given[0]} first)" for k in given[1:])
    if not given:
        raise MatchError(where, f"give one of {', '.join(MATCH_KINDS)}")
    try:
        return parse_string_match({given[0]: spec[given[0]]})
    except ValueError as exc:
        raise MatchError((*where, given[0]), str(exc)) from None


def _text(value: object, where: tuple[str | int, ...]) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise MatchError(where, f"must be a string, got {type(value).__name__}")


def _path(where: tuple[str | int, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in where).lstrip(".")
