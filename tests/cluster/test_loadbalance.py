"""Load balancers, warmup weights and call statistics, against Dubbo's semantics."""

from __future__ import annotations

import hashlib
import random
import threading
from collections import Counter
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dubbo_py.cluster.loadbalance import (
    LOADBALANCE_NAMES,
    ConsistentHashLoadBalance,
    LeastActiveLoadBalance,
    RandomLoadBalance,
    RoundRobinLoadBalance,
    ShortestResponseLoadBalance,
    calculate_warmup_weight,
    effective_weight,
    get_loadbalance,
    weight_stable_until,
)
from dubbo_py.cluster.loadbalance.base import IdentityCache
from dubbo_py.cluster.loadbalance.consistenthash import HashRing
from dubbo_py.cluster.loadbalance.roundrobin import identity_string
from dubbo_py.cluster.stats import CallStats, method_key
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL
from tests.support.chi_square import CHI2_999, chi_square

SERVICE = "demo.Greeter"
INV = Invocation(SERVICE, "SayHello", explicit_arguments=("ada",))
KEY = method_key(SERVICE, "SayHello")
NOW = 1_764_675_600_000  # a fixed "wall clock" in epoch ms


def provider(n: int, weight: int | None = None, **params: str | int) -> URL:
    url = URL.parse(f"tri://10.0.0.{n}:50051/{SERVICE}?interface={SERVICE}&version=1.0.0")
    if weight is not None:
        url = url.with_parameters(weight=weight)
    return url.with_parameters(**params) if params else url


def sample(lb: object, candidates: tuple[URL, ...], n: int, **kw: int) -> Counter[URL]:
    select = lb.select  # type: ignore[attr-defined]
    return Counter(select(candidates, INV, **kw) for _ in range(n))


# ---------------------------------------------------------------------- weights and warmup


def test_weight_defaults_and_configuration() -> None:
    assert effective_weight(provider(1), "SayHello", NOW) == 100
    assert effective_weight(provider(1, 5), "SayHello", NOW) == 5
    assert effective_weight(provider(1, 0), "SayHello", NOW) == 0
    assert effective_weight(provider(1, -3), "SayHello", NOW) == 0
    per_method = provider(1, 20).with_parameter_map({"SayHello.weight": "7"})
    assert effective_weight(per_method, "SayHello", NOW) == 7
    assert effective_weight(per_method, "SayGoodbye", NOW) == 20
    assert effective_weight(provider(1).with_parameter_map({"weight": "heavy"}), "m", NOW) == 100


@pytest.mark.parametrize(
    ("uptime", "expected"),
    [
        # ww = int(uptime / (600000 / 100)) = int(uptime / 6000), clamped to [1, 100]
        (60_000, 10),
        (300_000, 50),
        (1, 1),  # int(1/6000) = 0, clamped up to 1
        (5_999, 1),
        (12_000, 2),
        (599_999, 99),
        (600_000, 100),  # warmup over: not < warmup
        (10**9, 100),
        (0, 100),  # Dubbo only warms up when 0 < uptime < warmup
        (-5, 1),  # provider clock ahead of ours: Dubbo 3 returns 1
    ],
)
def test_warmup_weight_default_period(uptime: int, expected: int) -> None:
    url = provider(1, timestamp=NOW - uptime)
    assert effective_weight(url, "SayHello", NOW) == expected


def test_warmup_weight_custom_period_and_weight() -> None:
    # weight 200, warmup 10 s: ww = int(uptime / 50)
    url = provider(1, 200, timestamp=NOW - 2_500, warmup=10_000)
    assert effective_weight(url, "SayHello", NOW) == 50
    # weight 0 is never warmed up into traffic
    assert effective_weight(provider(1, 0, timestamp=NOW - 2_500), "SayHello", NOW) == 0


def test_warmup_uses_java_float_arithmetic() -> None:
    # (float) 30 / 100 = 0.3f = 0.300000011920928955078125, and 9 / 0.3f rounds to the float
    # 29.999998092651367 -> int 29, although 9 * 100 / 30 is exactly 30.
    assert calculate_warmup_weight(9, 30, 100) == 29
    # (float) 600000 / 97 = 6185.56689453125f; 556701 / that = 89.9999967 which rounds to the
    # float 90.0 -> 90, although 556701 * 97 / 600000 = 89.999995.
    assert calculate_warmup_weight(556_701, 600_000, 97) == 90
    assert calculate_warmup_weight(556_701, 600_000, 97) != 556_701 * 97 // 600_000


