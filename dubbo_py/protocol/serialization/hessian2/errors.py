"""The errors of the Hessian2 codec."""

from __future__ import annotations


class Hessian2Error(ValueError):
    """Something could not be put into, or read from, Hessian2."""


class Hessian2EncodeError(Hessian2Error):
    """A Python value has no Hessian2 form (or one outside Java's ranges)."""


class Hessian2DecodeError(Hessian2Error):
    """Bytes that are not (or not only) Hessian2: the message names the offset where it failed."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(f"{message} at offset {offset}")
        #: Where in the input the bad byte (or the missing one) is.
        self.offset = offset
