"""Access control of rules on etcd: the roles that keep applications off the rules.

ZooKeeper's access control is per node, so dubbo-py sets it itself (:mod:`.acl`). etcd's is per
role, on key ranges, and set by etcd's administrator (``etcdctl role grant-permission``);
dubbo-py only says which ranges: ``dubbo-py acl etcd-roles`` prints the grants of this module
for an address's key prefix (docs/registry.md, "etcd: TLS, users and roles"), and the tests set
up exactly these before showing an application's user refused a rule push that an operator's
user makes.

- Rules and their history: every key from ``/dubbo/config`` to ``/dubbo/config0`` ("0" sorts
  right after "/"): ``/dubbo/config``, ``/dubbo/config/...`` and ``/dubbo/config-history/...``.
  Operators read and write them, applications read them.
- Everything else under ``/dubbo`` (providers, consumers, mapping, metadata) and the
  application-level instances under ``/services``: applications read and write them, operators
  read them. etcd permissions only add up (there is no "deny"), so the applications' range is
  two ranges, before and after the rules.
- The key ``/dubbo`` itself: whoever writes first creates it (the store writes the parents it
  needs, as ZooKeeper has them), so operators may write it too.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from dubbo_py.registry import layout

__all__ = ["APPLICATIONS", "OPERATORS", "EtcdGrant", "etcdctl_commands", "grants"]

#: The roles' names in the commands printed (any names do: etcd's administrator picks them).
APPLICATIONS = "dubbo-applications"
OPERATORS = "dubbo-operators"

_SERVICES_ROOT = "/services"


@dataclass(frozen=True, slots=True)
class EtcdGrant:
    """One permission of a role: ``read`` or ``readwrite`` on the keys in ``[key, end)`` (on
    the key alone when ``end`` is empty)."""

    role: str
    permission: str
    key: str
    end: str

    def to_json(self) -> dict[str, str]:
        """As ``dubbo-py acl etcd-roles --json`` prints it."""
        return {"role": self.role, "permission": self.permission, "key": self.key, "end": self.end}


def grants(prefix: str = "") -> list[EtcdGrant]:
    """The grants of both roles for keys under ``prefix`` (an ``etcd://host/prefix`` address's
    prefix; ``""`` for none)."""
    root, config = prefix + layout.ROOT, prefix + f"{layout.ROOT}/config"
    after_rules, after_root = config + "0", root + "0"
    services = prefix + _SERVICES_ROOT
    return [
        EtcdGrant(APPLICATIONS, "readwrite", root, config),
        EtcdGrant(APPLICATIONS, "readwrite", after_rules, after_root),
        EtcdGrant(APPLICATIONS, "read", config, after_rules),
        EtcdGrant(APPLICATIONS, "readwrite", services, services + "0"),
        EtcdGrant(OPERATORS, "read", root, after_root),
        EtcdGrant(OPERATORS, "read", services, services + "0"),
        EtcdGrant(OPERATORS, "readwrite", config, after_rules),
        EtcdGrant(OPERATORS, "readwrite", root, ""),
    ]


def etcdctl_commands(prefix: str = "") -> list[str]:
    """``etcdctl`` commands that create both roles with :func:`grants` (users are then given
    them with ``etcdctl user grant-role USER ROLE``)."""
    out = [f"etcdctl role add {role}" for role in (APPLICATIONS, OPERATORS)]
    for grant in grants(prefix):
        keys = [grant.key, *([grant.end] if grant.end else [])]
        words = ["etcdctl", "role", "grant-permission", grant.role, grant.permission, *keys]
        out.append(shlex.join(words))
    return out
