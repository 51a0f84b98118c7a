"""A real, throw-away etcd server for tests (Debian's ``etcd-server`` package).

One member on loopback: a free client port and a free peer port, a temporary data directory,
short heartbeat and election timeouts so that it elects itself at once when (re)started, and
no fsync (``--unsafe-no-fsync``: the OS keeps what was written when the process is killed; only
a machine crash would lose it, which tests do not simulate). Like ZooKeeperServer, the ports
and data directory are kept across :meth:`EtcdServer.restart`, so leases (sessions) survive it.

A secured server (``certs``: TLS with client certificates checked against the test CA) and
etcd's authentication (:meth:`EtcdServer.enable_auth`, users and roles by etcd's Auth API, as
``etcdctl user/role/auth`` does) make the production set-up of docs/registry.md.
"""

from __future__ import annotations

import atexit
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import grpc

from tests.support.certs import Certs
from tests.support.local_server import free_port, log_tail

__all__ = ["EtcdCluster", "EtcdClusterMember", "EtcdServer", "EtcdUnavailable", "etcd_binary"]

_INSTALL_HINT = "install it with: apt-get install -y etcd-server"


class EtcdUnavailable(RuntimeError):
    """etcd is not installed, or the server would not start."""


def etcd_binary() -> str:
    """The path of the ``etcd`` server; :class:`EtcdUnavailable` when it is not installed."""
    found = shutil.which("etcd")
    if found is None:
        raise EtcdUnavailable(f"etcd not found; {_INSTALL_HINT}")
    return found


