"""What a rule change would do to live traffic: for every registered consumer that watches the
rule's key, which providers each of its methods reaches now and would reach after the change.

The consumer's view is rebuilt from the registry the way its directory builds it (the providers
of the level it reads -- interface or application, by its migration step and its application's
migration rule, as ``registry status`` shows it -- matched to the consumer, overrides applied
when this build has a configurator, every rule document it watches and every router URL of its
service, compiled by the factory), then routed with
:func:`dubbo_py.admin.rules.scenario.route` — the same code ``route test`` and consumers run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dubbo_py.admin.rules.documents import RuleKey
from dubbo_py.admin.rules.scenario import RouteOutcome, configurator, route
from dubbo_py.errors import RuleError
from dubbo_py.invocation import Invocation
from dubbo_py.registry import layout
from dubbo_py.registry.application import lookup as app_level
from dubbo_py.registry.application.migration import MigrationRule
from dubbo_py.registry.directory import ServiceRules
from dubbo_py.registry.matching import ProviderFilter, is_usable
from dubbo_py.registry.registry import Registry
from dubbo_py.registry.rule_kinds import WatchedKey
from dubbo_py.router import factory
from dubbo_py.router.base import Router
from dubbo_py.url import URL

__all__ = ["ConsumerReach", "ReachReport", "reach_now", "reach_of_change"]


@dataclass(frozen=True, slots=True)
class ConsumerReach:
    """One consumer and method: provider addresses reached before and after the change."""

    consumer: URL
    method: str
    before: tuple[str, ...]
    after: tuple[str, ...]

    @property
    def changed(self) -> bool:
        """Whether the change moves this consumer's traffic."""
        return self.before != self.after

    def to_json(self) -> dict[str, Any]:
        """``{"consumer", "application", "method", "before", "after", "changed"}``."""
        return {
            "consumer": self.consumer.to_string(),
            "application": self.consumer.get_str("application"),
            "method": self.method,
            "before": list(self.before),
            "after": list(self.after),
            "changed": self.changed,
        }


@dataclass
class ReachReport:
    """Every affected consumer's reach, and notes on what could not be taken into account."""

    rows: list[ConsumerReach] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        """Add a note once."""
        if text not in self.notes:
            self.notes.append(text)


def _watched(consumer: URL, providers: Sequence[URL]) -> list[WatchedKey]:
    rules = ServiceRules.for_consumer(consumer)
    keys = rules.static_keys()
    for app in sorted({p.get_str("application") for p in providers} - {""}):
        keys += rules.provider_app_keys(app)
    return keys


def _methods(providers: Sequence[URL], wanted: Sequence[str]) -> list[str]:
    if wanted:
        return list(wanted)
    names = {m.strip() for p in providers for m in p.get_str("methods").split(",") if m.strip()}
    return sorted(names) or [""]


class _Levels:
    """Each service's providers at both levels, read once per report, and the ones a consumer
    reads (the level its migration step and its application's migration rule choose)."""

    def __init__(
        self, registry: Registry, rules: dict[str, MigrationRule | None] | None = None
    ) -> None:
        self._registry = registry
        self._by_service: dict[str, tuple[list[URL], list[URL]]] = {}
        #: Each application's migration rule (read on first use; given: a rule to try).
        self._rules: dict[str, MigrationRule | None] = dict(rules or {})

    def providers(self, service: str, consumer: URL) -> list[URL]:
        """The provider URLs ``consumer`` of ``service`` reads."""
        found = self._by_service.get(service)
        if found is None:
            registry = self._registry
            found = (
                registry.lookup(service, layout.PROVIDERS),
                app_level.providers(registry.store, service),
            )
            self._by_service[service] = found
        interface_urls, app_urls = found
        level = app_level.consumer_level(
            self._registry.store, consumer, interface_urls, app_urls, self._rules
        ).level
        return app_urls if level == "application" else interface_urls


