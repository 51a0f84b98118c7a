"""``services``, ``providers SERVICE``, ``consumers SERVICE``: what is registered."""

from __future__ import annotations

import time
from typing import Any

import click

from dubbo_py.admin.common import (
    CONTEXT_SETTINGS,
    AdminError,
    CliEnv,
    did_you_mean,
    emit_json,
    env_of,
    json_option,
    print_table,
)
from dubbo_py.admin.fanout import Outcome, each_registry, labelled, raise_failures
from dubbo_py.admin.provider_levels import ListedProvider, levels_label, listed_providers
from dubbo_py.admin.rules import overrides
from dubbo_py.cluster import configurators
from dubbo_py.cluster.loadbalance.base import DEFAULT_WARMUP, effective_weight
from dubbo_py.registry import layout
from dubbo_py.registry.application import lookup as app_level
from dubbo_py.registry.application.mapping import read_applications
from dubbo_py.registry.registry import Registry
from dubbo_py.url import URL

__all__ = ["consumers", "known_service", "providers", "services"]

DEFAULT_WEIGHT = 100


def known_service(registry: Registry, service: str, where: str | None = None) -> None:
    """AdminError (not found, with the closest name) unless the registry knows ``service``;
    ``where`` names the registries searched (default: the run's one)."""
    names = registry.services()
    if service not in names and service not in app_level.interfaces(registry.store):
        names = sorted({*names, *app_level.interfaces(registry.store)})
        where = where or f"registry {env_of().address}"
        raise AdminError(
            f"no service {service!r} in {where}{did_you_mean(service, names)}",
            reason="not-found",
        )


@click.command(context_settings=CONTEXT_SETTINGS)
@json_option
def services() -> None:
    """List services with their provider, consumer and rule counts.

    \b
    Examples:
      dubbo-py services
      dubbo-py services --registry zookeeper://127.0.0.1:2181
      dubbo-py services --json

    \b
    PROVIDERS counts the interface-level provider URLs, INSTANCES the providers registered
    at the application level (instances whose metadata offers the service) and APPLICATIONS
    the applications the service-name mapping names.

    \b
    JSON: [{"service", "providers", "consumers", "routers", "configurators", "instances",
            "applications": [...]}]
    """
    env = env_of()
    several = env.several
    if not several:
        rows = _service_rows(env.registry)
    else:
        outcomes = each_registry(env, lambda child: _service_rows(child.registry))
        rows = labelled(outcomes)
    if env.json:
        emit_json(rows)
    else:
        labels = ["REGISTRY", "ZONE"] if several else []
        print_table(
            None,
            [
                *labels,
                "SERVICE",
                "PROVIDERS",
                "INSTANCES",
                "CONSUMERS",
                "ROUTERS",
                "OVERRIDES",
                "APPLICATIONS",
            ],
            (
                [
                    *([r["registry"], r["zone"] or ""] if several else []),
                    r["service"],
                    r["providers"],
                    r["instances"],
                    r["consumers"],
                    r["routers"],
                    r["configurators"],
                    ",".join(r["applications"]),
                ]
                for r in rows
            ),
            empty="no services registered",
        )
    if several:
        raise_failures(outcomes)


def _service_rows(registry: Registry) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    names = sorted({*registry.services(), *app_level.interfaces(registry.store)})
    for name in names:
        counts = {c: len(registry.lookup(name, c)) for c in layout.CATEGORIES}
        counts["instances"] = len(app_level.providers(registry.store, name))
        apps = sorted(read_applications(registry.store, name))
        rows.append({"service": name, **counts, "applications": apps})
    return rows


def warmup_left_ms(url: URL, now_ms: int) -> int:
    """Milliseconds until a provider's weight stops ramping up (0 once warm, or when it has no
    start timestamp or no weight): ``timestamp + warmup - now``, as load balancers read them."""
    timestamp = url.get_int("timestamp", 0)
    warmup = url.get_int("warmup", DEFAULT_WARMUP)
    if timestamp <= 0 or url.get_int("weight", DEFAULT_WEIGHT) <= 0:
        return 0
    return max(0, timestamp + warmup - now_ms)


