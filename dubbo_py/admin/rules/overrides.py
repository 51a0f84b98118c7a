"""Dubbo 2.6 override rules as the CLI writes them: persistent ``override://`` URLs in a
service's ``configurators`` category.

``override://10.0.0.5:50051/demo.Greeter?category=configurators&dynamic=false&enabled=true&weight=50``
changes the weight of the provider at that address; ``disabled=true`` takes it out of every
consumer's list. ``dynamic=false`` makes the registry write a persistent node (it outlives the
CLI). Host ``0.0.0.0`` means every provider, a missing port every port of the host, and
``version``/``group`` parameters narrow the override to providers of that version/group, as in
Dubbo's ``AbstractConfigurator``. Consumers apply them; this module only writes and reads them.
"""

from __future__ import annotations

from collections.abc import Iterable

from dubbo_py.errors import URLError
from dubbo_py.url import URL

__all__ = [
    "ANYHOST",
    "applies_to",
    "describe",
    "disable_url",
    "is_disabling",
    "is_weight",
    "parse_address",
    "same_target",
    "weight_url",
]

ANYHOST = "0.0.0.0"
#: Parameters every override carries that say nothing about what it changes.
_BOOKKEEPING = frozenset(
    {"category", "dynamic", "enabled", "version", "group", "interface", "application", "timestamp"}
)


def parse_address(address: str) -> tuple[str, int]:
    """``host[:port]`` of a provider; ValueError when it is not one."""
    text = address.strip()
    if not text or "/" in text or "?" in text:
        raise ValueError(f"{address!r} is not host[:port]")
    try:
        url = URL.parse(f"override://{text}")
    except URLError as exc:
        raise ValueError(f"{address!r} is not host[:port]: {exc}") from None
    if not url.host:
        raise ValueError(f"{address!r} is not host[:port]")
    return url.host, url.port


def _override(service: str, address: str, params: dict[str, str], version: str, group: str) -> URL:
    host, port = parse_address(address)
    parameters = {"category": "configurators", "dynamic": "false", "enabled": "true", **params}
    if version:
        parameters["version"] = version
    if group:
        parameters["group"] = group
    return URL("override", host, port, service, parameters=parameters)


def weight_url(
    service: str, address: str, weight: int, *, version: str = "", group: str = ""
) -> URL:
    """The override setting a provider's weight."""
    if weight < 0:
        raise ValueError("weight must be >= 0")
    return _override(service, address, {"weight": str(weight)}, version, group)


def disable_url(service: str, address: str, *, version: str = "", group: str = "") -> URL:
    """The override taking a provider out of service."""
    return _override(service, address, {"disabled": "true"}, version, group)


def same_target(override: URL, host: str, port: int, version: str, group: str) -> bool:
    """Whether an override is written for exactly this address, version and group."""
    return (
        override.host == host
        and override.port == port
        and override.get_str("version") == version
        and override.get_str("group") == group
    )


def is_disabling(override: URL) -> bool:
    """An override that disables providers."""
    return override.get_bool("disabled", False)


def is_weight(override: URL) -> bool:
    """An override that sets only the weight (the kind ``override weight`` replaces)."""
    effective = set(override.parameters) - _BOOKKEEPING
    return effective == {"weight"}


def applies_to(override: URL, provider: URL) -> bool:
    """Whether an enabled override matches a provider (address, port, version, group)."""
    if override.protocol != "override" or not override.get_bool("enabled", True):
        return False
    if override.host not in (ANYHOST, provider.host):
        return False
    if override.port and override.port != provider.port:
        return False
    for key in ("version", "group"):
        wanted = override.get_str(key)
        if wanted and wanted != "*" and wanted != provider.get_str(key):
            return False
    return True


def describe(override: URL) -> str:
    """What an override changes, e.g. ``weight=50`` or ``disabled=true``."""
    changes = sorted((k, v) for k, v in override.parameters.items() if k not in _BOOKKEEPING)
    text = ", ".join(f"{k}={v}" for k, v in changes)
    if not override.get_bool("enabled", True):
        text += " (not enabled)"
    return text


def effective(overrides: Iterable[URL], provider: URL) -> list[str]:
    """Descriptions of the overrides that apply to a provider."""
    return [describe(o) for o in overrides if applies_to(o, provider)]
