"""Script rules cannot hurt each other or slip past the checks (issue 37), with real sandbox
workers: checks fail closed, the budget reaches callbacks from builtins and cuts a run at the
budget, each rule has its own worker, a crashing rule is switched off by its identity whatever
its text, elif chains count as nesting, fail() text is bounded, asyncio never runs a script on
its loop. The attack sizes are calibrated to this machine when the tests run."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from dubbo_py import URL, Invocation
from dubbo_py.errors import RuleError
from dubbo_py.router.chain import RouterChain
from dubbo_py.router.offloop import settle_scripts
from dubbo_py.router.script import (
    InlineSandbox,
    Outcome,
    ProcessSandbox,
    ProgramSpec,
    ScriptRouter,
    check_script,
    parse_script_rule,
)
from dubbo_py.router.script.router import Strikes
from dubbo_py.router.script.sandbox import CRASH, TIMEOUT, UNAVAILABLE
from dubbo_py.router.snapshot import Snapshot

ROOT = Path(__file__).resolve().parents[2]
CONSUMER = URL.parse("consumer://10.9.9.9/demo.Greeter?application=shop")
SNAPSHOT = Snapshot(
    tuple(URL.parse(f"tri://10.0.0.{i}:50051/demo.Greeter?env=prod") for i in (5, 6))
)
ROUTE = "def route(invokers, invocation, context):\n"
KEEP_FIRST = ROUTE + "    return [i for i in invokers if i.host == '10.0.0.5']\n"
#: The docs' compile-time bomb: starlark-rust folds the constant while compiling.
BOMB = ROUTE + '    s = "a" * 2147483647\n    return invokers\n'
#: Prints a 200 000-deep list: the worker dies of SIGSEGV in a few ms.
CRASHER = ROUTE + "    v = []\n    for i in range(200000):\n        v = [v]\n    fail(v)\n"
BUDGET = 0.05
#: The budget of runs whose time is not the subject: a loaded shared machine can delay a short
#: run past 50 ms (then a timeout, the rule's own failure, would pass providers through).
SLOW_MACHINE = 5.0


def rule_text(script: str, key: str = "shop") -> str:
    return f"type: starlark\nkey: {key}\nscript: |\n{textwrap.indent(script, '  ')}"


def call(n: int) -> Invocation:
    """A new argument each time: no cached answer, the script runs."""
    return Invocation("demo.Greeter", "SayHello", explicit_arguments=(n,))


@pytest.fixture
def box() -> Iterator[ProcessSandbox]:
    sandbox = ProcessSandbox(restart_backoff=0.05)
    yield sandbox
    sandbox.close()


def uncut_seconds(script: str) -> float:
    """The CPU seconds one run of ``script`` takes here with no budget to stop it (CPU time,
    as the budget is: wall time on a loaded machine would size the attacks too small)."""
    router = ScriptRouter(parse_script_rule(rule_text(script), "calibrate"), budget=600.0)
    router.sandbox = InlineSandbox()
    bound = router.bind(SNAPSHOT, CONSUMER)
    started = time.thread_time()
    bound.route(SNAPSHOT.all, call(0))
    return time.thread_time() - started


def calibrated(template: str, budgets: float) -> str:
    """``template`` with ``{n}`` sized so that one uncut run takes about ``budgets`` budgets
    on this machine (measured at 1/16 of the size and scaled: the scripts are linear)."""
    n = 200_000
    while True:
        took = uncut_seconds(template.format(n=n))
        if took > 0.02 or n > 50_000_000:
            break
        n *= 4
    return template.format(n=max(int(n * budgets * BUDGET / took), 1000))


# ---------------------------------------------------------------- 1. checks fail closed


def test_the_bomb_is_refused_every_time_it_is_read_and_a_rule_read_next_keeps_its_meaning(
    box: ProcessSandbox,
) -> None:
    # The YAML path reads a failing document twice (libyaml, then PyYAML for the error's
    # words); the second read landed in the worker's restart back-off and skipped the check.
    for _ in range(3):
        with pytest.raises(RuleError, match=r"compiling the script failed in the sandbox"):
            parse_script_rule(
                rule_text(BOMB), "/dubbo/config/dubbo/shop.script-router", sandbox=box
            )
    # Right after: a rule with an unknown name is refused (its check ran) ...
    with pytest.raises(RuleError, match="not found"):
        parse_script_rule(rule_text(ROUTE + "    return nobody\n"), "benign", sandbox=box)
    # ... and a good one is accepted and keeps its meaning: 2 -> 1 provider.
    rule = parse_script_rule(rule_text(KEEP_FIRST), "benign", sandbox=box)
    bound = ScriptRouter(rule, sandbox=box, budget=SLOW_MACHINE).bind(SNAPSHOT, CONSUMER)
    assert bound.route(SNAPSHOT.all, call(1)) == 0b01


class UnavailableSandbox:
    """A sandbox whose worker can never start (what a sandbox restarting forever says)."""

    def check(self, source: str) -> Outcome:
        return Outcome(None, UNAVAILABLE, "cannot start sandbox worker: no such file")

    def run(
        self,
        program: ProgramSpec,
        candidates: Sequence[int],
        invocation: Mapping[str, Any],
        budget: float,
    ) -> Outcome:
        raise AssertionError("not called")


def test_a_rule_whose_check_cannot_run_is_refused_with_that_reason() -> None:
    with pytest.raises(RuleError, match=r"could not be checked: cannot start sandbox worker"):
        check_script(KEEP_FIRST, "benign", sandbox=UnavailableSandbox())


def test_a_check_waits_out_the_restart_of_a_crashed_worker() -> None:
    # A worker that cannot start at first (back-off growing) and then can: the check waits.
    sandbox = ProcessSandbox(restart_backoff=0.2, check_timeout=10.0)
    try:
        real_start = sandbox._start
        failures = [True, True]

        def start(lane: Any) -> Any:
            if failures:
                failures.pop()
                sandbox._note_failure(lane)
                from dubbo_py.router.script.sandbox import _WorkerGone

                raise _WorkerGone("cannot start sandbox worker: try again")
            return real_start(lane)

        sandbox._start = start  # type: ignore[method-assign]
        assert sandbox.check(KEEP_FIRST).ok
    finally:
        sandbox.close()


# ---------------------------------------------------------------- 2. a budget nobody evades


@pytest.mark.parametrize(
    "template",
    [
        ROUTE + "    x = max(range({n}), key = lambda v: -v)\n    return invokers\n",
        ROUTE + "    x = min(range({n}), key = lambda v: v)\n    return invokers\n",
        ROUTE + "    x = sorted(range({n}), key = lambda v: -v)\n    return invokers[:1]\n",
    ],
    ids=["max", "min", "sorted"],
)
def test_callbacks_from_builtins_count_toward_the_budget(
    box: ProcessSandbox, template: str
) -> None:
    # Ten budgets uncut (sorted: four, its key list must stay under the worker's memory cap).
    script = calibrated(template, budgets=4 if "sorted" in template else 10)
    router = ScriptRouter(
        parse_script_rule(rule_text(script), f"/builtin/{template[50:60]}", sandbox=box),
        sandbox=box,
        strikes=Strikes(),
    )
    bound = router.bind(SNAPSHOT, CONSUMER)
    outcomes = [
        box.run(
            bound.program,
            [0, 1],
            {"service": "s", "method": "m", "arguments": [n], "attachments": {}},
            BUDGET,
        )
        for n in range(3)
    ]
    # Cut at the budget (the old engine answered: the key calls never met a step check).
    assert [o.kind for o in outcomes] == [TIMEOUT] * 3, outcomes
    for n in range(3):  # the router: passed through, and switched off at the third overrun
        assert bound.route(SNAPSHOT.all, call(n)) == SNAPSHOT.all
    assert router.switched_off


def test_the_engine_itself_stops_key_callbacks_at_the_budget() -> None:
    # No parent to cut the run here (InlineSandbox): the engine's step check must see the
    # callbacks (the old engine answered after 17 budgets, uncancelled).
    script = calibrated(ROUTE + "    x = max(range({n}), key = lambda v: -v)\n    return []\n", 10)
    sandbox = InlineSandbox()
    router = ScriptRouter(parse_script_rule(rule_text(script), "/inline"), sandbox=sandbox)
    program = router.bind(SNAPSHOT, CONSUMER).program
    invocation = {"service": "s", "method": "m", "arguments": [], "attachments": {}}
    sandbox.run(program, [0, 1], invocation, 600.0)  # builds the program
    started = time.thread_time()
    assert sandbox.run(program, [0, 1], invocation, BUDGET).kind == TIMEOUT
    # Stopped at the budget (CPU time, as the budget is), not after the 10 budgets it asks for.
    assert time.thread_time() - started < 5 * BUDGET


def test_builtins_with_a_key_answer_as_the_builtins_do(box: ProcessSandbox) -> None:
    script = ROUTE + (
        "    pairs = [(1, 'a'), (0, 'b'), (1, 'c'), (0, 'd')]\n"
        "    got = [max(pairs, key = lambda p: p[0]), min(pairs, key = lambda p: p[0]),\n"
        "           max(3, 9, 4, key = lambda v: -v),\n"
        "           sorted(pairs, key = lambda p: p[0]),\n"
        "           sorted(pairs, key = lambda p: p[0], reverse = True),\n"
        "           sorted(pairs), max(pairs), min(2, 1)]\n"
        "    want = [(1, 'a'), (0, 'b'), 3, [(0, 'b'), (0, 'd'), (1, 'a'), (1, 'c')],\n"
        "            [(1, 'a'), (1, 'c'), (0, 'b'), (0, 'd')],\n"
        "            [(0, 'b'), (0, 'd'), (1, 'a'), (1, 'c')], (1, 'c'), 1]\n"
        "    return invokers[:1] if got == want else []\n"
    )
    rule = parse_script_rule(rule_text(script), "/equal", sandbox=box)
    assert (
        ScriptRouter(rule, sandbox=box, budget=SLOW_MACHINE)
        .bind(SNAPSHOT, CONSUMER)
        .route(3, call(0))
        == 0b01
    )


@pytest.mark.parametrize(
    "name", ["dubbo_sandbox_native_max", "dubbo_sandbox_invokers", "dubbo_sandbox_items"]
)
def test_scripts_cannot_read_the_engines_names(box: ProcessSandbox, name: str) -> None:
    script = ROUTE + f"    x = {name}\n    return invokers\n"
    with pytest.raises(RuleError, match="reserved"):
        parse_script_rule(rule_text(script), "/reserved", sandbox=box)


def test_one_step_past_the_budget_is_cut_at_the_budget(box: ProcessSandbox) -> None:
    # One native step (comparing two 2^64-node structures) never reaches a step check: the
    # caller is answered TIMEOUT at the budget, not at the worker's hard deadline (a crash).
    script = ROUTE + (
        "    x = (1,)\n    y = (1,)\n    for i in range(64):\n"
        "        x = (x, x)\n        y = (y, y)\n    return invokers if x == y else []\n"
    )
    router = ScriptRouter(parse_script_rule(rule_text(script), "/cmp", sandbox=box), sandbox=box)
    program = router.bind(SNAPSHOT, CONSUMER).program
    invocation = {"service": "s", "method": "m", "arguments": [], "attachments": {}}
    assert box.run(program, [0, 1], invocation, BUDGET).kind == TIMEOUT
    # The lane serves its next run (its worker drained or replaced meanwhile).
    good = ScriptRouter(
        parse_script_rule(rule_text(KEEP_FIRST), "/cmp", sandbox=box),
        sandbox=box,
        budget=SLOW_MACHINE,
    )
    assert good.bind(SNAPSHOT, CONSUMER).route(SNAPSHOT.all, call(1)) == 0b01


# ---------------------------------------------------------------- 3. isolation between rules


def test_a_crashing_rule_never_opens_another_rule(box: ProcessSandbox) -> None:
    attacker = ScriptRouter(
        parse_script_rule(rule_text(CRASHER, "evil"), "/evil", sandbox=box),
        sandbox=box,
        switch_off_after=0,  # keep crashing: the victim must hold every time
    )
    victim = ScriptRouter(
        parse_script_rule(rule_text(KEEP_FIRST), "/victim", sandbox=box),
        sandbox=box,
        budget=SLOW_MACHINE,
    )
    evil, kept = attacker.bind(SNAPSHOT, CONSUMER), victim.bind(SNAPSHOT, CONSUMER)
    crashes = 0
    for n in range(12):
        before = box.starts
        evil.route(SNAPSHOT.all, call(n))
        crashes += box.starts > before
        assert kept.route(SNAPSHOT.all, call(n)) == 0b01, n  # never let provider 2 through
        time.sleep(0.02)
    assert crashes >= 2  # the attacker's worker did die, again and again
    assert "/victim" in box.workers()


def test_a_crashing_rule_is_switched_off_by_its_identity_whatever_its_text(
    box: ProcessSandbox,
) -> None:
    strikes = Strikes()
    source = "/dubbo/config/dubbo/evil.script-router"
    versions = [CRASHER, CRASHER.replace("200000", "300000"), "# v3\n" + CRASHER]
    runs = []
    for number, script in enumerate(versions):
        router = ScriptRouter(
            parse_script_rule(rule_text(script, "evil"), source, sandbox=box),
            sandbox=box,
            strikes=strikes,
        )
        reasons: list[str] = []
        router.on_switch_off(reasons.append)
        bound = router.bind(SNAPSHOT, CONSUMER)
        n = 0
        while not router.switched_off and n < 200:
            bound.route(SNAPSHOT.all, call(number * 1000 + n))
            n += 1
            time.sleep(0.02)  # let the restart back-off pass
        assert router.switched_off and len(reasons) == 1
        runs.append(strikes.count(source))
    # Three crashes switch the first text off; each new text goes off at its first crash.
    assert runs == [3, 4, 5]


def test_a_rule_that_answers_starts_its_count_again(box: ProcessSandbox) -> None:
    strikes = Strikes()
    source = "/dubbo/config/dubbo/fixed.script-router"
    bad = ScriptRouter(
        parse_script_rule(rule_text(CRASHER), source, sandbox=box), sandbox=box, strikes=strikes
    )
    bad.bind(SNAPSHOT, CONSUMER).route(SNAPSHOT.all, call(0))
    assert strikes.count(source) == 1
    time.sleep(0.2)  # the restart back-off (0.05 s) passes
    fixed = ScriptRouter(
        parse_script_rule(rule_text(KEEP_FIRST), source, sandbox=box),
        sandbox=box,
        strikes=strikes,
        budget=SLOW_MACHINE,
    )
    assert fixed.bind(SNAPSHOT, CONSUMER).route(SNAPSHOT.all, call(1)) == 0b01
    assert strikes.count(source) == 0


class RecordingSandbox(InlineSandbox):
    """Inline, noting the thread each run happened on."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[threading.Thread] = []

    def run(
        self,
        program: ProgramSpec,
        candidates: Sequence[int],
        invocation: Mapping[str, Any],
        budget: float,
    ) -> Outcome:
        self.threads.append(threading.current_thread())
        return super().run(program, candidates, invocation, budget)


