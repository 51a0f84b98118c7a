"""Reading Dubbo 3 ``configurators`` documents into overrides
(:class:`~dubbo_py.cluster.override.Override`).

Follows Apache Dubbo 3.3's ``ConfigParser`` and ``ConfigItem`` (dubbo-cluster,
configurator/parser): the document's ``configVersion``, ``scope``, ``enabled`` and ``configs``;
each item's ``type``, ``enabled``, ``side``, ``addresses``, ``providerAddresses``,
``applications`` (service scope), ``services`` (application scope), ``match`` (v3.0,
:mod:`dubbo_py.cluster.configurator_match`) and ``parameters`` (``~key`` conditions before v3.0);
also Dubbo's other shape, a JSON array of ``override://`` URLs.

Besides the overrides, reading a document lists what it says that is not acted on -- fields
outside the model, a ``match`` Dubbo would not read, consumer parameters dubbo-py has no meaning
for, mock specs consumers will ignore -- each with its place and why: ``rules validate`` warns
about them and consumers and providers log them once per document version
(:func:`validate_document`). A document Dubbo accepts is never refused for them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from dubbo_py.cluster.configurator_match import MatchError, parse_condition_match
from dubbo_py.cluster.override import (
    ANYHOST,
    CONTROL_KEYS,
    Override,
    parse_override_url,
    split_parameters,
)
from dubbo_py.errors import RuleError
from dubbo_py.url import URL

if TYPE_CHECKING:
    from dubbo_py.yaml_loader import Path, YamlDocument

__all__ = [
    "CONSUMER_KEYS",
    "parse_configurators_yaml",
    "unacted_fields",
    "validate_document",
]

log = logging.getLogger("dubbo_py.cluster.configurators")

#: Item types whose ``enabled`` is the document's (Dubbo's ``ConfigItem.GENERAL_TYPE``).
GENERAL_TYPE = "general"
#: What a consumer-side override sets that dubbo-py consumers act on (service level, or
#: ``<method>.<key>``); any other parameter of a consumer-side item is named as not acted on.
CONSUMER_KEYS = frozenset(
    {
        "timeout",
        "retries",
        "loadbalance",
        "forks",
        "sticky",
        "cluster",
        "mock",
        "actives",
        "accesslog",
    }
)
#: The fields of a document and of an item that Dubbo 3.3 reads.
DOCUMENT_FIELDS = frozenset({"configVersion", "scope", "key", "enabled", "configs"})
ITEM_FIELDS = frozenset(
    {
        "type",
        "enabled",
        "addresses",
        "providerAddresses",
        "services",
        "applications",
        "parameters",
        "match",
        "side",
    }
)


def _strings(doc: YamlDocument, path: Path) -> tuple[str, ...]:
    value = doc.at(path) if _has(doc, path) else None
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(
        isinstance(v, str | int) and not isinstance(v, bool) for v in value
    ):
        return tuple(str(v) for v in value)
    raise doc.error(path, "must be a string or a list of strings")


def _has(doc: YamlDocument, path: Path) -> bool:
    parent = doc.at(path[:-1])
    return isinstance(parent, dict) and path[-1] in parent


def _truthy(value: object) -> bool:
    """Java's ``Boolean.parseBoolean(value.toString())``, which Dubbo reads ``enabled`` with."""
    return str(value).lower() == "true" if not isinstance(value, bool) else value


def parse_configurators_yaml(text: str, source: str = "") -> list[Override]:
    """Overrides from a Dubbo 3 ``configurators`` document; RuleError naming what is wrong,
    where (``configs[1].parameters``) and at which line and column."""
    # YAML is loaded with the first document: applying override URLs, or no override at all,
    # is what most consumers do, and needs no YAML parser in the process.
    from dubbo_py.yaml_loader import compile_yaml

    return compile_yaml(text, source, _configurators, error=RuleError, empty="rule is empty")


def unacted_fields(text: str, source: str = "") -> list[str]:
    """What a valid configurators document says that neither Dubbo 3.3 nor dubbo-py acts on,
    each with its place (``configs[0].match.zone``) and why: ``rules validate`` warns about
    each, consumers log them. RuleError when the document is not valid."""
    from dubbo_py.yaml_loader import compile_yaml

    return compile_yaml(text, source, _unacted, error=RuleError, empty="rule is empty")


#: (source, text) of the document versions whose unacted fields were logged (bounded).
_LOGGED: dict[tuple[str, str], None] = {}
_LOGGED_MAX = 256


