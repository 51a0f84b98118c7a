"""Override rules (configurators): change providers' parameters at runtime.

Two carriers, as in Apache Dubbo:

* Dubbo 2.6 ``override://`` URLs in a service's ``configurators`` category, e.g.
  ``override://10.0.0.5:50051/demo.Greeter?category=configurators&dynamic=false&weight=0``.
  The host is the provider's host (``0.0.0.0`` for all), the port optional (0: any port).
* Dubbo 3 YAML documents at ``<interface>:<version>:<group>.configurators`` (scope service) or
  ``<application>.configurators`` (scope application)::

      configVersion: v3.0
      scope: service
      key: demo.Greeter
      enabled: true
      configs:
        - addresses: ["10.0.0.5:50051"]     # or 0.0.0.0 / omitted: every provider
          side: provider
          match:                             # v3.0: narrow further (configurator_match.py)
            param: [{key: zone, value: {exact: a}}]
          parameters: {weight: 0}

Which items apply to a URL follows Dubbo 3.3's ``AbstractConfigurator`` and ``ConfigParser``:

* the document's ``enabled`` switches every item of type ``general`` (or no type) on or off; an
  item of another ``type`` (Dubbo Admin's ``weight``, ``balancing``, ``disabled``) is on only
  with its own ``enabled: true``;
* ``addresses``: hosts (``host`` or ``host:port``; ``0.0.0.0`` or none: every one) of the
  providers, or for a ``side: consumer`` item of the consumers;
* ``providerAddresses`` (provider side): ``host:port``, ``host``, ``0.0.0.0``, ``0.0.0.0:*`` or
  ``0.0.0.0:<port>`` entries, one of which must cover the provider;
* ``applications`` (service scope): the URL's application must be one of them;
  ``services`` (application scope): the URL's service key (``group/interface:version``) must be
  one of them, ``*`` for any;
* ``match`` when ``configVersion`` starts with ``v3.0`` (as Dubbo compares it), the v2.7
  ``~key`` conditions (``parameters: {"~zone": a}``: the URL's ``zone`` must be ``a``) when it
  does not -- override URLs included.

Matching overrides are applied in order (URLs first, then documents by key), each setting its
parameters on the provider URL. What providers carry is then what load balancers (``weight``),
the directory (``disabled``) and strategies read.

An override that says ``side: consumer`` (``&side=consumer`` on a URL) changes consumers
instead: its addresses are consumer hosts (``0.0.0.0`` or none: every consumer) and its
``match`` reads the consumer's own URL; :func:`consumer_parameters` gives what it sets
(``timeout`` in ms, ``retries``, ``loadbalance``, ``cluster``, ``mock``, ``actives``, or
``<method>.timeout`` and the like), which a reference merges over its own options. An override
without ``side`` is a provider override.

Whatever a document says that this module does not act on is named by :func:`unacted_fields`
(``rules validate`` warns, consumers and providers log it once per document version).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dubbo_py.cluster.configurator_match import ConditionMatch, MatchError, parse_condition_match
from dubbo_py.errors import RuleError
from dubbo_py.url import URL

if TYPE_CHECKING:
    from dubbo_py.yaml_loader import Path, YamlDocument

__all__ = [
    "Override",
    "apply",
    "consumer_parameters",
    "parse_configurators_yaml",
    "parse_override_url",
    "unacted_fields",
    "validate_document",
]

log = logging.getLogger(__name__)

#: URL parameters that steer the rule itself and are never copied onto providers.
CONTROL_KEYS = frozenset(
    {
        "category",
        "dynamic",
        "enabled",
        "check",
        "side",
        "application",
        "interface",
        "version",
        "group",
        "anyhost",
        "timestamp",
        "configVersion",
        "compatible_config",
        "providerAddresses",
        "interfaces",
    }
)
ANYHOST = "0.0.0.0"
#: Item types whose ``enabled`` is the document's (Dubbo's ``ConfigItem.GENERAL_TYPE``).
GENERAL_TYPE = "general"
#: What a consumer-side override sets that dubbo-py consumers act on (service level, or
#: ``<method>.<key>``); any other parameter of a consumer-side item is named as not acted on.
CONSUMER_KEYS = frozenset(
    {"timeout", "retries", "loadbalance", "forks", "sticky", "cluster", "mock", "actives"}
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


@dataclass(frozen=True, slots=True)
class Override:
    """One override: which URLs it applies to and what parameters it sets."""

    parameters: Mapping[str, str]
    #: ``host`` or ``host:port`` entries; empty or containing 0.0.0.0 matches every host.
    addresses: tuple[str, ...] = ()
    applications: tuple[str, ...] = ()
    #: ``provider``, ``consumer``, or ``""`` for a Dubbo 2.6 override URL that names no side
    #: (Dubbo's deprecated matching: providers, and without a port consumers too).
    side: str = "provider"
    enabled: bool = True
    source: str = field(default="", compare=False)
    #: Dubbo's ``providerAddresses``: one must cover the provider's address (empty: any).
    provider_addresses: tuple[str, ...] = ()
    #: Service keys (application scope; empty or ``*``: any service).
    services: tuple[str, ...] = ()
    #: The v3.0 ``match`` (read only when :attr:`config_version` starts with ``v3.0``).
    match: ConditionMatch | None = None
    config_version: str = ""
    #: v2.7 ``~key`` conditions: URL parameter -> required value (``*``: any).
    conditions: Mapping[str, str] = field(default_factory=dict)
    #: An ``absent://`` URL (Dubbo's AbsentConfigurator): sets only what the URL lacks.
    absent: bool = False
    #: ``version`` and ``group`` an override URL names (its service key): only URLs of that
    #: version / group match ("": not named, any).
    version: str = ""
    group: str = ""

    def set_on(self, present: Mapping[str, str], params: dict[str, str]) -> None:
        """Add what this override sets to ``params`` (what earlier overrides set on a URL
        whose own parameters are ``present``); an absent override adds only keys neither
        has."""
        if not self.absent:
            params.update(self.parameters)
            return
        for key, value in self.parameters.items():
            if key not in present and key not in params:
                params[key] = value

    @property
    def v3(self) -> bool:
        """Whether Dubbo reads this override's ``match`` (``configVersion`` v3.0...)."""
        return self.config_version.startswith("v3.0")

    def matches(self, provider: URL) -> bool:
        """Whether this override applies to ``provider``."""
        return (
            self.side in ("provider", "")
            and self._addressed(provider, by_port=True)
            and self._provider_addressed(provider)
            and self._conditions_hold(provider, provider.host)
        )

    def matches_consumer(self, consumer: URL) -> bool:
        """Whether this (``side: consumer``) override applies to ``consumer`` (matched by host
        and application; a consumer has no port). An item narrowed to some providers
        (``providerAddresses``, ``match.providerAddress``) sets per-provider consumer
        parameters in Dubbo, which dubbo-py does not have: it applies to no consumer (and
        :func:`unacted_fields` says so) rather than to every provider."""
        if self.side == "" and any(":" in a and not a.endswith(":0") for a in self.addresses):
            return False  # a 2.6 URL with a port names a provider (Dubbo's configureDeprecated)
        if self.side not in ("consumer", "") or self.provider_addresses:
            return False
        if self.v3 and self.match is not None and self.match.provider_address is not None:
            return False
        return self._addressed(consumer, by_port=False) and self._conditions_hold(
            consumer, consumer.host
        )

    def _addressed(self, url: URL, *, by_port: bool) -> bool:
        if not self.enabled:
            return False
        if self.applications and url.get_str("application") not in self.applications:
            return False
        if self.version and self.version != url.get_str("version"):
            return False
        if self.group and self.group != url.get_str("group"):
            return False
        if self.services and not any(
            s == "*" or _service_key(s) == url.service_key for s in self.services
        ):
            return False
        if not self.addresses:
            return True
        for address in self.addresses:
            host, _, port = address.partition(":")
            host_ok = host in (ANYHOST, "*") or host == url.host
            any_port = not by_port or not port or port in ("0", "*")
            if host_ok and (any_port or port == str(url.port)):
                return True
        return False

    def _provider_addressed(self, url: URL) -> bool:
        if not self.provider_addresses:
            return True
        any_port = (ANYHOST, f"{ANYHOST}:*", f"{ANYHOST}:{url.port}")
        return any(a in any_port or a in (url.address, url.host) for a in self.provider_addresses)

    def _conditions_hold(self, url: URL, host: str) -> bool:
        if self.v3:
            match = self.match
            return match is None or match.matches(
                host, url.address, url.service_key, url.get("application"), url.parameters
            )
        return all(v == "*" or url.get(k) == v for k, v in self.conditions.items())


