"""The affinity router of Dubbo 3.3 (and dubbo-go 3.3): prefer providers that share a parameter
with the consumer -- its region, zone, data centre -- while enough of them are left.

A document (``configVersion: v3.1``) is read from two keys::

    # <interface>:<version>:<group>.affinity-router  (service scope, priority 130)
    # <provider-application>.affinity-router         (provider application, priority 135)
    configVersion: v3.1
    scope: service          # not read: the key the document is stored at decides
    key: demo.Greeter       # not read, as above
    enabled: true
    affinityAware:
      key: region
      ratio: 20

For each call the router keeps the candidates whose ``region`` (any URL key a condition rule
can read: a parameter, ``host``, ``application``...) equals the consumer URL's ``region``
parameter when they are at least ``ratio`` % of the candidates it was given; otherwise it keeps
every candidate. As in Dubbo (``AffinityStateRouter``):

* the comparison is ``kept / candidates >= ratio / 100`` in floating point, so ``ratio: 0``
  (the default) keeps the affinity result even when it is empty -- the call then has no
  provider;
* a consumer without the parameter is not routed (Dubbo's matcher fails on the missing value
  and the router returns its input);
* a provider without the parameter never matches;
* ``enabled: false`` or ``valid: false`` leaves the document without effect.

Where dubbo-py differs (docs/routing.md): a ``ratio`` outside 0..100, a missing
``affinityAware.key`` or a ``configVersion`` other than v3.1 is refused with an error naming the
field, so the last good document stays in force (Dubbo logs the document and drops it); the
consumer's value is compared as a value, where Dubbo reads it as a glob pattern (a consumer
parameter ``region=bei*`` would match every ``bei...`` provider there).

Fields Dubbo reads but that change nothing here (``runtime``, ``force``, ``priority``,
``dynamic``) and fields neither knows are accepted, as Dubbo accepts them, and named:
:attr:`AffinityRule.ignored` lists them, consumers log them once per document version (Dubbo's
own fields at info, unknown ones as warnings), ``rules validate``/``push`` warn about them.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from dubbo_py.errors import RuleError
from dubbo_py.invocation import Invocation
from dubbo_py.router.base import PASS_THROUGH, BoundRouter
from dubbo_py.router.condition.matcher import sample_value
from dubbo_py.router.snapshot import Snapshot
from dubbo_py.rule_fields import Field, acted, ignored
from dubbo_py.url import URL
from dubbo_py.yaml_loader import YamlDocument, as_boolean, compile_yaml, value_node

__all__ = [
    "AFFINITY_PROVIDER_APPLICATION_PRIORITY",
    "AFFINITY_SERVICE_PRIORITY",
    "AffinityRouter",
    "AffinityRule",
    "BoundAffinityRouter",
    "parse_affinity_rule",
    "provider_application_routers",
    "service_routers",
]

log = logging.getLogger(__name__)

#: Chain priority of a document read from a service key (Dubbo's AffinityServiceStateRouter,
#: ``@Activate(order = 130)``): after the tag router (100), before condition rules (140).
AFFINITY_SERVICE_PRIORITY = 130
#: Chain priority of a document read from a provider application's key
#: (Dubbo's AffinityProviderAppStateRouter, ``@Activate(order = 135)``).
AFFINITY_PROVIDER_APPLICATION_PRIORITY = 135

#: Fields Dubbo's AbstractRouterRule reads that have no effect on an affinity rule here.
_NOT_ACTED_ON = {
    "runtime": "dubbo-py computes the affinity set when providers or rules change",
    "force": "Dubbo's affinity router is never forced",
    "priority": "the key the document is stored at sets the priority (130 or 135)",
    "dynamic": "Dubbo reads it and does nothing with it",
}
#: ``scope`` and ``key`` tell the CLI where a document goes; consumers, like Dubbo's, go by
#: the key the document is stored at.
_ACTED_ON = frozenset({"configVersion", "enabled", "valid", "affinityAware", "scope", "key"})
_AWARE_FIELDS = frozenset({"key", "ratio"})

#: Every field of an affinity document and what dubbo-py does with it (the no-silent-drop
#: table, :mod:`dubbo_py.rule_fields`): ``rules validate`` names those not acted on, and
#: consumers log and count them once per document version.
FIELDS: Mapping[str, Field] = {
    **{name: acted() for name in _ACTED_ON if name != "affinityAware"},
    **{name: ignored(why) for name, why in _NOT_ACTED_ON.items()},
    "affinityAware": acted(**{name: acted() for name in _AWARE_FIELDS}),
}


@dataclass(frozen=True)
class AffinityRule:
    """One affinity document, read."""

    #: The URL key whose value providers must share with the consumer (``region``).
    affinity_key: str
    #: The least share of the candidates (percent, 0..100) the matching ones must be.
    ratio: float
    #: False when ``enabled: false`` or ``valid: false``: the document has no effect.
    enabled: bool
    #: Where the document was read (errors and logs name it).
    source: str = ""
    #: ``(field, why)`` for every field present that changes nothing here.
    ignored: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, eq=False)
class BoundAffinityRouter:
    """An affinity rule bound to one snapshot: the providers sharing the consumer's value."""

    key: str
    value: str
    #: Providers whose ``key`` equals the consumer's ``value``.
    matching: int
    ratio: float

    def route(self, candidates: int, invocation: Invocation) -> int:
        """The matching candidates when they are at least ``ratio`` % of ``candidates``, else
        ``candidates``."""
        if not candidates:
            return candidates
        kept = candidates & self.matching
        # Dubbo's comparison, in the same double arithmetic.
        if kept.bit_count() / candidates.bit_count() >= self.ratio / 100:
            return kept
        return candidates

    def specialize(self, call: Invocation) -> tuple[BoundRouter, bool]:
        """Reads nothing of a call: only the candidates decide."""
        return self, False

    def explain(self, candidates: int, invocation: Invocation) -> str | None:
        """Why no candidate is left: none shares the consumer's value and the ratio is 0."""
        if not candidates or candidates & self.matching:
            return None
        return (
            f"no provider has {self.key}={self.value} (the consumer's) and ratio "
            f"{self.ratio:g} keeps the affinity result even when it is empty"
        )


