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
from dubbo_py.admin.provider_levels import (
    ListedProvider,
    levels_label,
    listed_providers,
    own_parameters,
)
from dubbo_py.admin.rules import documents as rule_documents
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
    What each column counts:
      PROVIDERS     provider URLs at the interface level (/dubbo/SERVICE/providers)
      INSTANCES     providers registered at the application level (instances whose
                    metadata offers the service)
      CONSUMERS     consumer URLs (/dubbo/SERVICE/consumers)
      ROUTERS       routing rules in force for the service: enabled rule documents
                    (condition, affinity, tag, script, shard; keyed by the service or by
                    one of its provider applications, as `rules list` shows them) plus
                    router URLs (/dubbo/SERVICE/routers)
      OVERRIDES     override rules in force: enabled configurators documents plus
                    override URLs (/dubbo/SERVICE/configurators)
      APPLICATIONS  the applications the service-name mapping names

    \b
    JSON: [{"service", "providers", "consumers", "routers", "configurators", "instances",
            "router_rules": [keys], "override_rules": [keys], "applications": [...]}]
    ("routers" and "configurators" count the URLs; the *_rules lists name the documents)
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
                    r["routers"] + len(r["router_rules"]),
                    r["configurators"] + len(r["override_rules"]),
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
    in_force = _rules_in_force(registry)
    for name in names:
        providers = registry.lookup(name, layout.PROVIDERS)
        counts = {c: len(registry.lookup(name, c)) for c in layout.CATEGORIES}
        app_providers = app_level.providers(registry.store, name)
        counts["instances"] = len(app_providers)
        apps = sorted(read_applications(registry.store, name))
        owners = {u.get_str("application") for u in [*providers, *app_providers]} - {""}
        keys = [
            key
            for key, rule in in_force
            if (rule.interface == name) or (rule.application_scoped and rule.target in owners)
        ]
        rows.append(
            {
                "service": name,
                **counts,
                "router_rules": [k for k in keys if not k.endswith(".configurators")],
                "override_rules": [k for k in keys if k.endswith(".configurators")],
                "applications": apps,
            }
        )
    return rows


def _rules_in_force(registry: Registry) -> list[tuple[str, rule_documents.RuleKey]]:
    """Every enabled rule document, with its parsed key."""
    out = []
    for key in sorted(registry.config_keys()):
        try:
            rule = rule_documents.parse_key(key)
        except ValueError:
            continue  # other config-center data
        doc = registry.get_config(key)
        if doc is not None and rule_documents.document_enabled(doc.text) is not False:
            out.append((key, rule))
    return out


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
    all_parameters: bool = False,
) -> dict[str, Any]:
    """One provider as ``providers --json`` prints it; ``configured`` is its shown URL with
    the override rules applied (what consumers balance on), ``now_ms`` the clock warmup is
    read against (default: now); ``parameters`` holds the URL parameters the application gave
    it (every one with ``all_parameters``)."""
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
        "parameters": own_parameters(url, all_parameters),
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
@click.option(
    "--all-parameters",
    is_flag=True,
    help="Show every URL parameter (default: the ones the application gave the provider).",
)
@json_option
def providers(service: str, all_parameters: bool) -> None:
    """List the providers of a service: the weight consumers balance on now (after override
    rules and warmup), how much warmup is left, and the overrides that apply to each.

    SERVICE is the interface name, e.g. demo.Greeter. A provider's weight ramps up over its
    warmup (default 10 minutes) after it starts: "37 of 100" is a provider still warming up.
    PARAMETERS shows the URL parameters the provider's application gave it (e.g.
    warehouse=north from @dubbo_py.service(warehouse="north"), dubbo.tag) -- what routing
    rules match on; --all-parameters shows every one (pid, timestamp, methods ...).

    \b
    Examples:
      dubbo-py providers demo.Greeter
      dubbo-py providers demo.Greeter --registry zookeeper://127.0.0.1:2181 --json

    \b
    JSON: [{"url", "urls": {"interface": ..., "application": ...}, "address", "protocol",
            "application", "version", "group", "weight", "effective_weight", "warmup_ms",
            "warmup_left_ms", "overrides": ["weight=50", ...],
            "levels": ["interface", "application"], "parameters": {name: value}}]

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
        shown = _provider_rows(registry, service, all_parameters)
    else:
        outcomes = each_registry(
            env, lambda child: _provider_rows(child.registry, service, all_parameters)
        )
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


def _provider_rows(
    registry: Registry, service: str, all_parameters: bool = False
) -> list[tuple[dict[str, Any], URL]]:
    """Each provider of ``service`` as JSON, with its URL after the override rules."""
    listed = listed_providers(registry, service)
    urls = [p.url for p in listed]
    rules = registry.lookup(service, layout.CONFIGURATORS)
    configured = configurators.apply(urls, rules, _documents(registry, service, urls))
    now_ms = int(time.time() * 1000)
    return [
        (provider_json(p, overrides.effective(rules, p.url), c, now_ms, all_parameters), c)
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
            "PARAMETERS",
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
                " ".join(f"{k}={v}" for k, v in r["parameters"].items()),
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
