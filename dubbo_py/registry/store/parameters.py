"""Dubbo's registry URL parameters: ``zookeeper://zkA:2181?zone=a&backup=zkB:2181``.

A Dubbo estate writes its registries as URLs whose parameters say how the registry is used
(Dubbo 3.3's ``RegistryConfig``, read by ``ZookeeperRegistry``, ``AbstractRegistry`` and
``ZoneAwareClusterInvoker``). :data:`REGISTRY_PARAMETERS` is the one table of every name Dubbo
reads there, and of dubbo-py's own store options, with what dubbo-py does with each:

* **settings** (``zone``, ``weight``, ``preferred``, ``register``, ``subscribe``,
  ``register-mode``) become the registry's :class:`~dubbo_py.config.model.RegistryConfig`
  fields, checked as the same fields of ``registries:`` in ``dubbo.yaml`` are;
* **connection** parameters (``backup``, ``timeout``, ``session``, ``group``) shape the store
  (more hosts, the connect and session timeouts, the root), or are refused when dubbo-py cannot
  do what they ask (a ``group`` other than Dubbo's default root); a store kind may take one of
  them as an option of its own instead (``nacos://``: ``group`` is the Nacos naming group, as
  Dubbo's ``NacosRegistry`` reads it, not a root);
* **ignored** ones (Dubbo options with no meaning in dubbo-py: ``check``, ``file``, ...) are
  accepted and logged once by name, with the reason;
* **tls** options (``ca``, ``cert``, ``key``: dubbo-py's own, not Dubbo's) name the files of
  an ``etcds://`` address, and are refused on any other (``namespace``, ``username`` and
  ``password`` likewise are options of ``nacos://`` only: the last two are Dubbo's spelling of
  the Nacos identity, which the address parser turns into the registry's ``auth``);
* a name neither Dubbo nor dubbo-py knows is refused, naming it and the address.

Dubbo spells a multi-word key both with dashes and dots (``register-mode``,
``registry.weight``); both are read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from dubbo_py.errors import RegistryAddressError

__all__ = [
    "REGISTRY_PARAMETERS",
    "AddressParameters",
    "RegistryParameter",
    "read_parameters",
]

log = logging.getLogger(__name__)

#: Dubbo's default registry root (``ZookeeperRegistry``: ``/`` + the ``group`` parameter,
#: ``dubbo`` when absent); dubbo-py's layout uses it always (dubbo_py/registry/layout.py).
DEFAULT_GROUP = "dubbo"


@dataclass(frozen=True, slots=True)
class RegistryParameter:
    """One registry URL parameter Dubbo reads, and dubbo-py's meaning for it."""

    #: The name as Dubbo (for a tls option, dubbo-py) writes it.
    name: str
    #: ``"setting"`` (a RegistryConfig field), ``"connection"`` (the store), ``"protection"``
    #: (the consumers' empty protection), ``"tls"`` (a store option of ``etcds://``:
    #: :attr:`~dubbo_py.registry.store.kinds.StoreKind.options`) or ``"ignored"``.
    use: str
    #: The RegistryConfig field or the connection attribute it sets; for tls ones, the file;
    #: for ignored ones, why.
    meaning: str


