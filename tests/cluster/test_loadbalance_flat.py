"""The indexed least-active and shortest-response balancers choose as Dubbo's (a full scan),
and the ``p2c`` and ``adaptive`` balancers follow Dubbo 3.2+'s power of two choices."""

from __future__ import annotations

import random
import threading
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from dubbo_py.cluster.loadbalance import (
    AdaptiveLoadBalance,
    LeastActiveLoadBalance,
    P2CLoadBalance,
    ShortestResponseLoadBalance,
    get_loadbalance,
)
from dubbo_py.cluster.stats import CallStats, method_key
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL
from tests.support.chi_square import CHI2_999, chi_square

SERVICE = "demo.Greeter"
INV = Invocation(SERVICE, "SayHello", explicit_arguments=("ada",))
KEY = method_key(SERVICE, "SayHello")
NOW = 1_764_675_600_000


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def provider(n: int, weight: int | None = None, **params: str | int) -> URL:
    url = URL.parse(f"tri://10.0.{n // 256}.{n % 256}:50051/{SERVICE}?interface={SERVICE}")
    if weight is not None:
        url = url.with_parameters(weight=weight)
    return url.with_parameters(**params) if params else url


def dubbo_lowest(
    candidates: tuple[URL, ...], values: list[int], weights: list[int]
) -> dict[URL, float]:
    """The probability of each candidate under Dubbo's scan: the lowest value wins, ties are
    split by weight (uniform when their weights are equal or all zero); weight-0 providers
    are left out while anyone weighs more (dubbo-py's drain rule)."""
    eligible = [i for i, w in enumerate(weights) if w > 0] or list(range(len(weights)))
    lowest = min(values[i] for i in eligible)
    tied = [i for i in eligible if values[i] == lowest]
    total = sum(weights[i] for i in tied)
    if total == 0 or len({weights[i] for i in tied}) == 1:
        return {candidates[i]: 1 / len(tied) for i in tied}
    return {candidates[i]: weights[i] / total for i in tied}


# ---------------------------------------------------------------------- indexed leastactive


@settings(max_examples=60, deadline=None)
@given(
    weights=st.lists(st.integers(0, 4), min_size=2, max_size=12),
    moves=st.lists(st.tuples(st.integers(0, 11), st.booleans()), max_size=60),
    seed=st.integers(0, 2**16),
)
def test_least_active_index_agrees_with_a_full_scan(
    weights: list[int], moves: list[tuple[int, bool]], seed: int
) -> None:
    """Calls start and end in any order; after each one the chosen provider is one a full scan
    of every candidate could choose (lowest in-flight, and never a drained one)."""
    stats = CallStats()
    candidates = tuple(provider(i, w) for i, w in enumerate(weights))
    lb = LeastActiveLoadBalance(stats, random.Random(seed))
    lb.select(candidates, INV, now_ms=NOW)  # build the index before the calls move it
    tokens: dict[int, list[object]] = {}
    for who, start in moves:
        i = who % len(candidates)
        if start:
            tokens.setdefault(i, []).append(stats.begin(candidates[i].address, KEY))
        elif tokens.get(i):
            stats.end(tokens[i].pop(), ok=True)  # type: ignore[arg-type]
        actives = [stats.active(u.address, KEY) for u in candidates]
        allowed = dubbo_lowest(candidates, actives, weights)
        assert lb.select(candidates, INV, now_ms=NOW) in allowed


def test_least_active_tie_distribution_is_dubbos() -> None:
    """Five providers of weights 1..5, two busy: the three idle share by weight (chi-square)."""
    stats = CallStats()
    candidates = tuple(provider(i, i + 1) for i in range(5))
    lb = LeastActiveLoadBalance(stats, random.Random(7))
    lb.select(candidates, INV, now_ms=NOW)
    stats.begin(candidates[1].address, KEY)
    stats.begin(candidates[3].address, KEY)
    n = 9_000
    counts = Counter(lb.select(candidates, INV, now_ms=NOW) for _ in range(n))
    odds = dubbo_lowest(candidates, [0, 1, 0, 1, 0], [1, 2, 3, 4, 5])
    expected = {u: p * n for u, p in odds.items()}
    assert set(counts) == set(expected)
    assert chi_square(counts, expected) < CHI2_999[2]


