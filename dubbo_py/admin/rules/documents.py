"""Rule documents as the CLI sees them: config keys and kinds, validation, the ``enabled`` flag.

A rule lives at a config-center key ``<target>.<kind>`` (docs/design.md §5): the target is a service
rule key ``interface:version:group`` (``demo.Greeter::``) or an application name (``shop``).
Which key a pushed file goes to is decided by :func:`resolve_key`:

1. ``--key KEY``: the kind is the key's suffix.
2. Otherwise the kind is ``--kind``, or inferred from the document's fields (the rule-kind
   table, :mod:`dubbo_py.registry.rule_kinds`), and the target from its ``scope``/``key``
   fields as Dubbo 3 rules carry them (tag and script rules always name the provider
   application; a shard rule names no service, so it needs ``--key``).

Validation compiles through the rule-kind table (:mod:`dubbo_py.registry.rule_kinds`) — exactly
what consumers run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import yaml

from dubbo_py.errors import RuleError
from dubbo_py.registry import layout, rule_kinds
from dubbo_py.registry.rule_kinds import RuleKind, Target
from dubbo_py.router.rule_budget import DEFAULT_RULE_BUDGET, budget_clock, elapsed_check
from dubbo_py.yaml_loader import YamlDocument, load_yaml, peek_yaml

__all__ = [
    "KINDS",
    "KeyUnknown",
    "RuleKey",
    "document_enabled",
    "infer_kind",
    "key_from_document",
    "load_document",
    "parse_key",
    "resolve_key",
    "scope_target",
    "service_target",
    "set_enabled",
    "validate",
]

#: Every kind of config-center rule document, as the suffix of its key.
KINDS: tuple[str, ...] = rule_kinds.kind_names()

_KEY_EXAMPLES = "demo.Greeter::.condition-router, shop.tag-router"


class KeyUnknown(RuleError):
    """A rule file that does not say which key it belongs to (``--key`` settles it)."""


@dataclass(frozen=True, slots=True)
class RuleKey:
    """A config key split into its target and kind."""

    key: str
    target: str
    kind: str

    @property
    def application_scoped(self) -> bool:
        """True for ``<application>.<kind>``, False for ``<interface>:<version>:<group>.<kind>``."""
        return ":" not in self.target

    @property
    def interface(self) -> str:
        """The service interface of a service-scoped key (``""`` for an application key)."""
        return "" if self.application_scoped else self.target.split(":", 1)[0]

    @property
    def rule_kind(self) -> RuleKind:
        """The kind's entry in the rule-kind table."""
        found = rule_kinds.kind_named(self.kind)
        assert found is not None, self.kind  # parse_key accepts known kinds only
        return found

    @property
    def read_as(self) -> Target:
        """How consumers read this key (an application's condition rule has its own compiler,
        as in :class:`~dubbo_py.registry.directory.ServiceRules`)."""
        if not self.application_scoped:
            return Target.SERVICE
        return self.rule_kind.application_target or Target.APPLICATION


def parse_key(key: str) -> RuleKey:
    """Split a config key; ValueError naming the key and what a key looks like."""
    key = key.strip()
    try:
        layout.config_path(key)
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    for kind in rule_kinds.kind_names():
        if key.endswith(f".{kind}"):
            target = key[: -len(kind) - 1]
            break
    else:
        kinds = ", ".join(f".{k}" for k in rule_kinds.kind_names())
        raise ValueError(f"{key!r} is not a rule key: it ends in one of {kinds} ({_KEY_EXAMPLES})")
    if not target:
        raise ValueError(f"{key!r} names no service or application before .{kind}")
    if ":" in target and target.count(":") != 2:
        raise ValueError(
            f"{key!r}: a service rule key is <interface>:<version>:<group>.{kind} "
            f"(blank parts stay empty: demo.Greeter::.{kind})"
        )
    rule = RuleKey(key, target, kind)
    targets = rule.rule_kind.targets
    if Target.SERVICE not in targets and not rule.application_scoped:
        owner = "provider " if Target.PROVIDER_APPLICATION in targets else ""
        raise ValueError(f"{key!r}: {kind} rules are keyed by {owner}application: <app>.{kind}")
    if rule.rule_kind.application_target is None and rule.application_scoped:
        raise ValueError(
            f"{key!r}: {kind} rules are keyed by service: <interface>:<version>:<group>.{kind}"
        )
    if not rule.application_scoped and not rule.interface:
        raise ValueError(f"{key!r} names no interface")
    return rule


def service_target(spec: str) -> str:
    """The rule-key target of a service named as ``interface:version:group`` (taken as is) or as
    a Dubbo service key ``[group/]interface[:version]``."""
    spec = spec.strip()
    if spec.count(":") == 2:
        return spec
    group, _, rest = spec.rpartition("/")
    interface, _, version = rest.partition(":")
    return layout.rule_key(interface, version, group)


def load_document(text: str, source: str) -> YamlDocument:
    """A rule file as YAML (an empty one loads as ``data=None``); RuleError with line and
    column on bad syntax, anchors or aliases."""
    return load_yaml(text, source, error=RuleError, empty=None, string_keys=False)


def infer_kind(data: object) -> str | None:
    """The kind a document's fields tell (the rule-kind table's ``fields``), None when none or
    several do."""
    kind = rule_kinds.infer_kind(data)
    return None if kind is None else kind.name


