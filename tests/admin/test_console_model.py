"""What the console shows, computed from a registry: each consumer's reach per method under the
rules in force, providers (one row each, with the levels it is registered at) after the
console's weight/disable documents, services with their rules, and histories with diffs."""

from __future__ import annotations

from dubbo_py.admin.console import model
from dubbo_py.admin.rules import documents as rules
from dubbo_py.admin.rules import override_documents
from dubbo_py.admin.rules.history import History
from dubbo_py.admin.rules.operations import RuleOps
from dubbo_py.admin.rules.reach import reach_now, reach_of_change
from dubbo_py.registry.application.publisher import InstancePublisher
from dubbo_py.registry.registry import Registry
from dubbo_py.url import URL
from tests.support.java_app_level import write_java_provider
from tests.support.memory_store import MemoryStore

P1 = "tri://10.0.0.5:50051/demo.Greeter?application=greeter&interface=demo.Greeter&methods=SayHello,Other&side=provider&version=1.0.0"
P2 = P1.replace("10.0.0.5", "10.0.0.6")
CONSUMER = "consumer://10.0.0.1/demo.Greeter?application=shop&category=consumers&interface=demo.Greeter&side=consumer&version=1.0.0"
KEY = "demo.Greeter:1.0.0:.condition-router"
RULE = """\
configVersion: v3.0
scope: service
key: demo.Greeter:1.0.0
conditions:
  - method = SayHello => host = 10.0.0.6
"""


def _registry() -> tuple[Registry, RuleOps]:
    store = MemoryStore()
    registry = Registry(store)
    for url in (P1, P2, CONSUMER):
        registry.register(URL.parse(url))
    return registry, RuleOps(registry, History(store), "dora")


def test_reach_matrix_follows_the_rule_in_force_per_method() -> None:
    registry, ops = _registry()
    page = model.service_page(registry, "demo.Greeter")
    assert {m.method for m in page.matrices} == {"SayHello", "Other"}
    for matrix in page.matrices:
        assert [set(r) for _, r in matrix.rows] == [{"10.0.0.5:50051", "10.0.0.6:50051"}]
    ops.put(KEY, RULE)
    page = model.service_page(registry, "demo.Greeter")
    reach = {m.method: m.rows[0] for m in page.matrices}
    assert reach["SayHello"] == ("shop@10.0.0.1", frozenset({"10.0.0.6:50051"}))
    assert reach["Other"][1] == frozenset({"10.0.0.5:50051", "10.0.0.6:50051"})
    assert page.rules == (KEY,)
    [row] = model.services(registry, "greet")
    assert (row.name, row.providers, row.consumers, row.rules) == ("demo.Greeter", 2, 1, (KEY,))
    assert model.services(registry, "nothing") == []


def test_weight_and_disable_documents_change_what_consumers_see() -> None:
    registry, ops = _registry()
    key = override_documents.target_key("demo.Greeter", "1.0.0", "")
    text = override_documents.set_weight(None, "demo.Greeter", "10.0.0.5:50051", 30)
    text = override_documents.set_disabled(text, "demo.Greeter", "10.0.0.6:50051", True)
    rules.validate(rules.parse_key(key), text, key)
    ops.put(key, text, action="console: weight")
    page = model.service_page(registry, "demo.Greeter")
    shown = {p.address: (p.weight, p.disabled, p.overrides) for p in page.providers}
    assert shown == {
        "10.0.0.5:50051": (30, False, ("weight=30",)),
        "10.0.0.6:50051": (100, True, ("disabled=true",)),
    }
    # The disabled provider is out of every consumer's reach.
    assert all(set(r) == {"10.0.0.5:50051"} for m in page.matrices for _, r in m.rows)
    # Setting again replaces the item; enabling removes it.
    again = override_documents.set_weight(text, "demo.Greeter", "10.0.0.5:50051", 60)
    again = override_documents.set_disabled(again, "demo.Greeter", "10.0.0.6:50051", False)
    assert again.count("addresses") == 1 and "weight: 60" in again and "disabled" not in again


