"""Rule documents as the CLI sees them: config keys and kinds, validation, the ``enabled`` flag.

A rule lives at a config-center key ``<target>.<kind>`` (design §4): the target is a service
rule key ``interface:version:group`` (``demo.Greeter::``) or an application name (``shop``).
Which key a pushed file goes to is decided by :func:`resolve_key`:

1. ``--key KEY``: the kind is the key's suffix.
2. Otherwise the kind is ``--kind``, or inferred from the document's fields
   (:data:`FIELD_KINDS`), and the target from its ``scope``/``key`` fields as Dubbo 3 rules carry
   them (tag and script rules always name the provider application; a shard rule names no
   service, so it needs ``--key``).

Validation runs :func:`dubbo_py.router.factory.compile_document` — exactly what consumers run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from dubbo_py.cluster import configurators
from dubbo_py.errors import RuleError
from dubbo_py.registry import layout
from dubbo_py.router import factory
from dubbo_py.router.rule_budget import DEFAULT_RULE_BUDGET, budget_clock, elapsed_check
from dubbo_py.router.rule_yaml import yaml_error

__all__ = [
    "APPLICATION_KINDS",
    "FIELD_KINDS",
    "KINDS",
    "SERVICE_KINDS",
    "KeyUnknown",
    "RuleKey",
    "document_enabled",
    "infer_kind",
    "key_from_document",
    "load_yaml",
    "parse_key",
    "resolve_key",
    "scope_target",
    "service_target",
    "set_enabled",
    "validate",
]

#: Every kind of config-center rule document, as the suffix of its key.
KINDS: tuple[str, ...] = (*factory.DOCUMENT_KINDS, "configurators")
#: Kinds keyed by (provider) application only: consumers watch ``<provider app>.<kind>``.
APPLICATION_KINDS = frozenset({"tag-router", "script-router"})
#: Kinds keyed by service only: ``<interface>:<version>:<group>.<kind>``.
SERVICE_KINDS = frozenset({"shard-router"})
#: A document field that tells its kind (Dubbo 3 rule formats and our shard rule).
FIELD_KINDS: tuple[tuple[str, str], ...] = (
    ("conditions", "condition-router"),
    ("tags", "tag-router"),
    ("script", "script-router"),
    ("scheme", "shard-router"),
    ("shards", "shard-router"),
    ("configs", "configurators"),
)

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
    def compile_kind(self) -> str:
        """The compiler consumers use for this key (an application's condition rule has its own,
        as in :class:`~dubbo_py.registry.directory.ServiceRules`)."""
        if self.kind == "condition-router" and self.application_scoped:
            return "condition-router-app"
        return self.kind


def parse_key(key: str) -> RuleKey:
    """Split a config key; ValueError naming the key and what a key looks like."""
    key = key.strip()
    try:
        layout.config_path(key)
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    for kind in KINDS:
        if key.endswith(f".{kind}"):
            target = key[: -len(kind) - 1]
            break
    else:
        kinds = ", ".join(f".{k}" for k in KINDS)
        raise ValueError(f"{key!r} is not a rule key: it ends in one of {kinds} ({_KEY_EXAMPLES})")
    if not target:
        raise ValueError(f"{key!r} names no service or application before .{kind}")
    if ":" in target and target.count(":") != 2:
        raise ValueError(
            f"{key!r}: a service rule key is <interface>:<version>:<group>.{kind} "
            f"(blank parts stay empty: demo.Greeter::.{kind})"
        )
    rule = RuleKey(key, target, kind)
    if kind in APPLICATION_KINDS and not rule.application_scoped:
        raise ValueError(f"{key!r}: {kind} rules are keyed by provider application: <app>.{kind}")
    if kind in SERVICE_KINDS and rule.application_scoped:
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


def load_yaml(text: str, source: str) -> tuple[Any, yaml.Node | None]:
    """Parse one YAML document (data and its node); RuleError with line and column on bad
    syntax, from the mark PyYAML reports."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        data = None if node is None else loader.construct_document(node)
        return data, node
    except yaml.YAMLError as exc:
        raise yaml_error(exc, source) from None
    except RecursionError:
        raise RuleError("invalid YAML: nested too deeply", source=source) from None
    finally:
        loader.dispose()


def infer_kind(data: object) -> str | None:
    """The kind a document's fields tell (:data:`FIELD_KINDS`), None when none or several do."""
    if not isinstance(data, Mapping):
        return None
    kinds = {kind for field, kind in FIELD_KINDS if field in data}
    return kinds.pop() if len(kinds) == 1 else None


def key_from_document(kind: str, data: object, source: str) -> str:
    """The config key a document of ``kind`` names through its ``scope``/``key`` fields;
    RuleError saying what is missing (and that ``--key`` settles it)."""

    def missing(reason: str) -> KeyUnknown:
        return KeyUnknown(f"{reason}; pass --key", source=source)

    if not isinstance(data, Mapping):
        raise missing("the rule is not a YAML mapping, so it names no key")
    if kind in SERVICE_KINDS:
        raise missing(
            f"a {kind} rule does not name its service (--key <interface>:<version>:<group>.{kind})"
        )
    name = data.get("key")
    if not isinstance(name, str) or not name.strip():
        raise missing("the rule has no 'key' field naming its service or application")
    name = name.strip()
    if kind in APPLICATION_KINDS:
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


def scope_target(data: object) -> str:
    """A stand-in target for a document that names no key: application-like when its scope is
    ``application``, service-like otherwise (all that matters to pick its compiler)."""
    if isinstance(data, Mapping) and data.get("scope") == "application":
        return "application"
    return "service::"


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
    data, _ = load_yaml(text, source)
    if data is None:
        raise RuleError("the rule file is empty", source=source)
    if kind is None:
        kind = infer_kind(data)
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
        data, _ = load_yaml(text, source)
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
    if rule.kind == "configurators":
        # What the directory runs on every configurators document it reads.
        load_yaml(text, source)  # syntax errors with their position
        configurators.parse_configurators_yaml(text, source)
        return []
    started = budget_clock()
    routers = factory.compile_document(rule.compile_kind, text, source)
    # Consumers refuse a rule that takes longer than this to compile; say so here too.
    elapsed_check(f"compiling the rule from {source}", started, DEFAULT_RULE_BUDGET)
    return [r.name for r in routers]


def document_enabled(text: str) -> bool | None:
    """The document's ``enabled`` field (default true), None when the text is not a mapping."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    if not isinstance(data, Mapping):
        return None
    value = data.get("enabled", True)
    return value if isinstance(value, bool) else None


def set_enabled(text: str, enabled: bool, source: str) -> str:
    """The document with its top-level ``enabled`` field set, everything else (comments,
    order, formatting) kept: the value is replaced in place, or a line is added before the
    first field. A flow-style mapping is re-written."""
    data, node = load_yaml(text, source)
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