@settings(max_examples=300, deadline=None)
@given(
    weight=st.integers(-5, 1000),
    warmup=st.integers(-10, 2_000_000),
    uptime=st.integers(-1000, 2_100_000),
    offset=st.floats(0, 1),
)
def test_weight_stable_until_is_a_safe_bound(
    weight: int, warmup: int, uptime: int, offset: float
) -> None:
    url = provider(1, weight, timestamp=NOW - uptime, warmup=warmup)
    now_weight = effective_weight(url, "SayHello", NOW)
    until = weight_stable_until(url, "SayHello", NOW)
    assert until > NOW
    later = NOW + 3_000_000 if until == float("inf") else int(until) - 1
    inside = NOW + int((later - NOW) * offset)
    assert effective_weight(url, "SayHello", later) == now_weight
    assert effective_weight(url, "SayHello", inside) == now_weight


# ---------------------------------------------------------------------- random


def test_random_follows_weights_chi_square() -> None:
    candidates = (provider(1, 1), provider(2, 2), provider(3, 3), provider(4, 4))
    lb = RandomLoadBalance(random.Random(1234))
    n = 20_000
    counts = sample(lb, candidates, n, now_ms=NOW)
    expected = {c: n * w / 10 for c, w in zip(candidates, (1, 2, 3, 4), strict=True)}
    assert chi_square(counts, expected) < CHI2_999[3]


def test_random_equal_weights_is_uniform() -> None:
    candidates = tuple(provider(i) for i in range(1, 6))
    lb = RandomLoadBalance(random.Random(99))
    n = 10_000
    counts = sample(lb, candidates, n, now_ms=NOW)
    assert chi_square(counts, dict.fromkeys(candidates, n / 5)) < CHI2_999[4]


def test_random_never_picks_weight_zero() -> None:
    candidates = (provider(1, 0), provider(2, 3), provider(3, 0), provider(4, 1))
    counts = sample(RandomLoadBalance(random.Random(5)), candidates, 2_000, now_ms=NOW)
    assert set(counts) == {candidates[1], candidates[3]}


def test_random_all_zero_weights_spread_evenly() -> None:
    candidates = (provider(1, 0), provider(2, 0), provider(3, 0))
    counts = sample(RandomLoadBalance(random.Random(6)), candidates, 3_000, now_ms=NOW)
    assert chi_square(counts, dict.fromkeys(candidates, 1_000)) < CHI2_999[2]


def test_random_sees_warmup_progress_on_the_same_tuple() -> None:
    # Same tuple object throughout: the cached weights must still follow the warmup.
    fresh = provider(1, timestamp=NOW)  # just started
    candidates = (fresh, provider(2), provider(3))
    lb = RandomLoadBalance(random.Random(7))
    n = 9_000
    early = sample(lb, candidates, n, now_ms=NOW + 60_000)  # weights 10 : 100 : 100
    expected = {fresh: n * 10 / 210, candidates[1]: n * 100 / 210, candidates[2]: n * 100 / 210}
    assert chi_square(early, expected) < CHI2_999[2]
    late = sample(lb, candidates, n, now_ms=NOW + 600_000)  # warmup over: 100 : 100 : 100
    assert chi_square(late, dict.fromkeys(candidates, n / 3)) < CHI2_999[2]


# ---------------------------------------------------------------------- round robin


def names(picks: Sequence[URL], candidates: Sequence[URL]) -> str:
    return "".join("ABCDEFGH"[candidates.index(p)] for p in picks)


def test_smooth_round_robin_sequence_5_1_1() -> None:
    candidates = (provider(1, 5), provider(2, 1), provider(3, 1))
    lb = RoundRobinLoadBalance()
    picks = [lb.select(candidates, INV, now_ms=NOW) for _ in range(14)]
    assert names(picks, candidates) == "AABACAA" * 2


