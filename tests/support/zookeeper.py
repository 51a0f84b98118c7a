"""A real, throw-away ZooKeeper server for tests (Debian's ``zookeeper`` package).

The server runs ``org.apache.zookeeper.server.ZooKeeperServerMain`` in a JVM with a generated
config: a free loopback port, a temporary data directory, ``tickTime`` 200 ms (so sessions may
be as short as 0.4 s), no admin server, the ``ruok``/``srvr``/``stat`` four-letter words, and
no cap on connections per client address: every process of a test connects from 127.0.0.1,
and ZooKeeper's default ``maxClientCnxns=60`` refuses the 61st (a benchmark of 100 consumer
applications plus providers and an operator would otherwise never get them all connected).
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from kazoo.client import KazooClient

from tests.support.local_server import free_port, log_tail

__all__ = [
    "EnsembleMember",
    "ZooKeeperEnsemble",
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


_JVM_OPTIONS = (
    # Small and quick to start: three of these must fit a loaded 2-core machine at once.
    "-Xmx128m",
    "-Xss512k",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:CICompilerCount=1",
    "-XX:-UsePerfData",
    "-Dzookeeper.jmx.log4j.disable=true",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
)


def _launch(
    main_class: str, config: Path, log_path: Path, prefix: Sequence[str] = ()
) -> subprocess.Popen[bytes]:
    """Start a ZooKeeper JVM running ``main_class`` on ``config``, its output in ``log_path``
    (``prefix``: run before it, e.g. ``setpriv --regid=G``)."""
    java = shutil.which("java")
    if java is None:
        raise ZooKeeperUnavailable(f"java not found; {_INSTALL_HINT}")
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [*prefix, java, *_JVM_OPTIONS, "-cp", zookeeper_classpath(), main_class, str(config)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            # Its own session: a test's signals (SIGSTOP included) reach the JVM alone.
            start_new_session=True,
        )


class _Stoppable(Protocol):
    def stop(self) -> None: ...

    def log_tail(self, lines: int = 40) -> str: ...


def _wait_serving(
    address: str, process: subprocess.Popen[bytes], timeout: float, owner: _Stoppable
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ZooKeeperUnavailable(
                f"ZooKeeper exited with {process.returncode}:\n{owner.log_tail()}"
            )
        # srvr answers "not currently serving requests" until the database is loaded (and,
        # in an ensemble, until the server has joined a quorum).
        if "Zookeeper version" in four_letter_word(address, "srvr"):
            return
        time.sleep(0.1)
    owner.stop()
    raise ZooKeeperUnavailable(f"ZooKeeper did not start in {timeout}s:\n{owner.log_tail()}")


class ZooKeeperServer:
    """One standalone ZooKeeper server process. The port and data directory are chosen at
    construction and kept across :meth:`restart`, so clients reconnect to the same sessions."""

    def __init__(self, *, tick_time_ms: int = 200, max_session_timeout_ms: int = 60_000) -> None:
        self._classpath = zookeeper_classpath()
        self._java = shutil.which("java")
        if self._java is None:
            raise ZooKeeperUnavailable(f"java not found; {_INSTALL_HINT}")
        self.port = free_port()
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
                    # Every client is on 127.0.0.1: the default cap of 60 per address would
                    # refuse the 61st session (and a reconnecting one) outright.
                    "maxClientCnxns=0",
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
        self._process = _launch(
            "org.apache.zookeeper.server.ZooKeeperServerMain", self._config, self._log_path
        )
        _wait_serving(self.address, self._process, timeout, self)

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
        return log_tail(self._log_path, lines)

    def __enter__(self) -> ZooKeeperServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EnsembleMember:
    """One server of a :class:`ZooKeeperEnsemble`: its own client port, data directory and JVM."""

    def __init__(
        self,
        server_id: int,
        base: Path,
        client_port: int,
        peer_ports: tuple[int, int] = (0, 0),
        prefix: Sequence[str] = (),
    ) -> None:
        self.server_id = server_id
        self.port = client_port
        #: The quorum and election ports (what a partition between members cuts).
        self.peer_ports = peer_ports
        #: Run before the JVM (``setpriv --regid=G``: tests.support.netfault matches its packets).
        self.prefix = list(prefix)
        self._base = base
        self.config = base / "zoo.cfg"
        self._log_path = base / "zookeeper.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """``127.0.0.1:port``."""
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        """Whether the JVM is alive (a paused one counts)."""
        return self._process is not None and self._process.poll() is None

    def launch(self) -> None:
        """Start the JVM without waiting (members of an ensemble wait for each other)."""
        if not self.running:
            self._process = _launch(
                "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                self.config,
                self._log_path,
                self.prefix,
            )

    def wait_serving(self, timeout: float = 60.0) -> None:
        """Wait until the server serves clients (it has joined a quorum)."""
        assert self._process is not None, "not launched"
        _wait_serving(self.address, self._process, timeout, self)

    def mode(self) -> str:
        """``leader``, ``follower``, or ``""`` while it is not serving."""
        for line in four_letter_word(self.address, "srvr", timeout=1.0).splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return ""

    def kill(self) -> None:
        """SIGKILL, like a crash (the data directory stays for a restart)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGCONT)  # a paused JVM dies as well
            process.send_signal(signal.SIGKILL)
            process.wait(10)

    stop = kill

    def pause(self) -> None:
        """SIGSTOP: the process hangs with its connections open (a frozen machine)."""
        assert self._process is not None
        self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        assert self._process is not None
        self._process.send_signal(signal.SIGCONT)

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the server's log."""
        return log_tail(self._log_path, lines)