def test_asyncio_routing_runs_scripts_off_the_loop() -> None:
    sandbox = RecordingSandbox()
    router = ScriptRouter(
        parse_script_rule(rule_text(KEEP_FIRST), "/aio", sandbox=sandbox),
        sandbox=sandbox,
        budget=SLOW_MACHINE,
    )
    chain = RouterChain([router]).bind(SNAPSHOT, CONSUMER)

    async def main() -> tuple[threading.Thread, list[Any]]:
        routed = []
        for n in range(3):
            invocation = call(n % 2)  # the third call's answer is cached
            await settle_scripts(chain, invocation)
            routed.append(chain.route(invocation))  # what the strategy does on the loop
        return threading.current_thread(), routed

    loop_thread, routed = asyncio.run(main())
    assert routed == [SNAPSHOT.providers[:1]] * 3
    assert len(sandbox.threads) == 2  # two distinct calls ran the script, once each
    assert all(t is not loop_thread for t in sandbox.threads)


# ---------------------------------------------------------------- 4. nesting


def elif_chain(count: int) -> str:
    """An if with ``count`` elif branches, written as tightly as the issue's (13 characters a
    branch: 5000 of them are 65 KB)."""
    return ROUTE + " x = 0\n if x:\n  0\n" + " elif x:\n  0\n" * count + " return invokers\n"


