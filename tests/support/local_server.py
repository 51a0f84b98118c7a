"""What the throw-away servers of the tests (ZooKeeper, etcd) share: a free loopback port and
the tail of their log file."""

from __future__ import annotations

import socket
from pathlib import Path


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def log_tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a server's log file ("" while there is none)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
