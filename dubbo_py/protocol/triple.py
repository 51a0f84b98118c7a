"""The Triple protocol's request headers and its attachment-key conversion, as Dubbo 3.3 speaks
them (``TripleHeaderEnum``, ``RequestMetadata.toHeaders``, ``StreamUtils.putHeaders`` and
``toAttachments``).

A Triple consumer names what it wants besides the gRPC path: ``tri-service-version`` and
``tri-service-group`` (from the provider URL it chose) and ``tri-consumer-appname``. A provider
exporting several versions or groups of one service dispatches on them.

HTTP/2 header names are lower case, Dubbo attachment keys need not be (``traceId``): the
sender lower-cases every key and, when that changed any, lists ``{"lower": "Original"}`` as JSON
in ``tri-header-convert`` (percent-encoded like ``grpc-message``); the receiver renames them
back. A ``bytes`` value travels under ``<key>-bin`` (gRPC's binary header), whatever its key.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final

from dubbo_py.url import URL

__all__ = [
    "BINARY_SUFFIX",
    "CALL_SINK",
    "CONSUMER_APPNAME",
    "HEADER_CONVERT",
    "RESERVED_HEADERS",
    "SERVICE_GROUP",
    "SERVICE_VERSION",
    "CallMetadata",
    "Metadata",
    "TripleCaller",
    "from_wire",
    "service_headers",
    "to_wire",
]

#: One call's metadata as dubbo-py builds it and gRPC Python gives it: (key, value) pairs.
Metadata = tuple[tuple[str, str | bytes], ...]

#: Metadata as a caller passes it to a stub (``metadata=``): any sequence of pairs, or none.
CallMetadata = Sequence[tuple[str, str | bytes]] | None

SERVICE_VERSION: Final = "tri-service-version"
SERVICE_GROUP: Final = "tri-service-group"
CONSUMER_APPNAME: Final = "tri-consumer-appname"
HEADER_CONVERT: Final = "tri-header-convert"
#: gRPC's marker for binary metadata keys (Dubbo's ``HEADER_BIN_SUFFIX``).
BINARY_SUFFIX: Final = "-bin"

#: Headers the protocol owns (Dubbo's ``TripleHeaderEnum``): never taken from attachments.
RESERVED_HEADERS: Final = frozenset(
    {
        "http-status",
        "grpc-status",
        "grpc-message",
        "grpc-status-details-bin",
        "grpc-timeout",
        "grpc-encoding",
        "grpc-accept-encoding",
        CONSUMER_APPNAME,
        SERVICE_VERSION,
        SERVICE_GROUP,
        "tri-service-timeout",
        HEADER_CONVERT,
        "tri-exception-code",
    }
)

_ERRORS = "surrogateescape"


def service_headers(provider: URL, application: str) -> Metadata:
    """The Triple headers of a call to ``provider``: its version and group when it has them
    (as Dubbo does, ``1.0.0`` included) and the calling application's name."""
    headers: list[tuple[str, str | bytes]] = []
    version = provider.parameters.get("version", "")
    group = provider.parameters.get("group", "")
    if version:
        headers.append((SERVICE_VERSION, version))
    if group:
        headers.append((SERVICE_GROUP, group))
    if application:
        headers.append((CONSUMER_APPNAME, application))
    return tuple(headers)


@dataclass(frozen=True, slots=True)
class TripleCaller:
    """Who calls, for the Triple headers of a reference's calls: the application's name, and
    whether one provider address may serve the reference under several versions or groups
    (the consumer asked for ``*`` or a group list), so that what is cached per provider must be
    keyed by version and group too."""

    application: str = ""
    several_targets: bool = False

    @classmethod
    def for_consumer(cls, application: str, version: str, group: str) -> TripleCaller:
        """The caller of a reference asking for ``version`` and ``group``."""
        return cls(application, version == "*" or group == "*" or "," in group)

    def headers(self, provider: URL) -> Metadata:
        """The Triple headers of a call to ``provider`` (:func:`service_headers`)."""
        return service_headers(provider, self.application)

    def key(self, provider: URL) -> str:
        """What a provider's cached callable is found by: its address, plus its group and
        version when several may share the address."""
        if not self.several_targets:
            return provider.address
        params = provider.parameters
        return f"{provider.address}|{params.get('group', '')}|{params.get('version', '')}"


