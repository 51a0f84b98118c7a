"""A real, throw-away ZooKeeper server for tests (Debian's ``zookeeper`` package).

The server runs ``org.apache.zookeeper.server.ZooKeeperServerMain`` in a JVM with a generated
config: a free loopback port, a temporary data directory, ``tickTime`` 200 ms (so sessions may
be as short as 0.4 s), no admin server, and the ``ruok``/``srvr``/``stat`` four-letter words.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

__all__ = [
    "ZooKeeperServer",
    "ZooKeeperUnavailable",
    "expire_session",
    "four_letter_word",
    "zookeeper_classpath",
]

_JAR_DIRS = (
    Path("/usr/share/zookeeper/lib"),
    Path("/usr/share/zookeeper"),
    Path("/usr/share/java"),
)
_INSTALL_HINT = "install it with: apt-get install -y zookeeper"


class ZooKeeperUnavailable(RuntimeError):
    """ZooKeeper (or Java) is not installed, or the server would not start."""


def _find_jar(*names: str) -> Path | None:
    for directory in _JAR_DIRS:
        for name in names:
            candidate = directory / name
            if candidate.is_file():
                return candidate
        for name in names:
            # versioned names, e.g. zookeeper-3.8.0.jar
            stem = name.removesuffix(".jar")
            matches = sorted(directory.glob(f"{stem}-[0-9]*.jar")) if directory.is_dir() else []
            if matches:
                return matches[-1]
    return None


def zookeeper_classpath() -> str:
    """The classpath of the installed ZooKeeper server; :class:`ZooKeeperUnavailable` if
    it is not installed."""
    server = _find_jar("zookeeper.jar")
    jute = _find_jar("zookeeper-jute.jar")
    if server is None or jute is None:
        raise ZooKeeperUnavailable(
            "ZooKeeper jars not found under "
            + ", ".join(str(d) for d in _JAR_DIRS)
            + f"; {_INSTALL_HINT}"
        )
    # Debian's zookeeper.jar names its other dependencies in its manifest Class-Path.
    parts = [server, jute]
    binding = _find_jar("slf4j-simple.jar", "slf4j-nop.jar")
    if binding is not None:
        parts.append(binding)
    return os.pathsep.join(str(p) for p in parts)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def four_letter_word(address: str, word: str, timeout: float = 2.0) -> str:
    """Send a ZooKeeper four-letter command and return the reply ('' if it cannot connect)."""
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as sock:
            sock.sendall(word.encode())
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


class ZooKeeperServer:
    """One standalone ZooKeeper server process. The port and data directory are chosen at
    construction and kept across :meth:`restart`, so clients reconnect to the same sessions."""

    def __init__(self, *, tick_time_ms: int = 200, max_session_timeout_ms: int = 60_000) -> None:
        self._classpath = zookeeper_classpath()
        self._java = shutil.which("java")
        if self._java is None:
            raise ZooKeeperUnavailable(f"java not found; {_INSTALL_HINT}")
        self.port = _free_port()
        self._base = Path(tempfile.mkdtemp(prefix="dubbo-py-zk-"))
        self._data_dir = self._base / "data"
        self._data_dir.mkdir()
        self._log_path = self._base / "zookeeper.log"
        self._config = self._base / "zoo.cfg"
        self._config.write_text(
            "\n".join(
                [
                    f"tickTime={tick_time_ms}",
                    f"dataDir={self._data_dir}",
                    f"clientPort={self.port}",
                    "clientPortAddress=127.0.0.1",
                    f"minSessionTimeout={2 * tick_time_ms}",
                    f"maxSessionTimeout={max_session_timeout_ms}",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,stat",
                    # The OS keeps what was written when the process is killed; only a machine
                    # crash would lose it, which tests do not simulate.
                    "forceSync=no",
                    "",
                ]
            )
        )
        self._process: subprocess.Popen[bytes] | None = None
        # The JVM runs in its own session: make sure it does not outlive an interrupted run.
        atexit.register(self.close)

    @property
    def address(self) -> str:
        """``127.0.0.1:port`` (kazoo's hosts string)."""
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._process is not None and self._process.poll() is None

    def start(self, timeout: float = 60.0) -> None:
        """Start the server and return once it serves requests."""
        if self.running:
            return
        assert self._java is not None
        log = self._log_path.open("ab")
        try:
            self._process = subprocess.Popen(
                [
                    self._java,
                    "-Xmx128m",
                    "-XX:+UseSerialGC",
                    "-XX:TieredStopAtLevel=1",
                    "-Dzookeeper.jmx.log4j.disable=true",
                    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                    "-cp",
                    self._classpath,
                    "org.apache.zookeeper.server.ZooKeeperServerMain",
                    str(self._config),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise ZooKeeperUnavailable(
                    f"ZooKeeper exited with {self._process.returncode}:\n{self.log_tail()}"
                )
            # srvr answers "not currently serving requests" until the database is loaded.
            if "Zookeeper version" in four_letter_word(self.address, "srvr"):
                return
            time.sleep(0.1)
        self.stop()
        raise ZooKeeperUnavailable(f"ZooKeeper did not start in {timeout}s:\n{self.log_tail()}")

    def stop(self) -> None:
        """Kill the server (SIGKILL: like a crash; sessions survive in its data directory)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait(10)

    def restart(self) -> None:
        """Stop, then start on the same port and data directory."""
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop and remove the data directory."""
        self.stop()
        shutil.rmtree(self._base, ignore_errors=True)
        atexit.unregister(self.close)

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the server's log."""
        try:
            return "\n".join(self._log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def __enter__(self) -> ZooKeeperServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def expire_session(target: Any, timeout: float = 30.0) -> None:
    """Make ZooKeeper expire the session of ``target`` (a ``KazooClient`` or anything with a
    ``kazoo_client`` property, such as ``ZooKeeperStore``), then wait until it has a new one.

    The classic trick: a second client joins the same session (id and password), which moves the
    session away from the first connection, and closes it; the first client then learns on
    reconnection that its session has expired.
    """
    client: KazooClient = getattr(target, "kazoo_client", target)
    old_id, password = client.client_id
    hosts = ",".join(f"{host}:{port}" for host, port in client.hosts)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        intruder = KazooClient(hosts=hosts, client_id=(old_id, password))
        try:
            intruder.start(timeout=max(1.0, deadline - time.monotonic()))
        finally:
            intruder.stop()
            intruder.close()
        attempt_end = min(deadline, time.monotonic() + 5.0)
        while time.monotonic() < attempt_end:
            current = client.client_id
            if client.connected and current is not None and current[0] != old_id:
                return
            time.sleep(0.05)
    raise TimeoutError(f"session {old_id:#x} did not expire within {timeout}s")
