"""The retry budget (Finagle's RetryBudget): ratio, reserve, expiry and its guarantee."""

from __future__ import annotations

import threading
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dubbo_py.cluster.budget import RetryBudget


class Clock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


def test_default_reserve_is_min_rate_times_ttl() -> None:
    budget = RetryBudget(clock=Clock())
    assert budget.balance() == 100  # 10 retries/s x 10 s
    assert all(budget.try_withdraw() for _ in range(100))
    assert not budget.try_withdraw()
    assert budget.balance() == 0


def test_requests_earn_ratio_of_a_retry() -> None:
    budget = RetryBudget(ratio=0.2, min_retries_per_second=0, clock=Clock())
    assert not budget.try_withdraw()
    for _ in range(10):
        budget.deposit()
    assert budget.balance() == 2
    assert budget.try_withdraw() and budget.try_withdraw()
    assert not budget.try_withdraw()
    for _ in range(4):
        budget.deposit()
    assert not budget.try_withdraw()  # 4 requests earn 0.8 of a retry
    budget.deposit()
    assert budget.try_withdraw()


def test_ratio_above_one_allows_several_retries_per_request() -> None:
    budget = RetryBudget(ratio=2.0, min_retries_per_second=0, clock=Clock())
    budget.deposit()
    assert budget.balance() == 2


def test_deposits_expire_after_ttl() -> None:
    clock = Clock()
    budget = RetryBudget(ratio=0.5, min_retries_per_second=0, ttl=10, clock=clock)
    for _ in range(100):
        budget.deposit()
    assert budget.balance() == 50
    clock.now += 9.99
    assert budget.balance() == 50
    clock.now += 0.01
    assert budget.balance() == 0


def test_reserve_comes_back_as_withdrawals_age_out() -> None:
    clock = Clock()
    budget = RetryBudget(ratio=0.2, min_retries_per_second=1, ttl=5, clock=clock)
    assert sum(budget.try_withdraw() for _ in range(10)) == 5
    clock.now += 5
    assert budget.balance() == 5


def test_zero_budget_never_retries() -> None:
    budget = RetryBudget(ratio=0, min_retries_per_second=0, clock=Clock())
    budget.deposit()
    assert not budget.try_withdraw()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ratio": -0.1}, "ratio"),
        ({"min_retries_per_second": float("nan")}, "min_retries_per_second"),
        ({"ttl": 0}, "ttl"),
    ],
)
def test_bad_settings_rejected(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RetryBudget(**kwargs)


RATIOS = st.sampled_from([0.0, 0.1, 0.2, 0.25, 0.5, 1.0, 2.0])


@settings(max_examples=200, deadline=None)
@given(
    ratio=RATIOS,
    min_rate=st.sampled_from([0.0, 0.5, 1.0, 10.0]),
    ttl=st.sampled_from([1.0, 2.5, 10.0]),
    ops=st.lists(st.booleans(), max_size=300),
)
def test_frozen_clock_grants_exactly_what_the_bound_allows(
    ratio: float, min_rate: float, ttl: float, ops: list[bool]
) -> None:
    # With no time passing nothing expires: a retry is granted exactly when one more would
    # still satisfy granted <= ratio * requests + reserve, the reserve being
    # min_retries_per_second * ttl rounded down to a multiple of 1/q (ratio = p/q).
    budget = RetryBudget(ratio, min_rate, ttl, clock=Clock())
    exact_ratio = Fraction(ratio).limit_denominator(10**6)
    q = exact_ratio.denominator
    reserve = Fraction(int(Fraction(min_rate) * Fraction(ttl) * q), q)
    requests = granted = 0
    for is_request in ops:
        if is_request:
            budget.deposit()
            requests += 1
        else:
            allowed = granted + 1 <= exact_ratio * requests + reserve
            assert budget.try_withdraw() == allowed
            granted += allowed
    assert granted <= ratio * requests + min_rate * ttl


@settings(max_examples=200, deadline=None)
@given(
    ratio=RATIOS,
    min_rate=st.sampled_from([0.0, 1.0, 10.0]),
    ops=st.lists(st.tuples(st.floats(0, 3, allow_nan=False), st.booleans()), max_size=300),
)
def test_granted_retries_bounded_over_time(
    ratio: float, min_rate: float, ops: list[tuple[float, bool]]
) -> None:
    # Over time the reserve renews once per ttl (10 slices of ttl/10): with the last granted
    # retry in slice k, granted <= ratio * requests + reserve * (k // 10 + 1).
    ttl = 10.0
    clock = Clock()
    start = clock.now
    budget = RetryBudget(ratio, min_rate, ttl, clock=clock)
    requests = granted = 0
    last_slice = 0
    for advance, is_request in ops:
        clock.now += advance
        if is_request:
            budget.deposit()
            requests += 1
        elif budget.try_withdraw():
            granted += 1
            last_slice = int((clock.now - start) // (ttl / 10))
    reserve = int(min_rate * ttl)
    assert granted <= Fraction(ratio) * requests + reserve * (last_slice // 10 + 1)


def test_counted_requests_are_credited_in_the_slice_they_were_counted_in() -> None:
    # The call path counts with count_request (folding first when a slice ended), as
    # deposit() does: credits expire a ttl after the slice they were earned in.
    clock = Clock()
    budget = RetryBudget(ratio=0.5, min_retries_per_second=0, ttl=10, clock=clock)

    def count() -> None:
        if budget.clock() >= budget.next_fold:
            budget.fold()
        budget.count_request()

    for _ in range(10):
        count()
    clock.now += 5
    for _ in range(10):
        count()
    assert budget.balance() == 10
    clock.now += 5  # the first ten expire, the second ten are 5 s old
    assert budget.balance() == 5
    clock.now += 5
    assert budget.balance() == 0


def test_concurrent_deposits_are_all_counted() -> None:
    budget = RetryBudget(ratio=1.0, min_retries_per_second=0, clock=Clock())

    def work() -> None:
        for _ in range(5_000):
            budget.deposit()
            budget.count_request()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert budget.balance() == 8 * 5_000 * 2