class EtcdServer:
    """One single-member etcd process on loopback."""

    def __init__(self, *, certs: Certs | None = None, auth_token_ttl: int | None = None) -> None:
        self.certs = certs
        self._auth_token_ttl = auth_token_ttl
        self.root_password: str | None = None
        self._root_token: str | None = None
        self._binary = etcd_binary()
        self.port = free_port()
        self.peer_port = free_port()
        self._base = Path(tempfile.mkdtemp(prefix="dubbo-py-etcd-"))
        self._data_dir = self._base / "data"
        self._log_path = self._base / "etcd.log"
        self._process: subprocess.Popen[bytes] | None = None
        atexit.register(self.close)

    @property
    def address(self) -> str:
        """``127.0.0.1:port``: the client endpoint (what ``etcd://`` addresses name)."""
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The registry address of this server: ``etcd://`` or, with TLS, ``etcds://`` with the
        test CA and the client certificate."""
        if self.certs is None:
            return f"etcd://{self.address}"
        c = self.certs
        return f"etcds://{self.address}?ca={c.ca}&cert={c.client_cert}&key={c.client_key}"

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._process is not None and self._process.poll() is None

    def start(self, timeout: float = 60.0) -> None:
        """Start the server and return once it serves requests."""
        if self.running:
            return
        client = f"{'https' if self.certs else 'http'}://{self.address}"
        peer = f"http://127.0.0.1:{self.peer_port}"
        secure: list[str] = []
        if self.certs is not None:
            secure += [
                "--cert-file",
                str(self.certs.server_cert),
                "--key-file",
                str(self.certs.server_key),
                "--trusted-ca-file",
                str(self.certs.ca),
                "--client-cert-auth",
            ]
        if self._auth_token_ttl is not None:
            secure += ["--auth-token-ttl", str(self._auth_token_ttl)]
        # The cheapest password hashing: every authentication checks one, on 2 loaded cores.
        secure += ["--bcrypt-cost", "4"]
        with self._log_path.open("ab") as log:
            self._process = subprocess.Popen(
                [
                    self._binary,
                    "--name",
                    "test",
                    "--data-dir",
                    str(self._data_dir),
                    "--listen-client-urls",
                    client,
                    "--advertise-client-urls",
                    client,
                    "--listen-peer-urls",
                    peer,
                    "--initial-advertise-peer-urls",
                    peer,
                    "--initial-cluster",
                    f"test={peer}",
                    "--heartbeat-interval",
                    "50",
                    "--election-timeout",
                    "250",
                    "--unsafe-no-fsync",
                    "--log-level",
                    "warn",
                    "--logger",
                    "zap",
                    *secure,
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a test's signals reach etcd alone
            )
        self._wait_serving(timeout)

    def _wait_serving(self, timeout: float) -> None:
        from dubbo_py.registry.store.etcd import _api as api

        deadline = time.monotonic() + timeout
        with self.admin_channel() as channel:
            stub = api.EtcdStub(channel)
            while time.monotonic() < deadline:
                assert self._process is not None
                if self._process.poll() is not None:
                    raise EtcdUnavailable(
                        f"etcd exited with {self._process.returncode}:\n{self.log_tail()}"
                    )
                try:
                    # A linearizable read answers once the member has elected itself leader.
                    stub.Range(api.RangeRequest(key=b"/"), timeout=1.0, metadata=self._token())
                    return
                except grpc.RpcError:
                    time.sleep(0.05)
        self.stop()
        raise EtcdUnavailable(f"etcd did not start in {timeout}s:\n{self.log_tail()}")

    def admin_channel(self) -> grpc.Channel:
        """A channel to the server (TLS with the client certificate when secured)."""
        if self.certs is None:
            return grpc.insecure_channel(self.address)
        c = self.certs
        credentials = grpc.ssl_channel_credentials(
            c.ca.read_bytes(), c.client_key.read_bytes(), c.client_cert.read_bytes()
        )
        return grpc.secure_channel(self.address, credentials)

    def _token(self, *, fresh: bool = False) -> list[tuple[str, str]]:
        """``root``'s token as call metadata, once authentication is on (kept: each
        authentication costs etcd a bcrypt check)."""
        if self.root_password is None:
            return []
        if fresh or self._root_token is None:
            from dubbo_py.registry.store.etcd import _api as api

            with self.admin_channel() as channel:
                reply = api.EtcdStub(channel).Authenticate(
                    api.AuthenticateRequest(name="root", password=self.root_password),
                    timeout=10.0,
                )
            self._root_token = str(reply.token)
        return [("token", self._root_token)]

    def auth(self, method: str, **fields: object) -> None:
        """One call of etcd's Auth API as ``root`` (``auth("UserAdd", name=..., password=...)``,
        ``auth("RoleGrantPermission", name=role, perm=api.Permission(...))``)."""
        from dubbo_py.registry.store.etcd import _api as api

        with self.admin_channel() as channel:
            stub = api.EtcdAuthStub(channel)
            call = getattr(stub, method)
            try:
                call(stub.request(method, **fields), timeout=10.0, metadata=self._token())
            except grpc.RpcError as exc:
                if "invalid auth token" not in str(exc.details()):
                    raise
                # root's token expired (--auth-token-ttl) or was invalidated: a new one.
                call(stub.request(method, **fields), timeout=10.0, metadata=self._token(fresh=True))

    def enable_auth(self, root_password: str) -> None:
        """Create ``root`` (with the root role) and turn authentication on, as ``etcdctl user
        add root && etcdctl auth enable`` do."""
        self.auth("UserAdd", name="root", password=root_password)
        self.auth("RoleAdd", name="root")
        self.auth("UserGrantRole", user="root", role="root")
        self.auth("AuthEnable")
        self.root_password = root_password

    def stop(self) -> None:
        """Kill the server (SIGKILL: like a crash; leases and keys stay in its data directory)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGCONT)  # a paused server dies as well
            process.send_signal(signal.SIGKILL)
            process.wait(10)

    def pause(self) -> None:
        """SIGSTOP: the process hangs with its connections open (a frozen machine)."""
        assert self._process is not None
        self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        assert self._process is not None
        self._process.send_signal(signal.SIGCONT)

    def restart(self) -> None:
        """Stop, then start on the same ports and data directory."""
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

    def __enter__(self) -> EtcdServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EtcdClusterMember:
    """One member of an :class:`EtcdCluster`: its client and peer ports, data directory and
    process (started with ``prefix``, e.g. ``setpriv --regid=G``)."""

    def __init__(
        self, name: str, base: Path, port: int, peer_port: int, prefix: Sequence[str]
    ) -> None:
        self.name = name
        self.port = port
        self.peer_port = peer_port
        self.prefix = list(prefix)
        self._data_dir = base / "data"
        self._log_path = base / "etcd.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """``127.0.0.1:port``: the client endpoint."""
        return f"127.0.0.1:{self.port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    def launch(self, initial_cluster: str) -> None:
        """Start the process without waiting (members wait for each other)."""
        client = f"http://{self.address}"
        with self._log_path.open("ab") as log:
            self._process = subprocess.Popen(
                [
                    *self.prefix,
                    etcd_binary(),
                    "--name",
                    self.name,
                    "--data-dir",
                    str(self._data_dir),
                    "--listen-client-urls",
                    client,
                    "--advertise-client-urls",
                    client,
                    "--listen-peer-urls",
                    self.peer_url,
                    "--initial-advertise-peer-urls",
                    self.peer_url,
                    "--initial-cluster",
                    initial_cluster,
                    "--initial-cluster-state",
                    "new",
                    "--heartbeat-interval",
                    "50",
                    "--election-timeout",
                    "500",
                    "--unsafe-no-fsync",
                    "--log-level",
                    "warn",
                    "--logger",
                    "zap",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def is_leader(self) -> bool:
        """Whether this member says it is the leader (its ``/metrics``; False when it does not
        answer)."""
        try:
            with urllib.request.urlopen(f"http://{self.address}/metrics", timeout=1.0) as reply:
                text = reply.read().decode()
        except OSError:
            return False
        return "\netcd_server_is_leader 1" in text

    def is_leader_or_follower(self) -> bool:
        """Whether the member knows a leader (its ``/health`` says true)."""
        try:
            with urllib.request.urlopen(f"http://{self.address}/health", timeout=1.0) as reply:
                return '"health":"true"' in reply.read().decode().replace(" ", "")
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait(10)

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the member's log."""
        return log_tail(self._log_path, lines)


