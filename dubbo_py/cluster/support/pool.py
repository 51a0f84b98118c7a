"""A thread pool made on first use, for work a call hands off (forks, futures)."""

from __future__ import annotations

import threading
from concurrent import futures

__all__ = ["LazyPool"]


class LazyPool:
    """A :class:`~concurrent.futures.ThreadPoolExecutor` of ``workers`` threads named
    ``name-N``, made on the first :meth:`get` (a process that never forks or asks for a future
    starts no thread) and shared by every caller after."""

    def __init__(self, workers: int, name: str) -> None:
        self._workers = workers
        self._name = name
        self._lock = threading.Lock()
        self._pool: futures.ThreadPoolExecutor | None = None

    def get(self) -> futures.ThreadPoolExecutor:
        """The pool (made now if this is the first call)."""
        with self._lock:
            if self._pool is None:
                self._pool = futures.ThreadPoolExecutor(
                    self._workers, thread_name_prefix=self._name
                )
            return self._pool
