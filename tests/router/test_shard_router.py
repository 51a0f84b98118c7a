"""The shard router in the chain: bind-time shard masks, per-call key lookup, fan-out, missing
keys, the live split, and the rule parser's errors."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dubbo_py.errors import NoProviderError, RuleError
from dubbo_py.invocation import Invocation
from dubbo_py.router.chain import RouterChain
from dubbo_py.router.shard.plan import plan_split
from dubbo_py.router.shard.router import BoundShardRouter, ShardRouter
from dubbo_py.router.shard.rule import KeySource, parse_key_source, parse_shard_rule
from dubbo_py.router.shard.schemes import make_layout
from dubbo_py.router.snapshot import Snapshot
from dubbo_py.url import URL

SOURCE = "/dubbo/config/dubbo/demo.Greeter:1.0.0:.shard-router"
CONSUMER = URL.parse("consumer://10.0.0.1/demo.Greeter?side=consumer")


def provider(n: int, shard: str | int | None, shards: int | None = None) -> URL:
    params = {"interface": "demo.Greeter", "version": "1.0.0"}
    if shard is not None:
        params["shard"] = str(shard)
    if shards is not None:
        params["shards"] = str(shards)
    return URL("tri", f"10.0.1.{n}", 50051, "demo.Greeter", parameters=params)


def call(tenant: str | None = None, *arguments: object, doc: str | None = None) -> Invocation:
    attachments = {}
    if tenant is not None:
        attachments["tenant"] = tenant
    if doc is not None:
        attachments["doc"] = doc
    return Invocation(
        "demo.Greeter", "SayHello", attachments=attachments, explicit_arguments=tuple(arguments)
    )


def chain_for(text: str, providers: Sequence[URL]) -> tuple[RouterChain, Snapshot]:
    router = ShardRouter(parse_shard_rule(text, SOURCE), SOURCE)
    return RouterChain([router]), Snapshot(tuple(providers))


def shards_of(urls: Sequence[URL]) -> set[str]:
    return {u.parameters.get("shard", "") for u in urls}


ES4 = """
scheme: elasticsearch
shards: 4
key: attachments[tenant]
"""


def test_a_key_reaches_only_its_shard() -> None:
    providers = [provider(i, i % 4) for i in range(8)]
    chain, snapshot = chain_for(ES4, providers)
    bound = chain.bind(snapshot, CONSUMER)
    layout = make_layout("elasticsearch", 4)
    for tenant in ("acme", "globex", "initech", "umbrella", "hooli"):
        (shard,) = layout.locate(tenant).shards
        routed = bound.route(call(tenant))
        assert len(routed) == 2
        assert shards_of(routed) == {str(shard)}


def test_router_respects_earlier_candidates() -> None:
    providers = [provider(i, i % 2) for i in range(4)]
    router = ShardRouter(parse_shard_rule(ES4.replace("4", "2"), SOURCE), SOURCE)
    bound = router.bind(Snapshot(tuple(providers)), CONSUMER)
    layout = make_layout("elasticsearch", 2)
    (shard,) = layout.locate("acme").shards
    only_first = 1 << shard  # provider index `shard` serves that shard; the other one is cut
    assert bound.route(only_first, call("acme")) == only_first
    assert bound.route(0b1111 ^ only_first, call("acme")) == 1 << (shard + 2)


def test_key_from_arguments() -> None:
    rule = ES4.replace("attachments[tenant]", "arguments[1]")
    providers = [provider(i, i) for i in range(4)]
    chain, snapshot = chain_for(rule, providers)
    bound = chain.bind(snapshot, CONSUMER)
    (shard,) = make_layout("elasticsearch", 4).locate("42").shards
    assert shards_of(bound.route(call(None, "ignored", 42))) == {str(shard)}


def test_missing_key_is_a_clear_error_when_forced() -> None:
    chain, snapshot = chain_for(ES4, [provider(i, i) for i in range(4)])
    bound = chain.bind(snapshot, CONSUMER)
    with pytest.raises(NoProviderError) as info:
        bound.route(call())
    assert info.value.router == f"shard:{SOURCE}"
    assert info.value.reason == "missing routing key attachments[tenant]"
    assert "missing routing key attachments[tenant]" in str(info.value)
    routed, steps = bound.trace(call())
    assert routed == ()
    assert steps[0].reason == "missing routing key attachments[tenant]"


def test_empty_string_key_counts_as_missing() -> None:
    chain, snapshot = chain_for(ES4, [provider(i, i) for i in range(4)])
    with pytest.raises(NoProviderError, match="missing routing key"):
        chain.bind(snapshot, CONSUMER).route(call(""))


def test_missing_key_passes_through_when_not_forced() -> None:
    providers = [provider(i, i) for i in range(4)]
    chain, snapshot = chain_for(ES4 + "force: false\n", providers)
    assert chain.bind(snapshot, CONSUMER).route(call()) == tuple(providers)


def test_disabled_rule_passes_everything() -> None:
    providers = [provider(i, i) for i in range(4)]
    chain, snapshot = chain_for(ES4 + "enabled: false\n", providers)
    assert chain.bind(snapshot, CONSUMER).route(call("acme")) == tuple(providers)


def test_a_shard_without_providers_names_the_shard() -> None:
    layout = make_layout("elasticsearch", 4)
    (shard,) = layout.locate("acme").shards
    providers = [provider(i, i) for i in range(4) if i != shard]
    chain, snapshot = chain_for(ES4, providers)
    with pytest.raises(NoProviderError) as info:
        chain.bind(snapshot, CONSUMER).route(call("acme"))
    assert (
        info.value.reason == f"routing key 'acme' -> shard {shard}: no provider serves that shard"
    )


def test_solr_route_prefix_fans_out() -> None:
    rule = "scheme: solr\nshards: 4\nkey: attachments[tenant]\n"
    providers = [provider(i, i) for i in range(4)]
    chain, snapshot = chain_for(rule, providers)
    bound = chain.bind(snapshot, CONSUMER)
    # TestHashPartitioner: "b/1!" covers shard1 and shard2, "b!" only shard1, "f1!f2!doc5" shard3
    assert shards_of(bound.route(call("b/1!"))) == {"0", "1"}
    assert shards_of(bound.route(call("b!"))) == {"0"}
    assert shards_of(bound.route(call("foo/0!"))) == {"0", "1", "2", "3"}
    assert shards_of(bound.route(call("f1!f2!doc5"))) == {"2"}


def test_elasticsearch_partitioned_key_fans_out_without_an_id() -> None:
    rule = (
        "scheme: elasticsearch-modulo\nshards: 6\npartition_size: 2\n"
        "key: attachments[tenant]\nid: attachments[doc]\n"
    )
    providers = [provider(i, i) for i in range(6)]
    chain, snapshot = chain_for(rule, providers)
    bound = chain.bind(snapshot, CONSUMER)
    # IndexRoutingTests.testPartitionedIndexBWC: routing "b" spreads over shards 5 and 0.
    assert shards_of(bound.route(call("b"))) == {"5", "0"}
    assert shards_of(bound.route(call("b", doc="b_0"))) == {"5"}
    assert shards_of(bound.route(call("b", doc="b_1"))) == {"0"}


def test_providers_without_a_valid_shard_are_left_out(caplog: pytest.LogCaptureFixture) -> None:
    providers = [
        provider(0, 0),
        provider(1, 1),
        provider(2, None),
        provider(3, "x"),
        provider(4, 9),
    ]
    rule = ES4.replace("shards: 4", "shards: 2")
    with caplog.at_level(logging.WARNING):
        chain, snapshot = chain_for(rule, providers)
        bound = chain.bind(snapshot, CONSUMER)
    assert "3 provider(s) not serving any shard" in caplog.text
    assert "10.0.1.4:50051 (shard=9, of 2)" in caplog.text
    for tenant in ("acme", "globex", "initech"):
        assert {u.host for u in bound.route(call(tenant))} <= {"10.0.1.0", "10.0.1.1"}
    # They remain reachable when a call carries no key and the rule does not force.
    chain, snapshot = chain_for(rule + "force: false\n", providers)
    assert len(chain.bind(snapshot, CONSUMER).route(call())) == 5


def test_providers_of_another_layout_are_left_out() -> None:
    providers = [provider(0, 0, shards=2), provider(1, 1, shards=2), provider(2, 0, shards=4)]
    rule = ES4.replace("shards: 4", "shards: 2")
    chain, snapshot = chain_for(rule, providers)
    routed = {
        u.host
        for t in ("a", "b", "c", "d", "e")
        for u in chain.bind(snapshot, CONSUMER).route(call(t))
    }
    assert routed <= {"10.0.1.0", "10.0.1.1"}


# ---------------------------------------------------------------- live split

SPLIT = """
scheme: elasticsearch
shards: 4
split_from: 2
routing_num_shards: 1024
key: attachments[tenant]
"""


def _key_with_new_shard(layout_shards: int, want: int, **kw: object) -> str:
    layout = make_layout("elasticsearch", layout_shards, routing_num_shards=1024)
    return next(k for k in (f"t{i}" for i in range(1000)) if layout.locate(k).shards == (want,))


def test_live_split_routes_to_the_old_shard_until_the_new_one_serves() -> None:
    # Old providers (before the split) advertise no count; one new shard-2 provider is up.
    providers = [provider(0, 0), provider(1, 1), provider(2, 2, shards=4)]
    chain, snapshot = chain_for(SPLIT, providers)
    bound = chain.bind(snapshot, CONSUMER)
    hosts = {j: {u.host for u in bound.route(call(_key_with_new_shard(4, j)))} for j in range(4)}
    assert hosts[0] == {"10.0.1.0"} and hosts[1] == {"10.0.1.0"}  # old shard 0 holds both
    assert hosts[2] == {"10.0.1.2"}  # new shard 2 is up
    assert hosts[3] == {"10.0.1.1"}  # new shard 3 is not: old shard 1 still holds its keys


def test_live_split_modulo_keeps_old_shards_serving_their_number() -> None:
    rule = "scheme: elasticsearch-modulo\nshards: 4\nsplit_from: 2\nkey: attachments[tenant]\n"
    providers = [provider(0, 0), provider(1, 1), provider(2, 3, shards=4)]
    chain, snapshot = chain_for(rule, providers)
    bound = chain.bind(snapshot, CONSUMER)
    layout = make_layout("elasticsearch-modulo", 4)
    for i in range(40):
        key = f"t{i}"
        (new,) = layout.locate(key).shards
        expected = {0: "10.0.1.0", 1: "10.0.1.1", 2: "10.0.1.0", 3: "10.0.1.2"}[new]
        assert {u.host for u in bound.route(call(key))} == {expected}


@st.composite
def split_scenarios(draw: st.DrawFn) -> tuple[str, list[URL], object]:
    scheme = draw(st.sampled_from(["elasticsearch", "elasticsearch-modulo", "solr"]))
    old = draw(st.sampled_from([1, 2, 3]))
    new = old * 2 if scheme == "solr" else old * draw(st.integers(min_value=2, max_value=3))
    lines = [
        f"scheme: {scheme}",
        f"shards: {new}",
        f"split_from: {old}",
        "key: attachments[tenant]",
    ]
    if scheme == "elasticsearch":
        lines.append(f"routing_num_shards: {new * 32}")
    if scheme == "solr":
        lines.append(f"initial_shards: {old}")
    # every old shard has a provider; any subset of the new shards has come up
    up = draw(st.lists(st.booleans(), min_size=new, max_size=new))
    providers = [provider(i, i) for i in range(old)]
    providers += [provider(old + j, j, shards=new) for j in range(new) if up[j]]
    return "\n".join(lines), providers, (scheme, old, new)


@settings(deadline=None, max_examples=60)
@given(split_scenarios(), st.lists(st.text(max_size=12), min_size=1, max_size=10))
def test_a_key_only_ever_goes_to_its_old_shard_or_its_new_one(
    scenario: tuple[str, list[URL], object], keys: list[str]
) -> None:
    text, providers, (scheme, old, new) = scenario  # type: ignore[misc]
    chain, snapshot = chain_for(text, providers)
    bound = chain.bind(snapshot, CONSUMER)
    rule = parse_shard_rule(text, SOURCE)
    plan = plan_split(
        scheme, old, new, rule.routing_num_shards if old > 1 else None, rule.initial_shards
    )
    old_owner = {f"10.0.1.{i}": i for i in range(old)}
    new_owner = {u.host: int(u.parameters["shard"]) for u in providers if "shards" in u.parameters}
    for key in keys:
        key = key.rstrip("!") or "k"
        (before,) = rule.old_layout.locate(key).shards  # type: ignore[union-attr]
        (after,) = rule.layout.locate(key).shards
        assert plan.sources[after] == before
        hosts = {u.host for u in bound.route(call(key))}
        assert hosts, key
        new_up = {h for h, s in new_owner.items() if s == after}
        if new_up:
            allowed = new_up
            if scheme == "elasticsearch-modulo" and after < old:
                allowed = new_up | {f"10.0.1.{after}"}
            assert hosts == allowed
        else:
            expected_old = (
                before if not (scheme == "elasticsearch-modulo" and after < old) else after
            )
            assert hosts == {f"10.0.1.{expected_old}"}
            assert old_owner[f"10.0.1.{expected_old}"] == before


@settings(deadline=None)
@given(
    st.sampled_from(["elasticsearch", "elasticsearch-modulo", "solr"]),
    st.integers(min_value=1, max_value=12),
    st.text(max_size=16),
)
def test_unsplit_key_reaches_exactly_one_shards_providers(
    scheme: str, shards: int, key: str
) -> None:
    key = key.rstrip("!") or "k"
    providers = [provider(i, i % shards) for i in range(shards * 2)]
    chain, snapshot = chain_for(
        f"scheme: {scheme}\nshards: {shards}\nkey: attachments[tenant]\n", providers
    )
    routed = chain.bind(snapshot, CONSUMER).route(call(key))
    assert len(shards_of(routed)) == 1
    assert len(routed) == 2


def test_bound_router_is_the_router_protocol_result() -> None:
    router = ShardRouter(parse_shard_rule(ES4, SOURCE), SOURCE)
    assert router.priority == 160
    assert router.name == f"shard:{SOURCE}"
    assert isinstance(router.bind(Snapshot(()), CONSUMER), BoundShardRouter)


# ---------------------------------------------------------------- rule parsing


def test_parse_full_rule() -> None:
    rule = parse_shard_rule(
        """
