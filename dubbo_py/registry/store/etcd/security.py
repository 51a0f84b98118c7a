"""TLS and user authentication for the etcd store.

**TLS** (``etcds://``): the channel to every endpoint is a TLS channel that checks etcd's
certificate against ``ca`` (a PEM file; the system's roots without it) and, with ``cert`` and
``key``, presents a client certificate (what etcd's ``--client-cert-auth`` demands). The files
are read when the store is made, so a missing one is an error at once, naming it.

**Authentication** (a user and password, the registry identity ``auth``): etcd trades them for
a token (``Auth/Authenticate``) that every later request carries in its ``token`` metadata, as
etcd's own client does. etcd stops honouring a token when it expires (``--auth-token-ttl`` for
simple tokens, the JWT's lifetime) or when its auth store changes (a user, role or permission
added or removed: "revision of auth store is old"); the store then authenticates again and
repeats the request, as etcd's client does (``shouldRefreshToken``).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from dubbo_py.errors import StoreError
from dubbo_py.registry.store.etcd._api import AUTHENTICATE

__all__ = [
    "EtcdTls",
    "TokenInterceptor",
    "credentials_refused",
    "stale_token",
    "tls_failure",
    "token_rejected",
]


@dataclass(frozen=True, slots=True)
class EtcdTls:
    """The TLS files of an ``etcds://`` address (paths of PEM files)."""

    #: The CA certificates etcd's certificate must chain to; None: the system's roots.
    ca: str | None = None
    #: The client certificate (chain) presented to etcd; with :attr:`key`.
    cert: str | None = None
    #: The client certificate's private key.
    key: str | None = None

    @classmethod
    def from_options(cls, address: str, options: Mapping[str, str]) -> EtcdTls:
        """The TLS files of an address's ``ca``, ``cert`` and ``key`` options."""
        tls = cls(options.get("ca"), options.get("cert"), options.get("key"))
        if (tls.cert is None) != (tls.key is None):
            raise StoreError(
                f"{address}: a client certificate needs both cert= and key= "
                f"(got only {'cert' if tls.key is None else 'key'})"
            )
        return tls

    def channel_credentials(self, address: str) -> grpc.ChannelCredentials:
        """gRPC's TLS credentials from the files (read now); StoreError naming a file that
        cannot be read."""
        return grpc.ssl_channel_credentials(
            root_certificates=_read(address, "ca", self.ca),
            private_key=_read(address, "key", self.key),
            certificate_chain=_read(address, "cert", self.cert),
        )


def _read(address: str, option: str, path: str | None) -> bytes | None:
    if path is None:
        return None
    try:
        data = Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise StoreError(
            f"{address}: cannot read the {option}= file {path}: {exc.strerror or exc}"
        ) from None
    if b"-----BEGIN" not in data:
        raise StoreError(f"{address}: the {option}= file {path} is not PEM")
    return data


class _CallDetails(
    collections.namedtuple(
        "_CallDetails",
        ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression"),
    ),
    grpc.ClientCallDetails,
):
    pass


class TokenInterceptor(
    grpc.UnaryUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Adds the current token (``token()``; none while it is empty) to every call but
    ``Authenticate``."""

    def __init__(self, token: Callable[[], str]) -> None:
        self._token = token

    def _details(self, details: Any) -> Any:
        token = self._token()
        if not token or details.method == AUTHENTICATE:
            return details
        metadata = [*(details.metadata or ()), ("token", token)]
        return _CallDetails(
            details.method,
            details.timeout,
            metadata,
            details.credentials,
            getattr(details, "wait_for_ready", None),
            getattr(details, "compression", None),
        )

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        return continuation(self._details(details), requests)


#: etcd's answers to a request whose token it no longer honours (etcd's rpctypes), on which
#: its client authenticates again: an expired or unknown token, a token older than the auth
#: store, and no token at all (the previous one was dropped).
_STALE_TOKEN = ("invalid auth token", "revision of auth store is old", "user name is empty")


def token_rejected(exc: grpc.RpcError) -> bool:
    """Whether etcd refused a request for its token (authenticate again and repeat it)."""
    return exc.code() in (
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.INVALID_ARGUMENT,
    ) and stale_token(str(exc.details() or ""))


def stale_token(reason: str) -> bool:
    """Whether etcd's message (an error's, a cancelled watcher's) says the token is stale."""
    return any(text in reason for text in _STALE_TOKEN)


def credentials_refused(exc: grpc.RpcError) -> bool:
    """Whether ``Authenticate`` failed for the user name or password."""
    return "authentication failed" in str(exc.details() or "")


#: What gRPC's messages say when a TLS handshake fails: our check of etcd's certificate
#: ("CERTIFICATE_VERIFY_FAILED", in the handshake), etcd's refusal of ours (with TLS 1.3 it
#: arrives after the handshake: "Unwrap failed (TSI_DATA_CORRUPTED)").
_TLS_WORDS = ("ssl", "handshake", "certificate", "tsi_")


def tls_failure(exc: grpc.RpcError) -> str | None:
    """What went wrong when a call failed in TLS (etcd's certificate not trusted, ours
    refused), else None."""
    if exc.code() is not grpc.StatusCode.UNAVAILABLE:
        return None
    details = str(exc.details() or "")
    if not any(word in details.lower() for word in _TLS_WORDS):
        return None
    if "unwrap failed" in details.lower():
        return (
            "etcd refused this client's certificate, or its lack of one (etcd's "
            "--client-cert-auth takes only certificates its --trusted-ca-file signed): "
            f"{details}"
        )
    return details
