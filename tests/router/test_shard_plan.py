"""Split plans: which old shard each new shard takes its keys from, and refusals with reasons."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dubbo_py.router.shard.plan import plan_split
from dubbo_py.router.shard.schemes import LayoutError, Scheme, make_layout


def test_elasticsearch_split_children_are_contiguous() -> None:
    # IndexMetadata.selectSplitShard: new shard j comes from j / routing_factor.
    plan = plan_split("elasticsearch", 2, 4)
    assert plan.ok
    assert plan.sources == (0, 0, 1, 1)
    assert plan.routing_num_shards == 1024  # a new 2-shard index's default, kept by the split
    assert plan.children(1) == (2, 3)


def test_elasticsearch_split_needs_a_multiple_of_the_source() -> None:
    plan = plan_split("elasticsearch", 2, 3)
    assert not plan.ok
    assert plan.refusal == "the number of source shards [2] must be a factor of [3]"
    assert plan.sources == ()


def test_elasticsearch_split_needs_a_factor_of_routing_num_shards() -> None:
    # A 2-shard index has 1024 routing shards: it can double, never triple.
    plan = plan_split("elasticsearch", 2, 6)
    assert not plan.ok
    assert plan.refusal is not None and "routing shards [1024]" in plan.refusal
    # A 3-shard index has 768 = 3 * 2^8: it can double to 6.
    assert plan_split("elasticsearch", 3, 6).sources == (0, 0, 1, 1, 2, 2)


def test_elasticsearch_number_of_routing_shards_30_example() -> None:
    # The index-modules docs: 5 shards with number_of_routing_shards 30 split 5 -> 10 -> 30,
    # 5 -> 15 -> 30 or 5 -> 30, and nothing else.
    assert plan_split("elasticsearch", 5, 10, 30).ok
    assert plan_split("elasticsearch", 10, 30, 30).ok
    assert plan_split("elasticsearch", 5, 15, 30).ok
    assert plan_split("elasticsearch", 5, 30, 30).sources == tuple(j // 6 for j in range(30))
    assert not plan_split("elasticsearch", 5, 20, 30).ok


def test_elasticsearch_one_shard_index_splits_into_anything() -> None:
    plan = plan_split("elasticsearch", 1, 3)
    assert plan.ok
    assert plan.sources == (0, 0, 0)
    assert plan.routing_num_shards == 768  # computed anew for the 3-shard target


def test_elasticsearch_modulo_split_keeps_old_shard_numbers() -> None:
    # IndexReshardingMetadata: "old:2 new:6 implies that shard 1 is the source shard for shards
    # 3 and 5" (1-based there); 0-based, old shard i keeps number i and feeds i + 2, i + 4.
    plan = plan_split("elasticsearch-modulo", 2, 6)
    assert plan.sources == (0, 1, 0, 1, 0, 1)
    assert plan.children(0) == (0, 2, 4)
    assert not plan_split("elasticsearch-modulo", 2, 5).ok


def test_solr_split_halves_ranges() -> None:
    plan = plan_split("solr", 2, 8)
    assert plan.sources == (0, 0, 0, 0, 1, 1, 1, 1)
    assert [str(r) for r in plan.old_ranges] == ["80000000-ffffffff", "0-7fffffff"]
    assert str(plan.new_ranges[0]) == "80000000-9fffffff"
    for j, source in enumerate(plan.sources):
        old = plan.old_ranges[source]
        assert old.min <= plan.new_ranges[j].min <= plan.new_ranges[j].max <= old.max


def test_solr_split_of_a_three_shard_collection() -> None:
    plan = plan_split("solr", 3, 6)
    assert plan.sources == (0, 0, 1, 1, 2, 2)
    assert plan.initial_shards == 3
    assert plan.rule_fields(during=True) == {
        "scheme": "solr",
        "shards": 6,
        "split_from": 3,
        "initial_shards": 3,
    }


def test_solr_refuses_what_halving_cannot_reach() -> None:
    plan = plan_split("solr", 2, 6)
    assert not plan.ok
    assert plan.refusal is not None and "halves" in plan.refusal


@pytest.mark.parametrize("scheme", list(Scheme))
def test_merging_is_not_a_split(scheme: Scheme) -> None:
    for to in (1, 2, 4):
        plan = plan_split(scheme, 4, to)
        assert not plan.ok
        assert plan.refusal is not None and "not a split" in plan.refusal


def test_invalid_layouts_raise() -> None:
    with pytest.raises(LayoutError) as info:
        plan_split("elasticsearch", 0, 2)
    assert info.value.field == "shards"
    with pytest.raises(LayoutError) as info:
        plan_split("elasticsearch", 3, 6, routing_num_shards=8)
    assert info.value.field == "routing_num_shards"
    with pytest.raises(LayoutError):
        plan_split("nope", 1, 2)
    with pytest.raises(LayoutError):
        plan_split("solr", 2, 0)


def test_rule_fields_keep_routing_num_shards_across_the_split() -> None:
    plan = plan_split("elasticsearch", 3, 6)
    assert plan.rule_fields(during=True) == {
        "scheme": "elasticsearch",
        "shards": 6,
        "split_from": 3,
        "routing_num_shards": 768,
    }
    assert plan.rule_fields(during=False) == {
        "scheme": "elasticsearch",
        "shards": 6,
        "routing_num_shards": 768,
    }
    assert plan_split("solr", 2, 3).rule_fields(during=True) == {}


# ---------------------------------------------------------------- properties

keys = st.text(max_size=24)


@st.composite
def valid_splits(draw: st.DrawFn) -> tuple[Scheme, int, int, int | None, int | None]:
    scheme = draw(st.sampled_from(list(Scheme)))
    if scheme is Scheme.SOLR:
        initial = draw(st.integers(min_value=1, max_value=6))
        old = initial << draw(st.integers(min_value=0, max_value=2))
        new = old << draw(st.integers(min_value=1, max_value=3))
        return scheme, old, new, None, initial
    old = draw(st.integers(min_value=1, max_value=8))
    factor = draw(st.integers(min_value=2, max_value=6))
    new = old * factor
    routing = None
    if scheme is Scheme.ELASTICSEARCH and old > 1:
        routing = new * draw(st.integers(min_value=1, max_value=8))
    return scheme, old, new, routing, None


@settings(deadline=None)
@given(valid_splits(), st.lists(keys, min_size=1, max_size=8))
def test_split_never_moves_a_key_out_of_its_source_shards_children(
    split: tuple[Scheme, int, int, int | None, int | None], sample: list[str]
) -> None:
    scheme, old, new, routing, initial = split
    plan = plan_split(scheme, old, new, routing, initial)
    assert plan.ok, plan.refusal
    old_layout = make_layout(
        scheme, old, routing_num_shards=routing if old > 1 else None, initial_shards=initial
    )
    new_layout = make_layout(
        scheme,
        new,
        routing_num_shards=plan.routing_num_shards if scheme is Scheme.ELASTICSEARCH else None,
        initial_shards=plan.initial_shards,
    )
    for key in sample:
        if scheme is Scheme.SOLR:
            key = key.rstrip("!")
        (before,) = old_layout.locate(key).shards
        (after,) = new_layout.locate(key).shards
        assert plan.sources[after] == before
        assert after in plan.children(before)


@settings(deadline=None)
@given(valid_splits(), st.text(alphabet="abc/0123456789", min_size=1, max_size=6))
def test_solr_route_prefix_shards_descend_from_the_old_ones(
    split: tuple[Scheme, int, int, int | None, int | None], tenant: str
) -> None:
    scheme, old, new, _routing, initial = split
    if scheme is not Scheme.SOLR:
        return
    plan = plan_split(scheme, old, new, None, initial)
    old_layout = make_layout(scheme, old, initial_shards=initial)
    new_layout = make_layout(scheme, new, initial_shards=initial)
    before = set(old_layout.locate(tenant + "!").shards)
    after = new_layout.locate(tenant + "!").shards
    assert {plan.sources[j] for j in after} == before


@pytest.mark.parametrize(("old", "mid", "new"), [(2, 4, 8), (2, 10, 20), (3, 12, 36), (1, 5, 15)])
def test_elasticsearch_generate_shard_id_split(old: int, mid: int, new: int) -> None:
    # IndexRoutingTests.testGenerateShardIdSplit: with routing_num_shards = the final count,
    # every intermediate split maps back to the original shard.
    first = make_layout("elasticsearch", old, routing_num_shards=new)
    for target in (mid, new):
        plan = plan_split("elasticsearch", old, target, new if old > 1 else None)
        later = make_layout("elasticsearch", target, routing_num_shards=new)
        for i in range(200):
            key = f"term-{i}"
            assert plan.sources[later.locate(key).shards[0]] == first.locate(key).shards[0]
