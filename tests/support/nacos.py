"""A real, throw-away Nacos server for tests (tests/peers/java/nacos-server).

The server is Nacos 3.1's naming and config modules, as republished on Maven Central under
``io.github.pig-mesh.nacos``, started in standalone mode with its embedded Derby in a temporary
directory. Nacos 3.x speaks the same gRPC protocol as 2.x: Nacos 2.x clients (Dubbo 3.3's Java
registry, ``nacos-sdk-python`` 2.x/3.x) register, discover and read config against it. Nacos
listens on four ports derived from the HTTP port P: P (HTTP, context path ``/nacos``), P+1000
(client gRPC), P+1001 (cluster gRPC) and P-1000 (Raft), so :func:`_free_base_port` picks a P
whose four ports are all free.

``NacosServer(auth=True)`` starts it with Nacos's auth plugin on (``nacos.core.auth.enabled``
and ``nacos.core.auth.admin.enabled``; the launcher already sets the token secret key and the
server identity the plugin needs, and turns the plugin's user cache off so a user or permission
just created applies at once): :meth:`NacosServer.start` then sets the administrator's password
(Nacos 3 has none until ``POST /nacos/v3/auth/user/admin``) and :meth:`NacosServer.auth_api`
calls the auth HTTP API (users, roles, permissions) as the administrator.
"""

from __future__ import annotations

import atexit
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from tests.support.local_server import log_tail
from tests.support.peers import ensure_built

__all__ = ["NacosServer", "NacosUnavailable"]

#: Offsets from the HTTP port of every port Nacos binds.
_PORT_OFFSETS = (0, 1000, 1001, -1000)


class NacosUnavailable(RuntimeError):
    """The Nacos server could not be built or would not start (the message says why)."""


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_base_port() -> int:
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            base = int(sock.getsockname()[1])
        if 2000 < base < 64000 and all(_port_free(base + d) for d in _PORT_OFFSETS):
            return base
    raise NacosUnavailable("no HTTP port P with P, P+1000, P+1001 and P-1000 free on 127.0.0.1")


class NacosServer:
    """One standalone Nacos server on loopback; :meth:`start`, then :attr:`address`."""

    #: The administrator of an auth-on server (Nacos 3's fixed administrator name).
    ADMIN_USER = "nacos"

    def __init__(self, start_timeout: float = 90.0, *, auth: bool = False) -> None:
        self.start_timeout = start_timeout
        #: Whether Nacos's auth plugin is on (clients and the admin API need a user).
        self.auth = auth
        #: The administrator's password, set by :meth:`start` on an auth-on server.
        self.admin_password = "dubbo-py-nacos-admin"
        self.port = 0
        self._dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """``127.0.0.1:P``: the HTTP port, as Nacos clients are given it (gRPC is P+1000)."""
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        """The server's console output."""
        assert self._dir is not None
        return self._dir / "console.log"

    def start(self) -> None:
        """Build the launcher if needed, start the server and wait for its READY line."""
        self._dir = Path(tempfile.mkdtemp(prefix="dubbo-py-nacos-"))
        self.port = _free_base_port()
        self._launch()
        if self.auth:
            self._http("POST", "/v3/auth/user/admin", {"password": self.admin_password})

    def _http(self, method: str, path: str, query: dict[str, str]) -> Any:
        body = urllib.parse.urlencode(query)
        url = f"http://{self.address}/nacos{path}"
        request = (
            urllib.request.Request(f"{url}?{body}", method=method)
            if method in ("GET", "DELETE")
            else urllib.request.Request(url, data=body.encode(), method=method)
        )
        try:
            with urllib.request.urlopen(request, timeout=15) as response:
                return json.loads(response.read().decode() or "null")
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            raise RuntimeError(f"Nacos {method} {path}: HTTP {exc.code}: {detail}") from None

    def login(self, user: str, password: str) -> str:
        """An access token of ``user`` (``POST /nacos/v3/auth/user/login``)."""
        answer = self._http("POST", "/v3/auth/user/login", {"username": user, "password": password})
        return str(answer["accessToken"])

    def auth_api(self, method: str, path: str, **query: str) -> Any:
        """``method`` on ``/nacos/v3/auth/<path>`` as the administrator (users, roles,
        permissions); RuntimeError with Nacos's answer when it refuses."""
        token = self.login(self.ADMIN_USER, self.admin_password)
        return self._http(method, f"/v3/auth/{path}", {**query, "accessToken": token})

    def kill(self) -> None:
        """SIGKILL the server, keeping its data and ports for :meth:`restart`."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(10)

    def restart(self) -> None:
        """Start the server again on the same ports and data (after :meth:`kill`)."""
        assert self._dir is not None and self._proc is not None, "start() first"
        self.kill()
        self._launch()

    def _launch(self) -> None:
        assert self._dir is not None
        peer = ensure_built("java", "nacos-server")
        ready_before = (
            self.log_path.read_text(errors="replace").count(f"READY {self.port}")
            if self.log_path.exists()
            else 0
        )
        args = [str(self._dir / "home"), str(self.port), *(["auth"] if self.auth else [])]
        cmd = peer.java_command("dubbopy.nacos.NacosLauncher", *args)
        # Hessian and Nacos's own reflection need java.lang opened on Java 17.
        cmd.insert(1, "--add-opens=java.base/java.lang=ALL-UNNAMED")
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        if not ready_before:
            atexit.register(self.close)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise NacosUnavailable(
                    f"Nacos exited with {self._proc.returncode}:\n{log_tail(self.log_path)}"
                )
            if self.log_path.read_text(errors="replace").count(f"READY {self.port}") > ready_before:
                return
            time.sleep(0.2)
        self.close()
        raise NacosUnavailable(
            f"Nacos not ready after {self.start_timeout} s:\n{log_tail(self.log_path)}"
        )

    def close(self) -> None:
        """Stop the server and remove its data."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)
        self._proc = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