def test_round_robin_equal_weights_cycles() -> None:
    candidates = (provider(1), provider(2), provider(3))
    lb = RoundRobinLoadBalance()
    picks = [lb.select(candidates, INV, now_ms=NOW) for _ in range(6)]
    assert names(picks, candidates) == "ABCABC"


def test_round_robin_state_is_per_method_and_survives_equal_new_tuple() -> None:
    candidates = (provider(1, 5), provider(2, 1), provider(3, 1))
    other = Invocation(SERVICE, "SayGoodbye")
    lb = RoundRobinLoadBalance()
    first = [lb.select(candidates, INV, now_ms=NOW) for _ in range(3)]
    # another method has its own rotation, starting from the beginning
    assert names([lb.select(candidates, other, now_ms=NOW) for _ in range(3)], candidates) == (
        "AAB"
    )
    # an equal but new tuple (a registry notification) continues the same rotation
    again = tuple(URL.parse(str(u)) for u in candidates)
    rest = [lb.select(again, INV, now_ms=NOW) for _ in range(4)]
    assert names(first, candidates) + names(rest, again) == "AABACAA"


def test_round_robin_zero_weight_left_out() -> None:
    candidates = (provider(1, 0), provider(2, 2), provider(3, 1))
    lb = RoundRobinLoadBalance()
    picks = [lb.select(candidates, INV, now_ms=NOW) for _ in range(6)]
    assert names(picks, candidates) == "BCBBCB"


def test_round_robin_recycles_vanished_providers_after_60s() -> None:
    a, b, c = provider(1), provider(2), provider(3)
    lb = RoundRobinLoadBalance()
    service_key = a.service_key
    ab = (a, b)
    lb.select((a, b, c), INV, now_ms=NOW)
    lb.select(ab, INV, now_ms=NOW + 1_000)
    tracked = {identity_string(u) for u in (a, b, c)}
    lb.select(ab, INV, now_ms=NOW + 60_000)
    assert lb.tracked(service_key, "SayHello", now_ms=NOW + 60_000) == tracked
    lb.select(ab, INV, now_ms=NOW + 60_001)
    assert lb.tracked(service_key, "SayHello", now_ms=NOW + 60_001) == tracked - {
        identity_string(c)
    }


class DubboRoundRobin:
    """A direct transcription of the semantics of Dubbo's RoundRobinLoadBalance.doSelect
    (O(n) per call), used as the model the heap-based implementation must agree with."""

    def __init__(self) -> None:
        self.state: dict[str, list[int]] = {}  # identity -> [weight, current, last_update]

    def select(self, candidates: tuple[URL, ...], now: int) -> URL:
        if len(candidates) == 1:
            return candidates[0]
        total = 0
        best: tuple[URL, list[int]] | None = None
        for url in candidates:
            weight = effective_weight(url, "SayHello", now)
            entry = self.state.setdefault(identity_string(url), [weight, 0, now])
            if entry[0] != weight:
                entry[0], entry[1] = weight, 0
            entry[1] += weight
            entry[2] = now
            if best is None or entry[1] > best[1][1]:
                best = (url, entry)
            total += weight
        if len(candidates) != len(self.state):
            self.state = {k: v for k, v in self.state.items() if now - v[2] <= 60_000}
        assert best is not None
        best[1][1] -= total
        return best[0]


@settings(max_examples=150, deadline=None)
@given(
    weights=st.lists(st.integers(1, 9), min_size=6, max_size=6),
    starts=st.lists(st.sampled_from([None, 0, 30_000, 500_000]), min_size=6, max_size=6),
    steps=st.lists(
        st.tuples(
            st.sets(st.integers(0, 5), min_size=1),  # which providers are candidates
            st.integers(0, 40_000),  # ms elapsed before this call
            st.booleans(),  # reuse the previous tuple object when the set is unchanged
        ),
        min_size=1,
        max_size=40,
    ),
)
def test_round_robin_agrees_with_dubbo_model(
    weights: list[int], starts: list[int | None], steps: list[tuple[set[int], int, bool]]
) -> None:
    pool = []
    for i, (w, start) in enumerate(zip(weights, starts, strict=True)):
        url = provider(i + 1, w, warmup=100_000)
        pool.append(url if start is None else url.with_parameters(timestamp=NOW + start))
    lb, model = RoundRobinLoadBalance(), DubboRoundRobin()
    now = NOW
    previous: tuple[URL, ...] = ()
    for members, elapsed, reuse in steps:
        now += elapsed
        wanted = tuple(pool[i] for i in sorted(members))
        candidates = previous if reuse and previous == wanted else wanted
        for _ in range(3):
            assert lb.select(candidates, INV, now_ms=now) == model.select(candidates, now)
        previous = candidates


