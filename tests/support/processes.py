"""Real provider processes for end-to-end tests (examples/quickstart/provider.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def dubbo_py_cli(registry: str, *args: str, timeout: float = 60.0) -> str:
    """``dubbo-py --registry REGISTRY ARGS`` in a process of its own, as an operator runs it on
    this checkout; its standard output, once it exited 0."""
    result = subprocess.run(
        [sys.executable, "-m", "dubbo_py.admin", "--registry", registry, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, f"dubbo-py {' '.join(args)}: {result.stderr}"
    return result.stdout


PROVIDER = ROOT / "examples" / "quickstart" / "provider.py"


def start_ready(
    cmd: list[str],
    timeout: float | None = 30.0,
    what: str | None = None,
    *,
    stdin: int | None = None,
) -> tuple[subprocess.Popen[str], str]:
    """Start ``cmd`` and wait for its ``READY <address> ...`` line: (the process, the
    address). A process that ends first, or prints nothing more within ``timeout`` seconds
    (None: no limit), is killed and RuntimeError names ``what`` (default: ``cmd[1]``, the
    script) with everything it printed. ``stdin=subprocess.PIPE`` gives a process that reads
    commands a pipe to write them to."""
    proc = subprocess.Popen(
        cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    lines: list[str] = []
    timer = threading.Timer(timeout, proc.kill) if timeout is not None else None
    if timer is not None:
        timer.start()
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("READY "):
                return proc, line.split()[1]
    finally:
        if timer is not None:
            timer.cancel()
    proc.kill()
    proc.wait(10)
    raise RuntimeError(f"{what or cmd[1]} did not start: {''.join(lines)}")


class ProviderProcess:
    """One Greeter provider in its own process; ``address`` is known once it printed READY."""

    def __init__(
        self,
        registry: str,
        *args: str,
        port: int = 0,
        log_dir: Path | None = None,
        script: Path = PROVIDER,
        prefix: Sequence[str] = (),
    ):
        #: The provider program (default: the quick start's Greeter provider).
        self.script = script
        #: Run before the command (e.g. ``setpriv --regid=G``: tests.support.netfault.in_group).
        self.prefix = list(prefix)
        self.registry = registry
        self.args = list(args)
        self.port = port
        self.log_dir = log_dir
        self.proc: subprocess.Popen[str] | None = None
        self.address = ""

    def start(self, timeout: float = 30.0) -> ProviderProcess:
        cmd = [
            sys.executable,
            str(self.script),
            "--registry",
            self.registry,
            "--port",
            str(self.port),
        ]
        # The checkout under test first: an installed (editable) dubbo_py may be another one.
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=path)
        self.proc = subprocess.Popen(
            [*self.prefix, *cmd, *self.args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=ROOT,
        )
        deadline = time.monotonic() + timeout
        lines = []
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("READY "):
                self.address = line.split()[1]
                self.port = int(self.address.rsplit(":", 1)[1])
                return self
        self.kill()
        raise RuntimeError(f"provider did not start: {''.join(lines)}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL: no unregister, no drain — what a crash looks like."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def terminate(self, timeout: float = 20.0) -> int:
        """SIGTERM: graceful shutdown; returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def __enter__(self) -> ProviderProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()
