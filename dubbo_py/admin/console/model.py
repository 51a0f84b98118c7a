"""What the console's pages show, read from the registry with the CLI's own computations
(reach, rules, overrides, history); pure data, no HTML."""

from __future__ import annotations

import difflib
import time
from collections.abc import Sequence
from dataclasses import dataclass

from dubbo_py.admin import provider_levels
from dubbo_py.admin.rules import documents as rules
from dubbo_py.admin.rules import overrides
from dubbo_py.admin.rules.diff import change_summary
from dubbo_py.admin.rules.history import History, HistoryEntry
from dubbo_py.admin.rules.reach import ConsumerReach, reach_now
from dubbo_py.cluster import configurators
from dubbo_py.cluster.loadbalance.base import effective_weight
from dubbo_py.registry import layout, rule_kinds
from dubbo_py.registry.directory import ServiceRules
from dubbo_py.registry.registry import Registry
from dubbo_py.url import URL

__all__ = [
    "HistoryRow",
    "ProviderRow",
    "ReachMatrix",
    "RuleRow",
    "ServicePage",
    "ServiceRow",
    "history_rows",
    "rule_rows",
    "service_page",
    "services",
    "unified_diff",
]

DEFAULT_WEIGHT = 100


@dataclass(frozen=True)
class ServiceRow:
    """One service in the services list."""

    name: str
    versions: tuple[str, ...]
    groups: tuple[str, ...]
    providers: int
    consumers: int
    #: Rule document keys in force for it, and how many router/override URLs it has.
    rules: tuple[str, ...]
    router_urls: int
    override_urls: int


@dataclass(frozen=True)
class ProviderRow:
    """A provider as consumers see it after override rules: one row per provider, whichever
    levels it is registered at (see :mod:`dubbo_py.admin.provider_levels`)."""

    #: The URL shown (the application-level one when registered at both levels).
    url: URL
    configured: URL
    #: Descriptions of what override rules change on it (``weight=50``, ``disabled=true``).
    overrides: tuple[str, ...]
    #: The levels it is registered at, interface level first.
    levels: tuple[str, ...] = (provider_levels.INTERFACE,)

    @property
    def levels_label(self) -> str:
        """``interface+application``, ``interface`` or ``application``."""
        return provider_levels.levels_label(self.levels)

    @property
    def address(self) -> str:
        """``host:port``."""
        return self.url.address

    @property
    def weight(self) -> int:
        """The weight after override rules (before warmup)."""
        return self.configured.get_int("weight", DEFAULT_WEIGHT)

    @property
    def effective_weight(self) -> int:
        """The weight load balancers use now (warmup applied)."""
        return effective_weight(self.configured, "", int(time.time() * 1000))

    @property
    def disabled(self) -> bool:
        """Taken out of service by an override rule."""
        return self.configured.get_bool("disabled", False)

    @property
    def tag(self) -> str:
        """The provider's ``dubbo.tag``, if any."""
        return self.configured.get_str("dubbo.tag")

    @property
    def parameters(self) -> dict[str, str]:
        """The URL parameters the provider's application gave it (``warehouse=north``), as
        ``dubbo-py providers`` shows them: what routing rules match on."""
        return provider_levels.own_parameters(self.url)


@dataclass(frozen=True)
class ReachMatrix:
    """Per method: which provider each consumer reaches now."""

    method: str
    providers: tuple[str, ...]
    #: (consumer label, addresses reached) per consumer.
    rows: tuple[tuple[str, frozenset[str]], ...]


@dataclass(frozen=True)
class ServicePage:
    """Everything the service page shows."""

    name: str
    providers: tuple[ProviderRow, ...]
    consumers: tuple[URL, ...]
    matrices: tuple[ReachMatrix, ...]
    notes: tuple[str, ...]
    rules: tuple[str, ...]
    override_urls: tuple[URL, ...]


@dataclass(frozen=True)
class RuleRow:
    """One rule document."""

    key: str
    kind: str
    version: int
    enabled: bool | None


@dataclass(frozen=True)
class HistoryRow:
    """One history entry with what it changed and its diff from the entry before."""

    entry: HistoryEntry
    change: str
    diff: str


def _existing(registry: Registry) -> dict[str, rules.RuleKey]:
    out = {}
    for key in registry.config_keys():
        try:
            out[key] = rules.parse_key(key)
        except ValueError:
            continue  # other config-center data
    return out


def _rules_of(
    service: str, providers: Sequence[URL], consumers: Sequence[URL], keys: dict[str, rules.RuleKey]
) -> tuple[str, ...]:
    """Rule keys that the service's consumers watch (as their directories do), or that name
    the service."""
    watched: set[str] = set()
    apps = {p.get_str("application") for p in providers} - {""}
    for consumer in consumers:
        rules_of_consumer = ServiceRules.for_consumer(consumer)
        watched.update(w.key for w in rules_of_consumer.static_keys())
        for app in apps:
            watched.update(w.key for w in rules_of_consumer.provider_app_keys(app))
    if not consumers:  # no consumer yet: the keys a consumer of another application watches
        for app in apps:
            watched.update(w.key for w in rule_kinds.provider_application_keys(app))
    return tuple(sorted(k for k, rule in keys.items() if k in watched or rule.interface == service))


