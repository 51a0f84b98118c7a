"""Access control of rules and their history on ZooKeeper (docs/configuration.md, "Access
control").

An authenticated operator's rule is only as safe as every folder on the way to it: ZooKeeper
lets whoever may *delete children of a folder* remove a node, and whoever may *create children*
add one, whatever the node's own ACL says. So before an authenticated write (and with
``dubbo-py acl secure``) every folder on the path to the rule and to its history is made the
operator's:

- ``/dubbo`` and ``/dubbo/config`` are *shared*: anyone may read them and add children
  (providers add service folders, Apache Dubbo its ``mapping`` and metadata folders), nobody
  else may delete or change what is in them;
- ``/dubbo/config/dubbo``, ``/dubbo/config-history`` and each rule's history folder are
  *private*: anyone may read, only the operator may add, change or delete; so is
  ``/dubbo/config/DUBBO_SERVICEDISCOVERY_MIGRATION``, where migration rules live (made
  private when one is written, or when it exists);
- the rule node and each history entry: anyone may read, only the operator may change.

A history folder that was open until now may hold entries anyone could have written. Entries
with an open ACL stay (they are history) but are never trusted; an entry that carries an
operator's ACL in a folder that was open can only have been forged (dubbo-py protects the
folder before it writes such an entry), so it is removed.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass

from dubbo_py.errors import NodeExistsError, NoNodeError, StoreError
from dubbo_py.registry import layout
from dubbo_py.registry.store.base import AccessControlled, NodeAccess, Store

__all__ = [
    "Secured",
    "Untrusted",
    "check_entry",
    "controlled",
    "guard",
    "rule_write_refusal",
    "secure_key",
    "secure_roots",
]

#: Folders shared with others (they may add children, never remove or change ours).
SHARED = (layout.ROOT, f"{layout.ROOT}/config")
#: Folders only the operator may change.
PRIVATE = (layout.CONFIG_ROOT, layout.HISTORY_ROOT)
#: The migration rules' group: private too, but created only for a migration rule (most
#: registries never hold one).
PRIVATE_ON_USE = (layout.MIGRATION_ROOT,)
_SHARED_ALLOWED = frozenset({"read", "create"})
_PRIVATE_ALLOWED = frozenset({"read"})


class Untrusted(Exception):
    """A history entry that no trusted identity vouches for (the message says why)."""


@dataclass(frozen=True, slots=True)
class Secured:
    """What securing did to one node."""

    path: str
    #: ``secured`` (its ACL was set now), ``protected`` (it already was), ``created``,
    #: ``absent``, or ``refused`` (another identity owns it).
    result: str
    detail: str = ""

    @property
    def refused(self) -> bool:
        """Whether the node could not be protected."""
        return self.result == "refused"

    def to_json(self) -> dict[str, str]:
        """The row as ``acl secure --json`` prints it."""
        return {"path": self.path, "result": self.result, "detail": self.detail}


def controlled(store: Store) -> AccessControlled | None:
    """The store, when it has ACLs and an identity to protect with; else None."""
    if isinstance(store, AccessControlled) and store.identity:
        return store
    return None


def rule_write_refusal(store: Store) -> str:
    """Why this store's identity (or, without one, anyone) may not add rules or history
    entries, as ``"<node> (<its ACL>)"``; ``""`` when it may -- the registry's own answer,
    read from the ACLs of the rule and history folders (or of their nearest existing
    parent). A store without ACLs (embedded, etcd) is writable to whoever can reach it."""
    if not isinstance(store, AccessControlled):
        return ""
    me = store.identity
    for folder in (*PRIVATE, *PRIVATE_ON_USE):
        node = folder
        while True:
            try:
                access = store.access(node)
            except NoNodeError:
                if node == "/":
                    break
                node = node.rsplit("/", 1)[0] or "/"
                continue
            if "create" not in access.world and not (me and access.may(me, "create")):
                return f"{node} ({access.describe()})"
            break
    return ""


def _secure(
    store: AccessControlled, path: str, *, shared: bool, create: bool
) -> tuple[Secured, NodeAccess | None]:
    """Protect one node; returns what was done and its ACL *before*."""
    allowed = _SHARED_ALLOWED if shared else _PRIVATE_ALLOWED
    me = store.identity
    assert me is not None
    try:
        before = store.access(path)
    except NoNodeError:
        if not create:
            return Secured(path, "absent"), None
        with contextlib.suppress(NodeExistsError):
            store.ensure_path(path)
        try:
            before = store.access(path)
        except NoNodeError:  # deleted meanwhile: the caller's write will say so
            return Secured(path, "absent"), None
        result = "created"
    else:
        result = "secured"
    if not before.open_beyond(allowed) and before.changers == {me} and before.may(me, "admin"):
        return Secured(path, "protected" if result == "secured" else result), before
    if not before.open_beyond(allowed) and not shared and me not in before.changers:
        owners = ", ".join(sorted(before.changers)) or "nobody"
        return Secured(path, "refused", f"owned by {owners} ({before.describe()})"), before
    try:
        store.restrict(path, shared=shared)
    except StoreError:
        if shared and not before.open_beyond(allowed):
            # Another identity protects it already: nobody else may remove what is in it.
            owners = ", ".join(sorted(before.changers))
            return Secured(path, "protected", f"by {owners}"), before
        return Secured(path, "refused", f"cannot change its ACL ({before.describe()})"), before
    return Secured(path, result, "was " + before.describe() if result == "secured" else ""), before


def _required(store: Store) -> AccessControlled:
    acl = controlled(store)
    if acl is None:
        raise StoreError("protecting rules needs ZooKeeper and an identity (--auth user:password)")
    return acl


def secure_roots(store: Store, *, create: bool = True) -> list[Secured]:
    """Protect the folders every rule and history lies under."""
    acl = _required(store)
    out = [_secure(acl, p, shared=True, create=create)[0] for p in SHARED]
    out += [_secure(acl, p, shared=False, create=create)[0] for p in PRIVATE]
    # Secured when present (a rule written there before), created by secure_key when needed.
    on_use = [_secure(acl, p, shared=False, create=False)[0] for p in PRIVATE_ON_USE]
    return out + [r for r in on_use if r.result != "absent"]


def secure_key(store: Store, key: str, *, create: bool = True) -> list[Secured]:
    """Protect a rule node (when it exists) and its history folder (created when ``create``),
    removing entries forged while the history was open (see the module doc)."""
    acl = _required(store)
    path = layout.config_path(key)
    folder = path.rsplit("/", 1)[0]
    out: list[Secured] = []
    if create and folder in PRIVATE_ON_USE:
        # Before a write of the first migration rule: its group becomes private as it is made.
        out.append(_secure(acl, folder, shared=False, create=True)[0])
    out.append(_secure(acl, path, shared=False, create=False)[0])
    folder = layout.history_path(key)
    secured, before = _secure(acl, folder, shared=False, create=create)
    out.append(secured)
    if before is not None and before.open and not secured.refused:
        out.extend(_drop_forged(acl, folder))
    return out


def _drop_forged(acl: AccessControlled, folder: str) -> list[Secured]:
    out: list[Secured] = []
    try:
        names = acl.children(folder)
    except NoNodeError:
        return out
    for name in names:
        path = f"{folder}/{name}"
        try:
            access = acl.access(path)
        except NoNodeError:
            continue
        if not access.open:
            with contextlib.suppress(NoNodeError):
                acl.delete(path)
            out.append(Secured(path, "removed", "forged: an identity's entry in an open folder"))
    return out


def guard(store: Store, key: str) -> None:
    """Before an authenticated write of ``key``: protect every folder on its way and its
    history; :class:`StoreError` naming the node when one cannot be protected. Nothing is done
    without an identity (or on the embedded store)."""
    if controlled(store) is None:
        return
    for secured in [*secure_roots(store), *secure_key(store, key)]:
        if secured.refused:
            raise StoreError(
                f"not authorised to protect {secured.path}: {secured.detail}; "
                "remove it as its owner (or a ZooKeeper superuser) first"
            )


def check_entry(store: Store, key: str, seq: int, data: bytes) -> None:
    """Before an authenticated rollback restores history entry ``seq`` of ``key`` (whose node
    data is ``data``): :class:`Untrusted` unless the entry was written by a trusted identity
    and nobody else could have changed it since. Trusted: this operator's identity and the
    identities that own the history folder. Nothing is checked without an identity: such a
    rollback writes with no more rights than anyone has."""
    acl = controlled(store)
    if acl is None:
        return
    folder = layout.history_path(key)
    entry = f"{folder}/{seq:010d}"
    try:
        folder_access = acl.access(folder)
        entry_access = acl.access(entry)
    except NoNodeError:
        raise Untrusted(f"history entry {seq} of {key} is gone") from None
    where = f"history entry {seq} of {key}"
    if folder_access.open:
        raise Untrusted(
            f"{where} is in a history anyone may change ({folder_access.describe()}); "
            "run 'dubbo-py acl secure' first"
        )
    if entry_access.open:
        raise Untrusted(
            f"{where} may have been written or changed by anyone ({entry_access.describe()}): "
            "it was recorded without an identity or before the history was protected"
        )
    writer = _recorded_writer(data)
    if writer is None:
        raise Untrusted(f"{where} does not record the identity that wrote it")
    trusted = {acl.identity} | {u for u, p in folder_access.users if "admin" in p}
    if writer not in entry_access.changers:
        raise Untrusted(
            f"{where} says it was written by {writer!r}, but its ACL does not let that "
            f"identity write it ({entry_access.describe()})"
        )
    strangers = entry_access.changers - trusted
    if writer not in trusted or strangers:
        who = ", ".join(sorted(strangers | ({writer} - trusted)))
        raise Untrusted(
            f"{where} can be changed by {who}, not a trusted identity "
            f"(trusted: {', '.join(sorted(u for u in trusted if u))})"
        )


def _recorded_writer(data: bytes) -> str | None:
    try:
        raw = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    writer = raw.get("writer") if isinstance(raw, dict) else None
    return writer if isinstance(writer, str) and writer else None