def _table() -> Mapping[str, RegistryParameter]:
    rows = [
        RegistryParameter("zone", "setting", "zone"),
        RegistryParameter("registry.zone", "setting", "zone"),
        RegistryParameter("weight", "setting", "weight"),
        RegistryParameter("registry.weight", "setting", "weight"),
        RegistryParameter("preferred", "setting", "preferred"),
        RegistryParameter("registry.preferred", "setting", "preferred"),
        RegistryParameter("register", "setting", "register"),
        RegistryParameter("subscribe", "setting", "subscribe"),
        RegistryParameter("register-mode", "setting", "register_mode"),
        RegistryParameter("register.mode", "setting", "register_mode"),
        RegistryParameter("backup", "connection", "more hosts of the same ensemble"),
        RegistryParameter("timeout", "connection", "connect timeout (ms)"),
        RegistryParameter("session", "connection", "session timeout (ms)"),
        RegistryParameter(
            "group",
            "connection",
            "the registry root (only Dubbo's default); on nacos://, the Nacos naming group",
        ),
        RegistryParameter(
            "enable-empty-protection",
            "protection",
            "keep providers that still answer when the registry loses them (docs/registry.md)",
        ),
        # etcd over TLS: the system's roots are trusted without ``ca``; ``cert`` and ``key``
        # are for etcd's --client-cert-auth.
        RegistryParameter("ca", "tls", "the CA that signed etcd's certificate"),
        RegistryParameter("cert", "tls", "a client certificate"),
        RegistryParameter("key", "tls", "the client certificate's private key"),
        # Nacos: a store option too (Dubbo's NacosRegistry reads ``namespace`` the same way).
        RegistryParameter("namespace", "tls", "the Nacos namespace id (nacos:// only)"),
        # Dubbo's spelling of a Nacos identity (NacosConnectionManager reads them as the Nacos
        # client's properties); the address parser makes them the registry's ``auth``, never
        # an option (an option is part of the address as printed).
        RegistryParameter("username", "tls", "the Nacos user (nacos:// only; with password)"),
        RegistryParameter("password", "tls", "the Nacos user's password (nacos:// only)"),
    ]
    ignored = {
        "check": "dubbo-py never fails startup on a registry that does not answer: it retries "
        "in the background",
        "dynamic": "providers always register as dynamic (removed with their session)",
        "file": "the notify cache file is set by Application(cache_path=...)",
        "simplified": "provider URLs are always written in full",
        "extra-keys": "provider URLs are always written in full",
        "accepts": "a provider-side connection limit of Dubbo's transport",
        "transporter": "Dubbo's ZooKeeper client choice (dubbo-py uses kazoo)",
        "client": "Dubbo's ZooKeeper client choice (dubbo-py uses kazoo)",
        "server": "Dubbo's transport server choice",
        "cluster": "the strategy among registries is always zone-aware",
        "version": "the registry's own version has no use here",
        "wait": "Dubbo's shutdown wait; see Application.close(grace=...)",
        "use-as-config-center": "the registry is always the config center",
        "use-as-metadata-center": "the registry is always the metadata center",
        "registry-type": "use register_mode/migration_step for application-level discovery",
        "registry.type": "use register_mode/migration_step for application-level discovery",
        "secure": "registry TLS is not supported",
        "id": "registry ids are given by registries: keys",
        "default": "every registry given is used",
        "protocol": "the scheme names the registry kind",
        "parameters": "a Java map of extra options",
    }
    rows += [RegistryParameter(name, "ignored", why) for name, why in ignored.items()]
    return MappingProxyType({row.name: row for row in rows})


#: Every registry URL parameter Dubbo 3.3 reads, by name (see the module docstring).
REGISTRY_PARAMETERS: Mapping[str, RegistryParameter] = _table()

#: The store options only ``nacos://`` takes.
_NACOS_ONLY = frozenset({"namespace", "username", "password"})

_logged: set[str] = set()
_logged_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class AddressParameters:
    """What an address's parameters say (parsed and checked)."""

    #: RegistryConfig fields and their values (``(("zone", "a"), ("weight", 50))``).
    settings: tuple[tuple[str, object], ...] = ()
    #: ``host:port`` entries of ``backup=`` (unchecked: the address parser checks them).
    backup: tuple[str, ...] = ()
    #: Seconds; None when not given.
    connect_timeout: float | None = None
    session_timeout: float | None = None
    #: ``enable-empty-protection``; None when not given.
    empty_protection: bool | None = None
    #: The store's ``tls`` options and their values, sorted by name.
    options: tuple[tuple[str, str], ...] = ()

    def __repr__(self) -> str:
        # The ``auth`` setting holds a password: shown as user:*** only.
        settings = tuple(
            (k, f"{str(v).partition(':')[0]}:***" if k == "auth" else v) for k, v in self.settings
        )
        return (
            f"AddressParameters(settings={settings!r}, backup={self.backup!r}, "
            f"connect_timeout={self.connect_timeout!r}, session_timeout={self.session_timeout!r}, "
            f"empty_protection={self.empty_protection!r}, options={self.options!r})"
        )


