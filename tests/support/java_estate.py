"""Apache Dubbo 3.3.6 processes (tests/peers/java/estate) as the other side of live tests.

``JavaProvider`` and ``JavaConsumer`` start the peer's ``estate.Provider`` / ``estate.Consumer``
(PEER_CONTRACT.md) from its cached build, pinned to 127.0.0.1. Their stdout carries only the
READY and RESULT lines; Dubbo's logs go to a file, named in every failure.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from tests.support.peers import Peer, ensure_built


def java_peer() -> Peer:
    """The Java estate peer, built now if this machine has not built these sources."""
    return ensure_built("java", "estate")


class _JavaProcess:
    main_class = ""

    def __init__(
        self, *args: str, ready_timeout: float = 60.0, extra_classpath: Sequence[Path] = ()
    ) -> None:
        self.args = list(args)
        self.extra_classpath = list(extra_classpath)
        self.ready_timeout = ready_timeout
        self.log = Path(tempfile.mkstemp(prefix="java-estate-", suffix=".log")[1])
        self.proc: subprocess.Popen[str] | None = None
        self.ready_line = ""

    def command_line(self) -> list[str]:
        """The process's command line (a Go peer's subclass names its binary instead)."""
        return java_peer().java_command(
            self.main_class, *self.args, extra_classpath=self.extra_classpath
        )

    def start(self) -> _JavaProcess:
        cmd = self.command_line()
        # DUBBO_IP_TO_REGISTRY=127.0.0.1 is refused by Dubbo (a loopback address is "invalid"
        # there); the peer pins Dubbo's local host to 127.0.0.1 instead (Loopback.java), so what
        # it registers and what it dials are loopback addresses.
        env = dict(os.environ)
        with self.log.open("w") as sink:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sink, text=True, env=env
            )
        self.ready_line = self._read_line("READY", self.ready_timeout)
        return self

    def logs(self) -> str:
        """What Dubbo logged so far (its last 60 lines)."""
        return "".join(self.log.read_text(errors="replace").splitlines(keepends=True)[-60:])

    def _read_line(self, prefix: str, timeout: float) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        timer = threading.Timer(timeout, self.proc.kill)
        timer.start()
        try:
            for line in self.proc.stdout:
                if line.startswith(prefix):
                    return line.strip()
        finally:
            timer.cancel()
        self.kill()
        raise RuntimeError(f"{self.main_class} ended before {prefix}:\n{self.logs()}")

    def stop(self) -> None:
        """Close its stdin, so Dubbo unregisters and exits, and kill it if it has not within
        a few seconds. (A killed provider's nodes outlive it until its ZooKeeper session ends,
        and a later Java consumer spends its start-up waiting on that dead instance's metadata.)"""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(8)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()

    def kill(self) -> None:
        """kill -9: what a crash looks like."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.stop()
        if exc_type is None:  # kept when something failed: the failure names it
            self.log.unlink(missing_ok=True)


class JavaProvider(_JavaProcess):
    """``estate.Provider``: demo.Greeter and demo.Chat exported on Triple by Dubbo 3.3.6."""

    main_class = "estate.Provider"

    @property
    def address(self) -> str:
        return self.ready_line.split()[1]


class JavaConsumer(_JavaProcess):
    """``estate.Consumer``: a Dubbo 3.3.6 reference to demo.Greeter, driven over stdin."""

    main_class = "estate.Consumer"

    def command(self, line: str, timeout: float = 60.0) -> dict[str, Any]:
        """Send one command line; its RESULT as a dict."""
        self.send(line)
        return self.result(timeout)

    def send(self, line: str) -> None:
        """Send one command line without waiting for its RESULT (read it with :meth:`result`),
        so a test can inject a fault while the command runs."""
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def result(self, timeout: float = 60.0) -> dict[str, Any]:
        """The RESULT of the command sent last, as a dict."""
        result: dict[str, Any] = json.loads(self._read_line("RESULT", timeout)[len("RESULT ") :])
        return result

    def publish(self, key: str, group: str, text: str) -> bool:
        """Write ``text`` at ``key`` in config group ``group`` through Dubbo's own
        DynamicConfiguration.publishConfig, as a Java tool in the estate would."""
        encoded = base64.b64encode(text.encode()).decode()
        result = self.command(f"publish {key} {group} {encoded}")
        assert "error" not in result, result["error"]
        return bool(result["done"])

    def unpublish(self, key: str, group: str) -> bool:
        """DynamicConfiguration.removeConfig of ``key`` in ``group``."""
        result = self.command(f"unpublish {key} {group}")
        assert "error" not in result, result["error"]
        return bool(result["done"])

    def call(self, n: int = 1, **attachments: str) -> dict[str, Any]:
        """``call N [name=...] [k=v ...]``."""
        words = [f"{k}={v}" for k, v in attachments.items()]
        return self.command(" ".join(["call", str(n), *words]))


class JavaDubboProvider(JavaProvider):
    """``estate.DubboProvider``: the Java interface estate.UserService exported over
    ``dubbo://`` (Hessian2) by Dubbo 3.3.6."""

    main_class = "estate.DubboProvider"


P = TypeVar("P", bound=_JavaProcess)


@contextmanager
def side_by_side(*processes: P) -> Iterator[list[P]]:
    """Start ``processes`` at once and, after the block, stop them at once: each start is a
    JVM's start-up (seconds of CPU, much of it waiting on one thread) and each stop Dubbo's
    shutdown wait, so a fixture of several peers need not take their sum. A process whose
    start failed is not waited for; the others are stopped as the block's exit says."""
    started: list[P] = []

    def start(process: P) -> None:
        process.__enter__()
        started.append(process)

    ok = False
    try:
        with ThreadPoolExecutor(max_workers=len(processes) or 1) as pool:
            list(pool.map(start, processes))
        yield list(processes)
        ok = True
    finally:
        with ThreadPoolExecutor(max_workers=len(started) or 1) as pool:
            failed = None if ok else AssertionError
            list(pool.map(lambda process: process.__exit__(failed, None, None), started))
