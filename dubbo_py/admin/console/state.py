"""One console's state: the registry connection every request shares, who writes, and the
lock that keeps its writes one at a time."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from dubbo_py.admin.common import CliEnv
from dubbo_py.admin.console.live import LiveReader
from dubbo_py.admin.console.security import WriteAccess

__all__ = ["ConsoleState"]


@dataclass
class ConsoleState:
    """The console's registry (through the CLI's environment) and its write rules."""

    env: CliEnv
    #: Extra host names the console answers to (the --bind address).
    allowed_hosts: tuple[str, ...] = ()
    #: Reads the providers' live figures from the applications' QoS ports (None: not shown).
    live: LiveReader | None = None
    write_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def access(self) -> WriteAccess:
        """Whether writes are allowed (see :mod:`dubbo_py.admin.console.security`)."""
        if self.env.address.kind == "zookeeper" and not self.env.auth:
            return WriteAccess(
                False,
                "read-only: start the console with your registry identity "
                "(--auth or $DUBBO_PY_REGISTRY_AUTH) to change rules",
            )
        return WriteAccess(True)
