"""Registry addresses: ``zookeeper://h:p[,h:p...][/chroot]``, ``etcd://h:p[,h:p...][/chroot]``,
``etcds://h:p[,h:p...][/chroot][?ca=PATH&cert=PATH&key=PATH]`` for etcd over TLS,
``sqlite:///abs/path.db`` for the embedded store, ``tri://host:port[,host:port]`` for direct,
registry-less calls.

A registry address may carry Dubbo's registry URL parameters (``?zone=a&backup=h2:2181``) and
a registry identity (``zookeeper://user:password@host:port``; on ``nacos://`` also Dubbo's
``?username=u&password=p``): see :mod:`dubbo_py.registry.store.parameters`. A password is never
shown: errors name the address in its :func:`display_address` form, and a parsed address
prints without its identity.

When no address is given, ``DUBBO_PY_REGISTRY`` is used, else the embedded store in the user's
data directory, so the quick start needs no server.
"""

from __future__ import annotations

import importlib
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dubbo_py.errors import RegistryAddressError, URLError
from dubbo_py.registry.store.base import Store
from dubbo_py.registry.store.kinds import STORES
from dubbo_py.registry.store.parameters import AddressParameters, read_parameters
from dubbo_py.url import URL

__all__ = [
    "ENV_REGISTRY",
    "RegistryAddress",
    "default_registry_path",
    "display_address",
    "parse_registry_address",
]

ENV_REGISTRY = "DUBBO_PY_REGISTRY"


def default_registry_path() -> Path:
    """Where the embedded registry lives when nothing is configured."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("dubbo-py", appauthor=False)) / "registry.db"


@dataclass(frozen=True, slots=True)
class RegistryAddress:
    """A parsed registry address."""

    #: A scheme of the store table (:data:`~dubbo_py.registry.store.kinds.STORES`), or
    #: ``"direct"`` for provider addresses called without a registry.
    kind: str
    #: zookeeper, etcd and direct: ``h:p,h:p``; sqlite: the database path.
    location: str
    #: zookeeper and etcd: the chroot (``""`` or ``/path``; for etcd a key prefix).
    chroot: str = ""
    #: What the address's parameters (and ``user:password@``) say; not part of the address's
    #: identity (two applications with different zones share one store).
    parameters: AddressParameters = field(default=AddressParameters(), compare=False)
    #: The store kind's own ``?name=value`` options, sorted by name (``etcds://``: its TLS
    #: files ``ca``, ``cert``, ``key``); part of the identity (other files, another session).
    options: tuple[tuple[str, str], ...] = ()

    @property
    def session_seconds(self) -> float | None:
        """The address's ``session`` in seconds (None: the store's default)."""
        return self.parameters.session_timeout

    @property
    def empty_protection(self) -> bool | None:
        """The address's ``enable-empty-protection`` (None: not given)."""
        return self.parameters.empty_protection

    def option(self, name: str) -> str | None:
        """The value of option ``name``; None when not given."""
        return dict(self.options).get(name)

    @property
    def hosts(self) -> tuple[str, ...]:
        """The ``host:port`` entries (zookeeper, etcd and direct)."""
        return tuple(h for h in self.location.split(",") if h)

    @property
    def networked(self) -> bool:
        """Whether the registry is a server reached over the network (ZooKeeper, etcd): it may
        be down when an application starts, and routes to it tell this machine's address."""
        kind = STORES.get(self.kind)
        return kind is not None and kind.networked

    def new_store(
        self, *, auth: tuple[str, str] | None = None, connect_timeout: float | None = None
    ) -> Store:
        """A new, unstarted store (a session of its own) on this address, of the class the
        store table (:data:`~dubbo_py.registry.store.kinds.STORES`) names for its kind.

        ``auth`` is a registry identity (a ZooKeeper digest ``(user, password)``, an etcd user
        and password); a store that cannot use one refuses it (StoreError) rather than connect
        without it.
        """
        kind = STORES.get(self.kind)
        if kind is None:
            raise RegistryAddressError(f"{self} is a direct provider address, not a registry")
        module, _, name = kind.target.partition(":")
        store_class: Any = getattr(importlib.import_module(module), name)
        if connect_timeout is None:
            connect_timeout = self.parameters.connect_timeout
        store: Store = store_class.from_address(self, auth=auth, connect_timeout=connect_timeout)
        return store

    def settings(self) -> dict[str, object]:
        """The :class:`~dubbo_py.config.model.RegistryConfig` fields the address's parameters
        set (``zone``, ``weight``, ``preferred``, ``register``, ``subscribe``,
        ``register_mode``, ``auth``)."""
        return dict(self.parameters.settings)

    def __str__(self) -> str:
        if self.kind == "sqlite":
            return f"sqlite://{self.location}"
        scheme = "tri" if self.kind == "direct" else self.kind
        query = "&".join(f"{name}={value}" for name, value in self.options)
        return f"{scheme}://{self.location}{self.chroot}{'?' if query else ''}{query}"


