"""Attachments <-> gRPC metadata: invocation attachments are text, metadata may be binary.

gRPC carries binary values under keys ending in ``-bin`` and insists they be ``bytes``; every
other value must be printable ASCII. Routers read attachments as text, so a binary value is
decoded as UTF-8 (what the shard router documents for byte keys) with ``surrogateescape``, which
maps any byte sequence to a string and back unchanged: the provider receives exactly the bytes
the caller sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["BINARY_SUFFIX", "attachments_from_metadata", "metadata_from_attachments"]

#: gRPC's marker for binary metadata keys.
BINARY_SUFFIX = "-bin"

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
    :func:`attachments_from_metadata` decoded them from (UTF-8 for text set by hand)."""
    return tuple(
        (k, v.encode("utf-8", _ERRORS) if k.endswith(BINARY_SUFFIX) and isinstance(v, str) else v)
        for k, v in attachments.items()
    )
