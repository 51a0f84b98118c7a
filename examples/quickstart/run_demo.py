"""The quick-start demo (`bash scripts/demo.sh` runs it): two providers and a consumer on the
embedded registry, steered by an operator with the dubbo-py CLI.

Every step waits for its effect in the consumer's output before the story goes on, so what is
printed is what happened, however slow the machine: after the push, a whole block of calls
answered by p2 alone; after the delete, a block with calls on p1 again; after p1 is killed with
kill -9 while calls are running, blocks answered by p2 alone and no failed call. An effect not
seen within DUBBO_PY_DEMO_TIMEOUT seconds (60 by default) is named and the demo exits 1.

DUBBO_PY_DEMO_RULE_TARGET=p1 makes the pushed rule send every call to p1 instead, so that the
effect the demo waits for never comes (its test checks that the demo says so).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

HERE = Path(__file__).resolve().parent
BLOCK = 50  # calls per line of the consumer's report
AFTER_KILL = 3  # whole blocks on p2 alone that show calls failing over after the kill
RULE_KEY = "demo.Greeter:1.0.0:.condition-router"
_BLOCK_LINE = re.compile(r"^\s*calls\s+(\d+)-(\d+)\s+(.*)$")
_print_lock = threading.Lock()


def say(text: str) -> None:
    # The relay thread and the steps print to one stdout: whole lines, in the order they are
    # observed, which is the order the demo's test checks.
    with _print_lock:
        print(text, flush=True)


class NotSeen(Exception):
    """A step's effect did not show in the consumer's output in time (or was contradicted)."""


class Block:
    """One report line of the consumer: how many calls each provider answered, and failures."""

    def __init__(self, line: str, first: int, last: int, counts: dict[str, int]) -> None:
        self.line = line.strip()
        self.calls = last - first + 1
        self.failed = counts.pop("failed", 0)
        self.answered = counts

    def only(self, address: str) -> bool:
        return self.calls == BLOCK and self.answered == {address: BLOCK}


def parse_block(line: str) -> Block | None:
    match = _BLOCK_LINE.match(line)
    if not match:
        return None
    counts = {}
    for part in match.group(3).split(", "):
        where, _, count = part.rpartition(": ")
        counts[where] = int(count)
    return Block(line, int(match.group(1)), int(match.group(2)), counts)


class Consumer:
    """examples/quickstart/consumer.py calling until stopped; its lines are relayed to stdout
    as they come and its report blocks kept for the steps to wait on."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.proc = subprocess.Popen(
            [
                sys.executable, str(HERE / "consumer.py"), "--calls", "0",
                "--interval", "0.01", "--report-every", str(BLOCK),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        self.blocks: list[Block] = []
        self._ended = False
        self._changed = threading.Condition()
        self.relay = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self.relay.start()

    def _read(self, out: IO[str] | None) -> None:
        assert out is not None
        for raw in out:
            line = raw.rstrip("\n")
            say(line)
            block = parse_block(line)
            with self._changed:
                if block is not None:
                    self.blocks.append(block)
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def mark(self) -> int:
        """Where the blocks reported from now on start (for :meth:`wait_for`)."""
        with self._changed:
            return len(self.blocks)

    def wait_for(self, effect: str, seen: Callable[[list[Block]], bool], since: int) -> None:
        """Waits until ``seen`` holds for the blocks reported since ``since``; raises
        :class:`NotSeen` naming ``effect`` after the timeout, when a call failed (the story
        says none does) or when the consumer is gone."""
        deadline = time.monotonic() + self.timeout
        with self._changed:
            while True:
                blocks = self.blocks[since:]
                if any(b.failed for b in blocks):
                    raise NotSeen(f"{effect}: a call failed instead")
                if seen(blocks):
                    return
                if self._ended:
                    raise NotSeen(f"{effect}: the consumer exited first")
                left = deadline - time.monotonic()
                if left <= 0:
                    last = blocks[-1].line if blocks else "none"
                    last = f" (the consumer's last report since: {last})"
                    raise NotSeen(f"{effect}: not seen within {self.timeout:g} s{last}")
                self._changed.wait(left)

    def stop(self) -> int:
        """Stops the calls (SIGTERM: the consumer prints its last block and totals); returns
        its exit status, 1 if any call failed."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired as late:
            raise NotSeen(f"the consumer's totals: not within {self.timeout:g} s") from late
        self.relay.join(timeout=5)
        return code


def start_provider(work: Path, name: str, timeout: float) -> tuple[subprocess.Popen[bytes], str]:
    """A provider process, once registered (its READY line); returns it and its address."""
    log = work / f"{name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "provider.py")], stdout=out, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("READY "):
                return proc, line.split()[1]
        time.sleep(0.1)
    why = f"exited {proc.returncode}" if proc.poll() is not None else f"not within {timeout:g} s"
    proc.kill()
    text = log.read_text(encoding="utf-8", errors="replace")
    raise NotSeen(f"provider {name} registered: {why}\n{text}")


def dubbo_py(args: Sequence[str], timeout: float) -> None:
    """Runs the operator's `dubbo-py` command and prints what it printed when it is done."""
    cli = shutil.which("dubbo-py")
    command = [cli] if cli else [sys.executable, "-m", "dubbo_py.admin"]
    try:
        done = subprocess.run(
            [*command, *args], capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as late:
        raise NotSeen(f"dubbo-py {' '.join(args)}: done within {timeout:g} s") from late
    say((done.stdout + done.stderr).rstrip("\n"))
    if done.returncode != 0:
        raise NotSeen(f"dubbo-py {' '.join(args)}: exited {done.returncode}")


def run(work: Path, timeout: float) -> int:
    # One registry for this run's processes and the operator's CLI alike.
    os.environ["DUBBO_PY_REGISTRY"] = f"sqlite://{work / 'registry.db'}"
    providers: dict[str, subprocess.Popen[bytes]] = {}
    consumer: Consumer | None = None
    failure = ""
    try:
        providers["p1"], p1 = start_provider(work, "p1", timeout)
        providers["p2"], p2 = start_provider(work, "p2", timeout)
        say(f"== providers up: p1={p1} p2={p2}")
        dubbo_py(["providers", "demo.Greeter"], timeout)

        say(f"== a consumer calls SayHello until stopped (where each {BLOCK} landed is printed)")
        consumer = Consumer(timeout)
        consumer.wait_for(
            "calls spread over p1 and p2",
            lambda blocks: any(p1 in b.answered and p2 in b.answered for b in blocks),
            0,
        )
        say("== seen: calls spread over p1 and p2")

        target = os.environ.get("DUBBO_PY_DEMO_RULE_TARGET", "p2")
        port = {"p1": p1, "p2": p2}[target].rpartition(":")[2]
        rule = work / f"only-{target}.yaml"
        rule.write_text(
            "configVersion: v3.0\nscope: service\nkey: demo.Greeter:1.0.0\nforce: true\n"
            f"conditions:\n  - method = SayHello => port = {port}\n",
            encoding="utf-8",
        )
        say(f"== operator: dubbo-py rules push {rule.name}   (every SayHello to {target})")
        since = consumer.mark()
        dubbo_py(["rules", "push", str(rule)], timeout)
        # Before the rule, round robin gives p1 about half of every block: a whole block on p2
        # alone is the rule at work in the consumer.
        consumer.wait_for(
            f"after the push, a block of {BLOCK} calls all answered by p2",
            lambda blocks: any(b.only(p2) for b in blocks),
            since,
        )
        say(f"== seen: {BLOCK} calls in a row answered by p2 alone: traffic follows the rule")

        say(f"== operator: dubbo-py rules delete {RULE_KEY}")
        since = consumer.mark()
        dubbo_py(["rules", "delete", RULE_KEY], timeout)
        # While the rule was in force p1 answered nothing: a call on p1 is its deletion at work.
        consumer.wait_for(
            "after the delete, a block with calls on both p1 and p2",
            lambda blocks: any(p1 in b.answered and p2 in b.answered for b in blocks),
            since,
        )
        say("== seen: calls on p1 and p2 again: traffic spreads")

        say("== operator: kill -9 p1 while the consumer is calling")
        since = consumer.mark()
        providers["p1"].send_signal(signal.SIGKILL)
        providers["p1"].wait()
        # With both providers up every block is spread, so a whole block on p2 alone is made of
        # calls sent after p1 died; none of them may fail.
        consumer.wait_for(
            f"after the kill, {AFTER_KILL} blocks of {BLOCK} calls all answered by p2, none failed",
            lambda blocks: sum(b.only(p2) for b in blocks) >= AFTER_KILL,
            since,
        )
        say(f"== seen: {AFTER_KILL * BLOCK} calls after the kill, all answered by p2, none failed")

        say("== stopping the consumer; its totals:")
        code, consumer = consumer.stop(), None
        if code != 0:
            say(f"== demo FAILED: the consumer exited {code} (a call failed)")
        return 1 if code else 0
    except NotSeen as missing:
        failure = str(missing)
        return 1
    finally:
        if consumer is not None:
            consumer.proc.kill()
            consumer.proc.wait()
            consumer.relay.join(timeout=5)
        for proc in providers.values():
            if proc.poll() is None:
                proc.terminate()  # graceful: unregisters and drains
        for proc in providers.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if failure:
            # Once the consumer's lines have stopped coming, so that this is the last line.
            say(f"== demo FAILED: expected {failure}")


def main() -> int:
    # A SIGTERM (a test's timeout, a supervisor) unwinds like Ctrl-C does, through run()'s
    # clean-up, instead of leaving the providers and the consumer running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    timeout = float(os.environ.get("DUBBO_PY_DEMO_TIMEOUT", "60"))
    with tempfile.TemporaryDirectory(prefix="dubbo-py-demo-") as work:
        return run(Path(work), timeout)


if __name__ == "__main__":
    sys.exit(main())