def services(registry: Registry, query: str = "") -> list[ServiceRow]:
    """Services whose name contains ``query`` (case-insensitive), with their counts."""
    keys = _existing(registry)
    out = []
    needle = query.strip().lower()
    for name in registry.services():
        if needle and needle not in name.lower():
            continue
        providers = registry.lookup(name, layout.PROVIDERS)
        consumers = registry.lookup(name, layout.CONSUMERS)
        out.append(
            ServiceRow(
                name,
                tuple(sorted({p.get_str("version") for p in providers})),
                tuple(sorted({p.get_str("group") for p in providers})),
                len(providers),
                len(consumers),
                _rules_of(name, providers, consumers, keys),
                len(registry.lookup(name, layout.ROUTERS)),
                len(registry.lookup(name, layout.CONFIGURATORS)),
            )
        )
    return out


def _documents(registry: Registry, urls: Sequence[URL], service: str) -> dict[str, str]:
    documents = {}
    apps = {u.get_str("application") for u in urls} - {""}
    keys = {layout.rule_key(service, u.get_str("version"), u.get_str("group")) for u in urls}
    for key in [*(f"{k}.configurators" for k in keys), *(f"{a}.configurators" for a in apps)]:
        doc = registry.get_config(key)
        if doc is not None:
            documents[key] = doc.text
    return documents


def _consumer_label(url: URL) -> str:
    app = url.get_str("application")
    return f"{app}@{url.host}" if app else url.host


def service_page(registry: Registry, service: str) -> ServicePage:
    """The service page's data: providers after overrides (one row per provider, at either
    level), consumers, reach per method."""
    listed = provider_levels.listed_providers(registry, service)
    urls = [p.url for p in listed]
    override_urls = registry.lookup(service, layout.CONFIGURATORS)
    documents = _documents(registry, urls, service)
    configured = configurators.apply(urls, override_urls, documents)
    rows = []
    for provider, url, after in zip(listed, urls, configured, strict=True):
        changes = list(overrides.effective(override_urls, url))
        for name in ("weight", "disabled"):
            if after.get_str(name) != url.get_str(name) and after.get_str(name):
                text = f"{name}={after.get_str(name)}"
                if text not in changes:
                    changes.append(text)
        rows.append(ProviderRow(url, after, tuple(changes), provider.levels))
    consumers = tuple(
        sorted(registry.lookup(service, layout.CONSUMERS), key=lambda u: u.to_string())
    )
    report = reach_now(registry, service)
    # A column per provider address, whichever level it is registered at: each consumer is
    # routed over the level it reads, so a provider at the other level only is, rightly, not
    # reached by it. Two rows at one address (another version) are one column.
    matrices = _matrices(report.rows, tuple(dict.fromkeys(r.address for r in rows)))
    return ServicePage(
        service,
        tuple(rows),
        consumers,
        matrices,
        tuple(report.notes),
        _rules_of(service, urls, consumers, _existing(registry)),
        tuple(u for u in override_urls if u.protocol != "empty"),
    )


def _matrices(
    reach: Sequence[ConsumerReach], providers: tuple[str, ...]
) -> tuple[ReachMatrix, ...]:
    by_method: dict[str, list[tuple[str, frozenset[str]]]] = {}
    for row in reach:
        by_method.setdefault(row.method, []).append(
            (_consumer_label(row.consumer), frozenset(row.after))
        )
    return tuple(
        ReachMatrix(method or "(any)", providers, tuple(rows))
        for method, rows in sorted(by_method.items())
    )


def rule_rows(registry: Registry) -> list[RuleRow]:
    """Every rule document (as ``rules list``)."""
    out = []
    for key, rule in sorted(_existing(registry).items()):
        doc = registry.get_config(key)
        if doc is None:
            continue
        out.append(RuleRow(key, rule.kind, doc.version, rules.document_enabled(doc.text)))
    return out


def unified_diff(before: str | None, after: str | None, before_name: str, after_name: str) -> str:
    """A unified diff of two rule texts (None: absent)."""
    return "".join(
        difflib.unified_diff(
            (before or "").splitlines(keepends=True),
            (after or "").splitlines(keepends=True),
            before_name,
            after_name,
        )
    )


def history_rows(history: History, key: str) -> list[HistoryRow]:
    """The history of ``key``, newest first, each with its change summary (as ``rules
    history``) and its diff from the entry before it."""
    entries = history.entries(key)
    out = []
    for index, entry in enumerate(entries):
        before = entries[index - 1].text if index else None
        change = change_summary(before, entry.text, first=(index == 0 and entry.seq > 0))
        previous = f"#{entries[index - 1].seq}" if index else "(before)"
        diff = unified_diff(before, entry.text, previous, f"#{entry.seq}")
        out.append(HistoryRow(entry, change, diff))
    return list(reversed(out))
