"""docs/tutorial.md, followed literally in an empty temporary folder.

Every ```` ```console ```` block is run: ``$ command`` lines are commands, the lines under one
are its output (stdout and stderr, as a terminal shows them), checked line by line. A block
starting ``# terminal N`` runs in that terminal: its command keeps running in the background
(its output lines are awaited in order; a block without a command is more of its output, and
``...`` skips lines until the next one shown appears) and ``^C`` sends it SIGINT (what it
printed before is on the screen already, above). Every block after a line ending
``Save this as `NAME`:`` is written to that file.

What differs from a reader's machine, and nothing else, is here (visible and minimal):
"""

from __future__ import annotations

import array
import fcntl
import os
import queue
import re
import shutil
import signal
import subprocess
import termios
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.zookeeper import ZooKeeperServer

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "tutorial.md"

#: Shown but not run: system packages need root and change the machine (this one has them);
#: the suite's fixture is the ZooKeeper. dubbo-py itself is installed as the page says: a fresh
#: virtual environment, `pip install` from a checkout (a copy of this tree's files, put where
#: the page's `dubbo-py` folder is), packages from PyPI (or this machine's pip configuration).
NOT_RUN = (
    "sudo apt-get install -y python3-venv",
    "sudo apt-get install -y zookeeperd",
    "sudo /usr/share/zookeeper/bin/zkServer.sh start",
)
#: pip's complaint about this machine's local package folders (its pip configuration names
#: local indexes that hold only some packages); a reader's pip has none.
LOCAL_INDEX_WARNING = re.compile(r"WARNING: Location 'file://[^']*' is ignored: .*")
#: Where the page's checkout is, relative to the reader's first folder.
TUTORIAL_CHECKOUT = "dubbo-py"
#: The tutorial's ZooKeeper address is replaced by the test's own (in a fresh chroot).
TUTORIAL_ZOOKEEPER = "zookeeper://127.0.0.1:2181"
#: The reader's data directory as the page shows it (the test uses a temporary one).
TUTORIAL_DATA_HOME = "/home/you/.local/share"
#: The user name the page shows as the rule history's operator.
TUTORIAL_USER = "you"
#: Seconds to wait for one line of a background process.
LINE_TIMEOUT = 60.0


# ----------------------------------------------------------------------------- the page


@dataclass
class Command:
    text: str
    expected: list[str] = field(default_factory=list)


@dataclass
class Step:
    kind: str  # "file" | "console"
    terminal: int = 1
    name: str = ""
    body: str = ""
    commands: list[Command] = field(default_factory=list)


def parse(text: str) -> list[Step]:
    """The page's files and console blocks, in order."""
    steps: list[Step] = []
    for match in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.S | re.M):
        lang, body = match.group(1), match.group(2)
        before = text[: match.start()].rstrip().splitlines()[-1]
        saved = re.search(r"[Ss]ave this as `([^`]+)`:$", before)
        if saved:
            steps.append(Step("file", name=saved.group(1), body=body))
        elif lang == "console":
            steps.append(console_step(body))
    return steps


def console_step(body: str) -> Step:
    lines = body.splitlines()
    step = Step("console")
    if lines and (m := re.fullmatch(r"# terminal (\d+)", lines[0])):
        step.terminal = int(m.group(1))
        lines = lines[1:]
    if lines and not (lines[0].startswith("$ ") or lines[0] == "^C"):
        step.commands.append(Command(""))  # more output of the terminal's running command
    for line in lines:
        if line.startswith("$ ") or line == "^C":
            step.commands.append(Command(line.removeprefix("$ ")))
        else:
            assert step.commands, f"output before any command: {line!r}"
            step.commands[-1].expected.append(line)
    return step


# ----------------------------------------------------------------------------- comparing


def normalise(line: str) -> str:
    """Ports and times differ on every run; trailing blanks do not matter."""
    line = re.sub(r"127\.0\.0\.1:\d{4,5}", "127.0.0.1:PORT", line)
    line = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "TIME", line)
    return line.rstrip()


