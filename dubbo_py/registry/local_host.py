"""Which address a process registers for its peers, and which one its server listens on.

As in Apache Dubbo, environment variables decide first: ``DUBBO_IP_TO_REGISTRY`` (or dubbo-py's
older ``DUBBO_PY_HOST``) is the address registered, ``DUBBO_IP_TO_BIND`` the address listened
on. Without them, the address registered is the one peers can reach: for a ZooKeeper registry,
the local address of this machine's route to the ensemble (the address a connection to ZooKeeper
leaves from); for the embedded registry, whose peers all live on this machine, loopback. A server
listens on the address it registered unless told otherwise.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dubbo_py.registry.store.address import RegistryAddress

__all__ = [
    "ENV_HOST",
    "ENV_IP_TO_BIND",
    "ENV_IP_TO_REGISTRY",
    "LOOPBACK",
    "Listen",
    "consumer_host",
    "default_host",
    "provider_hosts",
    "route_address",
]

log = logging.getLogger(__name__)

#: Apache Dubbo's variable for the address to register.
ENV_IP_TO_REGISTRY = "DUBBO_IP_TO_REGISTRY"
#: dubbo-py's variable for the same (kept; ``DUBBO_IP_TO_REGISTRY`` wins when both are set).
ENV_HOST = "DUBBO_PY_HOST"
#: Apache Dubbo's variable for the address to listen on.
ENV_IP_TO_BIND = "DUBBO_IP_TO_BIND"
LOOPBACK = "127.0.0.1"


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def route_address(hosts: Iterable[str]) -> str | None:
    """The local address this machine reaches the first resolvable ``host:port`` of ``hosts``
    from (what a TCP connection to it would leave from); None when there is no route. A UDP
    socket is "connected" to ask the kernel for the route: no packet is sent."""
    for entry in hosts:
        host, _, port = entry.rpartition(":")
        host = host.strip("[]")
        try:
            infos = socket.getaddrinfo(host, int(port or 0), type=socket.SOCK_DGRAM)
        except (OSError, ValueError):
            continue
        # IPv4 first: provider URLs carry bare hosts, as Dubbo's do.
        infos.sort(key=lambda info: info[0] != socket.AF_INET)
        for family, kind, proto, _name, sockaddr in infos:
            try:
                with socket.socket(family, kind, proto) as probe:
                    probe.connect(sockaddr)
                    local = str(probe.getsockname()[0])
            except OSError:
                continue
            if not _is_wildcard(local):
                return local
    return None


def default_host(address: RegistryAddress) -> str:
    """The address to register when nothing says otherwise: for ZooKeeper and etcd, the local
    end of the route to the registry's servers (loopback when they are on this machine's
    loopback); for the embedded registry and direct addresses, loopback."""
    if not address.networked:
        return LOOPBACK
    found = route_address(address.hosts)
    if found is None:
        log.warning(
            "no route to %s to learn this machine's address from; registering %s "
            "(set %s to the address peers reach this process at)",
            address,
            LOOPBACK,
            ENV_IP_TO_REGISTRY,
        )
        return LOOPBACK
    return found


def _from_env(environ: Mapping[str, str], *names: str) -> tuple[str, str] | None:
    for name in names:
        value = environ.get(name, "").strip()
        if value:
            return name, value
    return None


@dataclass(frozen=True, slots=True)
class Listen:
    """Where a provider is registered and where its server listens."""

    #: The address written in the provider URL (what consumers connect to).
    register: str
    #: The address the server binds.
    bind: str
    #: What decided ``bind`` (for error messages): an argument, a variable, or "registered".
    bind_source: str = "registered"


def provider_hosts(
    address: RegistryAddress,
    *,
    host: str | None = None,
    bind_host: str | None = None,
    configured_host: str | None = None,
    configured_bind: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Listen:
    """Resolve a provider's addresses. Registered: ``host`` (code), else
    ``$DUBBO_IP_TO_REGISTRY`` / ``$DUBBO_PY_HOST``, else ``configured_host`` (the file), else a
    concrete bind address, else :func:`default_host`. Bound: ``bind_host`` (code), else
    ``$DUBBO_IP_TO_BIND``, else ``configured_bind``, else the registered address.
    ValueError for a registered address that peers cannot connect to (empty, ``0.0.0.0``)."""
    env = os.environ if environ is None else environ
    bind_choice: tuple[str, str] | None = None
    if bind_host:
        bind_choice = ("bind_host", bind_host)
    else:
        bind_choice = _from_env(env, ENV_IP_TO_BIND)
        if bind_choice is None and configured_bind:
            bind_choice = ("protocol.bind_host", configured_bind)
    register_choice: tuple[str, str] | None = None
    if host:
        register_choice = ("host", host)
    else:
        register_choice = _from_env(env, ENV_IP_TO_REGISTRY, ENV_HOST)
        if register_choice is None and configured_host:
            register_choice = ("protocol.host", configured_host)
        if register_choice is None and bind_choice and not _is_wildcard(bind_choice[1]):
            # As Dubbo: the address listened on is registered when nothing else is named.
            register_choice = bind_choice
    if register_choice is None:
        register = default_host(address)
    else:
        source, register = register_choice
        if not register.strip() or _is_wildcard(register):
            raise ValueError(
                f"{source}={register!r} cannot be registered: consumers need an address they "
                "can connect to (listen on every interface with bind_host / "
                f"{ENV_IP_TO_BIND}=0.0.0.0 instead)"
            )
    if bind_choice is None:
        return Listen(register, register)
    return Listen(register, bind_choice[1], bind_choice[0])


def consumer_host(address: RegistryAddress, environ: Mapping[str, str] | None = None) -> str:
    """The address a consumer registers (what consumer-side override rules match):
    ``$DUBBO_IP_TO_REGISTRY`` / ``$DUBBO_PY_HOST``, else :func:`default_host`."""
    found = _from_env(os.environ if environ is None else environ, ENV_IP_TO_REGISTRY, ENV_HOST)
    return found[1] if found is not None else default_host(address)