#: Set while a ``with_call`` runs: the provider call appends the ``grpc.Call`` it made, so the
#: caller can read its trailing metadata (the provider's attachments).
CALL_SINK: ContextVar[list[Any] | None] = ContextVar("dubbo_py_call_sink", default=None)


def _percent_encode(text: str) -> str:
    # grpc-message's encoding (TriRpcStatus.encodeMessage): printable ASCII but '%' as is.
    out = []
    for byte in text.encode("utf-8"):
        if 0x20 <= byte <= 0x7E and byte != 0x25:
            out.append(chr(byte))
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


def _percent_decode(text: str) -> str:
    raw = bytearray()
    i = 0
    while i < len(text):
        if text[i] == "%" and _is_hex(text[i + 1 : i + 3]):
            raw.append(int(text[i + 1 : i + 3], 16))
            i += 3
        else:
            raw.extend(text[i].encode("utf-8"))
            i += 1
    return raw.decode("utf-8", "replace")


def _is_hex(pair: str) -> bool:
    return len(pair) == 2 and all(c in "0123456789abcdefABCDEF" for c in pair)


def to_wire(pairs: Iterable[tuple[str, str | bytes]]) -> Metadata:
    """Attachments (or metadata a servicer sets) as gRPC metadata, the way Dubbo writes them:
    keys lower-cased, with ``tri-header-convert`` naming the originals when any changed;
    ``bytes`` values under ``<key>-bin``, text given for a ``-bin`` key as its UTF-8 bytes (the
    exact bytes a ``surrogateescape`` decoding came from). Protocol headers (``tri-*``,
    ``grpc-*``) are dropped: a caller cannot forge the service version it asks for."""
    out: list[tuple[str, str | bytes]] = []
    renamed: dict[str, str] = {}
    for key, value in pairs:
        binary = isinstance(value, bytes) or key.endswith(BINARY_SUFFIX)
        base = key[: -len(BINARY_SUFFIX)] if key.endswith(BINARY_SUFFIX) else key
        lower = base.lower()
        if not lower or lower in RESERVED_HEADERS or (lower + BINARY_SUFFIX) in RESERVED_HEADERS:
            continue
        if lower != base:
            renamed[lower] = base
        if binary:
            data = value if isinstance(value, bytes) else value.encode("utf-8", _ERRORS)
            out.append((lower + BINARY_SUFFIX, data))
        else:
            out.append((lower, value))
    if renamed:
        out.append((HEADER_CONVERT, _percent_encode(json.dumps(renamed, separators=(",", ":")))))
    return tuple(out)


def _renames(metadata: Iterable[tuple[str, str | bytes]]) -> Mapping[str, str] | None:
    for key, value in metadata:
        if key == HEADER_CONVERT:
            text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
            try:
                found = json.loads(_percent_decode(text))
            except ValueError:
                return {}
            if not isinstance(found, dict):
                return {}
            return {str(k): str(v) for k, v in found.items() if isinstance(v, str)}
    return None


def from_wire(metadata: Iterable[tuple[str, str | bytes]] | None) -> Metadata:
    """gRPC metadata as the sender wrote it: keys named in ``tri-header-convert`` renamed back
    (``traceid`` -> ``traceId``, ``tracebytes-bin`` -> ``traceBytes-bin``) and that header
    dropped; everything else unchanged (binary values stay ``bytes`` under their ``-bin`` key,
    as gRPC Python presents them). A malformed convert header renames nothing."""
    if not metadata:
        return ()
    pairs = tuple(metadata)
    renames = _renames(pairs)
    if renames is None:
        return pairs
    out: list[tuple[str, str | bytes]] = []
    for key, value in pairs:
        if key == HEADER_CONVERT:
            continue
        if key.endswith(BINARY_SUFFIX):
            original = renames.get(key[: -len(BINARY_SUFFIX)])
            out.append((original + BINARY_SUFFIX if original else key, value))
        else:
            out.append((renames.get(key, key), value))
    return tuple(out)