def test_history_rows_are_newest_first_with_diffs() -> None:
    registry, ops = _registry()
    ops.put(KEY, RULE)
    ops.put(KEY, RULE.replace("10.0.0.6", "10.0.0.5"))
    rows = model.history_rows(ops.history, KEY)
    assert [r.entry.seq for r in rows] == [1, 0]
    assert rows[0].change.startswith("conditions[0]:")
    assert "-  - method = SayHello => host = 10.0.0.6" in rows[0].diff
    assert "+  - method = SayHello => host = 10.0.0.5" in rows[0].diff
    assert [r.key for r in model.rule_rows(registry)] == [KEY]


def test_a_provider_registered_at_both_levels_is_one_row_with_both_levels() -> None:
    registry, ops = _registry()
    # 10.0.0.5 as a dubbo-py provider registers by default: its instance too.
    InstancePublisher(registry.store, "greeter").add(URL.parse(P1))
    ops.put(
        override_documents.target_key("demo.Greeter", "1.0.0", ""),
        override_documents.set_weight(None, "demo.Greeter", "10.0.0.5:50051", 30),
    )
    # A Java provider registered at the application level only (register-mode=instance).
    write_java_provider(registry.store, "java", "10.0.0.9", 50070, "demo.Greeter", version="1.0.0")
    page = model.service_page(registry, "demo.Greeter")
    shown = [(p.address, p.levels_label, p.weight, p.overrides) for p in page.providers]
    assert shown == [
        ("10.0.0.5:50051", "interface+application", 30, ("weight=30",)),
        ("10.0.0.6:50051", "interface", 100, ()),
        ("10.0.0.9:50070", "application", 100, ()),
    ]
    # The reach matrix has a column per provider, and routes each consumer over the level it
    # reads: this one is in APPLICATION_FIRST, and the application level holds as many
    # providers as the interface level, so it reads that level -- 10.0.0.6 (interface level
    # only) is not reached, 10.0.0.9 (application level only) is.
    assert page.matrices
    for matrix in page.matrices:
        assert matrix.providers == ("10.0.0.5:50051", "10.0.0.6:50051", "10.0.0.9:50070")
        assert [reached for _, reached in matrix.rows] == [
            frozenset({"10.0.0.5:50051", "10.0.0.9:50070"})
        ]


def test_each_consumer_is_routed_over_the_level_it_reads() -> None:
    registry, _ops = _registry()
    InstancePublisher(registry.store, "greeter").add(URL.parse(P1))
    write_java_provider(registry.store, "java", "10.0.0.9", 50070, "demo.Greeter", version="1.0.0")
    # A second consumer pinned to the interface level (its migration step).
    pinned = CONSUMER.replace("10.0.0.1", "10.0.0.2") + "&migration-step=FORCE_INTERFACE"
    registry.register(URL.parse(pinned))
    reach = {
        row.consumer.host: set(row.after)
        for row in reach_now(registry, "demo.Greeter", methods=["SayHello"]).rows
    }
    assert reach == {
        "10.0.0.1": {"10.0.0.5:50051", "10.0.0.9:50070"},  # APPLICATION_FIRST: application
        "10.0.0.2": {"10.0.0.5:50051", "10.0.0.6:50051"},  # FORCE_INTERFACE: interface
    }
    # A dry run works out the same views: a rule sending SayHello to 10.0.0.6 leaves the
    # application-level reader nothing there, so its rule falls back (force: false).
    change = reach_of_change(registry, rules.parse_key(KEY), RULE, methods=["SayHello"])
    after = {row.consumer.host: set(row.after) for row in change.rows}
    assert after == {
        "10.0.0.1": {"10.0.0.5:50051", "10.0.0.9:50070"},
        "10.0.0.2": {"10.0.0.6:50051"},
    }
