"""When a call must be over: a value object on the monotonic clock, as grpclib's ``Deadline``."""

from __future__ import annotations

import time

__all__ = ["Deadline"]


class Deadline:
    """An instant on :func:`time.monotonic` by which a call must be over, or none at all.

    ``Deadline.after(timeout)`` starts one now (``None``: unbounded); :meth:`remaining` is what
    each attempt may still take (``None`` when unbounded, else never negative) and
    :meth:`expired` says whether a retry may still start. Immutable."""

    __slots__ = ("_at",)

    _at: float | None

    def __init__(self, at: float | None) -> None:
        object.__setattr__(self, "_at", at)

    @classmethod
    def after(cls, timeout: float | None) -> Deadline:
        """The deadline ``timeout`` seconds from now (unbounded for ``None``)."""
        return cls(None if timeout is None else time.monotonic() + timeout)

    @property
    def at(self) -> float | None:
        """The instant on :func:`time.monotonic` (``None``: unbounded)."""
        return self._at

    def remaining(self) -> float | None:
        """Seconds left (``0.0`` once passed; ``None`` when unbounded)."""
        at = self._at
        return None if at is None else max(0.0, at - time.monotonic())

    def expired(self) -> bool:
        """True once the instant has passed (never for an unbounded deadline)."""
        at = self._at
        return at is not None and time.monotonic() >= at

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Deadline is immutable (cannot set {name})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Deadline) and other._at == self._at

    def __hash__(self) -> int:
        return hash(self._at)

    def __repr__(self) -> str:
        return "Deadline(unbounded)" if self._at is None else f"Deadline(at={self._at:.6f})"