# ---------------------------------------------------------------------- least active


def test_least_active_picks_the_least_active() -> None:
    stats = CallStats()
    a, b, c = provider(1), provider(2), provider(3)
    for _ in range(2):
        stats.begin(a.address, KEY)
    stats.begin(c.address, KEY)
    lb = LeastActiveLoadBalance(stats, random.Random(1))
    assert set(sample(lb, (a, b, c), 200, now_ms=NOW)) == {b}
    for _ in range(2):
        stats.begin(b.address, KEY)
    assert set(sample(lb, (a, b, c), 200, now_ms=NOW)) == {c}


def test_least_active_ties_split_by_weight() -> None:
    stats = CallStats()
    a, b, c = provider(1, 1), provider(2, 3), provider(3, 50)
    stats.begin(c.address, KEY)
    lb = LeastActiveLoadBalance(stats, random.Random(2))
    n = 8_000
    counts = sample(lb, (a, b, c), n, now_ms=NOW)
    assert c not in counts
    assert chi_square(counts, {a: n / 4, b: 3 * n / 4}) < CHI2_999[1]


def test_least_active_follows_calls_ending() -> None:
    stats = CallStats()
    a, b = provider(1), provider(2)
    token = stats.begin(a.address, KEY)
    lb = LeastActiveLoadBalance(stats, random.Random(3))
    assert lb.select((a, b), INV, now_ms=NOW) == b
    stats.end(token, ok=True)
    stats.begin(b.address, KEY)
    assert lb.select((a, b), INV, now_ms=NOW) == a


# ---------------------------------------------------------------------- shortest response


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def record(stats: CallStats, url: URL, elapsed_ms: float, calls: int = 3, ok: bool = True) -> None:
    for _ in range(calls):
        stats.end(stats.begin(url.address, KEY), ok, elapsed_ms=elapsed_ms)


def test_shortest_response_prefers_the_faster() -> None:
    stats = CallStats(clock=FakeClock())
    slow, fast = provider(1), provider(2)
    record(stats, slow, 50)
    record(stats, fast, 10)
    lb = ShortestResponseLoadBalance(stats, random.Random(4))
    assert set(sample(lb, (slow, fast), 100, now_ms=NOW)) == {fast}
    # 10 ms x (5 in flight + 1) = 60 > 50 ms x 1: now the slow one is expected to answer first
    for _ in range(5):
        stats.begin(fast.address, KEY)
    assert set(sample(lb, (slow, fast), 100, now_ms=NOW)) == {slow}


def test_shortest_response_ignores_failures_and_resets_with_the_window() -> None:
    clock = FakeClock()
    stats = CallStats(clock=clock, slide_period=30)
    slow, fast = provider(1), provider(2)
    record(stats, slow, 50)
    record(stats, fast, 10)
    record(stats, fast, 500, ok=False)  # failed calls don't count towards the average
    assert stats.average_elapsed(fast.address, KEY) == 10
    lb = ShortestResponseLoadBalance(stats, random.Random(8))
    assert set(sample(lb, (slow, fast), 50, now_ms=NOW)) == {fast}
    clock.now += 31  # next window: nobody has an average, all tie and share the calls
    assert stats.average_elapsed(slow.address, KEY) == 0
    assert set(sample(lb, (slow, fast), 200, now_ms=NOW)) == {slow, fast}


