"""A retry budget, as Finagle's ``RetryBudget`` (the idea behind gRPC's retry throttling).

Every request makes a deposit; every retry must make a withdrawal. A deposit is worth
``ratio`` of a retry, and on top of that a reserve of ``min_retries_per_second * ttl`` retries
is always there, so a client that has just started (or is quiet) can still retry. Deposits and
withdrawals expire after about ``ttl`` seconds: the budget reflects recent traffic only, and the
reserve comes back as old withdrawals age out, i.e. at about ``min_retries_per_second``.

Finagle keeps the balance in a windowed adder of 10 slices of ``ttl / 10`` each; so does this
class. Amounts are integers: ``ratio`` is held as the fraction ``p / q`` nearest to it with
``q <= 10**6`` (exact for ratios such as 0.1, 0.2, 0.25); a deposit adds ``p`` units, a retry
costs ``q``, and the reserve is ``floor(min_retries_per_second * ttl * q)`` units.

Guarantee: between two instants less than ``ttl / 10`` apart (in particular, with a frozen
clock), ``retries granted <= ratio * requests + min_retries_per_second * ttl``. Over a longer
stretch whose withdrawals fall in slices ``0 .. k`` (slice = ``ttl / 10``), the reserve term is
counted ``k // 10 + 1`` times: it is renewed once per ttl, never more.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from fractions import Fraction

__all__ = ["RetryBudget"]

_SLICES = 10


class RetryBudget:
    """Thread-safe retry budget; ``clock`` (seconds, monotonic) is injectable for tests."""

    def __init__(
        self,
        ratio: float = 0.2,
        min_retries_per_second: float = 10.0,
        ttl: float = 10.0,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        for label, value in (("ratio", ratio), ("min_retries_per_second", min_retries_per_second)):
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ValueError(
                    f"retry budget {label} must be a finite number >= 0, got {value!r}"
                )
        if not (isinstance(ttl, int | float) and math.isfinite(ttl) and ttl > 0):
            raise ValueError(
                f"retry budget ttl must be a finite number of seconds > 0, got {ttl!r}"
            )
        fraction = Fraction(ratio).limit_denominator(1_000_000)
        if fraction > 0:
            self._deposit, self._withdrawal = fraction.numerator, fraction.denominator
        else:
            # No credit for requests: every retry comes from the reserve (as Finagle).
            self._deposit, self._withdrawal = 0, 1
        self._reserve = math.floor(
            Fraction(min_retries_per_second) * Fraction(ttl) * self._withdrawal
        )
        self._ttl = float(ttl)
        self._slice_width = self._ttl / _SLICES
        self._clock = clock
        self._origin = clock()
        self._slots = [0] * _SLICES
        self._slot_index = 0  # absolute index of the newest slice
        self._sum = 0
        self._lock = threading.Lock()

    @property
    def ratio(self) -> Fraction:
        """The ratio in force, as the exact fraction used."""
        return Fraction(self._deposit, self._withdrawal)

    @property
    def reserve(self) -> int:
        """Retries available with no request at all (``min_retries_per_second * ttl``)."""
        return self._reserve // self._withdrawal

    def _advance(self) -> None:
        # Caller holds the lock.
        self._advance_to(int((self._clock() - self._origin) // self._slice_width))

    def _advance_to(self, now: int) -> None:
        # Caller holds the lock. Zero the slices that fell out of the window since last time.
        if now <= self._slot_index:
            return
        steps = min(now - self._slot_index, _SLICES)
        for k in range(1, steps + 1):
            slot = (self._slot_index + k) % _SLICES
            self._sum -= self._slots[slot]
            self._slots[slot] = 0
        self._slot_index = now

    def deposit(self) -> None:
        """Credit one request."""
        if not self._deposit:
            return
        # Every call deposits: the slice is computed here and the window moved only when a
        # slice boundary was crossed (a tenth of the TTL), to keep the common case one frame.
        now = int((self._clock() - self._origin) // self._slice_width)
        with self._lock:
            if now > self._slot_index:
                self._advance_to(now)
            self._slots[self._slot_index % _SLICES] += self._deposit
            self._sum += self._deposit

    def try_withdraw(self) -> bool:
        """Take one retry if the budget allows it; False leaves the budget untouched."""
        with self._lock:
            self._advance()
            if self._reserve + self._sum < self._withdrawal:
                return False
            self._slots[self._slot_index % _SLICES] -= self._withdrawal
            self._sum -= self._withdrawal
            return True

    def balance(self) -> int:
        """Retries that could be made now (never negative)."""
        with self._lock:
            self._advance()
            return max(0, (self._reserve + self._sum) // self._withdrawal)

    def __repr__(self) -> str:
        return (
            f"RetryBudget(ratio={float(self.ratio)}, reserve={self.reserve}, ttl={self._ttl}, "
            f"balance={self.balance()})"
        )
