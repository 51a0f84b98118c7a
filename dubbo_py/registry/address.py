"""Registry addresses: ``zookeeper://h:p[,h:p...][/chroot]``, ``etcd://h:p[,h:p...][/chroot]``,
``sqlite:///abs/path.db`` for the embedded store, ``tri://host:port[,host:port]`` for direct,
registry-less calls.

When no address is given, ``DUBBO_PY_REGISTRY`` is used, else the embedded store in the user's
data directory, so the quick start needs no server.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from dubbo_py.errors import RegistryAddressError, URLError
from dubbo_py.url import URL

__all__ = [
    "ENV_REGISTRY",
    "RegistryAddress",
    "default_registry_path",
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

    kind: Literal["zookeeper", "etcd", "sqlite", "direct"]
    #: zookeeper, etcd and direct: ``h:p,h:p``; sqlite: the database path.
    location: str
    #: zookeeper and etcd: the chroot (``""`` or ``/path``; for etcd a key prefix).
    chroot: str = ""
    #: Parameters after ``?`` (only :data:`ADDRESS_PARAMETERS`), e.g.
    #: ``zookeeper://h:2181?enable-empty-protection=false``; not part of the registry's name.
    parameters: tuple[tuple[str, str], ...] = ()

    @property
    def session_seconds(self) -> float | None:
        """The address's ``session`` in seconds (None: the store's default)."""
        for key, value in self.parameters:
            if key == "session":
                return int(value) / 1000
        return None

    @property
    def empty_protection(self) -> bool | None:
        """The address's ``enable-empty-protection`` (None: not given)."""
        for key, value in self.parameters:
            if key == "enable-empty-protection":
                return value == "true"
        return None

    @property
    def hosts(self) -> tuple[str, ...]:
        """The ``host:port`` entries (zookeeper, etcd and direct)."""
        return tuple(h for h in self.location.split(",") if h)

    @property
    def networked(self) -> bool:
        """Whether the registry is a server reached over the network (ZooKeeper, etcd): it may
        be down when an application starts, and routes to it tell this machine's address."""
        return self.kind in ("zookeeper", "etcd")

    def __str__(self) -> str:
        if self.kind == "sqlite":
            return f"sqlite://{self.location}"
        scheme = "tri" if self.kind == "direct" else self.kind
        return f"{scheme}://{self.location}{self.chroot}"


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


def _boolean(value: str) -> str | None:
    return value.lower() if value.lower() in ("true", "false") else None


def _milliseconds(value: str) -> str | None:
    return value if value.isdigit() and int(value) > 0 else None


#: The parameters a registry address may carry: each one's check (the value to keep, or None
#: when it is not acceptable) and what it accepts.
ADDRESS_PARAMETERS: dict[str, tuple[Callable[[str], str | None], str]] = {
    "enable-empty-protection": (_boolean, "true or false"),
    # Dubbo's registry ``session``: ZooKeeper's session timeout, etcd's lease TTL (rounded up
    # to whole seconds).
    "session": (_milliseconds, "a number of milliseconds > 0"),
}


def _address_parameters(text: str, query: str) -> tuple[tuple[str, str], ...]:
    out = []
    for item in query.split("&"):
        if not item:
            continue
        key, _, value = item.partition("=")
        known = ADDRESS_PARAMETERS.get(key)
        if known is None:
            raise RegistryAddressError(
                f"{text!r}: unknown registry parameter {key!r} (known: "
                f"{', '.join(ADDRESS_PARAMETERS)})"
            )
        check, accepted = known
        kept = check(value)
        if kept is None:
            raise RegistryAddressError(f"{text!r}: {key}={value!r}: expected {accepted}")
        out.append((key, kept))
    return tuple(out)


def parse_registry_address(text: str | None = None) -> RegistryAddress:
    """Parse an address; ``None`` means ``$DUBBO_PY_REGISTRY`` or the embedded default. A
    ``?key=value`` part may carry :data:`ADDRESS_PARAMETERS`."""
    return _parse_location(text)


def _parse_location(text: str | None) -> RegistryAddress:
    if text is None or not text.strip():
        text = os.environ.get(ENV_REGISTRY, "").strip()
        if not text:
            return RegistryAddress("sqlite", str(default_registry_path()))
    text = text.strip()
    text, question, query = text.partition("?")
    if question:
        parameters = _address_parameters(text, query)
        return replace(_parse_location(text), parameters=parameters)
    scheme, sep, rest = text.partition("://")
    if not sep:
        raise RegistryAddressError(
            f"{text!r}: expected zookeeper://host:port, etcd://host:port, sqlite:///path or "
            "tri://host:port"
        )
    if scheme in ("zookeeper", "etcd"):
        hosts, slash, chroot = rest.partition("/")
        chroot = f"/{chroot.strip('/')}" if slash and chroot.strip("/") else ""
        if scheme == "zookeeper":
            return RegistryAddress("zookeeper", _check_hosts(text, hosts, 2181), chroot)
        return RegistryAddress("etcd", _check_hosts(text, hosts, 2379), chroot)
    if scheme == "sqlite":
        if not rest.startswith("/"):
            raise RegistryAddressError(f"{text!r}: the embedded registry needs an absolute path")
        return RegistryAddress("sqlite", rest)
    if scheme in ("tri", "grpc"):
        return RegistryAddress("direct", _check_hosts(text, rest.rstrip("/"), None))
    raise RegistryAddressError(
        f"{text!r}: unknown registry scheme {scheme!r} (zookeeper, etcd, sqlite or tri)"
    )
