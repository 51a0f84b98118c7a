"""One console's state: the registry connections every request shares, who writes, and the
lock that keeps its writes one at a time.

A console started with several ``--registry`` serves each of them, one per page: a page shows
(and its writes go to) the registry chosen with ``?registry=ID`` (kept in a cookie for the
pages that follow); a write names its registry in a header its page sets, so a write from a
page of one registry cannot land in another chosen meanwhile in another tab.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from dubbo_py.admin.common import CliEnv, RegistryTarget
from dubbo_py.admin.console.live import LiveReader
from dubbo_py.admin.console.security import WriteAccess
from dubbo_py.admin.rules import acl

__all__ = ["ConsoleRegistry", "ConsoleState", "write_access"]


@dataclass
class ConsoleRegistry:
    """One registry of a console that serves several."""

    target: RegistryTarget
    env: CliEnv
    live: LiveReader | None = None


@dataclass
class ConsoleState:
    """The console's registry (through the CLI's environment) and its write rules."""

    #: The registry's environment (with several: the first one's).
    env: CliEnv
    #: Extra host names the console answers to (the --bind address).
    allowed_hosts: tuple[str, ...] = ()
    #: Reads the providers' live figures from the applications' QoS ports (None: not shown).
    live: LiveReader | None = None
    write_lock: threading.Lock = field(default_factory=threading.Lock)
    #: Every registry by id, in the order given, when the console serves several (else empty).
    registries: dict[str, ConsoleRegistry] = field(default_factory=dict)

    @property
    def access(self) -> WriteAccess:
        """Whether writes to :attr:`env` are allowed (see :func:`write_access`)."""
        return write_access(self.env)


def write_access(env: CliEnv) -> WriteAccess:
    """Whether the console may write to ``env``'s registry: as the registry's access control
    allows this console's identity to (see :mod:`dubbo_py.admin.console.security`), read on
    each page so that a registry secured meanwhile turns the console read-only at once."""
    refusal = acl.rule_write_refusal(env.store)
    if not refusal:
        return WriteAccess(True)
    auth = env.auth
    who = f"by the identity {auth.partition(':')[0]!r}" if auth else "without an identity"
    return WriteAccess(
        False,
        f"read-only: {env.address} refuses rule writes {who} ({refusal}); "
        "start the console with an identity that may write them "
        "(--auth or $DUBBO_PY_REGISTRY_AUTH)",
    )