configVersion: v3.0
scheme: elasticsearch
shards: 4
routing_num_shards: 8
partition_size: 3
key: attachments[ tenant ]
id: arguments[0]
force: false
""",
        SOURCE,
    )
    assert rule.key == KeySource("attachments", name="tenant")
    assert rule.id == KeySource("arguments", index=0)
    assert rule.layout.routing_num_shards == 8
    assert rule.force is False
    assert rule.old_layout is None


def test_default_routing_num_shards_is_elasticsearchs() -> None:
    assert parse_shard_rule(ES4, SOURCE).layout.routing_num_shards == 1024


@pytest.mark.parametrize(
    ("text", "message", "line"),
    [
        ("scheme: elasticsearch\nshards: 0\nkey: attachments[t]\n", "shards: must be between 1", 2),
        ("scheme: es\nshards: 2\nkey: attachments[t]\n", "scheme: unknown scheme 'es'", 1),
        ("shards: 2\nkey: attachments[t]\n", "scheme: is required", 1),
        (
            "scheme: solr\nshards: 2\nkey: headers[t]\n",
            "key: expected attachments[name] or arguments[N]",
            3,
        ),
        (
            "scheme: solr\nshards: 2\nkey: attachments[]\n",
            "key: attachments[...] needs an attachment name",
            3,
        ),
        ("scheme: solr\nshards: 2\n", "key: is required", 1),
        ("scheme: solr\nshards: two\nkey: arguments[0]\n", "shards: must be an integer", 2),
        (
            "scheme: solr\nshards: 2\nkey: arguments[0]\nforce: yes please\n",
            "force: must be true or false",
            4,
        ),
        (
            "scheme: elasticsearch\nshards: 3\nrouting_num_shards: 8\nkey: arguments[0]\n",
            "routing_num_shards: must be a multiple of shards (3)",
            3,
        ),
        (
            "scheme: solr\nshards: 2\nrouting_num_shards: 8\nkey: arguments[0]\n",
            "routing_num_shards: applies to the elasticsearch scheme only",
            3,
        ),
        (
            "scheme: elasticsearch-modulo\nshards: 4\npartition_size: 4\nkey: arguments[0]\n",
            "partition_size: must be less than the number of routing shards (4)",
            3,
        ),
        (
            "scheme: elasticsearch\nshards: 4\nkey: arguments[0]\nid: arguments[1]\n",
            "id: applies to partitioned routing only",
            4,
        ),
        ("scheme: solr\nshards: 2\nkey: arguments[0]\nroute: x\n", "route: unknown field", 4),
        (
            "scheme: elasticsearch\nshards: 4\nsplit_from: 2\nkey: arguments[0]\n",
            "routing_num_shards: is required during a split",
            1,  # a missing field: the document's own position
        ),
        (
            "scheme: elasticsearch\nshards: 6\nsplit_from: 2\nrouting_num_shards: 1024\n"
            "key: arguments[0]\n",
            "routing_num_shards: must be a multiple of shards (6)",
            4,
        ),
        (
            "scheme: elasticsearch\nshards: 6\nsplit_from: 4\nrouting_num_shards: 24\n"
            "key: arguments[0]\n",
            "split_from: cannot split 4 -> 6: the number of source shards [4] must be a factor of",
            3,
        ),
        (
            "scheme: solr\nshards: 6\nsplit_from: 3\nkey: arguments[0]\n",
            "initial_shards: is required during a split",
            1,  # a missing field: the document's own position
        ),
        (
            "scheme: solr\nshards: 6\nsplit_from: 2\ninitial_shards: 3\nkey: arguments[0]\n",
            "split_from:",
            3,
        ),
        (
            "scheme: solr\nshards: 4\nsplit_from: 4\nkey: arguments[0]\n",
            "split_from: cannot split 4 -> 4",
            3,
        ),
    ],
)
def test_rule_errors_name_field_and_line(text: str, message: str, line: int) -> None:
    with pytest.raises(RuleError) as info:
        parse_shard_rule(text, SOURCE)
    assert info.value.source == SOURCE
    assert info.value.reason.startswith(message), info.value.reason
    assert info.value.line == line
    assert str(info.value).startswith(SOURCE)


def test_yaml_syntax_error_has_a_position() -> None:
    with pytest.raises(RuleError) as info:
        parse_shard_rule("scheme: solr\nshards: [2\nkey: x\n", SOURCE)
    assert info.value.reason.startswith("invalid YAML")
    assert info.value.line is not None and info.value.column is not None


@pytest.mark.parametrize("text", ["", "# nothing\n", "- a\n- b\n", "just text"])
def test_non_mapping_documents_are_refused(text: str) -> None:
    with pytest.raises(RuleError):
        parse_shard_rule(text, SOURCE)


@given(st.text(max_size=200))
def test_parser_only_ever_raises_rule_error(text: str) -> None:
    with contextlib.suppress(RuleError):
        parse_shard_rule(text, SOURCE)


@given(
    st.dictionaries(
        st.sampled_from(
            [
                "scheme",
                "shards",
                "key",
                "id",
                "routing_num_shards",
                "partition_size",
                "initial_shards",
                "split_from",
                "force",
                "enabled",
            ]
        ),
        st.one_of(
            st.integers(-3, 2000),
            st.booleans(),
            st.none(),
            st.text(max_size=8),
            st.sampled_from(
                ["solr", "elasticsearch", "elasticsearch-modulo", "attachments[t]", "arguments[0]"]
            ),
        ),
    )
)
def test_parser_handles_any_field_values(fields: dict[str, object]) -> None:
    import yaml

    try:
        rule = parse_shard_rule(yaml.safe_dump(fields), SOURCE)
    except RuleError:
        return
    assert rule.layout.shards == rule.shards  # a rule that parses always has a usable layout
    if rule.split_from is not None:
        assert rule.old_layout is not None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("attachments[tenant]", KeySource("attachments", name="tenant")),
        ("arguments[12]", KeySource("arguments", index=12)),
    ],
)
def test_parse_key_source(text: str, expected: KeySource) -> None:
    assert parse_key_source(text) == expected
    assert str(expected) == text


def test_key_source_reads_bytes_and_numbers() -> None:
    inv = Invocation("s", "m", explicit_arguments=(b"caf\xc3\xa9", 7, None))
    assert KeySource("arguments", index=0).read(inv) == "café"
    assert KeySource("arguments", index=1).read(inv) == "7"
    assert KeySource("arguments", index=2).read(inv) is None
    assert KeySource("arguments", index=5).read(inv) is None


def test_compile_shard_document_gives_one_router() -> None:
    from dubbo_py.router.shard.router import compile_shard_document

    (router,) = compile_shard_document(ES4, SOURCE)
    assert router.name == f"shard:{SOURCE}" and router.priority == 160
    with pytest.raises(RuleError):
        compile_shard_document("scheme: solr\n", SOURCE)