def provider_json(
    provider: ListedProvider,
    active: list[str],
    configured: URL | None = None,
    now_ms: int | None = None,
) -> dict[str, Any]:
    """One provider as ``providers --json`` prints it; ``configured`` is its shown URL with
    the override rules applied (what consumers balance on), ``now_ms`` the clock warmup is
    read against (default: now)."""
    url = provider.url
    configured = configured or url
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return {
        "url": url.to_string(),
        "urls": {level: u.to_string() for level, u in provider.by_level},
        "address": url.address,
        "protocol": url.protocol,
        "application": url.get_str("application"),
        "version": url.get_str("version"),
        "group": url.get_str("group"),
        "weight": url.get_int("weight", DEFAULT_WEIGHT),
        "effective_weight": effective_weight(configured, "", now),
        "warmup_ms": configured.get_int("warmup", DEFAULT_WARMUP),
        "warmup_left_ms": warmup_left_ms(configured, now),
        "overrides": active,
        "levels": list(provider.levels),
    }


def _duration(ms: int) -> str:
    seconds = (ms + 999) // 1000
    minutes, seconds = divmod(seconds, 60)
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


def _weight_cell(row: dict[str, Any], configured_weight: int) -> str:
    effective = row["effective_weight"]
    if effective >= configured_weight:
        return str(effective)
    return f"{effective} of {configured_weight}"


def _documents(registry: Registry, service: str, urls: list[URL]) -> dict[str, str]:
    """The configurators documents consumers of these providers' service keys read."""
    documents = {}
    for key in {f"{service}:{u.get_str('version')}:{u.get_str('group')}" for u in urls}:
        doc = registry.get_config(f"{key}.configurators")
        if doc is not None:
            documents[f"{key}.configurators"] = doc.text
    return documents


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("service")
@json_option
def providers(service: str) -> None:
    """List the providers of a service: the weight consumers balance on now (after override
    rules and warmup), how much warmup is left, and the overrides that apply to each.

    SERVICE is the interface name, e.g. demo.Greeter. A provider's weight ramps up over its
    warmup (default 10 minutes) after it starts: "37 of 100" is a provider still warming up.

    \b
    Examples:
      dubbo-py providers demo.Greeter
      dubbo-py providers demo.Greeter --registry zookeeper://127.0.0.1:2181 --json

    \b
    JSON: [{"url", "urls": {"interface": ..., "application": ...}, "address", "protocol",
            "application", "version", "group", "weight", "effective_weight", "warmup_ms",
            "warmup_left_ms", "overrides": ["weight=50", ...],
            "levels": ["interface", "application"]}]

    \b
    One row per provider (address, protocol, application, version and group), with the
    levels it is registered at: "interface" (a provider URL under /dubbo/SERVICE/providers),
    "application" (an instance under /services whose metadata offers the service, built as
    consumers build it) or both, "interface+application" (Dubbo 3's default). A provider at
    both levels shows its application-level URL's values, the level a consumer in the default
    migration step (APPLICATION_FIRST) reads; "urls" has each level's URL.
    """
    env = env_of()
    several = env.several
    if not several:
        registry = env.registry
        known_service(registry, service)
        shown = _provider_rows(registry, service)
    else:
        outcomes = each_registry(env, lambda child: _provider_rows(child.registry, service))
        if all(o.error is None and not o.value for o in outcomes):
            _known_to_one(env, outcomes, service)
        shown = [({**o.labels(), **r}, c) for o in outcomes for r, c in o.value or []]
    rows = [r for r, _ in shown]
    if env.json:
        emit_json(rows)
    else:
        _print_providers(service, shown, several)
    if several:
        raise_failures(outcomes)


