"""Script router: Starlark route() scripts, their rule formats, fallbacks and caching.

Scenarios ported from Apache Dubbo's ScriptStateRouterTest (dubbo-cluster, router/script):
return-all, pick-invokers, host filter and a broken script, rewritten from JavaScript to our
Starlark contract.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dubbo_py import URL, Invocation
from dubbo_py.errors import NoProviderError, RuleError
from dubbo_py.router.chain import RouterChain
from dubbo_py.router.script import (
    InlineSandbox,
    Outcome,
    ProcessSandbox,
    ProgramSpec,
    Sandbox,
    ScriptRouter,
    ScriptRule,
    check_script,
    parse_script_rule,
    parse_script_url,
    router_from_url,
    validate_script_yaml,
)
from dubbo_py.router.snapshot import Snapshot, iter_bits
from dubbo_py.url import encode_component

SOURCE = "/dubbo/config/dubbo/greeter.script-router"
CONSUMER = URL.parse("consumer://10.9.9.9/demo.Greeter?application=shop&region=eu")
HOSTS = Snapshot(
    tuple(
        URL.parse(f"dubbo://10.134.108.{i}:20880/com.dubbo.HelloService?available={a}")
        for i, a in ((1, "false"), (2, "true"), (3, "true"))
    )
)


@pytest.fixture(scope="module")
def process_sandbox() -> Iterator[ProcessSandbox]:
    sandbox = ProcessSandbox(restart_backoff=0)
    yield sandbox
    sandbox.close()


@pytest.fixture(params=["process", "inline"])
def sandbox(request: pytest.FixtureRequest, process_sandbox: ProcessSandbox) -> Sandbox:
    return process_sandbox if request.param == "process" else InlineSandbox()


class CountingSandbox:
    """Counts runs, to observe caching."""

    def __init__(self, inner: Sandbox) -> None:
        self.inner = inner
        self.runs = 0

    def run(
        self,
        program: ProgramSpec,
        candidates: Sequence[int],
        invocation: Mapping[str, Any],
        budget: float,
    ) -> Outcome:
        self.runs += 1
        return self.inner.run(program, candidates, invocation, budget)


def script_rule(body: str, **settings_: object) -> ScriptRule:
    lines = ["type: starlark", "key: greeter"]
    lines += [f"{k}: {str(v).lower()}" for k, v in settings_.items()]
    lines.append("script: |")
    lines += ["  " + line for line in body.strip("\n").splitlines()]
    return parse_script_rule("\n".join(lines) + "\n", SOURCE)


def route(
    router: ScriptRouter,
    snapshot: Snapshot,
    invocation: Invocation | None = None,
    candidates: int | None = None,
) -> list[int]:
    bound = router.bind(snapshot, CONSUMER)
    mask = bound.route(
        snapshot.all if candidates is None else candidates,
        invocation or Invocation("com.dubbo.HelloService", "sayHello"),
    )
    return list(iter_bits(mask))


# ---------------------------------------------------------------- ported from ScriptStateRouterTest


def test_route_returning_all_keeps_all(sandbox: Sandbox) -> None:
    rule = script_rule("def route(invokers, invocation, context):\n    return invokers\n")
    assert route(ScriptRouter(rule, sandbox=sandbox), HOSTS) == [0, 1, 2]


def test_route_picks_invokers(sandbox: Sandbox) -> None:
    rule = script_rule(
        """
def route(invokers, invocation, context):
    result = []
    for i in invokers:
        if i.parameters.get("available") == "true":
            result.append(i)
    return result
"""
    )
    assert route(ScriptRouter(rule, sandbox=sandbox), HOSTS) == [1, 2]


def test_route_host_filter(sandbox: Sandbox) -> None:
    rule = script_rule(
        """
TARGETS = ["10.134.108.2"]

def route(invokers, invocation, context):
    return [i for i in invokers if i.host in TARGETS]