def test_least_active_index_stops_following_dropped_tuples() -> None:
    """A consumer whose candidate set changes often leaves no index behind in the statistics:
    each call's cost stays bounded by the few current candidate tuples."""
    stats = CallStats()
    lb = LeastActiveLoadBalance(stats, random.Random(1))
    a = provider(1)
    for n in range(50):
        lb.select((a, provider(100 + n)), INV, now_ms=NOW)
    assert len(stats.cell(a.address, KEY).watchers) <= 8
    del lb
    import gc

    gc.collect()
    assert stats.cell(a.address, KEY).watchers == ()


def test_least_active_index_under_threads_ends_consistent() -> None:
    stats = CallStats()
    candidates = tuple(provider(i) for i in range(20))
    lb = LeastActiveLoadBalance(stats, random.Random(3))
    lb.select(candidates, INV, now_ms=NOW)

    def work(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(500):
            url = lb.select(candidates, INV, now_ms=NOW)
            token = stats.begin(url.address, KEY)
            if rng.random() < 0.5:
                stats.end(token, ok=True)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    actives = [stats.active(u.address, KEY) for u in candidates]
    allowed = dubbo_lowest(candidates, actives, [100] * 20)
    assert all(lb.select(candidates, INV, now_ms=NOW) in allowed for _ in range(50))


# ---------------------------------------------------------------------- indexed shortestresponse


@settings(max_examples=40, deadline=None)
@given(
    weights=st.lists(st.integers(1, 3), min_size=2, max_size=8),
    calls=st.lists(
        st.tuples(st.integers(0, 7), st.integers(0, 30), st.booleans(), st.booleans()), max_size=40
    ),
    seed=st.integers(0, 2**16),
)
def test_shortest_response_index_agrees_with_a_full_scan(
    weights: list[int], calls: list[tuple[int, int, bool, bool]], seed: int
) -> None:
    clock = FakeClock()
    stats = CallStats(clock=clock, slide_period=30)
    candidates = tuple(provider(i, w) for i, w in enumerate(weights))
    lb = ShortestResponseLoadBalance(stats, random.Random(seed))
    lb.select(candidates, INV, now_ms=NOW)
    for who, elapsed, ok, next_window in calls:
        url = candidates[who % len(candidates)]
        if next_window:
            clock.now += 31
        stats.end(stats.begin(url.address, KEY), ok, elapsed_ms=elapsed)
        stats.refresh_window()
        estimates = []
        for u in candidates:
            cell = stats.cell(u.address, KEY)
            estimates.append(cell.window_average * (cell.active + 1))
        allowed = dubbo_lowest(candidates, estimates, weights)
        assert lb.select(candidates, INV, now_ms=NOW) in allowed


def test_shortest_response_tie_distribution_is_dubbos() -> None:
    stats = CallStats(clock=FakeClock())
    candidates = tuple(provider(i, w) for i, w in enumerate((1, 3, 6)))
    for url in candidates[:2]:
        stats.end(stats.begin(url.address, KEY), True, elapsed_ms=4)
    stats.end(stats.begin(candidates[2].address, KEY), True, elapsed_ms=9)
    lb = ShortestResponseLoadBalance(stats, random.Random(5))
    n = 8_000
    counts = Counter(lb.select(candidates, INV, now_ms=NOW) for _ in range(n))
    assert chi_square(counts, {candidates[0]: n / 4, candidates[1]: 3 * n / 4}) < CHI2_999[1]


# ---------------------------------------------------------------------- p2c


def test_p2c_picks_the_less_busy_of_two() -> None:
    stats = CallStats()
    a, b = provider(1), provider(2)
    for _ in range(3):
        stats.begin(a.address, KEY)
    lb = P2CLoadBalance(stats, random.Random(1))
    assert {lb.select((a, b), INV, now_ms=NOW) for _ in range(100)} == {b}


def test_p2c_draws_pairs_uniformly_and_busy_one_loses_its_draws() -> None:
    """Four providers, one with calls in flight: it is never chosen (it loses every draw it is
    in), the others win 1/3 each. With nobody busy the choice is uniform (chi-square)."""
    stats = CallStats()
    candidates = tuple(provider(i) for i in range(4))
    lb = P2CLoadBalance(stats, random.Random(2))
    n = 8_000
    counts = Counter(lb.select(candidates, INV, now_ms=NOW) for _ in range(n))
    assert chi_square(counts, {u: n / 4 for u in candidates}) < CHI2_999[3]
    stats.begin(candidates[0].address, KEY)
    counts = Counter(lb.select(candidates, INV, now_ms=NOW) for _ in range(n))
    assert candidates[0] not in counts
    assert chi_square(counts, {u: n / 3 for u in candidates[1:]}) < CHI2_999[2]


def test_p2c_tie_split_by_weight_and_drained_left_out() -> None:
    stats = CallStats()
    a, b, drained = provider(1, 1), provider(2, 3), provider(3, 0)
    lb = P2CLoadBalance(stats, random.Random(3))
    n = 8_000
    counts = Counter(lb.select((a, b, drained), INV, now_ms=NOW) for _ in range(n))
    assert drained not in counts
    assert chi_square(counts, {a: n / 4, b: 3 * n / 4}) < CHI2_999[1]


# ---------------------------------------------------------------------- adaptive


def test_adaptive_prefers_the_faster_and_lets_the_slow_one_back() -> None:
    clock = FakeClock()
    stats = CallStats(clock=clock)
    slow, fast = provider(1, timeout=1000), provider(2, timeout=1000)
    lb = AdaptiveLoadBalance(stats, random.Random(4))
    for _ in range(5):
        stats.end(stats.begin(slow.address, KEY), True, elapsed_ms=400)
        stats.end(stats.begin(fast.address, KEY), True, elapsed_ms=4)
    chosen = Counter(lb.select((slow, fast), INV, now_ms=NOW) for _ in range(100))
    assert chosen == {fast: 100}
    # more than 2 s (2 x timeout) without a pick: the slow provider is forced once, then
    # loses again
    clock.now += 1.5
    assert lb.select((slow, fast), INV, now_ms=NOW) == fast
    clock.now += 0.6
    stats.end(stats.begin(fast.address, KEY), True, elapsed_ms=4)
    assert lb.select((slow, fast), INV, now_ms=NOW) == slow
    assert [lb.select((slow, fast), INV, now_ms=NOW) for _ in range(20)] == [fast] * 20


def test_adaptive_load_grows_with_in_flight_and_failures() -> None:
    from dubbo_py.cluster.loadbalance.adaptive import adaptive_load

    clock = FakeClock()
    stats = CallStats(clock=clock)
    for _ in range(4):
        stats.end(stats.begin("a:1", KEY), True, elapsed_ms=9)
        stats.end(stats.begin("b:1", KEY), True, elapsed_ms=9)
    a, b = stats.cell("a:1", KEY), stats.cell("b:1", KEY)
    a.last_pick = b.last_pick = clock.now
    base = adaptive_load(a, 100, 1.0, clock.now)
    assert base == adaptive_load(b, 100, 1.0, clock.now)
    stats.begin("b:1", KEY)
    assert adaptive_load(b, 100, 1.0, clock.now) > base
    stats.end(stats.begin("a:1", KEY), False, elapsed_ms=9)
    assert adaptive_load(a, 100, 1.0, clock.now) > base


def test_new_balancers_by_name() -> None:
    assert isinstance(get_loadbalance("P2C"), P2CLoadBalance)
    assert isinstance(get_loadbalance("adaptive"), AdaptiveLoadBalance)


def test_least_active_index_built_while_calls_start_and_end() -> None:
    """Calls recorded from other threads while a new candidate tuple's index is being built
    (a provider list change under load) neither fail nor leave the index wrong."""
    stats = CallStats()
    candidates = tuple(provider(i) for i in range(200))
    stop = threading.Event()
    errors: list[BaseException] = []

    def record() -> None:
        rng = random.Random(9)
        try:
            while not stop.is_set():
                url = candidates[rng.randrange(len(candidates))]
                stats.end(stats.begin(url.address, KEY), ok=True)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=record) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for seed in range(30):
            lb = LeastActiveLoadBalance(stats, random.Random(seed))
            lb.select(tuple(candidates), INV, now_ms=NOW)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors[:1]
