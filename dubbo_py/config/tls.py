"""TLS between consumers and providers: server certificates, optional mutual TLS.

A provider serving with :class:`ServerTLS` advertises ``tls=true`` (and Dubbo's
``ssl-enabled=true``) in its URL; by default consumers connect to such providers over TLS (see
:func:`use_tls`: a consumer's configuration may instead choose TLS for every provider, or none),
verifying the server against :class:`ClientTLS`'s CA (system roots
when none is given) and presenting their own certificate when the provider requires one
(``client_ca`` set on the provider: mutual TLS, plaintext and unauthenticated clients refused).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from dubbo_py.errors import TLSConfigError

__all__ = ["ClientTLS", "ServerTLS", "TLSConfigError", "provider_says_tls", "use_tls"]

#: Provider URL parameters that announce a TLS server: dubbo-py's and Apache Dubbo's.
TLS_PARAMETERS = ("tls", "ssl-enabled")


def _read(path: str | Path | None, what: str) -> bytes | None:
    if path is None:
        return None
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TLSConfigError(f"{what}: cannot read {path}: {exc.strerror}") from None
    if b"-----BEGIN" not in data:
        raise TLSConfigError(f"{what}: {path} is not a PEM file")
    return data


@dataclass(frozen=True, slots=True)
class ServerTLS:
    """A provider's TLS: its certificate chain and key; ``client_ca`` turns on mutual TLS."""

    cert_chain: str | Path
    private_key: str | Path
    client_ca: str | Path | None = None

    def credentials(self) -> grpc.ServerCredentials:
        """gRPC server credentials (reads the files now; TLSConfigError naming a bad one)."""
        cert = _read(self.cert_chain, "tls.cert_chain")
        key = _read(self.private_key, "tls.private_key")
        assert cert is not None and key is not None
        client_ca = _read(self.client_ca, "tls.client_ca")
        return grpc.ssl_server_credentials(
            [(key, cert)], root_certificates=client_ca, require_client_auth=client_ca is not None
        )


@dataclass(frozen=True, slots=True)
class ClientTLS:
    """A consumer's TLS: the CA that signs providers' certificates (system roots when None),
    an optional client certificate for mutual TLS, and an optional expected server name."""

    ca: str | Path | None = None
    cert_chain: str | Path | None = None
    private_key: str | Path | None = None
    server_name: str | None = None
    #: None: TLS to the providers whose URL says so (``tls=true`` / ``ssl-enabled=true``);
    #: True: TLS to every provider (for providers that serve TLS without saying so in their
    #: URL); False: plaintext to every provider.
    enabled: bool | None = None

    def __post_init__(self) -> None:
        if (self.cert_chain is None) != (self.private_key is None):
            raise TLSConfigError("tls: cert_chain and private_key go together (mutual TLS)")

    def credentials(self) -> grpc.ChannelCredentials:
        """gRPC channel credentials (reads the files now)."""
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.ca, "tls.ca"),
            private_key=_read(self.private_key, "tls.private_key"),
            certificate_chain=_read(self.cert_chain, "tls.cert_chain"),
        )

    def channel_options(self) -> list[tuple[str, Any]]:
        """Channel options (the server-name override, when set)."""
        if self.server_name:
            return [("grpc.ssl_target_name_override", self.server_name)]
        return []


def _true(text: str | None) -> bool:
    return text is not None and text.strip().lower() == "true"


def provider_says_tls(parameters: Mapping[str, str]) -> bool:
    """Whether a provider URL announces a TLS server (``tls=true`` or ``ssl-enabled=true``)."""
    return any(_true(parameters.get(key)) for key in TLS_PARAMETERS)


def use_tls(parameters: Mapping[str, str], tls: ClientTLS | None) -> bool:
    """Whether a consumer with ``tls`` connects over TLS to a provider with these URL
    parameters: the consumer's ``enabled`` when it says, else what the provider announces."""
    if tls is not None and tls.enabled is not None:
        return tls.enabled
    return provider_says_tls(parameters)