def test_statistics_of_providers_gone_for_good_are_dropped() -> None:
    # A churning fleet (pods replaced under new addresses) must not leave a cell per address
    # ever called: cells nothing called, picked or indexed for idle_drop seconds go.
    clock = FakeClock()
    stats = CallStats(clock=clock, slide_period=30, idle_drop=600)
    gone, busy, indexed = provider(1), provider(2), provider(3)
    for url in (gone, busy, indexed):
        record(stats, url, 10)
    lb = LeastActiveLoadBalance(stats, random.Random(1))
    lb.select((busy, indexed), INV, now_ms=NOW)  # indexes (and so watches) both cells
    for _ in range(21):  # 630 s, with calls to busy only
        clock.now += 30
        record(stats, busy, 10, calls=1)
    assert {v.address for v in stats.views()} == {busy.address, indexed.address}
    assert stats.view(busy.address, KEY).total == 3 + 21
    # Called again, the provider starts afresh.
    record(stats, gone, 10, calls=1)
    assert stats.view(gone.address, KEY).total == 1


# ---------------------------------------------------------------------- consistent hash


def invocation(*args: object) -> Invocation:
    return Invocation(SERVICE, "SayHello", explicit_arguments=args)


def test_consistent_hash_same_argument_same_provider() -> None:
    candidates = tuple(provider(i) for i in range(1, 9))
    lb = ConsistentHashLoadBalance()
    for key in ("ada", "grace", "linus", 42, True):
        chosen = lb.select(candidates, invocation(key, "x"), now_ms=NOW)
        assert all(
            lb.select(candidates, invocation(key, other), now_ms=NOW) == chosen
            for other in ("y", "z", 7)
        )
        # a fresh balancer with an equal, new tuple agrees (nothing depends on object identity)
        again = tuple(URL.parse(str(u)) for u in candidates)
        assert ConsistentHashLoadBalance().select(again, invocation(key), now_ms=NOW) == chosen
    spread = {lb.select(candidates, invocation(f"user-{i}"), now_ms=NOW) for i in range(200)}
    assert spread == set(candidates)


def test_consistent_hash_arguments_parameter() -> None:
    candidates = tuple(provider(i).with_parameter_map({"hash.arguments": "1"}) for i in range(1, 9))
    lb = ConsistentHashLoadBalance()
    by_second = {lb.select(candidates, invocation(f"a{i}", "same"), now_ms=NOW) for i in range(50)}
    assert len(by_second) == 1
    picks = {lb.select(candidates, invocation("same", f"b{i}"), now_ms=NOW) for i in range(50)}
    assert len(picks) > 1


def test_consistent_hash_adding_a_provider_moves_about_one_nth() -> None:
    # An ideal consistent hash moves 1/(N+1) of the keys when an (N+1)th provider joins, all of
    # them to the newcomer. With 160 virtual nodes the newcomer's share of the ring has a
    # relative spread of about 1/sqrt(160) = 8 %, so 1.5x the ideal share (> 6 sigma) is a
    # bound a correct ring cannot reach; no key may move between two old providers.
    n = 10
    before = tuple(provider(i) for i in range(1, n + 1))
    after = (*before, provider(n + 1))
    lb = ConsistentHashLoadBalance()
    keys = [f"key-{i}" for i in range(10_000)]
    moved = 0
    for key in keys:
        old = lb.select(before, invocation(key), now_ms=NOW)
        new = lb.select(after, invocation(key), now_ms=NOW)
        if old != new:
            moved += 1
            assert new == after[-1]
    assert 0 < moved <= 1.5 * len(keys) / (n + 1)


def test_consistent_hash_points_are_dubbo_little_endian_md5() -> None:
    # MD5("") = d41d8cd98f00b204e9800998ecf8427e; Dubbo reads bytes 0..3 little-endian:
    # 0xd98c1dd4. A call with no hashed argument has the key "".
    assert hashlib.md5(b"").hexdigest().startswith("d41d8cd9")
    a, b = provider(1), provider(2)
    at = HashRing((0xD98C1DD4, 0xD98C1DD5), (0, 1), (a, b), (0,))
    assert at.locate(at.key_of(())) == a  # a point equal to the hash owns it (ceiling)
    after = HashRing((0xD98C1DD3, 0xD98C1DD5), (0, 1), (a, b), (0,))
    assert after.locate("") == b
    wrap = HashRing((1, 2), (0, 1), (a, b), (0,))
    assert wrap.locate("") == a  # past the last point wraps to the first