class AffinityRouter:
    """A router for one affinity document at its priority; immutable."""

    def __init__(self, rule: AffinityRule, priority: int, name: str) -> None:
        self.rule = rule
        self.priority = priority
        self.name = name

    def bind(self, snapshot: Snapshot, consumer: URL) -> BoundRouter:
        """The providers sharing the consumer's value of the affinity key (pass-through when
        the rule is off or the consumer has no such value)."""
        rule = self.rule
        if not rule.enabled:
            return PASS_THROUGH
        value = consumer.parameters.get(rule.affinity_key)
        if not value:
            return PASS_THROUGH
        key = rule.affinity_key
        groups = snapshot.partition(("affinity", key), lambda url: sample_value(url, key) or "")
        return BoundAffinityRouter(key, value, groups.get(value, 0), rule.ratio)

    def __repr__(self) -> str:
        return f"AffinityRouter({self.name!r}, priority={self.priority})"


def parse_affinity_rule(text: str, source: str) -> AffinityRule:
    """Read an affinity document; RuleError naming the field and where when it is invalid
    (each distinct document is read once per process). Fields it does not act on are in
    :data:`FIELDS`: consumers log them once per document version."""
    return _parse(text, source)


@functools.lru_cache(maxsize=128)
def _parse(text: str, source: str) -> AffinityRule:
    rule = compile_yaml(
        text,
        source,
        lambda doc: _Reader(doc).build(),
        error=RuleError,
        empty="the document is empty",
    )
    return rule


def service_routers(text: str, source: str) -> list[AffinityRouter]:
    """A document read from a service key (priority 130)."""
    rule = parse_affinity_rule(text, source)
    return [AffinityRouter(rule, AFFINITY_SERVICE_PRIORITY, f"affinity({source})")]


def provider_application_routers(text: str, source: str) -> list[AffinityRouter]:
    """A document read from a provider application's key (priority 135)."""
    rule = parse_affinity_rule(text, source)
    return [AffinityRouter(rule, AFFINITY_PROVIDER_APPLICATION_PRIORITY, f"affinity({source})")]


@dataclass(frozen=True)
class _Reader:
    doc: YamlDocument

    def error(self, reason: str, node: yaml.Node | None) -> RuleError:
        if node is None:
            return RuleError(reason, source=self.doc.source)
        mark = node.start_mark
        return RuleError(reason, source=self.doc.source, line=mark.line + 1, column=mark.column + 1)

    def build(self) -> AffinityRule:
        data, root = self.doc.data, self.doc.root
        if not isinstance(data, dict):
            raise self.error("an affinity rule document must be a mapping of fields", root)
        version = data.get("configVersion")
        # Dubbo's AffinityRuleParser marks any other version invalid.
        if not (isinstance(version, str) and version.strip().lower().startswith("v3.1")):
            raise self.error(
                f"configVersion must be v3.1 for an affinity rule, not {version!r}",
                value_node(root, "configVersion") or root,
            )
        ignored: list[tuple[str, str]] = []
        for name in data:
            if name in _NOT_ACTED_ON:
                ignored.append((str(name), _NOT_ACTED_ON[name]))
            elif name not in _ACTED_ON:
                ignored.append((str(name), "not a field of Dubbo's affinity rule"))
        enabled = self.boolean(data, root, "enabled") and self.boolean(data, root, "valid")
        aware = data.get("affinityAware")
        aware_node = value_node(root, "affinityAware")
        if not isinstance(aware, dict):
            raise self.error(
                "affinityAware must be a mapping with key (and ratio)", aware_node or root
            )
        for name in aware:
            if name not in _AWARE_FIELDS:
                ignored.append((f"affinityAware.{name}", "not a field of Dubbo's affinity rule"))
        key = aware.get("key")
        if not isinstance(key, str) or not key.strip():
            raise self.error(
                f"affinityAware.key must name a URL key (region, zone...), not {key!r}",
                value_node(aware_node, "key") or aware_node,
            )
        ratio = self.ratio(aware.get("ratio", 0), value_node(aware_node, "ratio") or aware_node)
        return AffinityRule(key.strip(), ratio, enabled, self.doc.source, tuple(ignored))

    def boolean(self, data: Mapping[str, Any], root: yaml.Node | None, name: str) -> bool:
        value = data.get(name, True)
        flag = as_boolean(value)  # Dubbo's Boolean.parseBoolean(String.valueOf(value))
        if flag is None:
            raise self.error(f"{name} must be true or false, not {value!r}", value_node(root, name))
        return flag

    def ratio(self, value: Any, node: yaml.Node | None) -> float:
        # Dubbo: Double.valueOf(String.valueOf(ratio)), so 40.1 and "20" are both ratios.
        number: float | None = None
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                number = None
        if number is None or number != number:  # NaN is no ratio
            raise self.error(f"affinityAware.ratio must be a number, not {value!r}", node)
        if not 0 <= number <= 100:
            raise self.error(
                f"affinityAware.ratio must be within 0..100 (a percentage), not {value!r}", node
            )
        return number
