"""The time budget of turning a rule into routing: compiling it and binding it to providers.

Compiling and binding run on a consumer's notification path, so a rule that took long there
would delay every later provider or rule change (and, holding the GIL, slow every call). Rule
matching is linear by construction (RE2 regexes, glob patterns, bit masks), so a rule over
budget is an absurd rule, not an unlucky one: it is refused as invalid and the source's last
good rules stay in force (:meth:`~dubbo_py.router.rulebook.RuleBook.revoke`).

Binding code that loops over providers calls :func:`check_budget`, which raises
:class:`RuleBudgetError` as soon as the deadline set by :func:`within_budget` has passed;
anything else is measured when it returns.

The budget is counted in CPU time of the thread doing the work (:func:`budget_clock`), not wall
time: a valid rule must not be refused because the machine is busy or another thread holds the
GIL, and the first compile's one-off costs (building the condition grammar) stay far below it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from dubbo_py.errors import RuleError
from dubbo_py.router.base import Router

__all__ = [
    "DEFAULT_RULE_BUDGET",
    "RuleBudgetError",
    "budget_clock",
    "check_budget",
    "elapsed_check",
    "within_budget",
]

#: CPU seconds one rule may take to compile, and to bind to one provider snapshot.
DEFAULT_RULE_BUDGET = 2.0

#: The clock budgets are counted on: CPU time of the calling thread.
budget_clock = time.thread_time

_deadline: ContextVar[tuple[float, float] | None] = ContextVar("rule_deadline", default=None)


class RuleBudgetError(RuleError):
    """A rule took longer than its budget to compile or bind; ``router`` names it when known."""

    def __init__(self, message: str, *, source: str = "", router: Router | None = None) -> None:
        super().__init__(message, source=source)
        self.router = router


@contextmanager
def within_budget(seconds: float | None) -> Iterator[None]:
    """Run the block with a deadline ``seconds`` from now (``None``: no deadline)."""
    if seconds is None:
        yield
        return
    token = _deadline.set((budget_clock() + seconds, seconds))
    try:
        yield
    finally:
        _deadline.reset(token)


def check_budget(what: str) -> None:
    """Raise :class:`RuleBudgetError` if the current deadline has passed (cheap otherwise)."""
    deadline = _deadline.get()
    if deadline is not None and budget_clock() > deadline[0]:
        raise RuleBudgetError(
            f"{what} took longer than the rule budget of {deadline[1]:g} s of CPU"
        )


def elapsed_check(what: str, started: float, seconds: float | None) -> None:
    """Raise :class:`RuleBudgetError` if more than ``seconds`` passed since ``started``."""
    if seconds is None:
        return
    elapsed = budget_clock() - started
    if elapsed > seconds:
        raise RuleBudgetError(
            f"{what} took {elapsed:.2f} s of CPU, longer than the rule budget of {seconds:g} s"
        )