class ZooKeeperEnsemble:
    """Three (or ``size``) real ZooKeeper servers forming one ensemble on loopback, each with
    distinct client, quorum and election ports. ``tickTime`` is small so that elections and
    session timeouts take a fraction of a second to a few seconds."""

    def __init__(
        self,
        size: int = 3,
        *,
        tick_time_ms: int = 100,
        prefixes: Sequence[Sequence[str]] = (),
    ) -> None:
        zookeeper_classpath()  # fail early, with the install hint
        if shutil.which("java") is None:
            raise ZooKeeperUnavailable(f"java not found; {_INSTALL_HINT}")
        self._base = Path(tempfile.mkdtemp(prefix="dubbo-py-zk-ensemble-"))
        peers = [(free_port(), free_port(), free_port()) for _ in range(size)]
        servers = [
            f"server.{i + 1}=127.0.0.1:{quorum}:{election}"
            for i, (_client, quorum, election) in enumerate(peers)
        ]
        self.members: list[EnsembleMember] = []
        for i, (client, quorum, election) in enumerate(peers):
            base = self._base / f"server-{i + 1}"
            data = base / "data"
            data.mkdir(parents=True)
            (data / "myid").write_text(f"{i + 1}\n")
            prefix = prefixes[i] if i < len(prefixes) else ()
            member = EnsembleMember(i + 1, base, client, (quorum, election), prefix)
            member.config.write_text(
                "\n".join(
                    [
                        f"tickTime={tick_time_ms}",
                        "initLimit=50",
                        "syncLimit=20",
                        f"dataDir={data}",
                        f"clientPort={client}",
                        "clientPortAddress=127.0.0.1",
                        f"minSessionTimeout={2 * tick_time_ms}",
                        "maxSessionTimeout=60000",
                        "admin.enableServer=false",
                        "4lw.commands.whitelist=ruok,srvr,stat",
                        "maxClientCnxns=0",  # every client is on 127.0.0.1 (default cap: 60)
                        "forceSync=no",
                        # Elections retry every 200 ms at most (the default backs off to 60 s).
                        "cnxTimeout=500",
                        *servers,
                        "",
                    ]
                )
            )
            self.members.append(member)
        atexit.register(self.close)

    @property
    def hosts(self) -> str:
        """Every member's client address: kazoo's hosts string."""
        return ",".join(m.address for m in self.members)

    def start(self, timeout: float = 90.0) -> None:
        """Start every member and wait until all serve."""
        for member in self.members:
            member.launch()
        for member in self.members:
            member.wait_serving(timeout)

    def leader(self, timeout: float = 60.0) -> EnsembleMember:
        """The current leader (waiting for an election to end)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for member in self.members:
                if member.running and member.mode() == "leader":
                    return member
            time.sleep(0.1)
        raise ZooKeeperUnavailable(f"no leader elected within {timeout}s")

    def followers(self) -> list[EnsembleMember]:
        """The running members that are followers now."""
        return [m for m in self.members if m.running and m.mode() == "follower"]

    def close(self) -> None:
        """Kill every member and remove the data directories."""
        for member in self.members:
            member.kill()
        shutil.rmtree(self._base, ignore_errors=True)
        atexit.unregister(self.close)

    def __enter__(self) -> ZooKeeperEnsemble:
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
