"""Warnings about valid rules that will not do what their author meant.

Consumers accept every rule Dubbo 3.3 accepts, so a typo such as ``methd = Add``, a rule for a
misspelled service or a forced rule that starves a consumer is not a syntax error. ``rules
validate`` and ``rules push`` run these checks after validation and print what they find as
warnings (``--strict`` makes them refusals):

* a condition or tag-rule key that never matches: ``arguments``/``attachments`` without an
  index or name, or a URL key that no provider or consumer in the registry has (with the
  closest field as a suggestion);
* a condition document whose ``scope`` contradicts the key it goes to (the key wins);
* a field of a rule document that dubbo-py does not act on (``ignored-field``: ``runtime``,
  ``dynamic``, a document-level ``priority``; ``unknown-field``: a field Dubbo does not know
  either; the kind's table in :mod:`dubbo_py.rule_fields`, and for configurators every item
  part nothing acts on): consumers log and count them too, once per document version;
* a rule key naming no registered service or application, or one that no registered consumer
  watches (with the closest registered name or watched key);
* a rule that leaves a registered consumer with no provider for a method (from the dry-run
  reach, :func:`dubbo_py.admin.rules.reach.reach_of_change`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dubbo_py.admin.common import closest
from dubbo_py.admin.rules.documents import RuleKey
from dubbo_py.errors import RuleError
from dubbo_py.registry import layout
from dubbo_py.registry.application import lookup as app_level
from dubbo_py.registry.directory import ServiceRules
from dubbo_py.registry.registry import Registry
from dubbo_py.router.condition.parser import parse_rule, parse_side
from dubbo_py.router.condition.rule import Clause, KeyKind
from dubbo_py.url import URL
from dubbo_py.yaml_loader import peek_yaml

__all__ = ["LintWarning", "RegistryView", "lint_offline", "lint_rule", "rule_keys"]

#: Keys every URL has, whatever the registry holds (``url_sample``'s special keys).
_URL_PARTS = frozenset(
    {"protocol", "username", "password", "host", "port", "path", "address", "application"}
)


@dataclass(frozen=True, slots=True)
class LintWarning:
    """One finding: ``code`` is a short word scripts can test, ``message`` says what and where."""

    code: str
    message: str

    def to_json(self) -> dict[str, str]:
        """``{"code", "message"}``."""
        return {"code": self.code, "message": self.message}


@dataclass(frozen=True, slots=True)
class RuleKeyUse:
    """A key a rule reads, where (``conditions[0]``, ``tags[1].match[0]``) and how."""

    where: str
    name: str
    kind: KeyKind


# --------------------------------------------------------------------------- keys of a rule


def _clauses(clauses: Iterable[Clause] | None, where: str) -> Iterator[RuleKeyUse]:
    for clause in clauses or ():
        yield RuleKeyUse(where, clause.key.text(), clause.key.kind)


def _condition_keys(data: Mapping[str, Any], source: str) -> Iterator[RuleKeyUse]:
    conditions = data.get("conditions")
    if not isinstance(conditions, list):
        return
    version = str(data.get("configVersion") or "v3.0").strip().lower()
    for i, item in enumerate(conditions):
        where = f"conditions[{i}]"
        try:
            if version.startswith("v3.1") and isinstance(item, Mapping):
                source_side = item.get("from")
                if isinstance(source_side, Mapping):
                    text = source_side.get("match") or ""
                    yield from _clauses(parse_side(str(text), source, then=False), where)
                for j, dest in enumerate(item.get("to") or ()):
                    if isinstance(dest, Mapping):
                        text = dest.get("match") or ""
                        side = parse_side(str(text), source, then=True)
                        yield from _clauses(side, f"{where}.to[{j}]")
            elif isinstance(item, str):
                rule = parse_rule(item, source)
                yield from _clauses(rule.when, where)
                yield from _clauses(rule.then, where)
        except RuleError:
            continue  # validation reports real faults; here only valid text is looked at


def _tag_keys(data: Mapping[str, Any]) -> Iterator[RuleKeyUse]:
    for i, tag in enumerate(data.get("tags") or ()):
        if not isinstance(tag, Mapping):
            continue
        for j, match in enumerate(tag.get("match") or ()):
            if isinstance(match, Mapping) and isinstance(match.get("key"), str):
                yield RuleKeyUse(f"tags[{i}].match[{j}]", match["key"], KeyKind.PARAM)


def rule_keys(kind: str, text: str, source: str) -> list[RuleKeyUse]:
    """The keys a condition or tag rule document reads (other kinds: none)."""
    data = peek_yaml(text)
    if data is None:
        return []
    if not isinstance(data, Mapping):
        return []
    if kind == "condition-router":
        return list(_condition_keys(data, source))
    if kind == "tag-router":
        return list(_tag_keys(data))
    return []


# --------------------------------------------------------------------------- the registry


@dataclass(frozen=True)
class RegistryView:
    """What the checks need from the registry, read once."""

    services: tuple[str, ...]
    providers: Mapping[str, tuple[URL, ...]]
    consumers: Mapping[str, tuple[URL, ...]]

    @classmethod
    def read(cls, registry: Registry) -> RegistryView:
        """Every service with its providers and consumers."""
        services = tuple(registry.services())
        return cls(
            services,
            {s: tuple(registry.lookup(s, layout.PROVIDERS)) for s in services},
            {s: tuple(registry.lookup(s, layout.CONSUMERS)) for s in services},
        )

    def urls(self) -> Iterator[URL]:
        """Every provider and consumer URL."""
        for group in (self.providers, self.consumers):
            for urls in group.values():
                yield from urls

    def fields(self) -> frozenset[str]:
        """Every key a condition can read from some registered URL."""
        names: set[str] = set(_URL_PARTS)
        for url in self.urls():
            names.update(url.to_map())
        return frozenset(names)

    def applications(self) -> frozenset[str]:
        """Every application that registered a provider or consumer."""
        return frozenset(a for u in self.urls() if (a := u.get_str("application")))

    def watched_keys(self, kind: str) -> frozenset[str]:
        """Every config key of ``kind`` some registered consumer watches."""
        keys: set[str] = set()
        if kind == "migration":
            # Read by each consumer's migration subscriber, for its own application.
            return frozenset(
                f"{app}{layout.MIGRATION_SUFFIX}"
                for consumers in self.consumers.values()
                for c in consumers
                if (app := c.get_str("application"))
            )
        for service, consumers in self.consumers.items():
            apps = {p.get_str("application") for p in self.providers.get(service, ())} - {""}
            for consumer in consumers:
                rules = ServiceRules.for_consumer(consumer)
                pairs = rules.static_keys()
                for app in apps:
                    pairs += rules.provider_app_keys(app)
                keys.update(w.key for w in pairs if w.kind.name == kind)
        return frozenset(keys)


# --------------------------------------------------------------------------- the checks


def lint_offline(rule: RuleKey, text: str, source: str) -> list[LintWarning]:
    """The checks that need no registry: fields dubbo-py does not act on (the no-silent-drop
    table of the kind, :mod:`dubbo_py.rule_fields`), keys that can never match, a
    contradicting scope."""
    out: list[LintWarning] = [
        LintWarning(
            "ignored-field" if note.known else "unknown-field", f"{source}: {note.message()}"
        )
        for note in rule.rule_kind.unread(text, source)
    ]
    for use in rule_keys(rule.kind, text, source):
        if use.kind is KeyKind.ABSENT:
            out.append(
                LintWarning(
                    "never-matches",
                    f"{source}: {use.where}: key {use.name!r} never matches: Dubbo and dubbo-py "
                    "read arguments/attachments only as arguments[N] and attachments[name]",
                )
            )
    if rule.kind == "condition-router" and rule.key:
        data = peek_yaml(text)
        scope = data.get("scope") if isinstance(data, Mapping) else None
        where = "application" if rule.application_scoped else "service"
        if scope in ("service", "application") and scope != where:
            out.append(
                LintWarning(
                    "scope",
                    f"{source}: scope {scope!r} but {rule.key} is a {where} key: consumers "
                    f"(as Dubbo's) apply it as a {where} rule",
                )
            )
    return out


def _key_warnings(rule: RuleKey, text: str, source: str, view: RegistryView) -> list[LintWarning]:
    fields = view.fields()
    out = []
    for use in rule_keys(rule.kind, text, source):
        if use.kind is not KeyKind.PARAM or use.name in fields:
            continue
        suggestion = closest(use.name, sorted(fields | {"method", "methods"}))
        hint = f"; did you mean {suggestion!r}?" if suggestion else ""
        out.append(
            LintWarning(
                "never-matches",
                f"{source}: {use.where}: key {use.name!r} is not a field of any provider or "
                f"consumer in the registry, so it never matches{hint}",
            )
        )
    return out


def _target_warnings(rule: RuleKey, view: RegistryView) -> list[LintWarning]:
    if not rule.application_scoped:
        if rule.interface not in view.services:
            hint = closest(rule.interface, view.services)
            return [
                LintWarning(
                    "unknown-service",
                    f"{rule.key}: no service {rule.interface!r} is registered"
                    + (f"; did you mean {hint!r}?" if hint else ""),
                )
            ]
    elif rule.target not in view.applications():
        hint = closest(rule.target, sorted(view.applications()))
        return [
            LintWarning(
                "unknown-service",
                f"{rule.key}: no provider or consumer of application {rule.target!r} is "
                "registered" + (f"; did you mean {hint!r}?" if hint else ""),
            )
        ]
    if rule.kind == "configurators" or not any(view.consumers.values()):
        return []  # override rules also reach providers; with no consumer nothing can be said
    watched = view.watched_keys(rule.kind)
    if rule.key in watched:
        return []
    hint = closest(rule.key, sorted(watched))
    return [
        LintWarning(
            "not-watched",
            f"{rule.key}: no registered consumer reads this key"
            + (f"; did you mean {hint!r}?" if hint else ""),
        )
    ]


#: The likely cause of a rule nobody reads, and how to name the right registry.
_WRONG_REGISTRY = (
    "is this the registry your services use? name it with --registry or DUBBO_PY_REGISTRY"
)


def _reader_warnings(
    rule: RuleKey, view: RegistryView, registry: Registry, where: str
) -> list[LintWarning]:
    """A service rule for a service registered here once, with no live provider or consumer
    now (e.g. pushed to the embedded registry while the services moved to ZooKeeper)."""
    if rule.application_scoped or not rule.interface:
        return []
    service = rule.interface
    if view.providers.get(service) or view.consumers.get(service):
        return []
    if app_level.providers(registry.store, service):
        return []
    return [
        LintWarning(
            "no-reader",
            f"{rule.key}: no provider or consumer of {service} is registered in {where} now, "
            f"so nothing there reads this rule ({_WRONG_REGISTRY})",
        )
    ]


def _reach_warnings(registry: Registry, rule: RuleKey, text: str) -> list[LintWarning]:
    # Loaded here: only a check against a live registry needs it (rules validate offline
    # starts without it).
    from dubbo_py.admin.rules.reach import reach_of_change

    report = reach_of_change(registry, rule, text)
    out = []
    for row in report.rows:
        if row.after or not row.before:
            continue
        consumer = row.consumer
        out.append(
            LintWarning(
                "no-provider",
                f"{rule.key}: consumer {consumer.get_str('application') or '?'} on "
                f"{consumer.host} would have no provider for "
                f"{row.method or 'its calls'} (it has {len(row.before)} now)",
            )
        )
    return out


def lint_rule(
    rule: RuleKey, text: str, source: str, registry: Registry | None, where: str = ""
) -> tuple[list[LintWarning], list[str]]:
    """Every check for a valid document about to go to ``rule.key``: (warnings, notes). Without
    a registry only :func:`lint_offline` runs, and a note says so. ``where`` names the registry
    in warnings (default: the store's address)."""
    warnings = lint_offline(rule, text, source)
    if registry is None:
        return warnings, ["registry checks skipped (name a registry with --registry to run them)"]
    view = RegistryView.read(registry)
    notes: list[str] = []
    where = where or str(getattr(registry.store, "address", "the registry"))
    if not any(True for _ in view.urls()):
        notes.append("the registry has no provider or consumer: keys and targets not checked")
        if rule.key and not rule.application_scoped:
            warnings += _reader_warnings(rule, view, registry, where)
        elif rule.key and not app_level.instances(registry.store, rule.target):
            warnings.append(
                LintWarning(
                    "no-reader",
                    f"{rule.key}: {where} has no provider or consumer at all, so nothing there "
                    f"reads this rule ({_WRONG_REGISTRY})",
                )
            )
        return warnings, notes
    warnings += _key_warnings(rule, text, source, view)
    if rule.key:
        warnings += _target_warnings(rule, view) or _reader_warnings(rule, view, registry, where)
        warnings += _reach_warnings(registry, rule, text)
    return warnings, notes
