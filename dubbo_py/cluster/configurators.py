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
          parameters: {weight: 0}

Matching overrides are applied in order (URLs first, then documents by key), each setting its
parameters on the provider URL; ``enabled: false`` turns a rule off. What providers carry is then
what load balancers (``weight``), the directory (``disabled``) and strategies read.

An override that says ``side: consumer`` (``&side=consumer`` on a URL) changes consumers
instead: its addresses are consumer hosts (``0.0.0.0`` or none: every consumer) and its
applications consumer applications; :func:`consumer_parameters` gives what it sets
(``timeout`` in ms, ``retries``, ``loadbalance``, or ``<method>.timeout`` and the like), which a
reference merges over its own options. An override without ``side`` is a provider override.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dubbo_py.errors import RuleError
from dubbo_py.rule_fields import Field, acted, ignored
from dubbo_py.url import URL

if TYPE_CHECKING:
    from dubbo_py.yaml_loader import Path, YamlDocument

__all__ = [
    "Override",
    "apply",
    "consumer_parameters",
    "parse_configurators_yaml",
    "parse_override_url",
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
    }
)
ANYHOST = "0.0.0.0"

#: Every field of a configurators document and what dubbo-py does with it (the no-silent-drop
#: table, :mod:`dubbo_py.rule_fields`). ``parameters`` is read whole (the override's values).
FIELDS: Mapping[str, Field] = {
    "configVersion": ignored("every version is read as v2.7 (match is not applied)"),
    "scope": acted(),
    "key": acted(),
    "enabled": acted(),
    "configs": acted(
        side=acted(),
        addresses=acted(),
        providerAddresses=acted(),
        applications=acted(),
        parameters=acted(),
        enabled=acted(),
        services=ignored("an application-scope document applies to every service here"),
        match=ignored(
            "the v3.0 match is not applied: the override applies to every "
            "provider its other fields select"
        ),
        type=ignored("every item is an override of the parameters it lists"),
    ),
}


@dataclass(frozen=True, slots=True)
class Override:
    """One override: which providers (addresses, applications) and what parameters to set."""

    parameters: Mapping[str, str]
    #: ``host`` or ``host:port`` entries; empty or containing 0.0.0.0 matches every provider.
    addresses: tuple[str, ...] = ()
    applications: tuple[str, ...] = ()
    side: str = "provider"
    enabled: bool = True
    source: str = field(default="", compare=False)

    def matches(self, provider: URL) -> bool:
        """Whether this override applies to ``provider``."""
        return self.side == "provider" and self._matches(provider, by_port=True)

    def matches_consumer(self, consumer: URL) -> bool:
        """Whether this (``side: consumer``) override applies to ``consumer`` (matched by host
        and application; a consumer has no port)."""
        return self.side == "consumer" and self._matches(consumer, by_port=False)

    def _matches(self, url: URL, *, by_port: bool) -> bool:
        if not self.enabled:
            return False
        if self.applications and url.get_str("application") not in self.applications:
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


def parse_override_url(url: URL, source: str = "") -> Override | None:
    """An override from an ``override://`` URL (None for ``empty://`` or other protocols)."""
    if url.protocol != "override":
        return None
    params = {k: v for k, v in url.parameters.items() if k not in CONTROL_KEYS}
    address = url.host if not url.port else f"{url.host}:{url.port}"
    app = url.get_str("application")
    return Override(
        parameters=params,
        addresses=(address,) if url.host else (),
        applications=(app,) if app and app != "*" else (),
        side=url.get_str("side", "provider"),
        enabled=url.get_bool("enabled", True),
        source=source,
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


def parse_configurators_yaml(text: str, source: str = "") -> list[Override]:
    """Overrides from a Dubbo 3 ``configurators`` document; RuleError naming what is wrong,
    where (``configs[1].parameters``) and at which line and column."""
    # YAML is loaded with the first document: applying override URLs, or no override at all,
    # is what most consumers do, and needs no YAML parser in the process.
    from dubbo_py.yaml_loader import compile_yaml

    return compile_yaml(text, source, _configurators, error=RuleError, empty="rule is empty")


def _configurators(doc: YamlDocument) -> list[Override]:
    source = doc.source
    if not isinstance(doc.data, dict):
        raise doc.error((), "a configurators document must be a mapping")
    configs = doc.data.get("configs")
    if not isinstance(configs, list):
        where: Path = ("configs",) if "configs" in doc.data else ()
        raise doc.error(where, "'configs' must be a list of override entries")
    enabled_all = doc.data.get("enabled", True) is not False
    overrides = []
    for i, entry in enumerate(configs):
        at: Path = ("configs", i)
        if not isinstance(entry, dict):
            raise doc.error(at, "must be a mapping")
        params = entry.get("parameters", {})
        if not isinstance(params, dict) or not params:
            place = (*at, "parameters") if "parameters" in entry else at
            raise doc.error(place, "must be a non-empty mapping")
        side = str(entry.get("side", "provider"))
        if side not in ("provider", "consumer"):
            raise doc.error((*at, "side"), "must be provider or consumer")
        addresses = _strings(doc, (*at, "addresses"))
        addresses += _strings(doc, (*at, "providerAddresses"))
        overrides.append(
            Override(
                parameters={
                    str(k): ("true" if v is True else "false" if v is False else str(v))
                    for k, v in params.items()
                },
                addresses=addresses,
                applications=_strings(doc, (*at, "applications")),
                side=side,
                enabled=enabled_all and entry.get("enabled", True) is not False,
                source=source,
            )
        )
    return overrides


def _overrides(urls: list[URL], documents: Mapping[str, str]) -> list[Override]:
    """Every override in force, in application order (URLs, then documents by key). An invalid
    document is logged with its key and skipped; the others still apply."""
    overrides = [o for u in urls if (o := parse_override_url(u)) is not None]
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
            params.update(override.parameters)
    return params


def apply(providers: list[URL], urls: list[URL], documents: Mapping[str, str]) -> list[URL]:
    """Providers with every matching provider-side override applied (the directory's
    ``configure`` hook)."""
    overrides = [o for o in _overrides(urls, documents) if o.side == "provider"]
    if not overrides:
        return providers
    out = []
    for provider in providers:
        params: dict[str, str] = {}
        for override in overrides:
            if override.matches(provider):
                params.update(override.parameters)
        out.append(provider.with_parameter_map(params) if params else provider)
    return out
