"""``route test`` scenarios: which providers one invocation would reach under some rules.

A scenario is a YAML document (the format is in ``docs/cli.md``)::

    consumer: consumer://10.0.0.1/demo.Greeter?application=shop
    invocation: {method: SayHello, arguments: ["alice", 3], attachments: {dubbo.tag: gray}}
    providers:
      - tri://10.0.0.5:50051/demo.Greeter?version=1.0.0
    rules:
      - condition: "host = 10.0.0.1 => host = 10.0.0.5"
      - url: "condition://0.0.0.0/demo.Greeter?category=routers&rule=..."
      - config: condition-router
        yaml: |
          scope: service
          key: demo.Greeter
          conditions: ["method = SayHello => version = 1.0.0"]

Evaluation runs the code a live consumer runs: every rule is compiled through the rule-kind
table (:mod:`dubbo_py.registry.rule_kinds`) and :mod:`dubbo_py.router.factory`, the chain is
``builtin_routers()`` plus those routers, bound to a snapshot of the providers (taken as the
consumer's provider list, in the order written) and traced for the invocation. :func:`route`
is the same evaluation over URLs, for callers that read providers and rules from a registry
(``rules push --dry-run``).

A bare ``condition:`` rule is a Dubbo 2.6 condition router URL
(``condition://0.0.0.0/<service>?category=routers&rule=...``) whose ``force``, ``enabled`` and
``priority`` parameters are the rule's optional fields of the same names — the one carrier
that has exactly those fields.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from dubbo_py.cluster import configurators
from dubbo_py.errors import RuleError, URLError
from dubbo_py.invocation import Invocation
from dubbo_py.registry import rule_kinds
from dubbo_py.router import factory
from dubbo_py.router.base import Router
from dubbo_py.router.chain import RouterChain, TraceStep
from dubbo_py.router.rule_budget import DEFAULT_RULE_BUDGET, RuleBudgetError
from dubbo_py.router.snapshot import Snapshot
from dubbo_py.url import URL, encode_component
from dubbo_py.yaml_loader import YamlDocument, key_node, load_yaml, peek_yaml, value_node

__all__ = [
    "Configure",
    "ProviderWeight",
    "RouteOutcome",
    "Scenario",
    "ScenarioError",
    "ScenarioResult",
    "configurator",
    "configured_weight",
    "load",
    "route",
    "run",
    "run_text",
]


#: Applies override rules: (providers, configurator URLs, documents by source) -> providers.
Configure = Callable[[list[URL], list[URL], Mapping[str, str]], list[URL]]

_TOP_FIELDS = frozenset({"consumer", "invocation", "now_ms", "providers", "rules"})
_INVOCATION_FIELDS = frozenset({"method", "arguments", "attachments"})
_RULE_FIELDS = {
    "condition": frozenset({"condition", "force", "enabled", "priority"}),
    "url": frozenset({"url"}),
    "config": frozenset({"config", "yaml"}),
}


class ScenarioError(RuleError):
    """A scenario that cannot be evaluated: the message names the field or rule (``rules[N]``)
    and, where known, the line and column in the scenario file."""


@dataclass(frozen=True, slots=True)
class RouteOutcome:
    """Survivors (in snapshot order) and one trace step per router that ran."""

    providers: tuple[URL, ...]
    trace: tuple[TraceStep, ...]
    #: Rules left out because binding them ran over the rule budget (consumers refuse them).
    refused: tuple[RuleError, ...] = ()


@dataclass(frozen=True)
class Scenario:
    """A parsed scenario, its rules compiled."""

    source: str
    consumer: URL
    invocation: Invocation
    #: The provider URLs exactly as written, and parsed.
    providers: tuple[str, ...]
    provider_urls: tuple[URL, ...]
    routers: tuple[Router, ...]
    configurator_urls: tuple[URL, ...] = ()
    configurator_docs: Mapping[str, str] = field(default_factory=dict)
    now_ms: int | None = None


@dataclass(frozen=True, slots=True)
class ProviderWeight:
    """A surviving provider's weight for the invocation's method: ``configured`` is the URL's
    (``<method>.weight``, else ``weight``, else 100) after override rules, ``weight`` the
    effective one the load balancers use at the scenario's clock (warmup applied)."""

    provider: str
    configured: int
    weight: int

    def to_json(self) -> dict[str, Any]:
        """``{"provider", "configured", "weight"}``."""
        return {"provider": self.provider, "configured": self.configured, "weight": self.weight}


