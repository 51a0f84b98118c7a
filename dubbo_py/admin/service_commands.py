"""``services``, ``providers SERVICE``, ``consumers SERVICE``: what is registered."""

from __future__ import annotations

from typing import Any

import click

from dubbo_py.admin import overrides
from dubbo_py.admin.common import (
    CONTEXT_SETTINGS,
    AdminError,
    did_you_mean,
    emit_json,
    env_of,
    json_option,
    print_table,
)
from dubbo_py.registry import layout
from dubbo_py.registry.registry import Registry
from dubbo_py.url import URL

__all__ = ["consumers", "known_service", "providers", "services"]

DEFAULT_WEIGHT = 100


def known_service(registry: Registry, service: str) -> None:
    """AdminError (not found, with the closest name) unless the registry knows ``service``."""
    names = registry.services()
    if service not in names:
        raise AdminError(
            f"no service {service!r} in the registry{did_you_mean(service, names)}",
            reason="not-found",
        )


@click.command(context_settings=CONTEXT_SETTINGS)
@json_option
def services() -> None:
    """List services with their provider, consumer and rule counts.

    \b
    JSON: [{"service", "providers", "consumers", "routers", "configurators"}]
    """
    env = env_of()
    registry = env.registry
    rows: list[dict[str, Any]] = []
    for name in registry.services():
        counts = {c: len(registry.lookup(name, c)) for c in layout.CATEGORIES}
        rows.append({"service": name, **counts})
    if env.json:
        emit_json(rows)
        return
    print_table(
        None,
        ["SERVICE", "PROVIDERS", "CONSUMERS", "ROUTERS", "OVERRIDES"],
        (
            [r["service"], r["providers"], r["consumers"], r["routers"], r["configurators"]]
            for r in rows
        ),
        empty="no services registered",
    )


def provider_json(url: URL, active: list[str]) -> dict[str, Any]:
    """One provider as ``providers --json`` prints it."""
    return {
        "url": url.to_string(),
        "address": url.address,
        "protocol": url.protocol,
        "application": url.get_str("application"),
        "version": url.get_str("version"),
        "group": url.get_str("group"),
        "weight": url.get_int("weight", DEFAULT_WEIGHT),
        "overrides": active,
    }


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("service")
@json_option
def providers(service: str) -> None:
    """List the providers of a service and the overrides that apply to each.

    SERVICE is the interface name, e.g. demo.Greeter.

    \b
    JSON: [{"url", "address", "protocol", "application", "version", "group",
            "weight", "overrides": ["weight=50", ...]}]
    """
    env = env_of()
    registry = env.registry
    known_service(registry, service)
    urls = sorted(registry.lookup(service, layout.PROVIDERS), key=lambda u: u.to_string())
    rules = registry.lookup(service, layout.CONFIGURATORS)
    rows = [provider_json(u, overrides.effective(rules, u)) for u in urls]
    if env.json:
        emit_json(rows)
        return
    print_table(
        f"providers of {service}",
        ["ADDRESS", "PROTOCOL", "APPLICATION", "VERSION", "GROUP", "WEIGHT", "OVERRIDES"],
        (
            [
                r["address"],
                r["protocol"],
                r["application"],
                r["version"],
                r["group"],
                r["weight"],
                "; ".join(r["overrides"]),
            ]
            for r in rows
        ),
        empty=f"no providers of {service}",
    )


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("service")
@json_option
def consumers(service: str) -> None:
    """List the consumers of a service.

    \b
    JSON: [{"url", "address", "application", "version", "group"}]
    """
    env = env_of()
    registry = env.registry
    known_service(registry, service)
    urls = sorted(registry.lookup(service, layout.CONSUMERS), key=lambda u: u.to_string())
    rows = [
        {
            "url": u.to_string(),
            "address": u.host,
            "application": u.get_str("application"),
            "version": u.get_str("version"),
            "group": u.get_str("group"),
        }
        for u in urls
    ]
    if env.json:
        emit_json(rows)
        return
    print_table(
        f"consumers of {service}",
        ["ADDRESS", "APPLICATION", "VERSION", "GROUP"],
        ([r["address"], r["application"], r["version"], r["group"]] for r in rows),
        empty=f"no consumers of {service}",
    )
