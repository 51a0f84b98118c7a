"""A thread with a stack of a known size, to run recursive parsers on whatever thread asks.

The checks made when a script rule is read parse hostile text with recursive parsers
(starlark-rust's, Python's). Their nesting limits are sized for a stack of a given size, but the
thread that reads a rule is whoever's: a registry event thread, an executor, a thread started
with ``threading.stack_size(512 * 1024)``. :class:`StackThread` runs the work on one daemon
thread of its own, started with the stack the limits were sized for, and hands back the result
(or the exception) to the caller.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["CHECKING", "CHECK_STACK_SIZE", "StackThread"]

_T = TypeVar("_T")


class StackThread:
    """Runs callables one at a time on a daemon thread with ``stack_size`` bytes of stack."""

    def __init__(self, name: str, stack_size: int) -> None:
        self.name = name
        self.stack_size = stack_size
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._queue: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()

    def call(self, work: Callable[[], _T]) -> _T:
        """``work()`` on the thread; its result, or its exception raised here."""
        if threading.current_thread() is self._thread:
            return work()
        self._ensure_thread()
        future: Future[_T] = Future()
        self._queue.put((work, future))
        return future.result()

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is not None and self._pid == os.getpid() and self._thread.is_alive():
                return
            # threading.stack_size is process-wide: set it only while this thread is created.
            # (A thread another caller starts in that instant gets the larger stack too:
            # harmless, it is only reserved address space.)
            work: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
            self._queue = work  # a forked child starts with no pending work
            previous = threading.stack_size(self.stack_size)
            try:
                thread = threading.Thread(
                    target=self._serve, args=(work,), name=self.name, daemon=True
                )
                thread.start()
            finally:
                threading.stack_size(previous)
            self._thread, self._pid = thread, os.getpid()

    @staticmethod
    def _serve(work: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]]) -> None:
        while True:
            task, future = work.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(task())
            except BaseException as exc:  # handed to the caller, who raises it
                future.set_exception(exc)


#: The stack of the thread scripts are parsed and compiled on in this process. The nesting
#: limits of :mod:`~dubbo_py.router.script.rule` keep starlark-rust's recursive parser and
#: compiler (which crashed the process at 2000-4000 levels on 8 MiB) far from this; a
#: caller's thread (an event thread, an executor with a small stack) would not be.
CHECK_STACK_SIZE = 8 * 1024 * 1024

#: The thread that parses (and, for :class:`~dubbo_py.router.script.InlineSandbox`,
#: compiles) scripts in this process.
CHECKING = StackThread("dubbo-script-check", CHECK_STACK_SIZE)