def test_elif_chains_count_toward_the_nesting_limit(box: ProcessSandbox) -> None:
    check_script(elif_chain(60), "ok", sandbox=box)
    with pytest.raises(RuleError, match=r"nested deeper than 64 levels \(each elif counts"):
        check_script(elif_chain(4900), "deep", sandbox=box)


def test_checks_are_safe_on_a_thread_with_a_small_stack() -> None:
    # The worst nesting each limit lets through, and the 5000-elif chain, checked from a thread
    # with 512 KiB of stack, in a child process (a stack overflow would kill it).
    program = textwrap.dedent(
        """
        import sys, threading
        from dubbo_py.errors import RuleError
        from dubbo_py.router.script.rule import check_script
        exec(sys.stdin.read())
        results = []
        def work():
            for name, text in SCRIPTS.items():
                try:
                    check_script(text, name)
                    results.append(name + " ok")
                except RuleError as exc:
                    results.append(name + " refused")
        threading.stack_size(512 * 1024)
        t = threading.Thread(target=work)
        t.start()
        t.join()
        print(", ".join(results))
        """
    )
    deepest_allowed = (
        ROUTE
        + "".join("    " * (d + 1) + f"if invocation.method == 'm{d}':\n" for d in range(31))
        + "    " * 32
        + "return invokers\n    return invokers\n"
    )
    scripts = {
        "elifs": elif_chain(4900),
        "allowed": deepest_allowed,
        "chain": elif_chain(60),
        "unary": ROUTE + "    x = " + "not " * 490 + "True\n    return invokers\n",
    }
    result = subprocess.run(
        [sys.executable, "-c", program],
        input=f"SCRIPTS = {scripts!r}",
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "elifs refused, allowed ok, chain ok, unary ok"


# ---------------------------------------------------------------- 5. fail() text in logs


def test_fail_text_in_the_log_is_bounded_and_has_no_control_characters(
    box: ProcessSandbox, caplog: pytest.LogCaptureFixture
) -> None:
    script = ROUTE + '    fail("\\x1b[2J\\x1b[31mpwned\\x07\\x1b]0;title\\x07" + "x" * 5000)\n'
    router = ScriptRouter(parse_script_rule(rule_text(script), "/loud", sandbox=box), sandbox=box)
    with caplog.at_level(logging.ERROR, logger="dubbo_py.router.script"):
        assert router.bind(SNAPSHOT, CONSUMER).route(SNAPSHOT.all, call(0)) == SNAPSHOT.all
    (message,) = [r.getMessage() for r in caplog.records]
    assert "pwned" in message
    assert not any(ord(c) < 32 or ord(c) == 127 for c in message), repr(message[:200])
    assert len(message) < 600
    assert "more characters" in message


def test_a_crash_is_counted_like_an_overrun(box: ProcessSandbox) -> None:
    router = ScriptRouter(
        parse_script_rule(rule_text(CRASHER), "/c", sandbox=box), sandbox=box, strikes=Strikes()
    )
    program = router.bind(SNAPSHOT, CONSUMER).program
    invocation = {"service": "s", "method": "m", "arguments": [], "attachments": {}}
    assert box.run(program, [0, 1], invocation, SLOW_MACHINE).kind == CRASH