def _service_key(text: str) -> str:
    """A service of an application-scope item as Dubbo's ``ConfigParser.appendService`` reads
    it (``group/interface:version``), as a URL's service key: empty parts left out."""
    group, _, rest = text.partition("/") if text.find("/") > 0 else ("", "", text)
    interface, _, version = rest.partition(":") if rest.find(":") > 0 else (rest, "", "")
    key = f"{group}/{interface}" if group else interface
    return f"{key}:{version}" if version else key


def _split_parameters(params: Mapping[str, str], v3: bool) -> tuple[dict[str, str], dict[str, str]]:
    """(parameters to set, ``~key`` conditions): the conditions only before v3.0; in a v3.0
    rule a ``~key`` is neither (:func:`unacted_fields` names it)."""
    values, conditions = {}, {}
    for key, value in params.items():
        if key.startswith("~"):
            if not v3:
                conditions[key[1:]] = value
        elif key not in CONTROL_KEYS:
            values[key] = value
    return values, conditions


def parse_override_url(url: URL, source: str = "") -> Override | None:
    """An override from an ``override://`` or ``absent://`` URL (None for ``empty://`` or other
    protocols). The application is the ``application`` parameter, else the URL's user name
    (``override://shop@0.0.0.0/...``), as Dubbo reads it."""
    if url.protocol not in ("override", "absent"):
        return None
    version = url.get_str("configVersion")
    params, conditions = _split_parameters(url.parameters, version.startswith("v3.0"))
    # Without configVersion Dubbo matches a URL as 2.6 did: no side means providers and, for
    # a URL without a port, consumers too (Dubbo Admin 2.6's service downgrade writes
    # override://0.0.0.0/<service>?mock=force:return+null). With one, no side is provider here.
    side = url.get_str("side") or ("provider" if version else "")
    address = url.host if not url.port else f"{url.host}:{url.port}"
    app = url.get_str("application") or url.username
    providers = url.get_str("providerAddresses")
    return Override(
        parameters=params,
        addresses=(address,) if url.host else (),
        applications=(app,) if app and app != "*" else (),
        side=side,
        enabled=url.get_bool("enabled", True),
        source=source,
        provider_addresses=tuple(a for a in providers.split(",") if a) if providers else (),
        config_version=version,
        conditions=conditions,
        absent=url.protocol == "absent",
        version=_named(url.get_str("version")),
        group=_named(url.get_str("group")),
    )


