"""Attachments <-> gRPC metadata: invocation attachments are text, metadata may be binary.

gRPC carries binary values under keys ending in ``-bin`` and insists they be ``bytes``; every
other value must be printable ASCII, and every key lower case. Routers read attachments as
text under the key the caller wrote (``traceId`` stays ``traceId``), so a binary value is
decoded as UTF-8 (what the shard router documents for byte keys) with ``surrogateescape``, which
maps any byte sequence to a string and back unchanged: the provider receives exactly the bytes
the caller sent. On the wire keys are lower-cased with the originals in ``tri-header-convert``,
as Dubbo's Triple does (:mod:`dubbo_py.protocol.triple`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from dubbo_py.invocation import RETRIES_ATTACHMENT
from dubbo_py.protocol.triple import BINARY_SUFFIX, to_wire

__all__ = [
    "BINARY_SUFFIX",
    "CONSUMER_CONTROLS",
    "attachments_from_metadata",
    "metadata_from_attachments",
]

#: Call metadata that steers the consumer's cluster layer and never goes to the provider.
CONSUMER_CONTROLS = frozenset({RETRIES_ATTACHMENT})

_ERRORS = "surrogateescape"


def attachments_from_metadata(
    metadata: Iterable[tuple[str, str | bytes]] | None,
) -> dict[str, str]:
    """Call metadata as attachments: ``bytes`` values decoded as UTF-8, losslessly, under a
    ``-bin`` key (``("token", b"...")`` becomes ``token-bin``, the key it travels under)."""
    if not metadata:
        return {}
    out: dict[str, str] = {}
    for key, value in metadata:
        if isinstance(value, str):
            out[key] = value
        else:
            name = key if key.endswith(BINARY_SUFFIX) else key + BINARY_SUFFIX
            out[name] = value.decode("utf-8", _ERRORS)
    return out


def metadata_from_attachments(
    attachments: Mapping[str, str],
) -> tuple[tuple[str, str | bytes], ...]:
    """Attachments as call metadata, the way Dubbo's Triple writes them (keys lower-cased with
    ``tri-header-convert`` naming the originals; values of ``-bin`` keys encoded back to the
    exact bytes :func:`attachments_from_metadata` decoded them from, UTF-8 for text set by
    hand). The consumer-side controls (:data:`CONSUMER_CONTROLS`) are read by the cluster layer
    and not sent."""
    return to_wire((k, v) for k, v in attachments.items() if k not in CONSUMER_CONTROLS)
