"""A list of callbacks that each caller can take its own out of again.

Listeners of a quarantine, the sources a metrics scrape reads, the listeners of a migration
rule: each part keeps its callbacks in a list under its own lock and hands whoever adds one the
function that removes it (:func:`add_callback`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TypeVar

__all__ = ["add_callback"]

T = TypeVar("T")


def add_callback(
    lock: AbstractContextManager[object], callbacks: list[T], callback: T
) -> Callable[[], None]:
    """Append ``callback`` to ``callbacks`` under ``lock``; returns a function that removes it
    again under the lock (and does nothing once it is gone)."""
    with lock:
        callbacks.append(callback)

    def remove() -> None:
        with lock:
            if callback in callbacks:
                callbacks.remove(callback)

    return remove
