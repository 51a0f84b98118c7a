"""Access control of rules on Nacos: the roles that keep applications off the rules.

Nacos has no per-node ACL for dubbo-py to set (ZooKeeper's, :mod:`.acl`): its auth plugin gives
*users* *roles*, and roles *permissions* on resources ``<namespace>:<group>:<type>/<name>``
(``type`` ``naming`` for services, ``config`` for config data ids; ``*`` matches anything), each
``r``, ``w`` or ``rw``. Nacos's administrator sets them (console, or its auth HTTP API), within a
*namespace*: a namespace of its own per estate is what keeps one estate's applications off
another's rules. ``dubbo-py acl nacos-auth`` prints the permissions of this module for an
address's namespace (docs/registry.md, "Nacos").

- Applications register and discover (``rw`` on the naming resources of the address's naming
  group: its ``group``, ``DEFAULT_GROUP`` without one), write the service-name mapping
  (``rw`` on group ``mapping``) and read the rules (``r`` on groups ``dubbo`` and
  ``DUBBO_SERVICEDISCOVERY_MIGRATION``).
- Operators read services and the mapping, and read and write the rules and their history
  (groups ``dubbo``, ``DUBBO_SERVICEDISCOVERY_MIGRATION``, ``dubbo-history`` and
  ``dubbo-history-entries``).
"""

from __future__ import annotations

from dataclasses import dataclass

from dubbo_py.registry import layout
from dubbo_py.registry.store.nacos.store import (
    DEFAULT_NAMING_GROUP,
    HISTORY_ENTRY_GROUP,
    HISTORY_GROUP,
)

__all__ = ["APPLICATIONS", "OPERATORS", "NacosGrant", "curl_commands", "grants"]

#: The roles' names in the commands printed (any names do: Nacos's administrator picks them).
APPLICATIONS = "dubbo-applications"
OPERATORS = "dubbo-operators"
_RULE_GROUPS = ("dubbo", layout.MIGRATION_GROUP)


@dataclass(frozen=True, slots=True)
class NacosGrant:
    """One permission of a role: ``action`` (``r``, ``w``, ``rw``) on ``resource``."""

    role: str
    resource: str
    action: str

    def to_json(self) -> dict[str, str]:
        """As ``dubbo-py acl nacos-auth --json`` prints it."""
        return {"role": self.role, "resource": self.resource, "action": self.action}


def grants(namespace: str = "", naming_group: str = DEFAULT_NAMING_GROUP) -> list[NacosGrant]:
    """The permissions of both roles in ``namespace`` (a ``nacos://...?namespace=`` address's;
    ``""``: the default namespace, ``public``), its services in ``naming_group`` (the
    address's ``group``). The config groups are the same whatever the naming group: Dubbo
    keeps rules and the mapping there for every registry group."""
    ns = namespace or "public"
    out = [
        NacosGrant(APPLICATIONS, f"{ns}:{naming_group}:naming/*", "rw"),
        NacosGrant(APPLICATIONS, f"{ns}:mapping:config/*", "rw"),
        *(NacosGrant(APPLICATIONS, f"{ns}:{g}:config/*", "r") for g in _RULE_GROUPS),
        NacosGrant(OPERATORS, f"{ns}:{naming_group}:naming/*", "r"),
        NacosGrant(OPERATORS, f"{ns}:mapping:config/*", "r"),
    ]
    for group in (*_RULE_GROUPS, HISTORY_GROUP, HISTORY_ENTRY_GROUP):
        out.append(NacosGrant(OPERATORS, f"{ns}:{group}:config/*", "rw"))
    return out


def curl_commands(
    server: str, namespace: str = "", naming_group: str = DEFAULT_NAMING_GROUP
) -> list[str]:
    """``curl`` calls of Nacos 3's auth API on ``server`` (``host:port``, the HTTP port) that
    create both roles with :func:`grants`, for an administrator's ``$NACOS_TOKEN`` (from
    ``POST /nacos/v3/auth/user/login``). A role exists once a user has it, so each role is
    first given to a user of its own (``$APP_USER``, ``$OPERATOR_USER``: create them with
    ``POST /nacos/v3/auth/user``)."""
    base = f"http://{server}/nacos/v3/auth"
    token = "accessToken=$NACOS_TOKEN"
    out = [
        f'curl -X POST "{base}/role?role={APPLICATIONS}&username=$APP_USER&{token}"',
        f'curl -X POST "{base}/role?role={OPERATORS}&username=$OPERATOR_USER&{token}"',
    ]
    for grant in grants(namespace, naming_group):
        query = f"role={grant.role}&resource={grant.resource}&action={grant.action}&{token}"
        out.append(f'curl -X POST "{base}/permission?{query}"')
    return out