def test_consistent_hash_ring_is_dubbos_ketama_ring() -> None:
    # Every address contributes MD5(address + i) for i < nodes/4, four little-endian points
    # each; on a shared point the later provider wins (here the same address twice).
    providers = [provider(i) for i in range(1, 30)] + [provider(3, weight=7)]
    expected: dict[int, int] = {}
    for index, url in enumerate(providers):
        for i in range(160 // 4):
            digest = hashlib.md5(f"{url.address}{i}".encode()).digest()
            for h in range(4):
                expected[int.from_bytes(digest[4 * h : 4 * h + 4], "little")] = index
    ring = HashRing.build(providers, 160, (0,))
    assert list(ring.points) == sorted(expected)
    assert list(ring.owner_indices) == [expected[p] for p in sorted(expected)]
    assert providers.index(provider(3)) not in set(ring.owner_indices)  # lost every point


def test_consistent_hash_calls_arriving_together_build_the_ring_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A ring of 2 000 providers is tens of MB while it is built: the first calls after the
    # candidates change wait for one build instead of each making a copy.
    builds: list[int] = []
    real_build = HashRing.build.__func__  # type: ignore[attr-defined]

    def counted(cls: type[HashRing], *args: object) -> HashRing:
        builds.append(1)
        return real_build(cls, *args)  # type: ignore[no-any-return]

    monkeypatch.setattr(HashRing, "build", classmethod(counted))
    candidates = tuple(provider(i) for i in range(1, 200))
    lb = ConsistentHashLoadBalance()
    start = threading.Barrier(8)
    chosen: list[URL] = []

    def call() -> None:
        start.wait()
        chosen.append(lb.select(candidates, INV))

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1 and len(set(chosen)) == 1 and len(chosen) == 8


def test_consistent_hash_ring_reused_for_equal_candidates() -> None:
    candidates = tuple(provider(i) for i in range(1, 5))
    lb = ConsistentHashLoadBalance()
    ring = lb.ring(candidates, "SayHello")
    lb.select(candidates, INV)
    assert lb.ring(candidates, "SayHello") is lb.ring(candidates, "SayHello")
    assert lb.ring(tuple(URL.parse(str(u)) for u in candidates), "SayHello") is lb.ring(
        candidates, "SayHello"
    )
    assert len(ring.points) == 4 * 160


def test_consistent_hash_leaves_out_weight_zero() -> None:
    candidates = (provider(1, 0), provider(2), provider(3))
    lb = ConsistentHashLoadBalance()
    picks = {lb.select(candidates, invocation(f"k{i}"), now_ms=NOW) for i in range(500)}
    assert picks == {candidates[1], candidates[2]}


# ---------------------------------------------------------------------- properties


def all_balancers(stats: CallStats, seed: int) -> list[object]:
    return [
        RandomLoadBalance(random.Random(seed)),
        RoundRobinLoadBalance(),
        LeastActiveLoadBalance(stats, random.Random(seed)),
        ShortestResponseLoadBalance(stats, random.Random(seed)),
        ConsistentHashLoadBalance(),
    ]


@settings(max_examples=80, deadline=None)
@given(
    weights=st.lists(st.integers(0, 5), min_size=1, max_size=8),
    actives=st.lists(st.integers(0, 3), min_size=8, max_size=8),
    uptimes=st.lists(st.one_of(st.none(), st.integers(-100, 700_000)), min_size=8, max_size=8),
    seed=st.integers(0, 2**16),
    key=st.text(max_size=5),
)
def test_select_returns_a_candidate_and_never_a_drained_one(
    weights: list[int],
    actives: list[int],
    uptimes: list[int | None],
    seed: int,
    key: str,
) -> None:
    candidates = tuple(
        provider(i + 1, w) if up is None else provider(i + 1, w, timestamp=NOW - up)
        for i, (w, up) in enumerate(zip(weights, uptimes, strict=False))
    )
    stats = CallStats(clock=FakeClock())
    for url, active in zip(candidates, actives, strict=False):
        for _ in range(active):
            stats.begin(url.address, KEY)
    drained = {u for u, w in zip(candidates, weights, strict=False) if w == 0}
    someone_has_weight = len(drained) < len(candidates)
    for lb in all_balancers(stats, seed):
        for _ in range(5):
            chosen = lb.select(candidates, invocation(key), now_ms=NOW)  # type: ignore[attr-defined]
            assert chosen in candidates
            if someone_has_weight:
                assert chosen not in drained


def test_identity_cache_matches_the_tuple_object_and_its_validity() -> None:
    cache: IdentityCache[str] = IdentityCache(max_entries=2)
    first = (provider(1), provider(2))
    equal = tuple(URL.parse(str(u)) for u in first)
    cache.store(first, "SayHello", "table", NOW, NOW + 100)
    assert cache.lookup(first, "SayHello", NOW + 99) == "table"
    assert cache.lookup(first, "SayHello", NOW + 100) is None  # weights may have changed
    assert cache.lookup(first, "SayHello", NOW - 1) is None  # clock went back
    assert cache.lookup(first, "SayGoodbye", NOW) is None
    assert cache.lookup(equal, "SayHello", NOW) is None  # equal is not the same object
    cache.store(equal, "SayHello", "other", NOW, float("inf"))
    cache.store((provider(3),), "SayHello", "third", NOW, float("inf"))
    assert cache.lookup(first, "SayHello", NOW) is None  # oldest entry evicted
    assert cache.lookup(equal, "SayHello", NOW) == "other"


def test_registry_names() -> None:
    for name in LOADBALANCE_NAMES:
        assert get_loadbalance(name).name == name
    assert isinstance(get_loadbalance(" RoundRobin "), RoundRobinLoadBalance)
    with pytest.raises(ValueError, match="valid names: random, roundrobin, leastactive"):
        get_loadbalance("fastest")


def test_empty_candidates_rejected() -> None:
    with pytest.raises(ValueError, match="no candidates"):
        RandomLoadBalance().select((), INV)


def test_single_candidate_returned() -> None:
    only = (provider(1, 0),)
    for lb in all_balancers(CallStats(), 1):
        assert lb.select(only, INV) == only[0]  # type: ignore[attr-defined]


# ---------------------------------------------------------------------- statistics


def test_stats_count_in_flight_and_failures() -> None:
    stats = CallStats()
    with stats.track("10.0.0.1:50051", KEY):
        assert stats.active("10.0.0.1:50051", KEY) == 1
    with pytest.raises(RuntimeError), stats.track("10.0.0.1:50051", KEY):
        raise RuntimeError("boom")
    view = stats.view("10.0.0.1:50051", KEY)
    assert (view.active, view.total, view.failed, view.succeeded) == (0, 2, 1, 1)
    assert stats.active("10.0.0.9:1", KEY) == 0
    assert stats.views() == (view,)


def test_stats_window_average_with_clock() -> None:
    clock = FakeClock()
    stats = CallStats(clock=clock, slide_period=30)
    token = stats.begin("h:1", KEY)
    clock.now += 0.020
    stats.end(token, ok=True)
    token = stats.begin("h:1", KEY)
    clock.now += 0.040
    stats.end(token, ok=True)
    assert stats.average_elapsed("h:1", KEY) == pytest.approx(30.0)
    clock.now += 30
    assert stats.average_elapsed("h:1", KEY) == 0.0
    record(stats, URL.parse("tri://h:1"), 12, calls=2)
    assert stats.average_elapsed("h:1", KEY) == 12
    assert stats.view("h:1", KEY).total == 4


def test_stats_forget_is_seen_by_balancers() -> None:
    stats = CallStats()
    a, b = provider(1), provider(2)
    stats.begin(a.address, KEY)
    lb = LeastActiveLoadBalance(stats, random.Random(0))
    candidates = (a, b)
    assert lb.select(candidates, INV, now_ms=NOW) == b
    stats.forget(a.address)
    stats.begin(b.address, KEY)
    assert lb.select(candidates, INV, now_ms=NOW) == a


def test_stats_are_thread_safe() -> None:
    stats = CallStats()

    def work() -> None:
        for _ in range(2_000):
            stats.end(stats.begin("h:1", KEY), ok=True)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    view = stats.view("h:1", KEY)
    assert (view.active, view.total) == (0, 8_000)
