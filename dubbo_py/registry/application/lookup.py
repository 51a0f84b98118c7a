"""One-off reads of the application level (for the admin CLI): no watches, no caches.

:func:`providers` answers "which providers of this interface are registered at the application
level now", built exactly as consumers build them (:func:`.discovery.provider_url`);
:func:`interfaces` names every interface with a mapping; :func:`consumer_level` says which level
a consumer reads, from its migration step, its application's migration rule and what each
level holds.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from dubbo_py.errors import NoNodeError
from dubbo_py.registry.application import mapping
from dubbo_py.registry.application.discovery import provider_url
from dubbo_py.registry.application.instance import InstanceError, ServiceInstance
from dubbo_py.registry.application.metadata import MetadataError, MetadataInfo
from dubbo_py.registry.application.migration import (
    CountingFilter,
    MigrationRule,
    MigrationRuleError,
    choose,
)
from dubbo_py.registry.application.modes import MigrationStep
from dubbo_py.registry.application.paths import (
    MAPPING_ROOT,
    application_path,
    metadata_path,
    migration_path,
)
from dubbo_py.registry.store.base import Store
from dubbo_py.url import URL

__all__ = ["STEP_PARAMETER", "ConsumerLevel", "consumer_level", "interfaces", "providers"]

log = logging.getLogger(__name__)

#: The consumer URL parameter carrying a consumer's configured migration step (when it is not
#: Dubbo's default, ``APPLICATION_FIRST``).
STEP_PARAMETER = "migration-step"


def interfaces(store: Store) -> list[str]:
    """Every interface that has a service-name mapping."""
    try:
        return store.children(MAPPING_ROOT)
    except NoNodeError:
        return []


def instances(store: Store, app: str) -> list[ServiceInstance]:
    """An application's readable instances now."""
    try:
        names = store.children(application_path(app))
    except NoNodeError:
        return []
    out = []
    for name in names:
        try:
            data, _ = store.get(f"{application_path(app)}/{name}")
            out.append(ServiceInstance.parse(data, f"{application_path(app)}/{name}"))
        except (NoNodeError, InstanceError):
            continue
    return out


def providers(store: Store, interface: str) -> list[URL]:
    """The interface's providers at the application level now (instances whose metadata is
    ``remote`` and readable; others are left out)."""
    urls: list[URL] = []
    cache: dict[tuple[str, str], MetadataInfo | None] = {}
    for app in sorted(mapping.read_applications(store, interface)):
        for instance in instances(store, app):
            key = (app, instance.revision)
            if key not in cache:
                cache[key] = _metadata(store, instance)
            info = cache[key]
            if info is not None:
                urls.extend(provider_url(instance, s) for s in info.services_of(interface))
    return sorted(set(urls), key=lambda u: u.to_string())


def _metadata(store: Store, instance: ServiceInstance) -> MetadataInfo | None:
    if not instance.revision or instance.storage_type != "remote":
        return None
    try:
        data, _ = store.get(metadata_path(instance.app, instance.revision))
        return MetadataInfo.parse(data)
    except (NoNodeError, MetadataError):
        return None


@dataclass(frozen=True, slots=True)
class ConsumerLevel:
    """Which level one registered consumer reads, and why."""

    step: MigrationStep
    level: str
    #: Where the step came from: ``default``, ``consumer`` (its configuration) or ``rule``.
    source: str


def consumer_level(
    store: Store,
    consumer: URL,
    interface_urls: list[URL],
    app_urls: list[URL],
    rules: dict[str, MigrationRule | None] | None = None,
) -> ConsumerLevel:
    """The step and level of a registered consumer: its configured step, overridden by its
    application's migration rule, then Dubbo's comparison of the two levels."""
    configured = consumer.get_str(STEP_PARAMETER)
    source = "consumer" if configured else "default"
    try:
        step = MigrationStep.parse(configured) if configured else MigrationStep.APPLICATION_FIRST
    except ValueError:
        step = MigrationStep.APPLICATION_FIRST
    app = consumer.get_str("application")
    rule = _rule(store, app, rules) if app else None
    apps = mapping.read_applications(store, consumer.service_interface)
    if rule is not None:
        ruled = rule.step_for(consumer, apps, step)
        if ruled is not step or rule.step is not None:
            step, source = ruled, "rule"
    flt = CountingFilter(consumer, consumer.service_interface)
    threshold = rule.threshold_for(consumer, apps) if rule is not None else 0.0
    level = choose(step, interface_urls, app_urls, lambda urls: len(flt.select(urls)), threshold)
    return ConsumerLevel(step, level, source)


def _rule(
    store: Store, app: str, rules: dict[str, MigrationRule | None] | None
) -> MigrationRule | None:
    if rules is not None and app in rules:
        return rules[app]
    try:
        data, _ = store.get(migration_path(app))
        rule: MigrationRule | None = MigrationRule.parse(data.decode("utf-8", "replace"))
    except (NoNodeError, MigrationRuleError):
        rule = None
    if rules is not None:
        rules[app] = rule
    return rule
