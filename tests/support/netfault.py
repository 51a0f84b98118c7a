"""Real network faults on loopback, made with iptables in a chain of their own.

Every rule lives in one chain (``dpy-<pid>-<n>``) jumped to from ``OUTPUT`` (loopback traffic
passes ``OUTPUT`` once per packet, in both directions of a connection), so healing everything is
flushing that chain, and removing it leaves the machine's rules as they were. The chain is
removed when the fixture ends -- also when the test fails or is interrupted (``finally`` and
``atexit``) -- and :func:`remove_stale_chains` (run by the session fixture, before and after the
session) removes the chains of test processes that no longer run (killed with SIGKILL), never
another live session's.

Faults:

* :meth:`NetFaults.blackhole` -- every packet to and from a port dropped (a host gone dark:
  connections hang, new ones time out);
* :meth:`NetFaults.reset` -- every packet to a port answered with a TCP reset (a host whose
  process is gone, or a middlebox killing connections);
* :meth:`NetFaults.one_way` -- packets *from* a port dropped: requests arrive, answers never
  come back (an asymmetric route);
* :meth:`NetFaults.cut_group` -- one group of processes cannot reach a port: providers started
  with :func:`in_group` (``setpriv --regid``, still root, so they read everything root reads)
  are matched by ``-m owner --gid-owner`` on their own packets (their sessions to the registry
  time out while everyone else's live);
* :meth:`NetFaults.partition_member` -- one member of a cluster (ZooKeeper, etcd; started in a
  group of its own) cut off from its peers, its clients still reaching it;
* :meth:`NetFaults.isolate_ports` -- packets between two sets of listening ports dropped.

Each returns a :class:`Fault` to :meth:`Fault.heal`; :meth:`NetFaults.heal_all` heals them all.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "CHAIN_PREFIX",
    "Fault",
    "NetFaults",
    "NetFaultsUnavailable",
    "in_group",
    "iptables_rules",
    "remove_stale_chains",
]

#: Chains of this package are named ``dpy-<pid>-<n>``.
CHAIN_PREFIX = "dpy-"
_numbers = itertools.count(1)
_lock = threading.Lock()


class NetFaultsUnavailable(RuntimeError):
    """iptables is missing or may not be used here (the message says why: tests skip with it)."""


def _iptables(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("iptables")
    if binary is None:
        raise NetFaultsUnavailable("iptables not found; install it with: apt-get install iptables")
    # -w: wait for the xtables lock (other sessions may change their chains at the same time).
    done = subprocess.run(
        [binary, "-w", "5", *args], capture_output=True, text=True, timeout=30, check=False
    )
    if check and done.returncode != 0:
        raise NetFaultsUnavailable(
            f"iptables {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}"
        )
    return done


def iptables_rules() -> str:
    """``iptables -S``: every rule of the filter table (to check nothing was left behind)."""
    return _iptables("-S").stdout


def _remove_chain(chain: str) -> None:
    # Unhook first (a jump keeps the chain from being deleted), then flush and delete.
    while _iptables("-D", "OUTPUT", "-j", chain, check=False).returncode == 0:
        pass
    _iptables("-F", chain, check=False)
    _iptables("-X", chain, check=False)


def remove_stale_chains() -> list[str]:
    """Remove the chains of this package whose process is not running any more, and this
    process's; returns the chains removed."""
    removed = []
    try:
        rules = iptables_rules()
    except NetFaultsUnavailable:
        return removed
    for line in rules.splitlines():
        parts = line.split()
        if len(parts) != 2 or parts[0] != "-N" or not parts[1].startswith(CHAIN_PREFIX):
            continue
        chain = parts[1]
        pid_text = chain[len(CHAIN_PREFIX) :].split("-", 1)[0]
        if pid_text.isdigit() and int(pid_text) != os.getpid() and _alive(int(pid_text)):
            continue  # another live session's
        _remove_chain(chain)
        removed.append(chain)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def in_group(gid: int, command: Sequence[str]) -> list[str]:
    """``command`` run with real and effective group ``gid`` and no supplementary groups, as
    the same user: :meth:`NetFaults.cut_group` then matches its packets."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise NetFaultsUnavailable("setpriv not found (util-linux)")
    return [setpriv, f"--regid={gid}", "--clear-groups", *command]


@dataclass
class Fault:
    """Rules in force for one fault; :meth:`heal` removes them (twice is harmless)."""

    owner: NetFaults
    rules: list[list[str]]
    what: str

    def heal(self) -> None:
        """Remove this fault's rules."""
        self.owner._delete(self)

    def __enter__(self) -> Fault:
        return self

    def __exit__(self, *exc: object) -> None:
        self.heal()