class _View:
    """A consumer's providers and rule sources, read once from the registry."""

    def __init__(
        self,
        registry: Registry,
        consumer: URL,
        raw_providers: list[URL],
        report: ReachReport,
        texts: dict[str, str | None],
    ) -> None:
        self.registry = registry
        self.consumer = consumer
        self.report = report
        self.texts = texts
        service = consumer.service_interface
        self.matched = ProviderFilter(consumer, service).select(raw_providers)
        self.keys = _watched(consumer, self.matched)
        self.router_urls = registry.lookup(service, layout.ROUTERS)
        self.override_urls = registry.lookup(service, layout.CONFIGURATORS)
        self.routers_path = layout.category_path(service, layout.ROUTERS)

    def text(self, key: str) -> str | None:
        if key not in self.texts:
            doc = self.registry.get_config(key)
            self.texts[key] = None if doc is None else doc.text
        return self.texts[key]

    def providers(self, override: Mapping[str, str | None]) -> list[URL]:
        docs: dict[str, str] = {}
        for watched in self.keys:
            key = watched.key
            text = override[key] if key in override else self.text(key)
            if watched.kind.overrides and text:
                docs[key] = text
        providers = self.matched
        if self.override_urls or docs:
            providers = configurator()(list(providers), list(self.override_urls), docs)
        usable = [p for p in providers if is_usable(p)]
        return sorted(set(usable), key=lambda u: u.to_string())

    def routers(self, override: Mapping[str, str | None]) -> list[Router]:
        out: list[Router] = []
        for watched in self.keys:
            key = watched.key
            if watched.kind.overrides:
                continue
            text = override[key] if key in override else self.text(key)
            if not text or not text.strip():
                continue
            try:
                out.extend(watched.compile(text, layout.config_path(key)))
            except RuleError as exc:
                self.report.note(f"ignored (invalid, as consumers would): {exc}")
        for url in self.router_urls:
            source = f"{self.routers_path}/{url.encode()}"
            try:
                out.append(factory.compile_url(url, source))
            except RuleError as exc:
                self.report.note(f"ignored (invalid, as consumers would): {exc}")
        return out


def reach_of_change(
    registry: Registry,
    rule: RuleKey,
    new_text: str | None,
    *,
    methods: Sequence[str] = (),
    attachments: Mapping[str, str] | None = None,
) -> ReachReport:
    """Before/after reach of every consumer that watches ``rule.key`` if its document became
    ``new_text`` (None: deleted). ``methods`` defaults to the methods the providers advertise."""
    if rule.kind == "migration":
        return _migration_reach(registry, rule, new_text, methods, attachments)
    report = ReachReport()
    texts: dict[str, str | None] = {}
    change = {rule.key: new_text}
    nearby: set[str] = set()  # keys of the same kind watched nearby, to hint at a typo
    levels = _Levels(registry)
    for service in registry.services():
        consumers = registry.lookup(service, layout.CONSUMERS)
        if not consumers:
            continue
        for consumer in sorted(consumers, key=lambda u: u.to_string()):
            raw = levels.providers(service, consumer)
            view = _View(registry, consumer, raw, report, texts)
            watched = {w.key for w in view.keys}
            if rule.key not in watched:
                if service == rule.interface or rule.application_scoped:
                    nearby.update(k for k in watched if k.endswith(f".{rule.kind}"))
                continue
            before_providers = view.providers({})
            after_providers = view.providers(change)
            before_routers = view.routers({})
            after_routers = view.routers(change)
            for after in _reach_rows(
                report,
                consumer,
                service,
                _methods(view.matched, methods),
                attachments,
                (before_providers, before_routers),
                (after_providers, after_routers),
            ):
                for exc in after.refused:
                    report.note(f"refused (as consumers would): {exc}")
    if not report.rows:
        hint = f" (consumers watch: {', '.join(sorted(nearby))})" if nearby else ""
        report.note(f"no registered consumer watches {rule.key}{hint}")
    return report


