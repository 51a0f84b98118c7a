"""The two ways condition rules reach a consumer, read into routers.

* Dubbo 2.6 registry router URLs, in a service's ``routers`` category::

      condition://0.0.0.0/demo.Greeter?category=routers&force=false&priority=1&rule=<encoded>

  (``route://...&router=condition`` too: the ``router`` parameter names the kind, as in
  Dubbo's ``RegistryDirectory.toRouters``). Priority is the ``priority`` parameter, default 0.
* Dubbo 3 config-center YAML, ``configVersion: v3.0`` (a list of ``when => then`` strings) or
  ``v3.1`` (``from``/``to`` conditions with weighted destinations). A document read from a
  service key (``<interface>:<version>:<group>.condition-router``) runs at priority 140, one
  read from an application key at 150, as Dubbo's ServiceStateRouter and AppStateRouter: where
  the document is stored decides, as in Dubbo, which reads neither its ``scope`` nor its
  ``key`` field. Without a location (``scope=None``) the ``scope`` field chooses, default
  ``service``.

Everything that is wrong raises :class:`RuleError` naming the source and the reason, with the
line and column when the fault is in YAML syntax or in rule text.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from dubbo_py.errors import RuleError
from dubbo_py.router.base import Router
from dubbo_py.router.condition.parser import parse_rule, parse_side
from dubbo_py.router.condition.router import (
    ConditionRouter,
    ConditionRuleSet,
    Destination,
    MultiDestinationRouter,
)
from dubbo_py.router.condition.rule import Clause
from dubbo_py.rule_fields import Field, acted, document_fields, ignored
from dubbo_py.url import URL, decode_component
from dubbo_py.yaml_loader import YamlDocument, as_boolean, compile_yaml, value_node

__all__ = [
    "APPLICATION_SCOPE_PRIORITY",
    "PROVIDER_APPLICATION_PRIORITY",
    "SERVICE_SCOPE_PRIORITY",
    "application_routers_from_yaml",
    "provider_application_routers_from_yaml",
    "router_from_url",
    "routers_from_yaml",
    "service_routers_from_yaml",
    "validate_rule",
    "validate_yaml",
]

#: Chain priority of a service-scope YAML rule (Dubbo's ServiceStateRouter).
SERVICE_SCOPE_PRIORITY = 140
#: Chain priority of an application-scope YAML rule (Dubbo's AppStateRouter).
APPLICATION_SCOPE_PRIORITY = 150
#: Chain priority of a rule read from the key of the providers' application when that is not
#: the consumer's own (Dubbo's ProviderAppStateRouter, ``@Activate(order = 145)``).
PROVIDER_APPLICATION_PRIORITY = 145

_SCOPES = {"service": SERVICE_SCOPE_PRIORITY, "application": APPLICATION_SCOPE_PRIORITY}
#: Where a document can be read: the two scopes a document may declare, and the providers'
#: application (a place, never a declared scope).
_PLACES = {**_SCOPES, "provider-application": PROVIDER_APPLICATION_PRIORITY}
_DOCUMENT_FIELDS = frozenset(
    {
        "configVersion",
        "scope",
        "key",
        "enabled",
        "force",
        "runtime",
        "priority",
        "dynamic",
        "valid",
        "conditions",
    }
)
_V31_CONDITION_FIELDS = frozenset({"from", "to", "priority", "force", "ratio", "trafficDisable"})
log = logging.getLogger(__name__)
#: Every field of a condition document and what dubbo-py does with it (the no-silent-drop
#: table, :mod:`dubbo_py.rule_fields`): ``rules validate`` names those not acted on, and
#: consumers log them.
FIELDS: Mapping[str, Field] = document_fields(
    force=acted(),
    runtime=ignored(
        "conditions are evaluated for every call (Dubbo 3.3's state routers do not read it either)"
    ),
    priority=ignored(
        "the document's routers run at the priority of the key it is stored "
        "at (service 140, application 145/150), as Dubbo's state routers do"
    ),
    dynamic=ignored("rule documents are always dynamic (Dubbo reads and drops it)"),
    # ``valid: false`` builds no router, as Dubbo's AbstractRouterRule reads it.
    valid=acted(),
    # v3.0: each a 'when => then' string; v3.1: each a mapping.
    conditions=acted(
        **{
            "from": acted(match=acted()),
            "to": acted(match=acted(), weight=acted()),
            "priority": acted(),
            "force": acted(),
            "ratio": acted(),
            "trafficDisable": acted(),
        }
    ),
)


# --------------------------------------------------------------------------- registry URLs


def router_from_url(url: URL, source: str = "") -> Router:
    """A :class:`ConditionRouter` from a ``condition://`` (or ``route://...&router=condition``)
    URL of the ``routers`` category. ``source`` (e.g. the registry node path) names the router
    and its errors."""
    where = source or str(url)
    kind = url.parameters.get("router") or url.protocol
    if kind != "condition":
        raise RuleError(f"not a condition router URL (router type {kind!r})", source=where)
    category = url.parameters.get("category")
    if category and category != "routers":
        raise RuleError(f"router URL in category {category!r}, expected 'routers'", source=where)
    raw = url.parameters.get("rule", "")
    if not raw.strip():
        raise RuleError("router URL has no 'rule' parameter", source=where)
    rule = parse_rule(decode_component(raw), where)
    priority_text = url.parameters.get("priority", "").strip()
    try:
        priority = int(priority_text) if priority_text else 0
    except ValueError:
        raise RuleError(f"priority {priority_text!r} is not an integer", source=where) from None
    name = f"condition({source})" if source else f"condition({url.path or '*'}: {rule.text()})"
    return ConditionRouter(
        rule,
        name=name,
        priority=priority,
        force=url.get_bool("force", False),
        enabled=url.get_bool("enabled", True),
    )


def validate_rule(text: str, source: str) -> None:
    """Raise :class:`RuleError` unless ``text`` is a valid ``when => then`` rule."""
    parse_rule(text, source)


# --------------------------------------------------------------------------- config-center YAML


def routers_from_yaml(text: str, source: str, scope: str | None = None) -> list[Router]:
    """The routers of one condition-rule document (a list of one :class:`ConditionRuleSet`
    that applies the document's conditions in order, at its scope's priority). ``scope`` is
    where the document was read (``service`` or ``application`` key); ``None`` lets the
    document's own ``scope`` field say, defaulting to ``service``."""
    if scope is not None and scope not in _PLACES:
        raise ValueError(f"scope must be one of {sorted(_PLACES)}, not {scope!r}")
    return [_compiled_document(text, source, scope)]


