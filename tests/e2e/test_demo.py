"""scripts/demo.sh, the README's first command, tells the story that happened even on a busy
machine: each operator step waits for its effect in the consumer's output, the kill comes while
calls are running, and an effect that does not come is named, with exit status 1."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^\s*calls\s+(\d+)-(\d+)\s+(.*)$")
pytestmark = pytest.mark.e2e


@pytest.fixture
def busy_cpus() -> Iterator[None]:
    """More busy processes than the machine has cores (2 here), for the whole run."""
    count = (os.cpu_count() or 2) + 1
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def run_demo(**env: str) -> tuple[int, list[str]]:
    """Runs scripts/demo.sh in its own process group (installed already, so without its install
    step); returns its exit status and output lines, and checks it left no process behind."""
    proc = subprocess.Popen(
        ["bash", str(ROOT / "scripts" / "demo.sh")],
        cwd=ROOT,
        env={**os.environ, "DUBBO_PY_DEMO_SKIP_INSTALL": "1", **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)  # the demo cleans up on SIGTERM
        out, _ = proc.communicate(timeout=30)
        pytest.fail(f"the demo did not finish in 150 s:\n{out}")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
            leftover = True
        except ProcessLookupError:
            leftover = False
    assert not leftover, f"the demo left processes running:\n{out}"
    return proc.returncode, out.splitlines()


def blocks(lines: list[str]) -> list[dict[str, int]]:
    """The consumer's report lines among ``lines``: calls per provider ("failed" if any)."""
    out = []
    for line in lines:
        match = BLOCK.match(line)
        if match:
            spread = {}
            for part in match.group(3).split(", "):
                where, _, count = part.rpartition(": ")
                spread[where] = int(count)
            assert sum(spread.values()) == int(match.group(2)) - int(match.group(1)) + 1, line
            out.append(spread)
    return out


def index(lines: list[str], prefix: str) -> int:
    (found,) = [i for i, line in enumerate(lines) if line.startswith(prefix)]
    return found


def test_the_demo_under_cpu_load_tells_what_happened_in_order(busy_cpus: None) -> None:
    code, lines = run_demo(DUBBO_PY_DEMO_TIMEOUT="45")
    text = "\n".join(lines)
    assert code == 0, text
    up = re.match(r"== providers up: p1=(\S+) p2=(\S+)$", lines[index(lines, "== providers up")])
    assert up, text
    p1, p2 = up[1], up[2]
    steps = [
        index(lines, "== a consumer calls SayHello"),
        index(lines, "== seen: calls spread over p1 and p2"),
        index(lines, "== operator: dubbo-py rules push only-p2.yaml"),
        index(lines, "pushed demo.Greeter:1.0.0:.condition-router"),
        index(lines, "== seen: 50 calls in a row answered by p2 alone"),
        index(lines, "== operator: dubbo-py rules delete demo.Greeter:1.0.0:.condition-router"),
        index(lines, "deleted demo.Greeter:1.0.0:.condition-router"),
        index(lines, "== seen: calls on p1 and p2 again"),
        index(lines, "== operator: kill -9 p1"),
        index(lines, "== seen: 150 calls after the kill, all answered by p2, none failed"),
        index(lines, "== stopping the consumer"),
    ]
    assert steps == sorted(steps), text
    started, spread, push, _, on_p2, delete, _, spread_again, kill, failed_over, stop = steps
    # Each "seen" line follows the report that shows it.
    assert {p1, p2} <= set(blocks(lines[started:spread])[-1]), text
    assert blocks(lines[push:on_p2])[-1] == {p2: 50}, text
    assert {p1, p2} <= set(blocks(lines[delete:spread_again])[-1]), text
    assert blocks(lines[kill:failed_over])[-3:] == [{p2: 50}] * 3, text
    # The consumer was still calling when stopped, and no call failed anywhere.
    totals = re.fullmatch(r"(\d+) succeeded, 0 failed", lines[-1])
    assert totals, text
    assert not any("failed" in line for line in lines[:-1] if not line.startswith("== seen")), text
    reported = blocks(lines[:stop])
    after_stop = blocks(lines[stop:])
    assert len(after_stop) <= 1  # the block cut short by the stop, if any
    per_provider = {
        m[1]: int(m[2]) for m in (re.match(r"^\s+(\S+): (\d+) calls$", ln) for ln in lines) if m
    }
    counted = {where: sum(b.get(where, 0) for b in reported + after_stop) for where in (p1, p2)}
    assert per_provider == counted, text
    assert sum(counted.values()) == int(totals[1]), text
    assert all(sum(b.values()) == 50 for b in reported), text
    assert counted[p1] > 0 and counted[p2] > counted[p1], text


def test_the_demo_names_an_effect_it_does_not_see_and_fails() -> None:
    # The pushed rule sends every call to p1, so the whole block on p2 the demo waits for never
    # comes; the demo must say so, not go on with its story.
    code, lines = run_demo(DUBBO_PY_DEMO_RULE_TARGET="p1", DUBBO_PY_DEMO_TIMEOUT="20")
    text = "\n".join(lines)
    assert code == 1, text
    assert lines[-1].startswith(
        "== demo FAILED: expected after the push, a block of 50 calls all answered by p2:"
        " not seen within 20 s (the consumer's last report since: calls "
    ), text
    push = index(lines, "== operator: dubbo-py rules push only-p1.yaml   (every SayHello to p1)")
    p1 = lines[index(lines, "== providers up")].split()[3].removeprefix("p1=")
    assert {p1: 50} in blocks(lines[push:]), text
    assert not [line for line in lines[push:] if line.startswith("== seen")], text
    assert not [line for line in lines if "rules delete" in line or "kill -9" in line], text
