"""Regenerate the command outputs shown in docs/ (or, with --check, say which are stale).

A fenced block right after a line ``<!-- generated: NAME -->`` is command output: the script
builds the situation NAME describes (a registry in a temporary folder, a fixed clock and
operator), runs the block's ``$ dubbo-py ...`` lines in it and writes what they print under
them; ``example:PATH`` blocks hold what ``python PATH`` prints. Run it after changing what a
command prints:

    python scripts/regen_doc_outputs.py            # rewrite the stale blocks
    python scripts/regen_doc_outputs.py --check    # exit 1 listing them (the test suite runs it)

Provider addresses that vary between runs (the example's ports) are kept as the page shows
them, so a rerun changes nothing unless the output really changed.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
MARKER = re.compile(r"^<!-- generated: (\S+) -->\n```(\w*)\n(.*?)^```$", re.S | re.M)

#: 2025-12-02T10:40:00Z, the clock of the documented examples.
T0_MS = 1_764_672_000_000
MINUTE_MS = 60_000
KEY = "demo.Greeter:1.0.0:.condition-router"
RULE = """configVersion: v3.0
scope: service
key: demo.Greeter:1.0.0
force: false
conditions:
  - method = SayHello => host = 10.0.0.5
"""


class Clock:
    """The time the CLI reads while a documented example runs."""

    def __init__(self, ms: int) -> None:
        self.ms = ms

    def time(self) -> float:
        return self.ms / 1000


#: Where the pages show the embedded registry (the reader's default data directory).
PAGE_REGISTRY_DIR = "sqlite:///home/you/.local/share/dubbo-py/"


@contextlib.contextmanager
def situation(clock: Clock) -> Iterator[Callable[[str], str]]:
    """A fresh embedded registry; yields ``run("dubbo-py ...") -> output``."""
    sys.path.insert(0, str(ROOT))
    from click.testing import CliRunner

    from dubbo_py.admin.cli import cli
    from dubbo_py.admin.commands import services as service_commands
    from dubbo_py.admin.rules import history

    fake_time = SimpleNamespace(time=clock.time)
    with (
        tempfile.TemporaryDirectory() as tmp,
        mock.patch.object(history, "time", fake_time),
        mock.patch.object(service_commands, "time", fake_time),
        mock.patch.dict(os.environ, {"DUBBO_PY_REGISTRY": f"sqlite://{tmp}/registry.db"}),
        contextlib.chdir(tmp),
    ):
        Path(tmp, "greeter-condition.yaml").write_text(RULE, encoding="utf-8")

        def run(command: str) -> str:
            args = shlex.split(command)
            assert args[0] == "dubbo-py", command
            result = CliRunner().invoke(cli, args[1:])
            # Writes name their registry: the page shows the reader's default one.
            return (result.stdout + result.stderr).replace(f"sqlite://{tmp}/", PAGE_REGISTRY_DIR)

        yield run


def cli_registry(commands: list[str]) -> str:
    """Two warm providers (one with a weight override), one started four minutes ago, and a
    consumer, as in docs/cli.md."""
    from dubbo_py.registry.registry import Registry
    from dubbo_py.registry.store.address import parse_registry_address
    from dubbo_py.registry.store.embedded import EmbeddedStore
    from dubbo_py.url import URL

    clock = Clock(T0_MS)
    with situation(clock) as run:
        store = EmbeddedStore(parse_registry_address().location)
        store.start(5.0)
        try:
            registry = Registry(store)
            base = "demo.Greeter?application=greeter&methods=SayHello,SayHelloStream&side=provider"
            day_ago, four_minutes_ago = T0_MS - 1440 * MINUTE_MS, T0_MS - 4 * MINUTE_MS
            for host, started in (
                ("10.0.0.5", day_ago),
                ("10.0.0.6", day_ago),
                ("10.0.0.7", four_minutes_ago),
            ):
                registry.register(
                    URL.parse(f"tri://{host}:50051/{base}&timestamp={started}&version=1.0.0")
                )
            registry.register(
                URL.parse(
                    "consumer://10.0.0.1/demo.Greeter?application=shop&category=consumers"
                    "&side=consumer&version=1.0.0"
                )
            )
            run("dubbo-py override weight demo.Greeter 10.0.0.5:50051 50")
            return transcript(run, commands)
        finally:
            store.close()


def cli_history(commands: list[str]) -> str:
    """A rule pushed by alice, changed by bob, rolled back by alice."""
    clock = Clock(T0_MS)
    with situation(clock) as run:
        run("dubbo-py rules push greeter-condition.yaml --operator alice")
        clock.ms += 12 * MINUTE_MS + 13_000
        Path("greeter-condition.yaml").write_text(RULE.replace("10.0.0.5", "10.0.0.6"))
        run("dubbo-py rules push greeter-condition.yaml --operator bob")
        clock.ms += 2 * MINUTE_MS + 49_000
        if not any("rollback" in c for c in commands):
            run(f"dubbo-py rules rollback {KEY} --operator alice")
        return transcript(run, commands)


def transcript(run: Callable[[str], str], commands: list[str]) -> str:
    out = []
    for command in commands:
        out.append(f"$ {command}")
        out.extend(line.rstrip() for line in run(command).splitlines())
    return "\n".join(out) + "\n"


def example(path: str, current: str) -> str:
    """What ``python PATH`` prints (stdout and stderr, in order), its varying addresses
    replaced by those ``current`` shows, in order of appearance."""
    done = subprocess.run(
        [sys.executable, str(ROOT / path)],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
        check=True,
    )
    pattern = re.compile(r"127\.0\.0\.1:\d+")
    shown = list(dict.fromkeys(pattern.findall(current)))
    seen: dict[str, str] = {}

    def keep(match: re.Match[str]) -> str:
        address = match.group(0)
        if address not in seen:
            seen[address] = shown[len(seen)] if len(seen) < len(shown) else address
        return seen[address]

    return pattern.sub(keep, done.stdout)


SITUATIONS: dict[str, Callable[[list[str]], str]] = {
    "cli-registry": cli_registry,
    "cli-history": cli_history,
}


def generate(name: str, body: str) -> str:
    """The block's new body."""
    if name.startswith("example:"):
        return example(name.removeprefix("example:"), body)
    commands = [ln.removeprefix("$ ") for ln in body.splitlines() if ln.startswith("$ dubbo-py ")]
    if name not in SITUATIONS or not commands:
        raise SystemExit(f"unknown generated block {name!r} (or no '$ dubbo-py' line in it)")
    return SITUATIONS[name](commands)