def key_from_document(kind: str, data: object, source: str) -> str:
    """The config key a document of ``kind`` names through its ``scope``/``key`` fields;
    RuleError saying what is missing (and that ``--key`` settles it)."""

    def missing(reason: str) -> KeyUnknown:
        return KeyUnknown(f"{reason}; pass --key", source=source)

    if not isinstance(data, Mapping):
        raise missing("the rule is not a YAML mapping, so it names no key")
    rule_kind = rule_kinds.kind_named(kind)
    if rule_kind is None:
        raise missing(f"unknown rule kind {kind!r}")
    if not rule_kind.names_its_key:
        raise missing(
            f"a {kind} rule does not name its service (--key <interface>:<version>:<group>.{kind})"
        )
    name = data.get("key")
    if not isinstance(name, str) or not name.strip():
        raise missing("the rule has no 'key' field naming its service or application")
    name = name.strip()
    if Target.SERVICE not in rule_kind.targets:
        scope = data.get("scope", "application")
        if scope != "application":
            raise missing(f"{kind} rules are application-scoped, not scope {scope!r}")
        return f"{name}.{kind}"
    scope = data.get("scope")
    if scope == "application":
        return f"{name}.{kind}"
    if scope == "service":
        return f"{service_target(name)}.{kind}"
    raise missing(f"the rule's scope must be 'service' or 'application', not {scope!r}")


def scope_target(data: object, kind: str) -> str:
    """A stand-in target for a document of ``kind`` that names no key: application-like or
    service-like as :func:`~dubbo_py.registry.rule_kinds.target_for_document` reads it (all
    that matters to pick its compiler)."""
    rule_kind = rule_kinds.kind_named(kind)
    if rule_kind is None:
        return "service::"
    target = rule_kinds.target_for_document(rule_kind, data)
    return "application" if target.application_scoped else "service::"


def resolve_key(text: str, source: str, *, key: str | None, kind: str | None) -> RuleKey:
    """Where a rule file goes (see the module doc); RuleError (source: the file) when it cannot
    be told or ``--key`` contradicts the document."""
    if key is not None:
        try:
            rule = parse_key(key)
        except ValueError as exc:
            raise RuleError(str(exc), source=source) from None
        if kind is not None and kind != rule.kind:
            raise RuleError(f"--kind {kind} contradicts --key {rule.key}", source=source)
        _check_key_agrees(rule, text, source)
        return rule
    data = load_document(text, source).data
    if data is None:
        raise RuleError("the rule file is empty", source=source)
    if kind is None:
        kind = infer_kind(data)
        unread = rule_kinds.unread_document(data)
        if kind is None and unread is not None:
            raise RuleError(f"{unread.name}: {unread.why}", source=source)
        if kind is None:
            raise RuleError(
                "cannot tell the rule kind from its fields; pass --kind "
                f"({', '.join(KINDS)}) or --key",
                source=source,
            )
    key = key_from_document(kind, data, source)
    try:
        return parse_key(key)
    except ValueError as exc:
        raise RuleError(str(exc), source=source) from None


def _check_key_agrees(rule: RuleKey, text: str, source: str) -> None:
    # A document that names another service or application than --key is almost certainly
    # pushed to the wrong place; its version and group may differ (Dubbo rules often name only
    # the interface), the interface or application may not.
    try:
        data = load_document(text, source).data
        named = parse_key(key_from_document(rule.kind, data, source))
    except (RuleError, ValueError):
        return  # nothing (usable) named: --key decides; validation reports real faults
    same = (
        named.target == rule.target
        if rule.application_scoped or named.application_scoped
        else named.interface == rule.interface
    )
    if not same:
        raise RuleError(
            f"the rule names {named.target.rstrip(':') or named.target!r} "
            f"(key {named.key}) but --key is {rule.key}",
            source=source,
        )


def validate(rule: RuleKey, text: str, source: str) -> list[str]:
    """Check a document for ``rule``'s key as consumers will read it; returns the names of the
    routers it compiles to (none for configurators). RuleError naming ``source`` (and the line
    and column where known) when it is invalid."""
    started = budget_clock()
    routers = rule.rule_kind.compile(rule.read_as, text, source)
    # Consumers refuse a rule that takes longer than this to compile; say so here too.
    elapsed_check(f"compiling the rule from {source}", started, DEFAULT_RULE_BUDGET)
    return [r.name for r in routers]


def document_enabled(text: str) -> bool | None:
    """The document's ``enabled`` field (default true), None when the text is not a mapping."""
    data = peek_yaml(text)
    if not isinstance(data, Mapping):
        return None
    value = data.get("enabled", True)
    return value if isinstance(value, bool) else None


def set_enabled(text: str, enabled: bool, source: str) -> str:
    """The document with its top-level ``enabled`` field set, everything else (comments,
    order, formatting) kept: the value is replaced in place, or a line is added before the
    first field. A flow-style mapping is re-written."""
    doc = load_document(text, source)
    data, node = doc.data, doc.root
    if not isinstance(node, yaml.MappingNode) or not isinstance(data, Mapping):
        raise RuleError(
            "the rule is not a YAML mapping, so it has no 'enabled' field", source=source
        )
    value = "true" if enabled else "false"
    if node.flow_style:
        rewritten = {k: v for k, v in data.items() if k != "enabled"}
        return yaml.safe_dump({"enabled": enabled, **rewritten}, sort_keys=False)
    for key_node, value_node in node.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.value == "enabled":
            if not isinstance(value_node, yaml.ScalarNode):
                raise RuleError("'enabled' must be true or false", source=source)
            start, end = value_node.start_mark.index, value_node.end_mark.index
            if start == end:  # "enabled:" with no value: keep a space after the colon
                value = f" {value}"
            return text[:start] + value + text[end:]
    first = node.start_mark
    line_start = first.index - first.column
    indent = " " * first.column
    return text[:line_start] + f"{indent}enabled: {value}\n" + text[line_start:]