def _provider_rows(registry: Registry, service: str) -> list[tuple[dict[str, Any], URL]]:
    """Each provider of ``service`` as JSON, with its URL after the override rules."""
    listed = listed_providers(registry, service)
    urls = [p.url for p in listed]
    rules = registry.lookup(service, layout.CONFIGURATORS)
    configured = configurators.apply(urls, rules, _documents(registry, service, urls))
    now_ms = int(time.time() * 1000)
    return [
        (provider_json(p, overrides.effective(rules, p.url), c, now_ms), c)
        for p, c in zip(listed, configured, strict=True)
    ]


def _print_providers(service: str, shown: list[tuple[dict[str, Any], URL]], several: bool) -> None:
    print_table(
        f"providers of {service}",
        [
            *(["REGISTRY", "ZONE"] if several else []),
            "ADDRESS",
            "LEVELS",
            "PROTOCOL",
            "APPLICATION",
            "VERSION",
            "GROUP",
            "WEIGHT",
            "WARMUP",
            "OVERRIDES",
        ],
        (
            [
                *([r["registry"], r["zone"] or ""] if several else []),
                r["address"],
                levels_label(r["levels"]),
                r["protocol"],
                r["application"],
                r["version"],
                r["group"],
                _weight_cell(r, c.get_int("weight", DEFAULT_WEIGHT)),
                f"{_duration(r['warmup_left_ms'])} left" if r["warmup_left_ms"] else "done",
                "; ".join(r["overrides"]),
            ]
            for r, c in shown
        ),
        empty=f"no providers of {service}",
    )


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("service")
@json_option
def consumers(service: str) -> None:
    """List the consumers of a service.

    \b
    Examples:
      dubbo-py consumers demo.Greeter
      dubbo-py consumers demo.Greeter --json

    \b
    JSON: [{"url", "address", "application", "version", "group"}]
    several registries: each row also has "registry" and "zone"
    """
    env = env_of()
    several = env.several
    if not several:
        registry = env.registry
        known_service(registry, service)
        rows = _consumer_rows(registry, service)
    else:
        outcomes = each_registry(env, lambda child: _consumer_rows(child.registry, service))
        if all(o.error is None and not o.value for o in outcomes):
            _known_to_one(env, outcomes, service)
        rows = labelled(outcomes)
    if env.json:
        emit_json(rows)
    else:
        print_table(
            f"consumers of {service}",
            [
                *(["REGISTRY", "ZONE"] if several else []),
                "ADDRESS",
                "APPLICATION",
                "VERSION",
                "GROUP",
            ],
            (
                [
                    *([r["registry"], r["zone"] or ""] if several else []),
                    r["address"],
                    r["application"],
                    r["version"],
                    r["group"],
                ]
                for r in rows
            ),
            empty=f"no consumers of {service}",
        )
    if several:
        raise_failures(outcomes)


def _consumer_rows(registry: Registry, service: str) -> list[dict[str, Any]]:
    urls = sorted(registry.lookup(service, layout.CONSUMERS), key=lambda u: u.to_string())
    return [
        {
            "url": u.to_string(),
            "address": u.host,
            "application": u.get_str("application"),
            "version": u.get_str("version"),
            "group": u.get_str("group"),
        }
        for u in urls
    ]


def _known_to_one(env: CliEnv, outcomes: list[Outcome[Any]], service: str) -> None:
    """Not found (naming every registry, with the closest name from the first) unless one of
    the registries knows ``service``; for a listing that found nothing anywhere."""
    where = "registries " + ", ".join(o.target.id for o in outcomes)
    for outcome in outcomes:
        child = env.for_target(outcome.target)
        try:
            names = child.registry.services()
            if service in names or service in app_level.interfaces(child.registry.store):
                return
        finally:
            child.close()
    first = env.for_target(outcomes[0].target)
    try:
        known_service(first.registry, service, where)
    finally:
        first.close()