@dataclass(frozen=True, slots=True)
class ScenarioResult:
    """What ``route test`` prints: the survivors as written, in input order, the trace, and
    each survivor's effective weight."""

    providers: tuple[str, ...]
    trace: tuple[TraceStep, ...]
    #: One per survivor, in the order of ``providers``.
    weights: tuple[ProviderWeight, ...] = ()
    #: The clock the weights were read at (the scenario's ``now_ms``, else the wall clock).
    now_ms: int = 0

    def to_json(self) -> dict[str, Any]:
        """``{"providers": [...], "trace": [{"router", "in", "out"}], "weights": [{"provider",
        "configured", "weight"}], "now_ms": N, "error": null}``; a trace step whose router can
        say why it left no provider also has ``"reason"``."""
        trace = [step.to_json() for step in self.trace]
        return {
            "providers": list(self.providers),
            "trace": trace,
            "weights": [w.to_json() for w in self.weights],
            "now_ms": self.now_ms,
            "error": None,
        }


def configurator() -> Configure:
    """The override-rule function consumers run (:func:`dubbo_py.cluster.configurators.apply`)."""
    return configurators.apply


def route(
    consumer: URL,
    providers: Sequence[URL],
    routers: Sequence[Router],
    invocation: Invocation,
) -> RouteOutcome:
    """Route one invocation as a consumer with these providers and rule routers would."""
    snapshot = Snapshot(tuple(providers))
    kept = list(routers)
    refused: list[RuleError] = []
    while True:
        chain = RouterChain(factory.chain_routers(kept))
        try:
            bound = chain.bind(snapshot, consumer, DEFAULT_RULE_BUDGET, budgeted=kept)
            break
        except RuleBudgetError as exc:
            # As a consumer does: a rule over the budget is refused, the others still route.
            kept = [r for r in kept if r is not exc.router]
            refused.append(exc)
    survivors, steps = bound.trace(invocation)
    return RouteOutcome(survivors, tuple(steps), tuple(refused))


def run(scenario: Scenario) -> ScenarioResult:
    """Evaluate a scenario (configurators first, as the directory applies them, then routers)."""
    urls = list(scenario.provider_urls)
    written = list(scenario.providers)
    steps: list[TraceStep] = []
    if scenario.configurator_urls or scenario.configurator_docs:
        apply = configurator()
        kept_urls, kept_written = [], []
        # One provider at a time, so each configured URL stays tied to the line it came from.
        for url, text in zip(urls, written, strict=True):
            for out in apply([url], list(scenario.configurator_urls), scenario.configurator_docs):
                if not out.get_bool("disabled", False):
                    kept_urls.append(out)
                    kept_written.append(text)
        steps.append(TraceStep("configurators", len(urls), len(kept_urls)))
        urls, written = kept_urls, kept_written
    outcome = route(scenario.consumer, urls, scenario.routers, scenario.invocation)
    position = {id(u): i for i, u in enumerate(urls)}
    survivors = tuple(written[position[id(u)]] for u in outcome.providers)
    # Imported here: the balancers' package loads every balancer, and `rules validate` (which
    # imports this module through the rule commands) never weighs a provider.
    from dubbo_py.cluster.loadbalance.base import current_millis, effective_weight

    now_ms = current_millis() if scenario.now_ms is None else scenario.now_ms
    method = scenario.invocation.method
    weights = tuple(
        ProviderWeight(text, configured_weight(url, method), effective_weight(url, method, now_ms))
        for text, url in zip(survivors, outcome.providers, strict=True)
    )
    return ScenarioResult(survivors, (*steps, *outcome.trace), weights, now_ms)


def configured_weight(url: URL, method: str) -> int:
    """The weight a provider URL sets for ``method`` before warmup (never below 0)."""
    from dubbo_py.cluster.loadbalance.base import effective_weight

    return effective_weight(url.without_parameters("timestamp"), method, 0)


def run_text(text: str, source: str = "scenario") -> ScenarioResult:
    """Load and run a scenario; :class:`ScenarioError` when it (or a rule) is invalid."""
    return run(load(text, source))


