"""Attachments <-> gRPC metadata: invocation attachments are text, metadata may be binary.

gRPC carries binary values under keys ending in ``-bin`` and insists they be ``bytes``; every
other value must be printable ASCII. Routers read attachments as text, so a binary value is
decoded as UTF-8 (what the shard router documents for byte keys) with ``surrogateescape``, which
maps any byte sequence to a string and back unchanged: the provider receives exactly the bytes
the caller sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from dubbo_py.invocation import RETRIES_ATTACHMENT

__all__ = [
    "BINARY_SUFFIX",
    "CONSUMER_CONTROLS",
    "attachments_from_metadata",
    "metadata_from_attachments",
]

#: gRPC's marker for binary metadata keys.
BINARY_SUFFIX = "-bin"
#: Call metadata that steers the consumer's cluster layer and never goes to the provider.
CONSUMER_CONTROLS = frozenset({RETRIES_ATTACHMENT})

_ERRORS = "surrogateescape"


def attachments_from_metadata(
    metadata: Iterable[tuple[str, str | bytes]] | None,
) -> dict[str, str]:
    """Call metadata as attachments: ``bytes`` values decoded as UTF-8, losslessly."""
    if not metadata:
        return {}
    return {k: v if isinstance(v, str) else v.decode("utf-8", _ERRORS) for k, v in metadata}


def metadata_from_attachments(
    attachments: Mapping[str, str],
) -> tuple[tuple[str, str | bytes], ...]:
    """Attachments as call metadata: values of ``-bin`` keys encoded back to the exact bytes
    :func:`attachments_from_metadata` decoded them from (UTF-8 for text set by hand). The
    consumer-side controls (:data:`CONSUMER_CONTROLS`) are read by the cluster layer and not
    sent."""
    return tuple(
        (k, v.encode("utf-8", _ERRORS) if k.endswith(BINARY_SUFFIX) and isinstance(v, str) else v)
        for k, v in attachments.items()
        if k not in CONSUMER_CONTROLS
    )