"""
    )
    assert route(ScriptRouter(rule, sandbox=sandbox), HOSTS) == [1]


def test_broken_script_is_refused_when_read() -> None:
    # Dubbo logs and ignores a script that does not compile ("/"); we refuse the rule.
    url = "script://0.0.0.0/com.dubbo.HelloService?type=starlark&rule=" + encode_component("/")
    with pytest.raises(RuleError) as info:
        parse_script_url(url, "zk:/dubbo/com.dubbo.HelloService/routers/x")
    assert info.value.line == 1 and info.value.column is not None


# ---------------------------------------------------------------- what a script sees


def test_invoker_records_carry_the_provider_fields(sandbox: Sandbox) -> None:
    snapshot = Snapshot(
        (
            URL.parse("tri://10.0.0.1:50051/demo.Greeter?env=prod"),
            URL.parse("tri://10.0.0.2:50052/demo.Greeter?env=gray&interface=demo.Greeter"),
        )
    )
    rule = script_rule(
        """
def route(invokers, invocation, context):
    return [i for i in invokers if i.index == 1 and i.port == 50052 and i.protocol == "tri"
            and i.host == "10.0.0.2" and i.address == "10.0.0.2:50052"
            and i.path == "demo.Greeter" and i.service == "demo.Greeter"
            and i.parameters["env"] == "gray"
            and i.url == "tri://10.0.0.2:50052/demo.Greeter?env=gray&interface=demo.Greeter"]
"""
    )
    assert route(ScriptRouter(rule, sandbox=sandbox, cache_size=0), snapshot) == [1]


def test_invocation_and_context_are_visible(sandbox: Sandbox) -> None:
    rule = script_rule(
        """
def route(invokers, invocation, context):
    a = invocation.arguments
    ok = (invocation.service == "com.dubbo.HelloService" and invocation.method == "sayHello"
          and a[0] == "ada" and a[1] == 7 and a[2] == 2.5 and a[3] == True and a[4] == None
          and a[5] == "<opaque>" and invocation.attachments["lane"] == "b"
          and context.parameters["application"] == "shop" and context.host == "10.9.9.9")
    return invokers[:1] if ok else invokers[1:2]
"""
    )

    class Opaque:
        def __str__(self) -> str:
            return "<opaque>"

    invocation = Invocation(
        "com.dubbo.HelloService",
        "sayHello",
        attachments={"lane": "b"},
        explicit_arguments=("ada", 7, 2.5, True, None, Opaque()),
    )
    assert route(ScriptRouter(rule, sandbox=sandbox), HOSTS, invocation) == [0]


def test_script_sees_only_the_candidates(sandbox: Sandbox) -> None:
    rule = script_rule(
        "def route(invokers, invocation, context):\n"
        "    return [i for i in invokers if len(invokers) == 2]\n"
    )
    assert route(ScriptRouter(rule, sandbox=sandbox), HOSTS, candidates=0b101) == [0, 2]


def test_routing_by_method_and_attachment(sandbox: Sandbox) -> None:
    rule = script_rule(
        """
def route(invokers, invocation, context):
    if invocation.method == "slow":
        return invokers[-1:]
    lane = invocation.attachments.get("lane", "")
    return [i for i in invokers if i.host.endswith("." + lane)] if lane else invokers
