"""Waiting until every watched registry source has answered once.

Watches report their first state asynchronously, on the store's thread. Whoever must not act
before the rules are known (a consumer's first call, a provider's registration) marks each
source as expected before it starts watching it, marks it read in the watch callback once the
state is applied, and waits -- for a bounded time, after which it learns what is still unread.
"""

from __future__ import annotations

import threading
import time

__all__ = ["FirstReads"]


class FirstReads:
    """Sources (any hashable name, with the path to show for it) expected to answer once."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._pending: dict[str, str] = {}

    def expect(self, source: str, path: str) -> None:
        """Wait for ``source`` too (a source already read is not expected again)."""
        with self._cond:
            self._pending.setdefault(source, path)

    def read(self, source: str) -> None:
        """``source`` has answered and its state is applied."""
        with self._cond:
            if self._pending.pop(source, None) is not None and not self._pending:
                self._cond.notify_all()

    def wait(self, timeout: float) -> list[str]:
        """Wait up to ``timeout`` s until nothing is pending; the paths still unread, sorted."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return sorted(self._pending.values())
