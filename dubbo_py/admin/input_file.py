"""Reading an operator's input file (a rule, a scenario) with a size limit.

A rule ends up as one ZooKeeper node, and ZooKeeper refuses a node over ``jute.maxbuffer``
(1 MB by default) -- with a connection loss that reads like a network problem. So input over
:data:`MAX_INPUT_BYTES` is refused up front with that reason, and reading never takes more than
the limit plus one byte: ``rules push /dev/zero`` answers at once instead of reading forever.
"""

from __future__ import annotations

__all__ = ["MAX_INPUT_BYTES", "InputFileError", "read_input_file"]

#: ZooKeeper's default node size limit (``jute.maxbuffer``, 0xfffff bytes).
MAX_INPUT_BYTES = 1024 * 1024


class InputFileError(ValueError):
    """The file cannot be used as input; the message names it and says why."""


def read_input_file(path: str, limit: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of ``path``; :class:`InputFileError` if it is unreadable, not UTF-8 or
    larger than ``limit`` bytes (only ``limit + 1`` bytes are ever read)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise InputFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise InputFileError(
            f"{path} is larger than {limit // 1024} KiB, ZooKeeper's node size limit "
            "(jute.maxbuffer): a rule that large could not be stored"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(
            f"cannot read {path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