"""
    )
    router = ScriptRouter(rule, sandbox=sandbox)
    service = "com.dubbo.HelloService"
    assert route(router, HOSTS, Invocation(service, "slow")) == [2]
    assert route(router, HOSTS, Invocation(service, "fast", attachments={"lane": "1"})) == [0]
    assert route(router, HOSTS, Invocation(service, "fast")) == [0, 1, 2]


# ---------------------------------------------------------------- answers and fallbacks


def test_empty_answer_is_ignored_unless_forced(sandbox: Sandbox) -> None:
    body = "def route(invokers, invocation, context):\n    return []\n"
    assert route(ScriptRouter(script_rule(body), sandbox=sandbox), HOSTS) == [0, 1, 2]
    forced = ScriptRouter(script_rule(body, force=True), sandbox=sandbox)
    assert route(forced, HOSTS) == []
    chain = RouterChain([forced]).bind(HOSTS, CONSUMER)
    with pytest.raises(NoProviderError, match="script:greeter"):
        chain.route(Invocation("com.dubbo.HelloService", "sayHello"))


@pytest.mark.parametrize(
    ("body", "logged"),
    [
        ("    return invokers[10]\n", "out of bound"),
        ('    return ["10.134.108.1:20880"]\n', "must return invokers taken from"),
        ("    return None\n", "must return a list of invokers"),
        ('    invokers[0].parameters["x"] = "y"\n    return invokers\n', "Immutable"),
        ("    return [struct(index = 1)]\n", "not offered"),
        ('    fail("no route for you")\n', "no route for you"),
    ],
)
def test_failures_pass_candidates_through_and_are_logged(
    sandbox: Sandbox, body: str, logged: str, caplog: pytest.LogCaptureFixture
) -> None:
    rule = script_rule("def route(invokers, invocation, context):\n" + body)
    router = ScriptRouter(rule, sandbox=sandbox)
    with caplog.at_level(logging.ERROR, logger="dubbo_py.router.script"):
        # candidates 0 and 2: a fabricated struct(index = 1) must not reach provider 1
        assert route(router, HOSTS, candidates=0b101) == [0, 2]
    assert logged in caplog.text
    assert "script:greeter" in caplog.text and SOURCE in caplog.text


def test_failure_is_logged_once_per_rule_version(
    sandbox: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    rule = script_rule("def route(invokers, invocation, context):\n    return invokers[10]\n")
    router = ScriptRouter(rule, sandbox=sandbox)
    with caplog.at_level(logging.ERROR, logger="dubbo_py.router.script"):
        for method in ("a", "b", "c"):
            route(router, HOSTS, Invocation("com.dubbo.HelloService", method))
        route(router, Snapshot(HOSTS.providers[:2], version=2))
    assert len(caplog.records) == 1
    # a new rule version reports again
    with caplog.at_level(logging.ERROR, logger="dubbo_py.router.script"):
        route(ScriptRouter(rule, sandbox=sandbox), HOSTS)
    assert len(caplog.records) == 2


def test_disabled_rule_passes_through_without_running(process_sandbox: ProcessSandbox) -> None:
    counting = CountingSandbox(process_sandbox)
    rule = script_rule("def route(invokers, invocation, context):\n    return []\n", enabled=False)
    assert route(ScriptRouter(rule, sandbox=counting), HOSTS) == [0, 1, 2]
    assert counting.runs == 0


def test_results_are_cached_per_snapshot_and_visible_values(
    process_sandbox: ProcessSandbox,
) -> None:
    counting = CountingSandbox(process_sandbox)
    rule = script_rule("def route(invokers, invocation, context):\n    return invokers[:1]\n")
    router = ScriptRouter(rule, sandbox=counting)
    bound = router.bind(HOSTS, CONSUMER)
    call = Invocation("com.dubbo.HelloService", "sayHello", attachments={"k": "v"})
    for _ in range(3):
        assert bound.route(HOSTS.all, call) == 0b001
    assert counting.runs == 1
    bound.route(HOSTS.all, Invocation("com.dubbo.HelloService", "sayHello", attachments={"k": "w"}))
    bound.route(0b110, call)
    assert counting.runs == 3
    router.bind(HOSTS, CONSUMER).route(HOSTS.all, call)  # a new snapshot starts afresh
    assert counting.runs == 4


def test_new_snapshot_is_seen(sandbox: Sandbox) -> None:
    rule = script_rule(
        "def route(invokers, invocation, context):\n"
        '    return [i for i in invokers if i.host == "10.134.108.9"]\n',
        force=True,
    )
    router = ScriptRouter(rule, sandbox=sandbox)
    assert route(router, HOSTS) == []
    grown = Snapshot((*HOSTS.providers, URL.parse("dubbo://10.134.108.9:20880/x")), version=2)
    assert route(router, grown) == [3]


# ---------------------------------------------------------------- rule formats


def test_yaml_settings() -> None:
    rule = parse_script_rule(
        "key: greeter\ntype: Starlark\nenabled: false\nforce: true\npriority: 7\nscript: |\n"
        "  def route(invokers, invocation, context):\n      return invokers\n",
        SOURCE,
    )
    assert (rule.key, rule.enabled, rule.force, rule.priority) == ("greeter", False, True, 7)
    assert ScriptRouter(rule, sandbox=InlineSandbox()).priority == 7
    default = script_rule("def route(invokers, invocation, context):\n    return invokers\n")
    assert default.priority == 200 and default.force is False and default.enabled is True
    assert default.digest == script_rule(default.script).digest


def test_registry_url_router(sandbox: Sandbox) -> None:
    script = "def route(invokers, invocation, context):\n    return invokers[1:]\n"
    url = URL.parse(
        "script://0.0.0.0/com.dubbo.HelloService?category=routers&type=starlark"
        f"&priority=-5&force=true&rule={encode_component(script)}"
    )
    # as read from a registry node name: the whole URL encoded once more
    node = url.encode()
    router = router_from_url(URL.decode(node), "zk:/dubbo/com.dubbo.HelloService/routers/x")
    assert router.name == "script:com.dubbo.HelloService"
    assert router.priority == -5 and router.rule.force is True
    assert router.rule.script == script
    router = router_from_url(url, "zk:/x", sandbox=sandbox)
    assert route(router, HOSTS) == [1, 2]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("route://0.0.0.0/x?type=starlark&rule=x", "not a script router URL"),
        ("script://0.0.0.0/x?rule=x", "Dubbo defaults to javascript"),
        ("script://0.0.0.0/x?type=javascript&rule=x", "only type=starlark"),
        ("script://0.0.0.0/x?type=starlark", "'rule' parameter"),
        (
            "script://0.0.0.0/x?type=starlark&priority=high&rule="
            + encode_component("def route(a, b, c):\n    return a\n"),
            "priority 'high'",
        ),
    ],
)
def test_bad_registry_urls(url: str, message: str) -> None:
    with pytest.raises(RuleError, match=message) as info:
        parse_script_url(url, "zk:/x")
    assert info.value.source == "zk:/x"


ROUTE = "  def route(invokers, invocation, context):\n"


@pytest.mark.parametrize(
    ("text", "message", "line", "column"),
    [
        ("script: x\n", "'type' is required", 1, 1),
        ("type: javascript\nscript: x\n", "JavaScript script rules", 1, 7),
        ("type: starlark\n", "'script' is required", 1, 1),
        (f"type: starlark\nscript: |\n{ROUTE}      return invokers +\n", "Parse error", 4, 24),
        (f"type: starlark\nscript: |\n{ROUTE}      return nobody\n", "`nobody` not found", 4, 14),
        (
            "type: starlark\nscript: |\n  def other(a, b, c):\n      return a\n",
            "define route",
            2,
            9,
        ),
        ("type: starlark\nscript: |\n  def route(a):\n      return a\n", "exactly (invokers", 3, 3),
        (
            f"type: starlark\nscript: |\n  X = sorted([1])\n{ROUTE}      return X\n",
            "constants",
            3,
            3,
        ),
        (f"type: starlark\nscript: |\n  load('a', 'b')\n{ROUTE}      return 1\n", "load", 3, 3),
        (f"type: starlark\nscript: |\n{ROUTE}      while True:\n          pass\n", "while", 4, 7),
        (f"type: starlark\nscript: |\n{ROUTE}      return f'{{1}}'\n", "f-strings", 4, 14),
        (
            f"type: starlark\nscript: |\n  dubbo_sandbox_x = 1\n{ROUTE}      return 1\n",
            "reserved",
            3,
            3,
        ),
        (
            "type: starlark\nscript: |\n  def route(a, b, c, d=len([])):\n      return a\n",
            "default",
            3,
            3,
        ),
        (
            f"type: starlark\nscript: |\n{ROUTE}      return open('/etc/passwd')\n",
            "`open` not found",
            4,
            14,
        ),
        (f"type: starlark\nscript: |\n{ROUTE}      return __import__('os')\n", "not found", 4, 14),
    ],
)
def test_bad_script_rules(text: str, message: str, line: int, column: int) -> None:
    with pytest.raises(RuleError) as info:
        parse_script_rule(text, SOURCE)
    assert message in str(info.value)
    assert info.value.source == SOURCE
    assert (info.value.line, info.value.column) == (line, column)


def test_script_shape_limits() -> None:
    with pytest.raises(RuleError, match="more than the 65536 allowed"):
        check_script("#" * 70_000, SOURCE)
    with pytest.raises(RuleError, match="brackets nested deeper than 64") as info:
        check_script("def route(a, b, c):\n    return " + "[" * 100 + "]" * 100 + "\n", SOURCE)
    assert info.value.line == 2
    with pytest.raises(RuleError, match="longer than 500 tokens"):
        check_script("def route(a, b, c):\n    return 1" + " + 1" * 300 + "\n", SOURCE)
    deep = (
        "def route(a, b, c):\n"
        + "".join("    " * (i + 1) + "if a:\n" for i in range(40))
        + "    " * 41
        + "pass\n"
    )
    with pytest.raises(RuleError, match="blocks nested deeper than 32"):
        check_script(deep, SOURCE)


def test_validate_script_yaml() -> None:
    validate_script_yaml(f"type: starlark\nscript: |\n{ROUTE}      return invokers\n", SOURCE)
    with pytest.raises(RuleError):
        validate_script_yaml("type: starlark\nscript: '1 +'\n", SOURCE)


starlarkish = st.text(
    alphabet=st.sampled_from(list("defroutin()[]{}:,.=+-*/%<>!'\"\\#\n    abcxyz0123456789_")),
    max_size=300,
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(body=starlarkish)
def test_any_script_text_is_accepted_or_a_rule_error(body: str) -> None:
    for text in (body, "def route(invokers, invocation, context):\n    return " + body + "\n"):
        try:
            check_script(text, SOURCE)
        except RuleError as exc:
            assert exc.source == SOURCE


def test_a_script_python_would_warn_about_is_checked_without_printing_a_warning() -> None:
    """Starlark accepts a string escape Python does not know (``"\\_"``). Checking the
    structure reads the script with Python's parser, which warns about it; that warning is
    Python's, not the operator's concern, and must not be printed by every process compiling
    the rule (on Python 3.12+ it is a SyntaxWarning, shown by default). A fresh process with
    every warning shown, so pytest's own filters play no part."""
    script = 'NAME = "a\\_b"\ndef route(invokers, invocation, context):\n    return invokers\n'
    code = (
        "from dubbo_py.router.script.rule import check_script\n"
        f"check_script({script!r}, {SOURCE!r})\n"
        "print('checked')\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "always", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "checked"), done.stderr
    assert done.stderr == ""


# ---------------------------------------------------------------- the documentation's examples

DOC = Path(__file__).resolve().parents[2] / "docs" / "routing.md"


def test_documented_script_examples_are_true(sandbox: Sandbox) -> None:
    text = DOC.read_text()
    start = text.index("# script-router example")
    rule = parse_script_rule(text[start : text.index("```", start)], SOURCE)
    assert (rule.key, rule.priority, rule.force) == ("shop-detail", 200, False)
    snapshot = Snapshot(
        tuple(
            URL.parse(f"tri://10.0.0.{i}:50051/demo.Greeter?region={region}")
            for i, region in enumerate(["eu", "us", "eu"])
        )
    )
    router = ScriptRouter(rule, sandbox=sandbox)
    us = Invocation("demo.Greeter", "SayHello", attachments={"region": "us"})
    assert route(router, snapshot, us) == [1]
    assert route(router, snapshot, Invocation("demo.Greeter", "SayHello")) == [0, 2]
    mars = Invocation("demo.Greeter", "SayHello", attachments={"region": "mars"})
    assert route(router, snapshot, mars) == [0, 1, 2]

    url = next(line for line in text.splitlines() if line.startswith("script://"))
    from_url = router_from_url(url, "zk:/x", sandbox=sandbox)
    assert (
        from_url.rule.script == "def route(invokers, invocation, context):\n    return invokers\n"
    )
    assert route(from_url, snapshot) == [0, 1, 2]
