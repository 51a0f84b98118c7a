"""One override rule, and reading override URLs: the value every configurator carrier comes to.

An :class:`Override` is one item of a configurators document or one ``override://`` /
``absent://`` URL, with where it applies (addresses, applications, services, ``match``, ``~key``
conditions) and what it sets; :func:`parse_override_url` reads a URL, and
:mod:`dubbo_py.cluster.configurator_documents` the Dubbo 3 documents. Applying overrides in
order is :mod:`dubbo_py.cluster.configurators`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dubbo_py.url import URL

if TYPE_CHECKING:
    # Loaded with the first document that has a match (it brings the regex engine).
    from dubbo_py.cluster.configurator_match import ConditionMatch


__all__ = ["ANYHOST", "CONTROL_KEYS", "Override", "parse_override_url", "split_parameters"]

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


def split_parameters(params: Mapping[str, str], v3: bool) -> tuple[dict[str, str], dict[str, str]]:
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
    params, conditions = split_parameters(url.parameters, version.startswith("v3.0"))
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
