"""Waiting for things that happen on other threads, with generous bounds (never timing asserts)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["Recorder", "wait_until"]

#: How long a test waits for something that should happen "soon". Generous: the machine may be
#: loaded; a passing test returns as soon as the condition holds.
PATIENCE = 20.0


def wait_until(condition: Callable[[], bool], timeout: float = PATIENCE, what: str = "") -> None:
    """Poll ``condition`` until it holds; fail the test with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or condition}")
        time.sleep(0.01)


class Recorder:
    """A callback that records what it is called with (one argument, or a tuple of several)."""

    def __init__(self) -> None:
        self._calls: list[Any] = []
        self._cond = threading.Condition()

    def __call__(self, *args: Any) -> None:
        with self._cond:
            self._calls.append(args[0] if len(args) == 1 else args)
            self._cond.notify_all()

    @property
    def calls(self) -> list[Any]:
        """Everything recorded so far, oldest first."""
        with self._cond:
            return list(self._calls)

    @property
    def last(self) -> Any:
        """The latest call's argument(s)."""
        with self._cond:
            return self._calls[-1]

    def wait_for(self, predicate: Callable[[Any], bool], timeout: float = PATIENCE) -> Any:
        """Wait until the latest call satisfies ``predicate`` and return it."""
        with self._cond:
            ok = self._cond.wait_for(
                lambda: bool(self._calls) and predicate(self._calls[-1]), timeout
            )
            if not ok:
                raise AssertionError(f"no matching call within {timeout}s; calls: {self._calls}")
            return self._calls[-1]

    def wait_last(self, expected: Any, timeout: float = PATIENCE) -> None:
        """Wait until the latest call equals ``expected``."""
        self.wait_for(lambda value: value == expected, timeout)

    def wait_count(self, count: int, timeout: float = PATIENCE) -> list[Any]:
        """Wait until at least ``count`` calls were recorded and return them all."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._calls) >= count, timeout):
                raise AssertionError(
                    f"expected {count} calls within {timeout}s; calls: {self._calls}"
                )
            return list(self._calls)