class NetFaults:
    """Faults on loopback in a chain of their own; :meth:`close` removes the chain."""

    def __init__(self) -> None:
        with _lock:
            self.chain = f"{CHAIN_PREFIX}{os.getpid()}-{next(_numbers)}"
        self._faults: list[Fault] = []
        _iptables("-N", self.chain)
        atexit.register(self.close)
        try:
            _iptables("-I", "OUTPUT", "1", "-j", self.chain)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ faults

    def blackhole(self, port: int) -> Fault:
        """Drop every TCP packet to and from ``port`` on loopback."""
        return self._add(
            f"blackhole :{port}",
            [self._tcp("--dport", port, "DROP"), self._tcp("--sport", port, "DROP")],
        )

    def reset(self, port: int) -> Fault:
        """Answer every TCP packet to ``port`` with a reset (connections and new ones fail)."""
        return self._add(
            f"reset :{port}",
            [self._tcp("--dport", port, "REJECT", "--reject-with", "tcp-reset")],
        )

    def one_way(self, port: int) -> Fault:
        """Drop the packets ``port`` sends: what is sent to it arrives, no answer comes back."""
        return self._add(f"one-way :{port}", [self._tcp("--sport", port, "DROP")])

    def cut_group(self, gid: int, ports: Sequence[int]) -> Fault:
        """Drop the packets processes of group ``gid`` send to ``ports`` (see :func:`in_group`)."""
        rules = [
            [
                "-p",
                "tcp",
                "-d",
                "127.0.0.0/8",
                "--dport",
                str(port),
                "-m",
                "owner",
                "--gid-owner",
                str(gid),
                "-j",
                "DROP",
            ]
            for port in ports
        ]
        return self._add(f"group {gid} cut from {list(ports)}", rules)

    def isolate_ports(self, inside: Sequence[int], outside: Sequence[int]) -> Fault:
        """Drop the packets between any port of ``inside`` and any port of ``outside`` (both
        directions, whichever end connected)."""
        rules = []
        for a in inside:
            for b in outside:
                for src, dst in ((a, b), (b, a)):
                    ports = ["--sport", str(src), "--dport", str(dst)]
                    rules.append(["-p", "tcp", "-d", "127.0.0.0/8", *ports, "-j", "DROP"])
        return self._add(f"ports {list(inside)} cut from {list(outside)}", rules)

    def partition_member(
        self, gid: int, own_ports: Sequence[int], other_ports: Sequence[int]
    ) -> Fault:
        """Cut one cluster member (its processes in group ``gid``, see :func:`in_group`) from
        its peers: nothing it sends to their peer ports, nothing it sends from its own, and
        nothing anyone sends to its own peer ports gets through. Its clients still reach it
        (client ports are not touched): the member is on the minority side of a partition."""
        rules: list[list[str]] = []
        owner = ["-m", "owner", "--gid-owner", str(gid)]
        for port in other_ports:
            rules.append(["-p", "tcp", "-d", "127.0.0.0/8", "--dport", str(port), *owner])
        for port in own_ports:
            rules.append(["-p", "tcp", "-d", "127.0.0.0/8", "--sport", str(port), *owner])
            rules.append(["-p", "tcp", "-d", "127.0.0.0/8", "--dport", str(port)])
        return self._add(
            f"member of group {gid} (peer ports {list(own_ports)}) cut from {list(other_ports)}",
            [[*rule, "-j", "DROP"] for rule in rules],
        )

    @staticmethod
    def _tcp(direction: str, port: int, target: str, *extra: str) -> list[str]:
        return ["-p", "tcp", "-d", "127.0.0.0/8", direction, str(port), "-j", target, *extra]

    def _add(self, what: str, rules: list[list[str]]) -> Fault:
        fault = Fault(self, [], what)
        self._faults.append(fault)
        for rule in rules:
            _iptables("-A", self.chain, *rule)
            fault.rules.append(rule)
        return fault

    def _delete(self, fault: Fault) -> None:
        for rule in fault.rules:
            _iptables("-D", self.chain, *rule, check=False)
        fault.rules = []

    # ------------------------------------------------------------------ healing

    def heal_all(self) -> None:
        """Remove every fault's rules (the chain stays, empty)."""
        for fault in self._faults:
            fault.rules = []
        _iptables("-F", self.chain, check=False)

    def close(self) -> None:
        """Heal everything and remove the chain (idempotent)."""
        atexit.unregister(self.close)
        self._faults = []
        _remove_chain(self.chain)

    def __enter__(self) -> NetFaults:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