def rows_in_any_order(lines: list[str]) -> list[str]:
    """Consecutive lines naming a provider (`127.0.0.1:PORT`) sorted: the page lists two
    providers by address, and which of them got the lower port differs on every run."""
    out: list[str] = []
    run: list[str] = []
    for line in [*lines, None]:
        if line is not None and line.startswith("127.0.0.1:PORT "):
            run.append(line)
            continue
        out.extend(sorted(run))
        run = []
        if line is not None:
            out.append(line)
    return out


def same(actual: list[str], expected: list[str], what: str) -> None:
    got = rows_in_any_order([normalise(x) for x in actual])
    want = rows_in_any_order([normalise(x) for x in expected])
    assert got == want, f"{what}:\n--- page\n" + "\n".join(want) + "\n--- ran\n" + "\n".join(got)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Terminal:
    """A long-running command, its output read line by line as it comes."""

    def __init__(
        self, command: str, cwd: Path, env: dict[str, str], unsub: Callable[[str], str]
    ) -> None:
        self.process = subprocess.Popen(
            ["bash", "-c", f"exec {command}"],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            # ^C must reach the command as a reader's terminal delivers it. A test run started
            # as a background job of a non-interactive shell inherits SIGINT ignored, and a
            # Python program that starts with SIGINT ignored never raises KeyboardInterrupt:
            # the watching consumer then prints on after the ^C instead of "stopped".
            preexec_fn=_default_sigint,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.skipped: list[str] = []
        self.unsub = unsub
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(self.unsub(line.rstrip("\n")))
        self.lines.put(None)

    def _next(self) -> str | None:
        try:
            return self.lines.get(timeout=LINE_TIMEOUT)
        except queue.Empty:
            return None

    def expect(self, expected: list[str], what: str) -> None:
        got: list[str] = []
        skipping = False
        for want in expected:
            if want == "...":
                skipping = True
                continue
            line = self._next()
            while skipping and line is not None and normalise(line) != normalise(want):
                self.skipped.append(line)
                line = self._next()
            if line is None:
                got.extend(["(skipped:)", *self.skipped[-20:]])
                break
            if skipping:
                got.append("...")
            got.append(line)
            skipping = False
        same(got, expected, what)

    def interrupt(self) -> None:
        """^C: what the command printed before it is already on the screen, above the ^C.

        A line printed just before the signal may still be in the pipe, or in the reader
        thread's hands, on a busy machine; it would then read as output after the ^C. So the
        command is stopped first (SIGSTOP: it writes nothing more), every line it wrote is
        collected and dropped, and only then is it interrupted and let go."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        self.process.send_signal(signal.SIGSTOP)
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < 0.3:
            unread = array.array("i", [0])
            fcntl.ioctl(fd, termios.FIONREAD, unread)
            try:
                self.lines.get(timeout=0.05)
                quiet_since = time.monotonic()
            except queue.Empty:
                if unread[0]:
                    quiet_since = time.monotonic()
        self.process.send_signal(signal.SIGINT)
        self.process.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)


# ----------------------------------------------------------------------------- running it


def copy_checkout(destination: Path) -> None:
    """This tree's files as a checkout has them (tracked, and new ones not ignored), without
    build leftovers: what `git clone` of this commit gives a reader."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


@pytest.fixture
def reader(tmp_path: Path, zookeeper: ZooKeeperServer) -> Iterator[tuple[Path, dict[str, str]]]:
    """An empty folder beside a checkout of dubbo-py, and the environment of a reader who has
    Python but has not installed dubbo-py (nothing of this tree on PYTHONPATH)."""
    home = tmp_path / "home"
    home.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DUBBO_PY_", "PYTHON", "VIRTUAL_ENV"))
    }
    env.update(
        XDG_DATA_HOME=str(home / "data"),
        XDG_CACHE_HOME=str(home / "cache"),
        USER=TUTORIAL_USER,
        PYTHONUNBUFFERED="1",
        PYTHONNOUSERSITE="1",
        # Quieter and faster than a reader's pip, nothing else: no root warning (the test runs
        # as root), no version check, no byte-compiling of every installed module.
        PIP_ROOT_USER_ACTION="ignore",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_COMPILE="1",
    )
    env["TUTORIAL_ZOOKEEPER"] = f"zookeeper://{zookeeper.address}/tutorial-{uuid.uuid4().hex[:8]}"
    folder = tmp_path / "work"
    folder.mkdir()
    copy_checkout(folder / TUTORIAL_CHECKOUT)
    yield folder, env


