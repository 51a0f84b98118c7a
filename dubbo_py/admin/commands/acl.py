"""``acl``: protect rules and their history on ZooKeeper (docs/cli.md, docs/configuration.md);
on etcd, print the roles that do it (``acl etcd-roles``, :mod:`dubbo_py.admin.rules.etcd_roles`);
on Nacos, the auth roles and permissions (``acl nacos-auth``,
:mod:`dubbo_py.admin.rules.nacos_auth`).

``acl secure`` makes every folder on the way to the rules and their history the authenticated
operator's (:mod:`dubbo_py.admin.rules.acl`), for rules written before access control was in
use or by tools that left the folders open. Authenticated pushes do the same for the key they write.
"""

from __future__ import annotations

import click

from dubbo_py.admin.common import (
    CONTEXT_SETTINGS,
    AdminError,
    command_group,
    emit_json,
    env_of,
    json_option,
    print_table,
)
from dubbo_py.admin.rules import acl
from dubbo_py.admin.rules import documents as rules
from dubbo_py.admin.rules.history import History

__all__ = ["acl_group"]


@command_group("acl")
def acl_group() -> None:
    """Access control of rules and rule history: on ZooKeeper (needs --auth) and, as roles
    to grant, on etcd and Nacos."""


@acl_group.command("secure", context_settings=CONTEXT_SETTINGS)
@click.argument("keys", nargs=-1, metavar="[KEY]...")
@json_option
def secure(keys: tuple[str, ...]) -> None:
    """Make the rule folders, the rules at KEY... (default: every rule and history) and their
    history this identity's: anyone may read them, nobody else may change, add or delete.

    /dubbo and /dubbo/config stay open for adding children (providers' service folders,
    Apache Dubbo's mapping and metadata), never for deleting or changing ours. Entries forged
    into a history while it was open are removed; entries written without an identity stay,
    and 'rules rollback' refuses them. Exit 1 when a node is owned by another identity.

    \b
    Examples:
      DUBBO_PY_REGISTRY_AUTH=admin:secret dubbo-py acl secure --registry zookeeper://zk1:2181
      dubbo-py acl secure demo.Greeter:1.0.0:.condition-router --auth admin:secret

    \b
    JSON: [{"path", "result", "detail"}]   result: secured | protected | created | absent |
                                                   removed | refused
    """
    env = env_of()
    if env.address.kind == "nacos":
        raise AdminError(
            f"{env.address}: Nacos's access control is its auth plugin's users, roles and "
            "permissions on <namespace>:<group>:<type>/* resources, which Nacos's administrator "
            "sets (console or auth API), not dubbo-py; keep each estate in a namespace of its "
            "own: 'dubbo-py acl nacos-auth' prints the permissions that keep applications off "
            "the rules",
            reason="refused",
        )
    if not env.auth:
        raise click.UsageError(
            "acl secure needs the identity to protect with: --auth user:password "
            "(or DUBBO_PY_REGISTRY_AUTH)"
        )
    if env.address.kind in ("etcd", "etcds"):
        raise AdminError(
            f"{env.address}: etcd's access control is its roles on key ranges, which etcd's "
            "administrator sets (etcdctl role grant-permission), not dubbo-py: "
            "'dubbo-py acl etcd-roles' prints the grants that keep applications off the rules",
            reason="refused",
        )
    store = env.store
    if acl.controlled(store) is None:
        raise AdminError(
            f"{env.address} has no access control (the embedded registry is protected by its "
            "file's permissions)",
            reason="refused",
        )
    for key in keys:
        try:
            rules.parse_key(key)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="KEY") from None
    if keys:
        chosen = sorted(set(keys))
    else:
        chosen = sorted(set(env.registry.config_keys()) | set(History(store).keys()))
    results = acl.secure_roots(store)
    for key in chosen:
        results += acl.secure_key(store, key, create=False)
    if env.json:
        emit_json([r.to_json() for r in results])
    else:
        print_table(
            f"access control in {env.address}",
            ["PATH", "RESULT", "DETAIL"],
            ([r.path, r.result, r.detail] for r in results),
        )
    refused = [r for r in results if r.refused]
    if refused:
        raise AdminError(
            f"{len(refused)} node(s) could not be protected: "
            + "; ".join(f"{r.path} ({r.detail})" for r in refused),
            reason="denied",
        )


@acl_group.command("etcd-roles", context_settings=CONTEXT_SETTINGS)
@json_option
def etcd_roles() -> None:
    """Print the etcdctl commands that make the two roles of an etcd registry: applications
    (read and write providers, consumers and instances; read rules) and operators (read
    everything; write rules and their history). For the key prefix of the --registry address;
    nothing is read or written. Give users the roles with 'etcdctl user grant-role'.

    \b
    Examples:
      dubbo-py acl etcd-roles --registry etcds://etcd1:2379/prod

    \b
    JSON: [{"role", "permission", "key", "end"}]   end "": the key alone
    """
    from dubbo_py.admin.rules import etcd_roles as roles

    env = env_of()
    address = env.address
    if address.kind not in ("etcd", "etcds"):
        raise click.UsageError(
            f"acl etcd-roles is for etcd registries (etcd:// or etcds://), not {address}; "
            "ZooKeeper's access control is 'acl secure', Nacos's 'acl nacos-auth'"
        )
    if env.json:
        emit_json([g.to_json() for g in roles.grants(address.chroot)])
        return
    for line in roles.etcdctl_commands(address.chroot):
        click.echo(line)


@acl_group.command("nacos-auth", context_settings=CONTEXT_SETTINGS)
@json_option
def nacos_auth() -> None:
    """Print the Nacos auth roles and permissions that keep applications off the rules, in the
    --registry address's namespace (services in its group): applications (register and
    discover, write the service-name mapping, read rules) and operators (read services; read
    and write rules and their history). As curl calls of Nacos 3's auth API, for an
    administrator's token in $NACOS_TOKEN; nothing is read or written. Nacos needs
    nacos.core.auth.enabled=true.

    \b
    Examples:
      dubbo-py acl nacos-auth --registry 'nacos://nacos1:8848?namespace=prod'

    \b
    JSON: [{"role", "resource", "action"}]   action: r | rw
    """
    from dubbo_py.admin.rules import nacos_auth as auth
    from dubbo_py.registry.store.nacos.store import DEFAULT_NAMING_GROUP

    env = env_of()
    address = env.address
    if address.kind != "nacos":
        raise click.UsageError(
            f"acl nacos-auth is for Nacos registries (nacos://), not {address}; "
            "ZooKeeper's access control is 'acl secure', etcd's 'acl etcd-roles'"
        )
    namespace = address.option("namespace") or ""
    group = address.option("group") or DEFAULT_NAMING_GROUP
    if env.json:
        emit_json([g.to_json() for g in auth.grants(namespace, group)])
        return
    for line in auth.curl_commands(address.hosts[0], namespace, group):
        click.echo(line)
