"""``registry status``: which registry, whether it answers, and what it holds."""

from __future__ import annotations

from typing import Any

from dubbo_py.admin.common import (
    CONTEXT_SETTINGS,
    AdminError,
    command_group,
    emit_json,
    env_of,
    json_option,
    print_table,
)
from dubbo_py.admin.rules import documents as rules
from dubbo_py.errors import NoNodeError, NotInLayoutError, StoreError
from dubbo_py.registry import layout
from dubbo_py.registry.application import lookup as app_level
from dubbo_py.registry.application.migration import MigrationRule
from dubbo_py.registry.application.paths import SERVICES_ROOT

__all__ = ["registry_group"]


@command_group("registry")
def registry_group() -> None:
    """The registry itself."""


def _counts(env: Any) -> dict[str, int]:
    registry = env.registry
    counts = dict.fromkeys(("services", *layout.CATEGORIES, "rules"), 0)
    for name in registry.services():
        counts["services"] += 1
        for category in layout.CATEGORIES:
            counts[category] += len(registry.lookup(name, category))
    for key in registry.config_keys():
        try:
            rules.parse_key(key)
        except ValueError:
            continue
        counts["rules"] += 1
    store = registry.store
    try:
        applications = store.children(SERVICES_ROOT)
    except (NoNodeError, NotInLayoutError):  # a store or layout without /services
        applications = []
    counts["applications"] = len(applications)
    counts["instances"] = sum(len(app_level.instances(store, a)) for a in applications)
    return counts


def _consumer_modes(env: Any) -> list[dict[str, str]]:
    """Each registered consumer's migration step and the level it reads (see
    :func:`dubbo_py.registry.application.lookup.consumer_level`)."""
    registry = env.registry
    store = registry.store
    rules: dict[str, MigrationRule | None] = {}
    rows = []
    names = sorted({*registry.services(), *app_level.interfaces(store)})
    for name in names:
        consumers = registry.lookup(name, layout.CONSUMERS)
        if not consumers:
            continue
        interface_urls = registry.lookup(name, layout.PROVIDERS)
        app_urls = app_level.providers(store, name)
        for consumer in sorted(consumers, key=lambda u: u.to_string()):
            mode = app_level.consumer_level(store, consumer, interface_urls, app_urls, rules)
            rows.append(
                {
                    "service": name,
                    "application": consumer.get_str("application"),
                    "address": consumer.host,
                    "step": mode.step.value,
                    "level": mode.level,
                    "source": mode.source,
                }
            )
    return rows


@registry_group.command("status", context_settings=CONTEXT_SETTINGS)
@json_option
def status() -> None:
    """Which registry is used, whether it answers, and how many services, providers,
    consumers, router URLs, overrides and rule documents it holds (exit 1 when unreachable),
    how many applications and instances are registered at the application level, and which
    migration step each consumer is in and which level it reads providers from (its
    configured step, overridden by its application's ``<app>.migration`` rule).

    \b
    Examples:
      dubbo-py registry status
      dubbo-py registry status --registry zookeeper://127.0.0.1:2181

    \b
    JSON: {"registry", "kind", "reachable", "error", "services", "providers", "consumers",
           "routers", "configurators", "rules", "applications", "instances",
           "consumer_modes": [{"service", "application", "address", "step", "level",
                               "source"}]}
    """
    env = env_of()
    address = env.address
    info: dict[str, Any] = {
        "registry": str(address),
        "kind": "embedded" if address.kind == "sqlite" else address.kind,
        "reachable": False,
        "error": None,
    }
    modes: list[dict[str, str]] = []
    try:
        info.update(_counts(env))
        modes = _consumer_modes(env)
        info["reachable"] = True
    except StoreError as exc:
        info["error"] = str(exc) or type(exc).__name__
    if env.json:
        emit_json({**info, "consumer_modes": modes})
    else:
        print_table(
            None,
            ["", ""],
            ([k, "-" if v is None else v] for k, v in info.items() if k != "error"),
            header=False,
        )
        if modes:
            print_table(
                "consumers",
                ["SERVICE", "APPLICATION", "ADDRESS", "STEP", "LEVEL", "FROM"],
                (
                    [m[k] for k in ("service", "application", "address", "step", "level", "source")]
                    for m in modes
                ),
            )
    if not info["reachable"]:
        error = str(info["error"])
        message = error if str(address) in error else f"registry {address} unreachable: {error}"
        raise AdminError(message, reason="unreachable", printed=True)