@functools.lru_cache(maxsize=128)
def _compiled_document(text: str, source: str, scope: str | None) -> Router:
    """One document's rule set, compiled once per process: every application of a process
    (and every reference of one) that reads a pushed document gets the same rule set, which is
    immutable once compiled, instead of parsing the YAML and the rules again -- ten
    applications in a process applied a push ten times over. A document that fails raises each
    time (errors are not kept)."""
    # Every consumer reads every push: libyaml first, the reference parser for errors. Fields
    # it does not act on are in FIELDS: the registry directory logs and counts them.
    return compile_yaml(
        text,
        source,
        lambda doc: _Document(doc, scope).build(),
        error=RuleError,
        empty="the document is empty",
    )


def service_routers_from_yaml(text: str, source: str) -> list[Router]:
    """A document read from a service key (``<interface>:<version>:<group>.condition-router``)."""
    return routers_from_yaml(text, source, "service")


def application_routers_from_yaml(text: str, source: str) -> list[Router]:
    """A document read from an application key (``<application>.condition-router``)."""
    return routers_from_yaml(text, source, "application")


def provider_application_routers_from_yaml(text: str, source: str) -> list[Router]:
    """A document read from the providers' application key (``<provider-app>.condition-router``)
    by a consumer of another application: priority 145, as Dubbo's ProviderAppStateRouter."""
    return routers_from_yaml(text, source, "provider-application")


def validate_yaml(text: str, source: str) -> None:
    """Raise :class:`RuleError` unless ``text`` is a valid condition-rule document."""
    routers_from_yaml(text, source)