def validate_document(text: str, source: str = "") -> list[Override]:
    """What a consumer or provider runs on each document version it receives:
    :func:`parse_configurators_yaml` (RuleError for an invalid one), and a warning naming each
    field not acted on (:func:`unacted_fields`), once per document version."""
    from dubbo_py.yaml_loader import compile_yaml

    overrides, unacted = compile_yaml(text, source, _read, error=RuleError, empty="rule is empty")
    if unacted and (source, text) not in _LOGGED:
        if len(_LOGGED) >= _LOGGED_MAX:
            _LOGGED.pop(next(iter(_LOGGED)))
        _LOGGED[(source, text)] = None
        log.warning(
            "override rule %s: not acted on: %s", source or "<document>", "; ".join(unacted)
        )
        # The same count as every rule kind's (dubbo_py_rule_fields_unread_total).
        from dubbo_py.rule_fields import count_unread

        count_unread("configurators", (u.split(":", 1)[0] for u in unacted))
    return overrides


def _configurators(doc: YamlDocument) -> list[Override]:
    return _read(doc)[0]


def _unacted(doc: YamlDocument) -> list[str]:
    return _read(doc)[1]


def _read(doc: YamlDocument) -> tuple[list[Override], list[str]]:
    source = doc.source
    if isinstance(doc.data, list):
        return _url_list(doc), []
    if not isinstance(doc.data, dict):
        raise doc.error((), "a configurators document must be a mapping")
    data = doc.data
    configs = data.get("configs")
    if not isinstance(configs, list):
        where: Path = ("configs",) if "configs" in data else ()
        raise doc.error(where, "'configs' must be a list of override entries")
    unacted = [
        f"{k}: not a field of a configurators document" for k in data if k not in DOCUMENT_FIELDS
    ]
    version = str(data.get("configVersion") or "")
    v3 = version.startswith("v3.0")
    application_scope = data.get("scope") == "application"
    enabled_all = _truthy(data["enabled"]) if data.get("enabled") is not None else True
    overrides = []
    for i, entry in enumerate(configs):
        at: Path = ("configs", i)
        place = f"configs[{i}]"
        if not isinstance(entry, dict):
            raise doc.error(at, "must be a mapping")
        params = entry.get("parameters", {})
        if not isinstance(params, dict) or not params:
            if "parameters" not in entry:
                raise doc.error(at, "needs parameters: a non-empty mapping of what to set")
            raise doc.error((*at, "parameters"), "must be a non-empty mapping")
        side = str(entry.get("side", "provider"))
        if side not in ("provider", "consumer"):
            # Dubbo accepts the document and the item applies to nothing: so here.
            unacted.append(
                f"{place}.side: {side!r} is neither provider nor consumer: applies to nothing"
            )
        for name in ("addresses", "providerAddresses", "services", "applications"):
            if isinstance(entry.get(name), str):
                unacted.append(
                    f"{place}.{name}: a string, read here as a list of one; Dubbo reads only a "
                    "list and ignores it (the item then applies to every one)"
                )
        if "side" not in entry:
            unacted.append(
                f"{place}: no side: dubbo-py applies it to providers, Dubbo 3.3 to nothing "
                "(write side: provider)"
            )
        unacted += [
            f"{place}.{k}: not a field of a configurators item"
            for k in entry
            if k not in ITEM_FIELDS
        ]
        kind = entry.get("type")
        if kind is None or str(kind) == GENERAL_TYPE:
            enabled = enabled_all
            if "enabled" in entry:
                unacted.append(
                    f"{place}.enabled: an item's enabled is read only with a type other than "
                    "general (as Dubbo does); the document's enabled decides"
                )
        else:
            enabled = _truthy(entry.get("enabled"))
            if "enabled" not in entry:
                unacted.append(
                    f"{place}: an item of type {kind!r} without enabled: true is off (as in Dubbo)"
                )
        values, conditions = split_parameters({str(k): _text(v) for k, v in params.items()}, v3)
        for key in params:
            key = str(key)
            if key.startswith("~") and v3:
                unacted.append(
                    f"{place}.parameters.{key}: a ~key condition is read only before "
                    "configVersion v3.0 (use match.param)"
                )
            elif key in CONTROL_KEYS:
                unacted.append(f"{place}.parameters.{key}: steers the rule, never set on a URL")
        provider_addresses = _strings(doc, (*at, "providerAddresses"))
        addresses = _strings(doc, (*at, "addresses"))
        services = _strings(doc, (*at, "services"))
        applications = _strings(doc, (*at, "applications"))
        if application_scope and applications:
            unacted.append(f"{place}.applications: read only in service scope (as Dubbo does)")
            applications = ()
        if not application_scope and services:
            unacted.append(f"{place}.services: read only in application scope (as Dubbo does)")
            services = ()
        match = None
        if "match" in entry and entry["match"] is not None:
            try:
                match = parse_condition_match(entry["match"])
            except MatchError as exc:
                raise doc.error((*at, "match", *exc.where), exc.message) from None
            if not v3:
                unacted.append(
                    f"{place}.match: read only with configVersion v3.0 (this document says "
                    f"{version or 'none'}), as Dubbo does"
                )
                match = None
            else:
                unacted += [f"{place}.{u}: not acted on" for u in match.unacted]
                address = match.address
                if address is not None and address.kind != "cird" and ":" in address.pattern:
                    unacted.append(
                        f"{place}.match.address: compared with a host, never host:port (as "
                        "Dubbo does): a pattern with a port matches no host"
                    )
        accesslog = values.get("accesslog", "").strip().lower()
        if accesslog not in ("", "true", "false", "default"):
            unacted.append(
                f"{place}.parameters.accesslog: a rule may not choose a file to write; calls are "
                "logged on the dubbo.accesslog logger instead (set a path in code or dubbo.yaml)"
            )
        if side == "provider":
            unacted += [
                f"{place}.parameters.{key}: an access log per method; dubbo-py switches it per "
                "service (set accesslog)"
                for key in values
                if key.endswith(".accesslog")
            ]
        if side == "consumer":
            unacted += _consumer_unacted(place, values)
            narrowed = provider_addresses or (
                match is not None and match.provider_address is not None
            )
            if narrowed:
                unacted.append(
                    f"{place}: a consumer-side item for some providers only (providerAddresses, "
                    "match.providerAddress) is not applied: dubbo-py has no per-provider "
                    "consumer parameters"
                )
        overrides += _per_address(
            Override(
                parameters=values,
                addresses=addresses,
                applications=applications,
                side=side,
                enabled=enabled,
                source=source,
                provider_addresses=provider_addresses,
                services=services,
                match=match,
                config_version=version,
                conditions=conditions,
            )
        )
    return in_dubbo_order(overrides), unacted