def _named(value: str) -> str:
    return "" if value == "*" else value


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
        values, conditions = _split_parameters({str(k): _text(v) for k, v in params.items()}, v3)
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
        if side == "provider" and "accesslog" in values:
            unacted.append(
                f"{place}.parameters.accesslog: set on the provider URL, but dubbo-py providers "
                "keep no access log"
            )
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
        overrides.append(
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
    return overrides, unacted


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
        elif name == "loadbalance" and key != name:
            out.append(
                f"{place}.parameters.{key}: a balancer per method; dubbo-py has one per "
                "reference (set loadbalance)"
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
    return out


def _text(value: object) -> str:
    return "true" if value is True else "false" if value is False else str(value)


def _overrides(urls: list[URL], documents: Mapping[str, str]) -> list[Override]:
    """Every override in force, in application order (URLs, then documents by key). An invalid
    document is logged with its key and skipped; the others still apply."""
    # A URL Dubbo Admin writes next to a document for 2.6 clients (compatible_config) is read
    # as Dubbo 3's RegistryDirectory reads it: not at all (the document says the same).
    overrides = [
        o
        for u in urls
        if not u.get("compatible_config") and (o := parse_override_url(u)) is not None
    ]
    for key in sorted(documents):
        try:
            overrides.extend(parse_configurators_yaml(documents[key], key))
        except RuleError as exc:
            log.error("ignoring invalid override rule %s: %s", key, exc)
    return overrides


def consumer_parameters(
    consumer: URL, urls: list[URL], documents: Mapping[str, str]
) -> dict[str, str]:
    """What the consumer-side overrides matching ``consumer`` set, later ones winning (the
    directory's ``configure_consumer`` hook)."""
    params: dict[str, str] = {}
    for override in _overrides(urls, documents):
        if override.matches_consumer(consumer):
            override.set_on(consumer.parameters, params)
    return params


def apply(providers: list[URL], urls: list[URL], documents: Mapping[str, str]) -> list[URL]:
    """Providers with every matching provider-side override applied (the directory's
    ``configure`` hook)."""
    overrides = [o for o in _overrides(urls, documents) if o.side != "consumer"]
    if not overrides:
        return providers
    out = []
    for provider in providers:
        params: dict[str, str] = {}
        for override in overrides:
            if override.matches(provider):
                override.set_on(provider.parameters, params)
        out.append(provider.with_parameter_map(params) if params else provider)
    return out