def _boolean(name: str, value: str, text: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise RegistryAddressError(f"{text!r}: {name} must be true or false, got {value!r}")


def _integer(name: str, value: str, text: str, least: int) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise RegistryAddressError(f"{text!r}: {name} must be an integer, got {value!r}") from None
    if number < least:
        raise RegistryAddressError(f"{text!r}: {name} must be >= {least}, got {number}")
    return number


def _setting(field: str, name: str, value: str, text: str) -> object:
    if field == "zone":
        if not value.strip() or value != value.strip():
            raise RegistryAddressError(f"{text!r}: {name} must be a zone name, got {value!r}")
        return value
    if field == "weight":
        return _integer(name, value, text, 0)
    if field == "register_mode":
        # RegisterMode's values (dubbo_py/registry/application/modes.py), which imports the
        # registry: named here so the store layer does not.
        mode = value.strip().lower()
        if mode not in ("all", "interface", "instance"):
            raise RegistryAddressError(
                f"{text!r}: {name}={value!r} is not a register mode (all, interface, instance)"
            )
        return mode
    return _boolean(name, value, text)


def read_parameters(
    query: str, text: str, *, networked: bool, options: frozenset[str] = frozenset()
) -> AddressParameters:
    """Read the part after ``?`` of the address ``text`` (see the module docstring), for a
    store that takes the ``options`` named (its tls rows, or a connection parameter it reads
    as its own, as ``nacos://`` does ``group``): RegistryAddressError naming the parameter and
    the address for an unknown name, a bad value, a name given twice, a connection parameter
    of a store that is not a server or a tls option of a store that does not take it."""
    settings: dict[str, object] = {}
    seen: dict[str, str] = {}
    tls: dict[str, str] = {}
    backup: tuple[str, ...] = ()
    connect: float | None = None
    session: float | None = None
    protection: bool | None = None
    for part in query.split("&"):
        if not part.strip():
            continue
        name, sep, value = part.partition("=")
        name = name.strip()
        row = REGISTRY_PARAMETERS.get(name)
        if row is None:
            raise RegistryAddressError(
                f"{text!r}: unknown registry parameter {name!r} (Dubbo's registry parameters: "
                "docs/registry.md, Registry URL parameters)"
            )
        if row.use == "tls" or name in options:
            if name not in options:
                needs = (
                    "a Nacos option: it needs nacos://"
                    if name in _NACOS_ONLY
                    else ("a TLS option: it needs etcds://")
                )
                raise RegistryAddressError(f"{text!r}: option {name!r} is {needs}")
            if not value:
                raise RegistryAddressError(f"{text!r}: option {name!r} needs a value ({name}=...)")
            if name in tls:
                raise RegistryAddressError(f"{text!r}: option {name!r} given twice")
            tls[name] = value
            continue
        if not sep and row.use != "ignored":
            raise RegistryAddressError(f"{text!r}: parameter {name!r} needs a value ({name}=...)")
        key = row.meaning if row.use == "setting" else name
        if key in seen:
            raise RegistryAddressError(
                f"{text!r}: {name!r} repeats {seen[key]!r}: give each parameter once"
            )
        seen[key] = name
        if row.use == "ignored":
            _log_ignored(row)
        elif row.use == "setting":
            settings[row.meaning] = _setting(row.meaning, name, value, text)
        elif row.use == "protection":
            protection = _boolean(name, value, text)
        elif not networked:
            raise RegistryAddressError(
                f"{text!r}: {name} is a parameter of a registry server (zookeeper, etcd)"
            )
        elif name == "backup":
            backup = tuple(h.strip() for h in value.split(","))
        elif name == "timeout":
            connect = _integer(name, value, text, 1) / 1000
        elif name == "session":
            session = _integer(name, value, text, 1) / 1000
        elif name == "group" and value.strip().strip("/") != DEFAULT_GROUP:
            raise RegistryAddressError(
                f"{text!r}: group={value} asks for the registry root /{value.strip('/')}; "
                f"dubbo-py reads and writes Dubbo's default root /{DEFAULT_GROUP} (a chroot, "
                f"zookeeper://host:port/path, puts /{DEFAULT_GROUP} under /path)"
            )
    return AddressParameters(
        tuple(settings.items()), backup, connect, session, protection, tuple(sorted(tls.items()))
    )


def _log_ignored(row: RegistryParameter) -> None:
    with _logged_lock:
        if row.name in _logged:
            return
        _logged.add(row.name)
    log.warning(
        "registry parameter %r has no meaning in dubbo-py and is ignored: %s",
        row.name,
        row.meaning,
    )
