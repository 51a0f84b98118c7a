"""The rule-kind table: one entry is all a new kind of rule document needs.

The directory watches it, the CLI parses its keys, infers it from its fields and validates it,
and ``route test`` compiles it -- with nothing but the table changed.
"""

from __future__ import annotations

import pytest

from dubbo_py.admin.rules import documents as rules
from dubbo_py.admin.rules import scenario
from dubbo_py.errors import RuleError
from dubbo_py.invocation import Invocation
from dubbo_py.registry import rule_kinds
from dubbo_py.registry.directory import RegistryDirectory, ServiceRules
from dubbo_py.registry.registry import Registry
from dubbo_py.registry.rule_kinds import RuleKind, Target
from dubbo_py.router import factory
from dubbo_py.url import URL
from tests.support.fake_rules import compile_fake_document
from tests.support.memory_store import MemoryStore, MemoryTree

SERVICE = "demo.Greeter"
CONSUMER = URL.parse(f"consumer://127.0.0.1/{SERVICE}?application=shop&interface={SERVICE}")
PROVIDERS = [
    URL.parse(f"tri://127.0.0.{i}:5005{i}/{SERVICE}?application=greeter&interface={SERVICE}")
    for i in (1, 2)
]
#: A kind of rule nobody has heard of: the fake condition language at ``<service>.lab-router``.
LAB = RuleKind("lab-router", {Target.SERVICE: compile_fake_document}, fields=("labConditions",))
CALL = Invocation(SERVICE, "SayHello")
DOC = "conditions: ['=> host = 127.0.0.2']\n"


@pytest.fixture
def lab(monkeypatch: pytest.MonkeyPatch) -> RuleKind:
    monkeypatch.setattr(rule_kinds, "RULE_KINDS", (*rule_kinds.RULE_KINDS, LAB))
    return LAB


def test_a_kind_added_to_the_table_is_watched_and_applied_by_consumers(lab: RuleKind) -> None:
    tree = MemoryTree()
    providers = Registry(MemoryStore(tree))
    for url in PROVIDERS:
        providers.register(url)
    registry = Registry(MemoryStore(tree))
    assert f"{SERVICE}::.lab-router" in [
        w.key for w in ServiceRules.for_consumer(CONSUMER).static_keys()
    ]
    directory = RegistryDirectory(
        CONSUMER, registry, factory.new_rulebook(), assemble=factory.chain_routers
    )
    directory.start()
    try:
        registry.put_config(f"{SERVICE}::.lab-router", DOC)
        assert [p.host for p in directory.chain.route(CALL)] == ["127.0.0.2"]
        registry.put_config(f"{SERVICE}::.lab-router", "conditions: 3\n")  # invalid: kept
        assert [p.host for p in directory.chain.route(CALL)] == ["127.0.0.2"]
        assert any("lab-router" in source for source in directory.rule_errors)
    finally:
        directory.close()


def test_a_kind_added_to_the_table_is_known_to_the_cli(lab: RuleKind) -> None:
    key = rules.parse_key(f"{SERVICE}:1.0.0:.lab-router")
    assert (key.rule_kind, key.read_as) == (lab, Target.SERVICE)
    assert rules.infer_kind({"labConditions": []}) == "lab-router"
    assert rules.validate(key, DOC, "lab.yaml") == ["fake(lab.yaml)#0"]
    with pytest.raises(RuleError, match="conditions must be a non-empty list"):
        rules.validate(key, "conditions: []\n", "lab.yaml")
    with pytest.raises(ValueError, match="keyed by service"):
        rules.parse_key("shop.lab-router")


def test_a_kind_added_to_the_table_is_known_to_route_test(lab: RuleKind) -> None:
    text = (
        f"consumer: {CONSUMER.to_string()}\n"
        "providers:\n"
        + "".join(f"  - {p.to_string()}\n" for p in PROVIDERS)
        + "rules:\n  - config: lab-router\n    yaml: |\n      conditions: ['=> host = 127.0.0.2']\n"
    )
    result = scenario.run_text(text)
    assert [URL.parse(p).host for p in result.providers] == ["127.0.0.2"]


def test_every_kind_is_read_somewhere_and_named_once() -> None:
    names = rule_kinds.kind_names()
    assert len(set(names)) == len(names)
    for kind in rule_kinds.RULE_KINDS:
        assert kind.targets, kind.name
        # where the CLI would push a document of this kind, a consumer reads it
        target = rule_kinds.target_for_document(kind, None)
        assert target in kind.targets
    watched = {w.key for w in rule_kinds.service_keys("demo.Greeter::", "shop")}
    watched |= {w.key for w in rule_kinds.provider_application_keys("greeter")}
    for kind in rule_kinds.RULE_KINDS:
        # a migration rule is read by the consumer's migration subscriber, not the directory
        assert kind.directory == any(key.endswith(f".{kind.name}") for key in watched), kind.name
    assert [k.name for k in rule_kinds.RULE_KINDS if not k.directory] == ["migration"]


def test_override_rules_compile_to_no_routers_but_are_validated() -> None:
    overrides = rule_kinds.kind_named("configurators")
    assert overrides is not None and overrides.overrides
    good = "configVersion: v3.0\nscope: service\nkey: x\nconfigs:\n  - parameters: {weight: 0}\n"
    assert overrides.compile(Target.SERVICE, good, "k") == []
    with pytest.raises(RuleError, match="configs"):
        overrides.compile(Target.APPLICATION, "configVersion: v3.0\nconfigs: 3\n", "k")