# --------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class _Reader:
    doc: YamlDocument

    @property
    def source(self) -> str:
        return self.doc.source

    def error(self, reason: str, node: yaml.Node | None) -> ScenarioError:
        if node is None:
            return ScenarioError(reason, source=self.source)
        mark = node.start_mark
        return ScenarioError(reason, source=self.source, line=mark.line + 1, column=mark.column + 1)

    def load(self) -> tuple[Any, yaml.MappingNode]:
        data, node = self.doc.data, self.doc.root
        if not isinstance(data, dict) or not isinstance(node, yaml.MappingNode):
            raise self.error("a scenario must be a YAML mapping (consumer, providers, ...)", node)
        return data, node

    def unknown_fields(
        self, data: Mapping[Any, Any], node: yaml.Node, known: frozenset[str], what: str
    ) -> None:
        for key in data:
            if key not in known:
                raise self.error(
                    f"{what}: unknown field {key!r} (expected {', '.join(sorted(known))})",
                    key_node(node, key),
                )

    def items(
        self, raw: Any, node: yaml.Node | None, not_a_list: str
    ) -> list[tuple[Any, yaml.Node | None]]:
        """The items of a list field (null: none), each with its node (the list's when it has
        none of its own); the error ``not_a_list`` when the field is not a list."""
        if raw is None:
            return []
        if not isinstance(raw, list):
            raise self.error(not_a_list, node)
        nodes = list(node.value) if isinstance(node, yaml.SequenceNode) else []
        return [(item, nodes[i] if i < len(nodes) else node) for i, item in enumerate(raw)]

    def url(self, value: Any, node: yaml.Node | None, what: str) -> URL:
        if not isinstance(value, str) or not value.strip():
            raise self.error(f"{what} must be a URL string", node)
        try:
            return URL.parse(value)
        except URLError as exc:
            raise self.error(f"{what}: {exc}", node) from None

    def relocate(
        self, exc: RuleError, what: str, node: yaml.Node | None, fallback: yaml.Node | None
    ) -> ScenarioError:
        """A rule's error placed in the scenario file: exactly when the rule text is a
        one-line scalar (or a literal block), else at the rule with the rule-relative place."""
        reason = f"{what}: {exc.reason}"
        if exc.line is None or exc.column is None or not isinstance(node, yaml.ScalarNode):
            return self.error(reason, node or fallback)
        located = self.doc.locate(node, exc.line, exc.column)
        if located is not None:
            line, column = located
            return ScenarioError(reason, source=self.source, line=line, column=column)
        where = f" (line {exc.line}, column {exc.column} of the rule)"
        return self.error(reason + where, node)


def _scalar_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def load(text: str, source: str = "scenario") -> Scenario:
    """Parse a scenario and compile its rules; :class:`ScenarioError` naming the field or rule
    and its line and column when anything is wrong."""
    doc = load_yaml(text, source, error=ScenarioError, empty=None, string_keys=False)
    reader = _Reader(doc)
    data, root = reader.load()
    reader.unknown_fields(data, root, _TOP_FIELDS, "scenario")

    if "consumer" not in data:
        raise reader.error("the scenario needs a 'consumer' URL", root)
    consumer = reader.url(data["consumer"], value_node(root, "consumer"), "consumer")

    invocation = _invocation(reader, consumer, data.get("invocation"), root)

    if "providers" not in data:
        raise reader.error("the scenario needs a 'providers' list (provider URLs)", root)
    providers = reader.items(
        data["providers"],
        value_node(root, "providers"),
        "providers must be a list of provider URLs",
    )
    written: list[str] = []
    urls: list[URL] = []
    for i, (value, node) in enumerate(providers):
        urls.append(reader.url(value, node, f"providers[{i}]"))
        written.append(str(value).strip())

    now_ms = data.get("now_ms")
    if now_ms is not None and (
        not isinstance(now_ms, int) or isinstance(now_ms, bool) or now_ms < 0
    ):
        raise reader.error("now_ms must be a non-negative integer", value_node(root, "now_ms"))

    routers, cfg_urls, cfg_docs = _rules(reader, consumer, data.get("rules"), root)
    return Scenario(
        source=source,
        consumer=consumer,
        invocation=invocation,
        providers=tuple(written),
        provider_urls=tuple(urls),
        routers=tuple(routers),
        configurator_urls=tuple(cfg_urls),
        configurator_docs=cfg_docs,
        now_ms=now_ms,
    )