def _per_address(override: Override) -> list[Override]:
    """An item as Dubbo's ConfigParser turns it into override URLs: one per address (none:
    ``0.0.0.0``), each matching by host, the item's ``providerAddresses`` -- or for a provider
    item its whole address list -- deciding which ports (AbstractConfigurator). The item's
    effect on a URL is the same as one override for all addresses; the order they apply in
    (:func:`in_dubbo_order`) is not."""
    addresses = override.addresses or (ANYHOST,)
    covering = override.provider_addresses
    if not covering and override.side == "provider" and override.addresses:
        covering = override.addresses
    return [
        replace(override, addresses=(address.partition(":")[0],), provider_addresses=covering)
        for address in addresses
    ]


def _dubbo_rank(override: Override) -> tuple[str, int]:
    host = override.addresses[0].partition(":")[0] if override.addresses else ""
    try:
        priority = int(override.parameters.get("priority", "0"))
    except ValueError:
        priority = 0
    return host, priority


def in_dubbo_order(overrides: list[Override]) -> list[Override]:
    """Overrides in the order Dubbo applies one document's (``Configurator.toConfigurators``
    sorts them): by host as text, so ``0.0.0.0`` comes before any address and a rule for one
    host wins over a rule for all whatever the order in the document, then by ``priority``;
    the document's order among equals. Checked against Dubbo 3.3.6 by
    tests/router/test_java_router_oracle.py."""
    return sorted(overrides, key=_dubbo_rank)


def _consumer_unacted(place: str, values: Mapping[str, str]) -> list[str]:
    """Parameters of a consumer-side item that consumers do not act on, and mock specs they
    will ignore (a consumer logs a bad spec and keeps what was in force)."""
    from dubbo_py.cluster.mock import parse_mock
    from dubbo_py.errors import MockSpecError

    out = []
    for key, value in values.items():
        name = key.rsplit(".", 1)[-1]
        if name not in CONSUMER_KEYS:
            out.append(
                f"{place}.parameters.{key}: dubbo-py consumers have no {name!r} setting "
                f"(they act on {', '.join(sorted(CONSUMER_KEYS))})"
            )
        elif name in ("loadbalance", "accesslog") and key != name:
            out.append(
                f"{place}.parameters.{key}: per method; dubbo-py sets {name} per reference "
                f"(set {name})"
            )
        elif name == "mock":
            try:
                parse_mock(value)
            except MockSpecError as exc:
                out.append(f"{place}.parameters.{key}: {exc}; consumers ignore it")
        elif name == "cluster":
            from dubbo_py.cluster.strategies import STRATEGIES

            if value.strip().lower() not in STRATEGIES:
                out.append(
                    f"{place}.parameters.{key}: unknown strategy {value!r}; consumers ignore it"
                )
    return out


def _url_list(doc: YamlDocument) -> list[Override]:
    """Dubbo's other document shape: a JSON array of ``override://`` URLs."""
    out = []
    for i, item in enumerate(doc.data):
        if not isinstance(item, str):
            raise doc.error((i,), "an override URL list holds override:// URL strings")
        try:
            override = parse_override_url(URL.parse(item), doc.source)
        except ValueError as exc:
            raise doc.error((i,), str(exc)) from None
        if override is None:
            raise doc.error((i,), "not an override:// URL")
        out.append(override)
    return in_dubbo_order(out)


def _text(value: object) -> str:
    return "true" if value is True else "false" if value is False else str(value)
