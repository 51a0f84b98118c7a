"""Steady client load for end-to-end tests: calls from several threads, each recorded with
when it started, which provider answered, or the error."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Sample:
    started: float
    provider: str = ""
    error: str = ""


class Load:
    """Steady calls from ``threads`` threads, each recording when it started, where it landed
    and any error."""

    def __init__(
        self,
        call: Callable[[], str],
        threads: int,
        pause: float = 0.002,
        gate: threading.Event | None = None,
    ) -> None:
        self.samples: list[Sample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._pause = pause
        #: Calls are made only while ``gate`` is set (None: always).
        self._gate = gate
        self._threads = [threading.Thread(target=self._run, args=(call,)) for _ in range(threads)]

    def _run(self, call: Callable[[], str]) -> None:
        while not self._stop.is_set():
            if self._gate is not None and not self._gate.wait(0.05):
                continue
            started = time.monotonic()
            try:
                sample = Sample(started, call())
            except Exception as exc:
                sample = Sample(started, error=repr(exc))
            with self._lock:
                self.samples.append(sample)
            time.sleep(self._pause)

    def __enter__(self) -> Load:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()

    def errors(self) -> list[Sample]:
        with self._lock:
            return [s for s in self.samples if s.error]

    def between(self, start: float, end: float = float("inf")) -> list[Sample]:
        with self._lock:
            return [s for s in self.samples if start <= s.started < end]