class EtcdCluster:
    """Three (or ``size``) etcd members forming one cluster on loopback; ``prefixes[i]`` runs
    before member ``i`` (its own group, so tests.support.netfault can cut it from the others)."""

    def __init__(self, size: int = 3, *, prefixes: Sequence[Sequence[str]] = ()) -> None:
        etcd_binary()
        self._base = Path(tempfile.mkdtemp(prefix="dubbo-py-etcd-cluster-"))
        self.members = []
        for i in range(size):
            base = self._base / f"m{i + 1}"
            base.mkdir()
            prefix = prefixes[i] if i < len(prefixes) else ()
            self.members.append(
                EtcdClusterMember(f"m{i + 1}", base, free_port(), free_port(), prefix)
            )
        atexit.register(self.close)

    @property
    def hosts(self) -> str:
        """Every member's client address (what an ``etcd://`` address lists)."""
        return ",".join(m.address for m in self.members)

    def start(self, timeout: float = 60.0) -> None:
        """Start every member and wait until the cluster has a leader and answers."""
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        for member in self.members:
            member.launch(initial)
        self.leader(timeout)

    def leader(self, timeout: float = 30.0) -> EtcdClusterMember:
        """The member that is leader now (waiting for an election)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for member in self.members:
                if member.is_leader():
                    return member
            time.sleep(0.1)
        raise EtcdUnavailable(
            f"no etcd leader within {timeout}s:\n" + "\n".join(m.log_tail(10) for m in self.members)
        )

    def close(self) -> None:
        """Kill every member and remove the data directories."""
        for member in self.members:
            member.kill()
        shutil.rmtree(self._base, ignore_errors=True)
        atexit.unregister(self.close)

    def __enter__(self) -> EtcdCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
