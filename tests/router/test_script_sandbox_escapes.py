"""Escape attempts against the script sandbox. Every one must fail safely.

Apache Dubbo's JavaScript script router ran rules in Nashorn with reflection allowed, so a rule
written to the registry could execute arbitrary code on every consumer (CVE-2021-30181). Here a
rule is Starlark; each attempt below must end in one of two safe ways:

- refused when the rule is read (a RuleError: nothing runs), or
- run in the sandbox worker and fail there: the candidates pass through unchanged, the failure
  is logged, this process carries on and the sandbox serves the next script.

What each attempt does inside starlark-pyo3 was measured when this suite was written; the
``kinds`` column records the outcome seen (timeout = cancelled by the time budget; crash = the
worker aborted on its memory cap or was killed at the hard deadline; script = a Starlark error).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from dubbo_py import URL, Invocation
from dubbo_py.errors import RuleError
from dubbo_py.router.script import (
    InlineSandbox,
    ProcessSandbox,
    ScriptRouter,
    parse_script_rule,
    sandbox,
)
from dubbo_py.router.snapshot import Snapshot, iter_bits

SOURCE = "/dubbo/config/dubbo/evil.script-router"
CONSUMER = URL.parse("consumer://10.9.9.9/demo.Greeter?application=shop")
SNAPSHOT = Snapshot(
    tuple(URL.parse(f"tri://10.0.0.{i}:50051/demo.Greeter?env=prod") for i in range(4))
)
CANDIDATES = 0b1011  # provider 2 was removed by an earlier router
CALL = Invocation("demo.Greeter", "SayHello", attachments={"user": "mallory"})


def rule_text(script: str) -> str:
    body = textwrap.indent(textwrap.dedent(script).strip("\n"), "  ")
    return f"key: evil\ntype: starlark\nscript: |\n{body}\n"


@pytest.fixture(scope="module")
def guard() -> Iterator[ProcessSandbox]:
    box = ProcessSandbox(restart_backoff=0)
    yield box
    box.close()


def assert_sandbox_still_serves(guard: ProcessSandbox) -> None:
    benign = parse_script_rule(
        rule_text(
            """
            def route(invokers, invocation, context):
                return [i for i in invokers if i.index == 1]
            """
        ),
        SOURCE,
        sandbox=guard,
    )
    bound = ScriptRouter(benign, sandbox=guard).bind(SNAPSHOT, CONSUMER)
    assert bound.route(CANDIDATES, CALL) == 0b0010


# ---------------------------------------------------------------- refused before anything runs

REFUSED = {
    "load() of another module": """
        load("//secrets.star", "token")
        def route(invokers, invocation, context):
            return invokers
        """,
    "python import statement": """
        import os
        def route(invokers, invocation, context):
            return invokers
        """,
    "__import__ builtin": """
        def route(invokers, invocation, context):
            return __import__("os").system("id")
        """,
    "exec": """
        def route(invokers, invocation, context):
            exec("import os")
            return invokers
        """,
    "eval": """
        def route(invokers, invocation, context):
            return eval("invokers")
        """,
    "open a file": """
        def route(invokers, invocation, context):
            open("/etc/passwd").read()
            return invokers
        """,
    "print to stdout": """
        def route(invokers, invocation, context):
            print("leak")
            return invokers
        """,
    "while True": """
        def route(invokers, invocation, context):
            while True:
                pass
        """,
    "class definition": """
        class Evil:
            pass
        def route(invokers, invocation, context):
            return invokers
        """,
    "top-level memory bomb": """
        X = "a" * 2147483647
        def route(invokers, invocation, context):
            return invokers
        """,
    "top-level loop": """
        for i in range(2147483647):
            pass
        def route(invokers, invocation, context):
            return invokers
        """,
    "default-argument bomb": """
        def route(invokers, invocation, context, pad = sorted(range(2147483647))):
            return invokers
        """,
    "top-level lambda": """
        f = lambda: sorted(range(2147483647))
        def route(invokers, invocation, context):
            return invokers
        """,
    "redefining the engine entry point": """
        def route(invokers, invocation, context):
            return invokers
        def dubbo_sandbox_entry(candidates, raw_invocation):
            return [0, 1, 2, 3]
        """,
    "string bomb folded by the compiler": """
        def route(invokers, invocation, context):
            s = "a" * 2147483647
            return invokers
        """,
    "tuple bomb folded by the compiler": """
        def route(invokers, invocation, context):
            t = (0,) * 2147483647
            return invokers
        """,
    "f-string": """
        def route(invokers, invocation, context):
            return f"{invokers}"
        """,
}


@pytest.mark.parametrize("script", list(REFUSED.values()), ids=list(REFUSED))
def test_refused_when_read(guard: ProcessSandbox, script: str) -> None:
    with pytest.raises(RuleError) as info:
        parse_script_rule(rule_text(script), SOURCE, sandbox=guard)
    assert info.value.source == SOURCE
    assert_sandbox_still_serves(guard)


@pytest.mark.parametrize(
    "script",
    [
        # starlark-rust's parser and compiler recurse: nesting a few thousand levels deep
        # segfaults the process that parses, so these must be refused before Starlark sees them
        "def route(a, b, c):\n    return " + "[" * 5000 + "]" * 5000 + "\n",
        "def route(a, b, c):\n    return " + "-" * 5000 + "1\n",
        "def route(a, b, c):\n    return 1" + " + 1" * 5000 + "\n",
        "def route(a, b, c):\n    return " + "lambda: " * 3000 + "1\n",
        "def route(a, b, c):\n" + "".join("    " * (i + 1) + "if a:\n" for i in range(100)),
        "def route(a, b, c):\n    return " + "[" * 100000,
        "def route(a, b, c):\n    return 1\n" + "#" * (1 << 17),
        "def route(a, b, c):\n    return 1\n" + "#" * (1 << 21),
    ],
    ids=["brackets", "unary", "binary", "lambdas", "blocks", "unclosed", "large", "huge"],
)
def test_parser_crash_bait_is_refused(guard: ProcessSandbox, script: str) -> None:
    with pytest.raises(RuleError):
        parse_script_rule("type: starlark\nscript: " + _yaml_quote(script), SOURCE, sandbox=guard)


def _yaml_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


# ---------------------------------------------------------------- run, fail, pass through

RUNTIME = {
    "dunder attribute on a value": (
        """
        def route(invokers, invocation, context):
            return ().__class__
        """,
        {"script"},
    ),
    "getattr __globals__": (
        """
        def route(invokers, invocation, context):
            return getattr(route, "__globals__")
        """,
        {"script"},
    ),
    "getattr on invoker internals": (
        """
        def route(invokers, invocation, context):
            return getattr(invokers[0], "__class__").__subclasses__()
        """,
        {"script"},
    ),
    "direct recursion": (
        """
        def route(invokers, invocation, context):
            return route(invokers, invocation, context)
        """,
        {"script"},
    ),
    "mutual recursion": (
        """
        def ping(n):
            return pong(n + 1)
        def pong(n):
            return ping(n + 1)
        def route(invokers, invocation, context):
            return ping(0)
        """,
        {"script"},
    ),
    "unbounded loop": (
        """
        def route(invokers, invocation, context):
            for i in range(2147483647):
                pass
            return invokers
        """,
        {"timeout"},
    ),
    "nested loops": (
        """
        def route(invokers, invocation, context):
            n = 0
            for i in range(100000):
                for j in range(100000):
                    n += 1
            return invokers
        """,
        {"timeout"},
    ),
    "list growth in a loop": (
        """
        def route(invokers, invocation, context):
            grow = []
            for i in range(2147483647):
                grow.append(i)
            return invokers
        """,
        {"timeout", "crash"},
    ),
    "doubling a list": (
        """
        def route(invokers, invocation, context):
            x = [1]
            for i in range(64):
                x = x + x
            return invokers
        """,
        {"timeout", "crash"},
    ),
    "string repeat beyond i32": (
        """
        def route(invokers, invocation, context):
            return "a" * (1 << 40)
        """,
        {"script"},
    ),
    "2 GiB string in one step": (
        """
        def route(invokers, invocation, context):
            s = "a" * (2147483647 - len(invocation.method))  # not a constant: runs
            return invokers
        """,
        {"crash", "timeout"},  # aborted at the memory cap, or cut at the budget first
    ),
    "16 GiB list in one step": (
        """
        def route(invokers, invocation, context):
            x = [0] * 2147483647
            return invokers
        """,
        {"crash", "timeout"},  # aborted at the memory cap, or cut at the budget first
    ),
    "materialised range": (
        """
        def route(invokers, invocation, context):
            return sorted(range(2147483647))
        """,
        {"crash", "timeout"},  # aborted at the memory cap, or cut at the budget first
    ),
    "quadratic replace": (
        """
        def route(invokers, invocation, context):
            s = "a" * 100000
            return s.replace("a", s)
        """,
        {"crash", "timeout"},  # aborted at the memory cap, or cut at the budget first
    ),
    "exponential structure compared": (
        """
        def route(invokers, invocation, context):
            x = (1,)
            y = (1,)
            for i in range(64):
                x = (x, x)
                y = (y, y)
            return invokers if x == y else []
        """,
        {"crash", "timeout"},  # aborted at the memory cap, or cut at the budget first
    ),
    "exponential structure printed": (
        """
        def route(invokers, invocation, context):
            x = [1]
            for i in range(64):
                x = [x, x]
            return str(x)
        """,
        {"crash", "timeout"},
    ),
    "exponential structure returned": (
        """
        def route(invokers, invocation, context):
            x = [1]
            for i in range(64):
                x = [x, x]
            return [x]
        """,
        {"script"},
    ),
    "fabricated invoker for a removed provider": (
        """
        def route(invokers, invocation, context):
            return [struct(index = 2)]
        """,
        {"script"},
    ),
    "mutating shared invoker data": (
        """
        def route(invokers, invocation, context):
            invokers[0].parameters["env"] = "gray"
            return invokers
        """,
        {"script"},
    ),
    "mutating the consumer context": (
        """
        def route(invokers, invocation, context):
            context.parameters["application"] = "admin"
            return invokers
        """,
        {"script"},
    ),
}


@pytest.mark.parametrize(("script", "kinds"), list(RUNTIME.values()), ids=list(RUNTIME))
def test_runtime_escape_fails_safely(
    guard: ProcessSandbox, script: str, kinds: set[str], caplog: pytest.LogCaptureFixture
) -> None:
    rule = parse_script_rule(rule_text(script), SOURCE, sandbox=guard)
    router = ScriptRouter(rule, sandbox=guard)
    bound = router.bind(SNAPSHOT, CONSUMER)
    starts = guard.starts
    pid = os.getpid()
    with caplog.at_level(logging.ERROR, logger="dubbo_py.router.script"):
        result = bound.route(CANDIDATES, CALL)
    assert result == CANDIDATES  # passed through, never widened to provider 2
    assert os.getpid() == pid
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 1
    seen = next(kind for kind in ("script", "timeout", "crash") if f": {kind}: " in logged[0])
    assert seen in kinds, logged[0]
    assert_sandbox_still_serves(guard)
    if seen == "crash":
        assert guard.starts > starts  # the failure stayed in a worker we replaced


def test_introspection_shows_only_data(guard: ProcessSandbox) -> None:
    rule = parse_script_rule(
        rule_text(
            """
            def route(invokers, invocation, context):
                names = dir(invokers[0]) + dir(invocation) + dir(context) + dir(invokers)
                if [n for n in names if n.startswith("_")]:
                    return invokers[:1]
                return invokers
            """
        ),
        SOURCE,
        sandbox=guard,
    )
    bound = ScriptRouter(rule, sandbox=guard).bind(SNAPSHOT, CONSUMER)
    assert list(iter_bits(bound.route(SNAPSHOT.all, CALL))) == [0, 1, 2, 3]


def test_repeated_failures_are_logged_once(
    guard: ProcessSandbox, caplog: pytest.LogCaptureFixture
) -> None:
    rule = parse_script_rule(rule_text(RUNTIME["unbounded loop"][0]), SOURCE, sandbox=guard)
    router = ScriptRouter(rule, sandbox=guard)
    with caplog.at_level(logging.ERROR, logger="dubbo_py.router.script"):
        for user in ("a", "b", "c"):
            call = Invocation("demo.Greeter", "SayHello", attachments={"user": user})
            assert router.bind(SNAPSHOT, CONSUMER).route(CANDIDATES, call) == CANDIDATES
    assert len(caplog.records) == 1


# ---------------------------------------------------------------- a compromised worker

FAKE_WORKER = """
import json, os, struct, sys
out = os.fdopen(1, "wb", buffering=0)
inp = os.fdopen(0, "rb", buffering=0)
def send(obj=None, raw=None):
    data = raw if raw is not None else json.dumps(obj).encode()
    out.write(struct.pack(">I", len(data)) + data)