def _check_hosts(text: str, hosts: str, default_port: int | None) -> str:
    out = []
    for raw in hosts.split(","):
        entry = raw.strip()
        if not entry:
            raise RegistryAddressError(f"{text!r}: empty host in host list")
        try:
            url = URL.parse(f"x://{entry}")
        except URLError as exc:
            raise RegistryAddressError(f"{text!r}: {exc}") from None
        port = url.port or default_port
        if not url.host or not port:
            raise RegistryAddressError(f"{text!r}: {entry!r} needs host:port")
        out.append(f"{url.host}:{port}")
    return ",".join(out)


_NONE = AddressParameters()
# ``password=...`` among an address's parameters (up to the next ``&``).
_PASSWORD_PARAMETER = re.compile(r"([?&]\s*password\s*=)[^&]*")
_HIDDEN = "***"


def display_address(text: str) -> str:
    """``text`` (an address as written) with its passwords hidden: the ``password`` of a
    ``user:password@`` identity and the value of a ``password=`` parameter become ``***``.
    What errors and logs show of an address that may hold an identity."""
    scheme, sep, rest = text.partition("://")
    if not sep:
        return text
    authority_end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, tail = rest[:authority_end], rest[authority_end:]
    identity, at, hosts = authority.rpartition("@")
    if at and ":" in identity:
        authority = f"{identity.partition(':')[0]}:{_HIDDEN}@{hosts}"
    tail = _PASSWORD_PARAMETER.sub(lambda m: m.group(1) + _HIDDEN, tail)
    return f"{scheme}://{authority}{tail}"


def _parameter_identity(
    parameters: AddressParameters, shown: str
) -> tuple[AddressParameters, str | None]:
    """The parameters without ``username``/``password`` (Dubbo's spelling of a Nacos identity:
    never options, which are part of the address as printed), and that identity as
    ``user:password`` (None when neither is given). One without the other is refused naming
    the missing one."""
    given = dict(parameters.options)
    user, password = given.pop("username", None), given.pop("password", None)
    if user is None and password is None:
        return parameters, None
    if user is None or password is None:
        missing, present = ("username", "password") if user is None else ("password", "username")
        raise RegistryAddressError(
            f"{shown!r}: {present}= needs {missing}= too (both give the Nacos identity)"
        )
    return replace(parameters, options=tuple(sorted(given.items()))), f"{user}:{password}"


def _with_setting(
    parameters: AddressParameters, name: str, value: object, text: str
) -> AddressParameters:
    if any(k == name for k, _ in parameters.settings):
        raise RegistryAddressError(f"{text!r}: {name} is given twice")
    return replace(parameters, settings=(*parameters.settings, (name, value)))


def parse_registry_address(text: str | None = None) -> RegistryAddress:
    """Parse an address; ``None`` means ``$DUBBO_PY_REGISTRY`` or the embedded default."""
    if text is None or not text.strip():
        text = os.environ.get(ENV_REGISTRY, "").strip()
        if not text:
            return RegistryAddress("sqlite", str(default_registry_path()))
    text = text.strip()
    # What errors show of the address: its passwords hidden.
    shown = display_address(text)
    scheme, sep, rest = text.partition("://")
    rest, question, query = rest.partition("?")
    if not sep:
        raise RegistryAddressError(
            f"{shown!r}: expected zookeeper://host:port, etcd://host:port, etcds://host:port, "
            "sqlite:///path or tri://host:port"
        )
    kind = STORES.get(scheme)
    if kind is not None and kind.default_port is not None:
        hosts, slash, chroot = rest.partition("/")
        chroot = f"/{chroot.strip('/')}" if slash and chroot.strip("/") else ""
        parameters = (
            read_parameters(query, shown, networked=True, options=kind.options)
            if question
            else _NONE
        )
        parameters, spelled = _parameter_identity(parameters, shown)
        identity, at, hosts = hosts.rpartition("@")
        if at:
            user, colon, _ = identity.partition(":")
            if not colon or not user:
                raise RegistryAddressError(f"{shown!r}: expected user:password@ before the hosts")
            if spelled is not None and spelled != identity:
                raise RegistryAddressError(
                    f"{shown!r}: user:password@ ({user}:{_HIDDEN}@) and username=/password= "
                    f"(username={spelled.partition(':')[0]}) give different identities: give one"
                )
            parameters = _with_setting(parameters, "auth", identity, shown)
        elif spelled is not None:
            parameters = _with_setting(parameters, "auth", spelled, shown)
        if parameters.backup:
            hosts = ",".join((hosts, *parameters.backup))
        location = _check_hosts(shown, hosts, kind.default_port)
        return RegistryAddress(kind.scheme, location, chroot, parameters, parameters.options)
    if scheme == "sqlite":
        if not rest.startswith("/"):
            raise RegistryAddressError(f"{shown!r}: the embedded registry needs an absolute path")
        parameters = read_parameters(query, shown, networked=False) if question else _NONE
        return RegistryAddress("sqlite", rest, "", parameters)
    if scheme in ("tri", "grpc"):
        if question:
            raise RegistryAddressError(
                f"{shown!r}: a direct provider address takes no parameters (reference options "
                "go to reference(...) or dubbo.yaml's references:)"
            )
        return RegistryAddress("direct", _check_hosts(shown, rest.rstrip("/"), None))
    raise RegistryAddressError(
        f"{shown!r}: unknown registry scheme {scheme!r} ({', '.join(STORES)} or tri)"
    )