def regenerate(page: Path) -> tuple[str, str]:
    """(current text, regenerated text) of one page."""
    text = page.read_text(encoding="utf-8")
    pieces, last = [], 0
    for match in MARKER.finditer(text):
        name, lang, body = match.group(1), match.group(2), match.group(3)
        pieces.append(text[last : match.start()])
        fresh = generate(name, body)
        if not fresh.endswith("\n"):
            fresh += "\n"
        pieces.append(f"<!-- generated: {name} -->\n```{lang}\n{fresh}```")
        last = match.end()
    pieces.append(text[last:])
    return text, "".join(pieces)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    stale = []
    for page in sorted(DOCS.glob("*.md")):
        current, fresh = regenerate(page)
        if current == fresh:
            continue
        stale.append(page)
        if args.check:
            diff = difflib.unified_diff(
                current.splitlines(keepends=True),
                fresh.splitlines(keepends=True),
                f"{page.relative_to(ROOT)} (committed)",
                f"{page.relative_to(ROOT)} (what the commands print now)",
            )
            sys.stdout.writelines(diff)
        else:
            page.write_text(fresh, encoding="utf-8")
            print(f"regenerated {page.relative_to(ROOT)}")
    if args.check and stale:
        print(
            f"\n{len(stale)} page(s) show outdated command output; "
            "run: python scripts/regen_doc_outputs.py",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
