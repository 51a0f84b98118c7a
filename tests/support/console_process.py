"""``dubbo-py console`` in its own process, as an operator starts it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.support.processes import ROOT


class ConsoleProcess:
    """The console on a free loopback port; ``url`` is known once it printed where it serves."""

    def __init__(self, registry: str, *args: str, env: dict[str, str] | None = None) -> None:
        self.registry = registry
        self.args = list(args)
        self.env = env or {}
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self, timeout: float = 60.0) -> ConsoleProcess:
        cmd = [
            sys.executable, "-m", "dubbo_py.admin", "--registry", self.registry,
            "console", "--port", "0", *self.args,
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
            cwd=ROOT,
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        lines = []
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("dubbo-py console: "):
                self.url = line.split()[2].rstrip("/")
                return self
        self.stop()
        raise RuntimeError(f"console did not start: {''.join(lines)}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def __enter__(self) -> ConsoleProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
