"""Rules too costly to use are switched off: a script rule over its time budget call after call,
a rule whose binding runs over the rule budget. Either way the source's last good rules come back,
one error is logged, a counter says so, and the rule stays refused until its text changes."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from dubbo_py import URL, Invocation
from dubbo_py.registry import rule_kinds
from dubbo_py.registry.directory import RegistryDirectory
from dubbo_py.registry.registry import Registry
from dubbo_py.router import factory
from dubbo_py.router.base import PASS_THROUGH, BoundRouter, Router
from dubbo_py.router.rulebook import RuleBook
from dubbo_py.router.script import InlineSandbox, Outcome, ProgramSpec, ScriptRouter
from dubbo_py.router.script.router import SWITCH_OFF_KEY
from dubbo_py.router.script.sandbox import TIMEOUT
from dubbo_py.router.snapshot import Snapshot
from tests.support.memory_store import MemoryStore, MemoryTree

SERVICE = "demo.Greeter"
CONSUMER = URL.parse(f"consumer://127.0.0.1/{SERVICE}?application=shop&interface={SERVICE}")
PROVIDERS = tuple(
    URL.parse(f"tri://127.0.0.{i}:5005{i}/{SERVICE}?application=greeter&interface={SERVICE}")
    for i in (1, 2, 3)
)
KEEP_FIRST = "def route(invokers, invocation, context):\n    return invokers[:1]\n"
SPIN = (
    "def route(invokers, invocation, context):\n"
    "    n = 0\n"
    "    for i in range(100000000):\n"
    "        n += i\n"
    "    return invokers\n"
)


def script_yaml(body: str) -> str:
    indented = "".join("  " + line + "\n" for line in body.splitlines())
    return f"type: starlark\nkey: greeter\nscript: |\n{indented}"


class TimingOutSandbox:
    """Every run reports an exhausted budget (what a looping script does), without the wait."""

    def __init__(self) -> None:
        self.runs = 0

    def run(
        self,
        program: ProgramSpec,
        candidates: Sequence[int],
        invocation: Mapping[str, Any],
        budget: float,
    ) -> Outcome:
        self.runs += 1
        return Outcome(None, TIMEOUT, "budget exhausted")


def call(method: str) -> Invocation:
    return Invocation(SERVICE, method)


def test_script_over_budget_three_calls_in_a_row_is_switched_off() -> None:
    from dubbo_py.router.script import parse_script_rule

    sandbox = TimingOutSandbox()
    router = ScriptRouter(
        parse_script_rule(script_yaml(SPIN), "greeter.script-router"), sandbox=sandbox
    )
    reasons: list[str] = []
    router.on_switch_off(reasons.append)
    snapshot = Snapshot(PROVIDERS)
    bound = router.bind(snapshot, CONSUMER)
    for i in range(10):  # a new method each time: no cached answer
        assert bound.route(snapshot.all, call(f"m{i}")) == snapshot.all
    assert sandbox.runs == 3  # the rest passed through without running the script
    assert router.switched_off
    assert len(reasons) == 1 and "3 calls in a row" in reasons[0]


def test_switch_off_count_is_a_consumer_parameter() -> None:
    from dubbo_py.router.script import parse_script_rule

    sandbox = TimingOutSandbox()
    router = ScriptRouter(parse_script_rule(script_yaml(SPIN), "s"), sandbox=sandbox)
    snapshot = Snapshot(PROVIDERS)
    bound = router.bind(snapshot, CONSUMER.with_parameter_map({SWITCH_OFF_KEY: "0"}))
    for i in range(6):
        bound.route(snapshot.all, call(f"m{i}"))
    assert sandbox.runs == 6 and not router.switched_off


def compile_script(text: str, source: str) -> list[Router]:
    from dubbo_py.router.script import parse_script_rule

    return [ScriptRouter(parse_script_rule(text, source), sandbox=InlineSandbox())]


def _script_book() -> RuleBook:
    return RuleBook()


def test_looping_script_rule_gives_way_to_the_last_good_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    book = _script_book()
    source = "/dubbo/config/dubbo/greeter.script-router"
    assert book.set_document(source, script_yaml(KEEP_FIRST), compile_script)
    good = book.routers()[0]
    assert book.set_document(source, script_yaml(SPIN), compile_script)
    spinning = book.routers()[0]
    assert isinstance(spinning, ScriptRouter)
    snapshot = Snapshot(PROVIDERS)
    bound = spinning.bind(snapshot, CONSUMER)
    changed: list[bool] = []
    book.add_listener(lambda: changed.append(True))
    with caplog.at_level(logging.ERROR, logger="dubbo_py.router.rulebook"):
        for i in range(5):
            bound.route(snapshot.all, call(f"m{i}"))
    assert changed == [True]
    assert book.routers() == [good]  # the last good rule is back in force
    assert "exhausted its time budget" in book.errors[source]
    assert book.revocations == {source: 1}
    assert sum("switched off" in r.getMessage() for r in caplog.records) == 1
    # The same text again (a reconnect re-delivers it) stays refused ...
    assert not book.set_document(source, script_yaml(SPIN), compile_script)
    assert book.routers() == [good]
    # ... a changed rule is compiled and used.
    assert book.set_document(source, script_yaml(KEEP_FIRST + "# v3\n"), compile_script)
    assert book.routers()[0] is not good and source not in book.errors


class SlowRouter:
    """A rule whose binding takes ``seconds`` (what an absurd rule does on many providers)."""

    priority = 10

    def __init__(self, seconds: float, name: str) -> None:
        self.seconds = seconds
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def bind(self, snapshot: Snapshot, consumer: URL) -> BoundRouter:
        started = time.thread_time()  # busy: the budget counts CPU time, not sleeping
        while time.thread_time() - started < self.seconds:
            pass
        return PASS_THROUGH


def test_rule_over_the_bind_budget_is_refused_and_the_last_good_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def compile_slow(text: str, source: str) -> list[Router]:
        return [SlowRouter(float(text), f"slow:{text}")]

    kinds = tuple(
        dataclasses.replace(k, compilers=dict.fromkeys(k.compilers, compile_slow))
        if k.name == "condition-router"
        else k
        for k in rule_kinds.RULE_KINDS
    )
    monkeypatch.setattr(rule_kinds, "RULE_KINDS", kinds)
    book = RuleBook(budget=0.2)
    tree = MemoryTree()
    provider_registry = Registry(MemoryStore(tree))
    for url in PROVIDERS:
        provider_registry.register(url)
    registry = Registry(MemoryStore(tree))
    directory = RegistryDirectory(CONSUMER, registry, book, assemble=factory.chain_routers)
    directory.start()
    key = f"{SERVICE}::.condition-router"
    registry.put_config(key, "0")
    assert [r.name for r in book.routers()] == ["slow:0"]
    registry.put_config(key, "0.5")  # over the 0.2 s budget when bound
    assert [r.name for r in book.routers()] == ["slow:0"]
    source = next(iter(directory.rule_errors))
    assert "rule budget" in directory.rule_errors[source]
    assert "binding slow:0.5" in directory.rule_errors[source]
    assert directory.rules_switched_off == {source: 1}
    assert "slow:0" in [name for name, _ in directory.chain.stages]
    assert len(directory.providers) == 3
    directory.close()