def _migration_reach(
    registry: Registry,
    rule: RuleKey,
    new_text: str | None,
    methods: Sequence[str],
    attachments: Mapping[str, str] | None,
) -> ReachReport:
    """A migration rule moves the consumers of its application between the levels: each one's
    reach with the providers of the level it reads now and of the level it would read."""
    report = ReachReport()
    app = rule.target
    try:
        new_rule = MigrationRule.parse(new_text or "", rule.key)
    except ValueError as exc:
        report.note(f"ignored (invalid, as consumers would): {exc}")
        return report
    before_levels = _Levels(registry)
    after_levels = _Levels(registry, {app: None if new_text is None else new_rule})
    texts: dict[str, str | None] = {}
    for service in registry.services():
        consumers = [
            c for c in registry.lookup(service, layout.CONSUMERS) if c.get_str("application") == app
        ]
        for consumer in sorted(consumers, key=lambda u: u.to_string()):
            before_view = _View(
                registry, consumer, before_levels.providers(service, consumer), report, texts
            )
            after_raw = after_levels.providers(service, consumer)
            after_view = _View(registry, consumer, after_raw, report, texts)
            if before_view.matched and not after_view.matched:
                # As MigrationSubscriber: a FORCE_* step whose level has nothing to call is
                # not taken without force: true.
                apps = _mapping_apps(registry, service)
                if not new_rule.force_for(consumer, apps):
                    report.note(
                        f"{consumer.get_str('application')} on {consumer.host} ({service}) "
                        "stays at its level: the rule's level has no provider for it "
                        "(add force: true to move anyway)"
                    )
                    after_view = before_view
            before_providers = before_view.providers({})
            after_providers = after_view.providers({})
            routers = before_view.routers({})
            _reach_rows(
                report,
                consumer,
                service,
                _methods(before_view.matched or after_view.matched, methods),
                attachments,
                (before_providers, routers),
                (after_providers, routers),
            )
    if not report.rows:
        report.note(f"no registered consumer of application {app!r} reads {rule.key}")
    return report


def _reach_rows(
    report: ReachReport,
    consumer: URL,
    service: str,
    methods: Sequence[str],
    attachments: Mapping[str, str] | None,
    before: tuple[Sequence[URL], Sequence[Router]],
    after: tuple[Sequence[URL], Sequence[Router]],
) -> list[RouteOutcome]:
    """One row per method: where ``consumer``'s calls go with the providers and routers of
    ``before`` and of ``after``; the ``after`` outcomes returned for their refusals."""
    outcomes = []
    for method in methods:
        invocation = Invocation(service, method, attachments=dict(attachments or {}))
        was = route(consumer, *before, invocation)
        now = route(consumer, *after, invocation)
        report.rows.append(
            ConsumerReach(
                consumer,
                method,
                tuple(p.address for p in was.providers),
                tuple(p.address for p in now.providers),
            )
        )
        outcomes.append(now)
    return outcomes


def _mapping_apps(registry: Registry, service: str) -> frozenset[str]:
    """The provider applications the mapping names for ``service``."""
    from dubbo_py.registry.application import mapping

    return frozenset(mapping.read_applications(registry.store, service))


def reach_now(
    registry: Registry,
    service: str,
    *,
    methods: Sequence[str] = (),
    attachments: Mapping[str, str] | None = None,
) -> ReachReport:
    """Which providers every registered consumer of ``service`` reaches now, per method, under
    the rules in force (each row's ``before`` and ``after`` are the same): the console's reach
    matrix. ``methods`` defaults to the methods the providers advertise."""
    report = ReachReport()
    texts: dict[str, str | None] = {}
    levels = _Levels(registry)
    for consumer in sorted(registry.lookup(service, layout.CONSUMERS), key=lambda u: u.to_string()):
        view = _View(registry, consumer, levels.providers(service, consumer), report, texts)
        providers = view.providers({})
        routers = view.routers({})
        for method in _methods(view.matched, methods):
            invocation = Invocation(service, method, attachments=dict(attachments or {}))
            outcome = route(consumer, providers, routers, invocation)
            for exc in outcome.refused:
                report.note(f"refused (as consumers would): {exc}")
            reached = tuple(p.address for p in outcome.providers)
            report.rows.append(ConsumerReach(consumer, method, reached, reached))
    return report