send({{"ok": True, "ready": True}})
while True:
    head = inp.read(4)
    if len(head) < 4:
        break
    (n,) = struct.unpack(">I", head)
    body = b""
    while len(body) < n:
        body += inp.read(n - len(body))
    request = json.loads(body)
    if request["op"] == "load":
        send({{"ok": True}})
    else:
        {reply}
"""


@pytest.mark.parametrize(
    "reply",
    [
        'send({"ok": True, "indices": [0, 1, 2, 3]})',  # includes a removed provider
        'send({"ok": True, "indices": ["0"]})',
        "send(raw=b'not json')",
        "out.write(struct.pack('>I', 1 << 30))",  # claims a 1 GiB answer
        "os._exit(0)",
    ],
    ids=["widening", "wrong-type", "garbage", "oversized", "dies"],
)
def test_parent_trusts_nothing_from_the_worker(
    reply: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "fake_worker.py"
    fake.write_text(FAKE_WORKER.format(reply=reply))
    monkeypatch.setattr(sandbox, "_ENGINE_PATH", str(fake))
    box = ProcessSandbox(restart_backoff=0, grace=2.0)
    try:
        rule = parse_script_rule(
            rule_text("def route(invokers, invocation, context):\n    return invokers[:1]\n"),
            SOURCE,
            sandbox=InlineSandbox(),
        )
        bound = ScriptRouter(rule, sandbox=box).bind(SNAPSHOT, CONSUMER)
        assert bound.route(CANDIDATES, CALL) == CANDIDATES
    finally:
        box.close()
    assert sys.executable  # the test process is intact


def test_worker_ends_itself_when_a_step_never_returns(guard: ProcessSandbox) -> None:
    # As if the router process died mid-call: nobody will read the answer or kill the worker.
    # The worker's own alarm (budget + grace) must end it rather than leave an orphan spinning.
    box = ProcessSandbox(restart_backoff=0, grace=0.2)
    rule = parse_script_rule(
        rule_text(RUNTIME["exponential structure compared"][0]), SOURCE, sandbox=guard
    )
    program = ScriptRouter(rule, sandbox=box).bind(SNAPSHOT, CONSUMER).program
    call = {"service": "s", "method": "m", "arguments": [], "attachments": {}}
    # The caller is cut at the budget; nobody reads the worker's answer or kills it from here.
    assert box.run(program, [0], call, 0.05).kind == "timeout"
    worker = box._lane(program.lane).worker
    assert worker is not None
    assert worker.process.wait(timeout=30) == -signal.SIGALRM
    # The lane's next run finds its worker gone and a fresh one serves it.
    benign = parse_script_rule(rule_text(RUNTIME["unbounded loop"][0]), SOURCE, sandbox=guard)
    again = ScriptRouter(benign, sandbox=box).bind(SNAPSHOT, CONSUMER).program
    assert box.run(again, [0], call, 0.05).kind == "timeout"
    box.close()


def test_strings_that_starlark_cannot_hold_are_cleaned(guard: ProcessSandbox) -> None:
    rule = parse_script_rule(
        rule_text(
            """
            def route(invokers, invocation, context):
                return invokers[:1] if invocation.attachments["k"] == "a?b" else invokers
            """
        ),
        SOURCE,
        sandbox=guard,
    )
    bound = ScriptRouter(rule, sandbox=guard).bind(SNAPSHOT, CONSUMER)
    call = Invocation("demo.Greeter", "SayHello", attachments={"k": "a\udc80b"})
    assert bound.route(SNAPSHOT.all, call) == 0b0001
