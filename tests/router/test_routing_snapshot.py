"""The provider snapshot: masks to providers, and the per-mask memory of selections."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dubbo_py.router.snapshot import (
    SELECT_CACHE_SIZE,
    Snapshot,
    iter_bits,
    mask_from_flags,
    mask_of,
)
from dubbo_py.url import URL


def providers(n: int) -> tuple[URL, ...]:
    return tuple(URL("tri", f"10.0.{i // 256}.{i % 256}", 50051, "demo.Greeter") for i in range(n))


@st.composite
def snapshot_and_mask(draw: st.DrawFn) -> tuple[Snapshot, int]:
    n = draw(st.integers(0, 300))
    mask = draw(st.integers(0, (1 << n) - 1))
    return Snapshot(providers(n)), mask


@given(st.sets(st.integers(0, 5_000), max_size=200))
def test_iter_bits_lists_exactly_the_indices_of_mask_of(indices: set[int]) -> None:
    assert list(iter_bits(mask_of(indices))) == sorted(indices)


@given(snapshot_and_mask())
def test_select_returns_the_masked_providers_in_snapshot_order(
    case: tuple[Snapshot, int],
) -> None:
    snapshot, mask = case
    expected = tuple(p for i, p in enumerate(snapshot.providers) if mask >> i & 1)
    assert snapshot.select(mask) == expected


def test_select_of_everything_is_the_provider_tuple_itself() -> None:
    snapshot = Snapshot(providers(5))
    assert snapshot.select(snapshot.all) is snapshot.providers
    assert snapshot.select(0) == ()


def test_a_repeated_mask_gives_the_same_tuple_object() -> None:
    # Load balancers cache their precomputation per candidate tuple (by identity), so a call
    # that routes to the same providers as the last one must hand them the same tuple.
    snapshot = Snapshot(providers(2_000))
    mask = mask_of(range(0, 2_000, 3))
    first = snapshot.select(mask)
    assert snapshot.select(int(mask)) is first
    assert len(first) == 667


def test_the_selection_memory_is_bounded_and_forgets_the_oldest() -> None:
    snapshot = Snapshot(providers(SELECT_CACHE_SIZE + 2))
    first = snapshot.select(1)
    for i in range(1, SELECT_CACHE_SIZE + 1):
        snapshot.select(1 << i)
    again = snapshot.select(1)
    assert again == first
    assert again is not first


def test_each_snapshot_remembers_its_own_selections() -> None:
    old, new = Snapshot(providers(3)), Snapshot(providers(4)[1:])
    assert old.select(0b001) == providers(3)[:1]
    assert new.select(0b001) == providers(4)[1:2]


@pytest.mark.parametrize("mask", [-1, 1 << 3])
def test_a_mask_outside_the_snapshot_is_refused(mask: int) -> None:
    with pytest.raises(ValueError, match="mask"):
        Snapshot(providers(3)).select(mask)


def test_iter_bits_refuses_a_negative_mask() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        list(iter_bits(-4))


@given(st.lists(st.booleans(), max_size=400))
def test_mask_from_flags_sets_the_bits_whose_flag_is_one(flags: list[bool]) -> None:
    mask = mask_from_flags(bytes(flags))
    assert list(iter_bits(mask)) == [i for i, flag in enumerate(flags) if flag]


def test_mask_where_keeps_the_providers_the_predicate_accepts() -> None:
    snapshot = Snapshot(providers(50))
    assert snapshot.mask_where(lambda p: p.host.endswith("7")) == mask_of([7, 17, 27, 37, 47])
