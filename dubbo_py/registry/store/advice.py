"""What to do about a registry that does not answer: one sentence for the error a provider exits
with and the warning a consumer starts with.

Where the address is on this machine, the advice reads what it can here: whether Debian's
``zookeeper`` package is installed (``/usr/share/zookeeper/bin/zkServer.sh``) and the port its
``zoo.cfg`` sets. So "installed but not running" (start it; the package starts nothing where there
is no init system, e.g. in a container) reads differently from "not installed" (install it) and
from "the address names another port than ZooKeeper's". It never probes the network: the caller
already knows nothing answered at the address.
"""

from __future__ import annotations

import re
from pathlib import Path

from dubbo_py.registry.store.address import parse_registry_address

__all__ = ["ZK_CONFIG", "ZK_SERVER", "start_advice"]

#: Debian's zookeeper package: its start script and its configuration.
ZK_SERVER = Path("/usr/share/zookeeper/bin/zkServer.sh")
ZK_CONFIG = Path("/etc/zookeeper/conf/zoo.cfg")
_LOOPBACK = ("localhost", "::1", "[::1]")
_EMBEDDED = "or leave the registry unset to use the embedded one (no server needed)"


def _loopback(host: str) -> bool:
    return host in _LOOPBACK or host.startswith("127.")


def _client_port(config: Path) -> int | None:
    try:
        text = config.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    match = re.search(r"^\s*clientPort\s*=\s*(\d+)\s*$", text, re.M)
    return int(match.group(1)) if match else None


def _zookeeper_here(port: int, server: Path, config: Path) -> str:
    if not server.exists():
        return (
            "ZooKeeper is not installed on this machine: install it (Debian/Ubuntu: "
            f"sudo apt-get install zookeeperd), {_EMBEDDED}"
        )
    start = f"sudo systemctl start zookeeper, or where there is no init system sudo {server} start"
    configured = _client_port(config)
    if configured is not None and configured != port:
        return (
            f"ZooKeeper is installed here but set to listen on port {configured} "
            f"(clientPort in {config}), not {port}: check the address, or start it ({start})"
        )
    return f"ZooKeeper is installed here but not running: start it ({start}), {_EMBEDDED}"


def start_advice(registry: str, *, server: Path = ZK_SERVER, config: Path = ZK_CONFIG) -> str:
    """What to do when nothing answers at ``registry`` (an address as written): a sentence
    without a final full stop."""
    try:
        address = parse_registry_address(registry)
    except ValueError:
        return f"check the address, {_EMBEDDED}"
    hosts = address.hosts
    if address.kind == "zookeeper" and len(hosts) == 1:
        host, _, port = hosts[0].rpartition(":")
        if _loopback(host) and port.isdigit():
            return _zookeeper_here(int(port), server, config)
    if address.kind == "etcd":
        return f"start etcd there (Debian/Ubuntu: sudo apt-get install etcd-server), {_EMBEDDED}"
    return f"start ZooKeeper there, {_EMBEDDED}"