@pytest.mark.zookeeper
@pytest.mark.e2e
def test_the_tutorial_works_as_written(reader: tuple[Path, dict[str, str]]) -> None:
    text = DOC.read_text(encoding="utf-8")
    for command in NOT_RUN:
        assert f"$ {command}\n" in text, f"NOT_RUN lists {command!r}, which the page lacks"
    cwd, env = reader
    zookeeper = env.pop("TUTORIAL_ZOOKEEPER")
    data_home = env["XDG_DATA_HOME"]

    def sub(command: str) -> str:
        return command.replace(TUTORIAL_ZOOKEEPER, zookeeper)

    def unsub(output: str) -> str:
        return output.replace(zookeeper, TUTORIAL_ZOOKEEPER).replace(data_home, TUTORIAL_DATA_HOME)

    terminals: dict[int, Terminal] = {}
    ran = 0
    try:
        for step in parse(text):
            if step.kind == "file":
                (cwd / step.name).write_text(step.body, encoding="utf-8")
                continue
            for command in step.commands:
                what = f"terminal {step.terminal}: {command.text}"
                if command.text in NOT_RUN:
                    continue
                ran += 1
                if step.terminal != 1:
                    if command.text == "^C":
                        terminals[step.terminal].interrupt()
                    elif command.text:
                        terminals[step.terminal] = Terminal(sub(command.text), cwd, env, unsub)
                    terminals[step.terminal].expect(command.expected, what)
                    continue
                cwd = run_here(sub(command.text), cwd, env, command.expected, unsub, what)
        for number, terminal in terminals.items():
            assert terminal.process.wait(30) == 0, f"terminal {number} did not stop cleanly"
    finally:
        for terminal in terminals.values():
            terminal.kill()
    assert ran >= 20  # the page was read (a parser that found nothing would pass vacuously)
    # dubbo-py ran from the environment the page made, not from this tree.
    venv = Path(env["VIRTUAL_ENV"])
    where = subprocess.run(
        [venv / "bin" / "python", "-c", "import dubbo_py; print(dubbo_py.__file__)"],
        cwd=venv.parent,  # not this tree (`-c` puts the working directory first on sys.path)
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(venv) and not Path(where).is_relative_to(ROOT), where


def run_here(
    command: str,
    cwd: Path,
    env: dict[str, str],
    expected: list[str],
    unsub: Callable[[str], str],
    what: str,
) -> Path:
    """Run a command in the first terminal; returns the directory it leaves the shell in."""
    if command.startswith("export "):
        name, _, value = command.removeprefix("export ").partition("=")
        env[name] = value
        same([], expected, what)
        return cwd
    if activated := re.fullmatch(r"\. (\S+)/bin/activate", command):
        # What `activate` does to the shell the later commands (and terminals) run in.
        venv = cwd / activated.group(1)
        assert (venv / "bin" / "python").exists(), f"{what}: no virtual environment at {venv}"
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
        same([], expected, what)
        return cwd
    output: list[str] = []
    for part in command.split(" && "):
        if part.startswith("cd "):
            cwd = cwd / part.removeprefix("cd ")
            continue
        done = subprocess.run(
            ["bash", "-c", part],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=600,
        )
        output.extend(
            unsub(line)
            for line in done.stdout.splitlines()
            if not LOCAL_INDEX_WARNING.fullmatch(line)
        )
        # A command whose documented output ends in an error is meant to fail.
        failing = bool(expected) and expected[-1].startswith("error: ")
        assert (done.returncode != 0) == failing, f"{what} exited {done.returncode}:\n{done.stdout}"
    same(output, expected, what)
    return cwd
