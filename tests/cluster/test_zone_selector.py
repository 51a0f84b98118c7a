"""The zone-aware choice of a registry (Dubbo's ZoneAwareClusterInvoker order): preferred, the
call's zone, the application's zone, a weighted pick among the available, the first when none
is; registry_zone_force refuses to leave the zone; exclusion walks on to the next one."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dubbo_py.cluster.zone import ZoneForcedError, ZoneSelector
from tests.support.chi_square import CHI2_999, chi_square


@dataclass
class Member:
    name: str
    zone: str | None = None
    weight: int = 100
    preferred: bool = False
    available: bool = True


def test_preferred_wins_while_available() -> None:
    a, b = Member("a", "A"), Member("b", "B", preferred=True)
    selector = ZoneSelector([a, b], zone="A")
    assert selector.pick() == 1
    assert selector.pick("A") == 1
    b.available = False
    assert selector.pick() == 0


def test_call_zone_then_application_zone() -> None:
    members = [Member("a", "A"), Member("b", "B"), Member("c", "C")]
    selector = ZoneSelector(members, zone="B")
    assert selector.pick() == 1
    assert selector.pick("C") == 2
    members[2].available = False
    # The call's zone has nothing available: not forced, so the weighted pick among the rest.
    assert selector.pick("C") in (0, 1)


def test_force_refuses_to_leave_the_zone() -> None:
    members = [Member("a", "A"), Member("b", "B", available=False)]
    selector = ZoneSelector(members)
    with pytest.raises(ZoneForcedError, match="'B'"):
        selector.pick("B", force=True)
    with pytest.raises(ZoneForcedError, match="'Z'"):
        selector.pick("Z", force=True)
    assert selector.pick("A", force=True) == 0
    # Once the zone's registry was tried, a forced call has nowhere else to go.
    assert selector.pick("A", force=True, exclude=[0]) is None


def test_weighted_pick_follows_weights() -> None:
    members = [Member("a", weight=100), Member("b", weight=300), Member("c", weight=0)]
    selector = ZoneSelector(members, draw=random.Random(7).random)
    counts = Counter(selector.pick() for _ in range(8000))
    assert counts[2] == 0
    stat = chi_square(counts, {0: 2000, 1: 6000})
    assert stat < CHI2_999[1], counts


def test_unavailable_are_skipped_and_the_first_is_the_last_resort() -> None:
    members = [Member("a", available=False), Member("b"), Member("c", available=False)]
    selector = ZoneSelector(members)
    assert {selector.pick() for _ in range(50)} == {1}
    members[1].available = False
    assert selector.pick() == 0  # nothing available: the first, whose stack says why
    assert selector.pick(exclude=[0]) == 1
    assert selector.pick(exclude=[0, 1, 2]) is None


def test_exclusion_walks_in_the_same_order() -> None:
    members = [Member("a", "A"), Member("b", "B", preferred=True), Member("c", "C")]
    selector = ZoneSelector(members, zone="C")
    assert selector.pick() == 1
    assert selector.pick(exclude=[1]) == 2
    assert selector.pick(exclude=[1, 2]) == 0


def test_all_weights_zero_split_evenly() -> None:
    members = [Member("a", weight=0), Member("b", weight=0)]
    selector = ZoneSelector(members, draw=random.Random(3).random)
    counts = Counter(selector.pick() for _ in range(2000))
    assert chi_square(counts, {0: 1000, 1: 1000}) < CHI2_999[1]


@given(
    st.lists(
        st.tuples(
            st.sampled_from([None, "A", "B"]),
            st.integers(0, 300),
            st.booleans(),
            st.booleans(),
        ),
        min_size=1,
        max_size=5,
    ),
    st.sampled_from([None, "A", "B", "C"]),
    st.floats(0.0, 0.999),
)
def test_the_fast_default_pick_is_choose(
    specs: list[tuple[str | None, int, bool, bool]], zone: str | None, draw: float
) -> None:
    members = [
        Member(f"m{i}", z, weight, preferred, available)
        for i, (z, weight, preferred, available) in enumerate(specs)
    ]
    selector = ZoneSelector(members, zone=zone, draw=lambda: draw)
    assert selector.default() == selector.choose()