@dataclass(frozen=True)
class _Document:
    doc: YamlDocument
    #: Where the document was read (service or application key); None: its ``scope`` says.
    scope: str | None = None

    @property
    def source(self) -> str:
        return self.doc.source

    # ------------------------------------------------------------------ errors

    def error(self, reason: str, node: yaml.Node | None = None) -> RuleError:
        if node is None:
            return RuleError(reason, source=self.source)
        mark = node.start_mark
        return RuleError(reason, source=self.source, line=mark.line + 1, column=mark.column + 1)

    def rule_error(self, exc: RuleError, node: yaml.Node, where: str) -> RuleError:
        """Re-locate an error in rule text to the YAML document where the rule text maps onto
        it exactly (:meth:`YamlDocument.locate`), else point at the rule."""
        reason = f"{where}: {exc.reason}"
        if exc.line is None or exc.column is None:
            return self.error(reason, node)
        located = self.doc.locate(node, exc.line, exc.column)
        if located is not None:
            line, column = located
            return RuleError(reason, source=self.source, line=line, column=column)
        if not isinstance(node, yaml.ScalarNode):
            return self.error(reason, node)
        return self.error(f"{reason} (line {exc.line}, column {exc.column} of the rule)", node)

    # ------------------------------------------------------------------ reading

    def build(self) -> Router:
        data, node = self.doc.data, self.doc.root
        assert node is not None  # empty documents are refused by the loader
        if not isinstance(data, dict):
            raise self.error("a condition rule document must be a mapping of fields", node)
        # Fields it does not know are accepted, as Dubbo accepts them, and named by the
        # no-silent-drop check (FIELDS; `rules validate` warns, consumers log them).
        version = self.version(data, node)
        # Dubbo reads neither field (the key the document is stored at decides), so a document
        # without them, or with a scope it does not know, is accepted as Dubbo accepts it; the
        # CLI warns about a scope that contradicts the key it is pushed to.
        declared = data.get("scope")
        scope: str = self.scope or (
            declared if isinstance(declared, str) and declared in _SCOPES else "service"
        )
        key = data.get("key")
        key = key.strip() if isinstance(key, str) else ""
        enabled = self.boolean(data, node, "enabled", True)
        force = self.boolean(data, node, "force", False)
        self.boolean(data, node, "runtime", True)
        self.boolean(data, node, "dynamic", False)
        # Dubbo's ListenableStateRouter builds no router from a document with valid: false.
        valid = self.boolean(data, node, "valid", True)
        self.integer(data, node, "priority", 0)
        conditions = data.get("conditions")
        conditions_node = value_node(node, "conditions")
        if not isinstance(conditions, list) or not conditions:
            raise self.error("conditions must be a non-empty list", conditions_node or node)
        assert isinstance(conditions_node, yaml.SequenceNode)
        label = self.source or f"{scope}:{key}"
        items = list(zip(conditions, conditions_node.value, strict=True))
        if version == "v3.1":
            members: list[Router] = [
                self.multi_destination(item, item_node, i, label, force, enabled)
                for i, (item, item_node) in enumerate(items)
            ]
            members.sort(key=lambda m: m.priority)  # stable: equal priorities keep their order
        else:
            members = [
                self.single(item, item_node, i, label, force, enabled)
                for i, (item, item_node) in enumerate(items)
            ]
        if not valid:
            members = []
        return ConditionRuleSet(f"condition({label})", _PLACES[scope], tuple(members))

    def version(self, data: Mapping[str, Any], node: yaml.Node) -> str:
        # Dubbo's ConditionRuleParser: v3.1 when the version starts with it, the v3.0 list
        # format when absent or older.
        version = data.get("configVersion")
        if version is None:
            return "v3.0"
        if isinstance(version, str):
            lowered = version.strip().lower()
            if lowered.startswith("v3.1"):
                return "v3.1"
            if lowered in ("v3.0", "v2.7"):
                return "v3.0"
        raise self.error(
            f"unsupported configVersion {version!r} (expected v3.0 or v3.1)",
            value_node(node, "configVersion"),
        )

    def boolean(self, data: Mapping[str, Any], node: yaml.Node, name: str, default: bool) -> bool:
        value = data.get(name, default)
        flag = as_boolean(value)
        if flag is None:
            raise self.error(f"{name} must be true or false, not {value!r}", value_node(node, name))
        return flag

    def integer(
        self, data: Mapping[str, Any], node: yaml.Node, name: str, default: int, where: str = ""
    ) -> int:
        value = data.get(name, default)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
            return int(value.strip())
        raise self.error(f"{where}{name} must be an integer, not {value!r}", value_node(node, name))

    def single(
        self, item: Any, node: yaml.Node, index: int, label: str, force: bool, enabled: bool
    ) -> Router:
        where = f"conditions[{index}]"
        if isinstance(item, bool):
            item = "true" if item else "false"  # Java's String.valueOf, as Dubbo reads it
        elif isinstance(item, int | float):
            item = str(item)
        if not isinstance(item, str):
            raise self.error(f"{where} must be a 'when => then' string", node)
        try:
            rule = parse_rule(item, self.source)
        except RuleError as exc:
            raise self.rule_error(exc, node, where) from None
        return ConditionRouter(
            rule, name=f"condition({label}#{index})", force=force, enabled=enabled
        )

    def multi_destination(
        self, item: Any, node: yaml.Node, index: int, label: str, force: bool, enabled: bool
    ) -> Router:
        where = f"conditions[{index}]"
        if not isinstance(item, dict):
            raise self.error(f"{where} must be a mapping with 'from' and 'to'", node)
        when = self.from_side(item.get("from"), value_node(node, "from"), where)
        destinations = self.to_side(item.get("to"), value_node(node, "to"), where)
        ratio = self.integer(item, node, "ratio", 0, f"{where}: ")
        if not 0 <= ratio <= 100:
            raise self.error(
                f"{where}: ratio must be within 0..100, not {ratio}", value_node(node, "ratio")
            )
        return MultiDestinationRouter(
            when,
            destinations,
            name=f"condition({label}#{index})",
            priority=self.integer(item, node, "priority", 0, f"{where}: "),
            force=force or self.boolean(item, node, "force", False),
            ratio=ratio,
            traffic_disable=self.boolean(item, node, "trafficDisable", False),
            enabled=enabled,
        )

    def match_text(
        self, holder: Any, node: yaml.Node | None, where: str
    ) -> tuple[str, yaml.Node | None]:
        if holder is None:
            return "", None
        if not isinstance(holder, dict):
            raise self.error(f"{where} must be a mapping with 'match'", node)
        match = holder.get("match")
        match_node = value_node(node, "match")
        if match is None:
            return "", match_node
        if isinstance(match, bool):
            match = "true" if match else "false"
        if not isinstance(match, str):
            raise self.error(f"{where}.match must be a condition string", match_node)
        return match, match_node

    def from_side(self, holder: Any, node: yaml.Node | None, where: str) -> tuple[Clause, ...]:
        text, match_node = self.match_text(holder, node, f"{where}.from")
        if isinstance(holder, dict) and "weight" in holder:
            raise self.error(f"{where}.from: 'weight' belongs to 'to' entries", node)
        try:
            side = parse_side(text, self.source, then=False)
        except RuleError as exc:
            assert match_node is not None
            raise self.rule_error(exc, match_node, f"{where}.from.match") from None
        assert side is not None
        return side

    def to_side(self, items: Any, node: yaml.Node | None, where: str) -> tuple[Destination, ...]:
        if items is None:
            return ()  # Dubbo: no destinations means the matching calls get no provider
        if not isinstance(items, list):
            raise self.error(f"{where}.to must be a list of destinations", node)
        assert isinstance(node, yaml.SequenceNode)
        destinations: list[Destination] = []
        for i, (entry, entry_node) in enumerate(zip(items, node.value, strict=True)):
            here = f"{where}.to[{i}]"
            text, match_node = self.match_text(entry, entry_node, here)
            if not text.strip():
                then: tuple[Clause, ...] | None = ()  # Dubbo: an empty match selects all
            else:
                try:
                    then = parse_side(text, self.source, then=True)
                except RuleError as exc:
                    assert match_node is not None
                    raise self.rule_error(exc, match_node, f"{here}.match") from None
            weight = self.integer(entry or {}, entry_node, "weight", 100, f"{here}: ")
            if weight < 0:
                raise self.error(
                    f"{here}: weight must not be negative", value_node(entry_node, "weight")
                )
            destinations.append(Destination(then, weight))
        return tuple(destinations)