def _invocation(reader: _Reader, consumer: URL, raw: Any, root: yaml.Node) -> Invocation:
    node = value_node(root, "invocation")
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise reader.error("invocation must be a mapping (method, arguments, attachments)", node)
    reader.unknown_fields(raw, node or root, _INVOCATION_FIELDS, "invocation")
    method = raw.get("method", "")
    if method is None:
        method = ""
    if not isinstance(method, str):
        raise reader.error("invocation.method must be a string", value_node(node, "method"))
    arguments = raw.get("arguments", [])
    if arguments is None:
        arguments = []
    if not isinstance(arguments, list):
        raise reader.error("invocation.arguments must be a list", value_node(node, "arguments"))
    attachments = raw.get("attachments", {})
    if attachments is None:
        attachments = {}
    attachments_node = value_node(node, "attachments")
    if not isinstance(attachments, dict):
        raise reader.error("invocation.attachments must be a mapping", attachments_node)
    clean: dict[str, str] = {}
    for key, value in attachments.items():
        if isinstance(value, (dict, list)) or value is None:
            raise reader.error(
                f"invocation.attachments[{key}] must be a string",
                value_node(attachments_node, str(key)) or attachments_node,
            )
        clean[str(key)] = _scalar_text(value)
    return Invocation(
        service=consumer.service_interface,
        method=method,
        attachments=clean,
        explicit_arguments=tuple(arguments),
    )


def _rules(
    reader: _Reader, consumer: URL, raw: Any, root: yaml.Node
) -> tuple[list[Router], list[URL], dict[str, str]]:
    items = reader.items(raw, value_node(root, "rules"), "rules must be a list")
    routers: list[Router] = []
    cfg_urls: list[URL] = []
    cfg_docs: dict[str, str] = {}
    for i, (rule, rule_node) in enumerate(items):
        what = f"rules[{i}]"
        if not isinstance(rule, dict):
            raise reader.error(f"{what} must be a mapping with condition, url or config", rule_node)
        carriers = [k for k in _RULE_FIELDS if k in rule]
        if len(carriers) != 1:
            raise reader.error(
                f"{what} needs exactly one of 'condition', 'url' or 'config'", rule_node
            )
        carrier = carriers[0]
        reader.unknown_fields(rule, rule_node or root, _RULE_FIELDS[carrier], what)
        if carrier == "condition":
            routers.append(_condition_rule(reader, consumer, rule, rule_node, what))
        elif carrier == "url":
            url_node = value_node(rule_node, "url")
            url = reader.url(rule["url"], url_node, f"{what}.url")
            if url.protocol == "override" or url.category == "configurators":
                cfg_urls.append(url)
                continue
            try:
                routers.append(factory.compile_url(url, what))
            except RuleError as exc:
                raise reader.relocate(exc, what, None, url_node) from None
        else:
            kind = rule["config"]
            kind_node = value_node(rule_node, "config")
            rule_kind = rule_kinds.kind_named(kind) if isinstance(kind, str) else None
            if rule_kind is None:
                names = ", ".join(rule_kinds.kind_names())
                raise reader.error(f"{what}.config must be one of {names}, not {kind!r}", kind_node)
            text = rule.get("yaml")
            text_node = value_node(rule_node, "yaml")
            if not isinstance(text, str) or not text.strip():
                raise reader.error(
                    f"{what}.yaml must be the rule document (text)", text_node or rule_node
                )
            target = rule_kinds.target_for_document(
                rule_kind, peek_yaml(text), consumer.get_str("application")
            )
            try:
                compiled = rule_kind.compile(target, text, what)
            except RuleError as exc:
                raise reader.relocate(exc, what, text_node, rule_node) from None
            if rule_kind.overrides:
                cfg_docs[what] = text
            routers.extend(compiled)
    return routers, cfg_urls, cfg_docs


def _condition_rule(
    reader: _Reader, consumer: URL, rule: Mapping[str, Any], node: yaml.Node | None, what: str
) -> Router:
    text = rule["condition"]
    text_node = value_node(node, "condition")
    if not isinstance(text, str) or not text.strip():
        raise reader.error(f"{what}.condition must be a 'when => then' rule", text_node or node)
    params = {"category": "routers", "rule": encode_component(text)}
    for name in ("force", "enabled"):
        if name in rule:
            value = rule[name]
            if not isinstance(value, bool):
                raise reader.error(f"{what}.{name} must be true or false", value_node(node, name))
            params[name] = _scalar_text(value)
    if "priority" in rule:
        priority = rule["priority"]
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise reader.error(f"{what}.priority must be an integer", value_node(node, "priority"))
        params["priority"] = str(priority)
    url = URL("condition", "0.0.0.0", 0, consumer.service_interface, parameters=params)
    try:
        return factory.compile_url(url, what)
    except RuleError as exc:
        raise reader.relocate(exc, what, text_node, node) from None
