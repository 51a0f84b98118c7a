"""Condition routing: which providers a call reaches under a rule.

Most cases are ported from Apache Dubbo 3.3's ``ConditionStateRouterTest`` (dubbo-cluster,
org.apache.dubbo.rpc.cluster.router.condition); each names the Dubbo test it follows. Where
dubbo-py deliberately differs (see docs/routing.md) the test says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, SupportsIndex

import pytest
from google.protobuf import api_pb2, source_context_pb2, timestamp_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from dubbo_py.invocation import Invocation
from dubbo_py.router.condition import ConditionRouter, parse_rule
from dubbo_py.router.condition.router import DEFAULT_CACHE_SIZE, PASS_THROUGH
from dubbo_py.router.snapshot import Snapshot
from dubbo_py.url import URL

LOCAL = "127.0.0.1"
CONSUMER = f"consumer://{LOCAL}/com.foo.BarService"
# Dubbo's three-invoker fixture: one remote host, two on the consumer's host.
THREE = (
    "dubbo://10.20.3.3:20880/com.foo.BarService?region=hangzhou&serialization=fastjson",
    f"dubbo://{LOCAL}:20880/com.foo.BarService",
    f"dubbo://{LOCAL}:20881/com.foo.BarService",
)


def invocation(method: str = "getFoo", *args: Any, **attachments: str) -> Invocation:
    return Invocation(
        "com.foo.BarService", method, attachments=attachments, explicit_arguments=args
    )


def route(
    rule: str,
    providers: tuple[str, ...] = THREE,
    consumer: str = CONSUMER,
    call: Invocation | None = None,
    *,
    force: bool = False,
    enabled: bool = True,
) -> list[str]:
    """The providers (as strings) a call reaches under one rule."""
    router = ConditionRouter(parse_rule(rule), name="t", force=force, enabled=enabled)
    snapshot = Snapshot(tuple(URL.parse(p) for p in providers))
    bound = router.bind(snapshot, URL.parse(consumer))
    mask = bound.route(snapshot.all, call or invocation())
    return [str(u) for u in snapshot.select(mask)]


def when_matches(when: str, consumer: str = CONSUMER, call: Invocation | None = None) -> bool:
    """Does the when side match? (a forced then side that nobody satisfies empties the list)."""
    return route(f"{when} => host = 9.9.9.9", THREE, consumer, call, force=True) == []


# --------------------------------------------------------------------------- when side


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        # ConditionStateRouterTest.testRoute_matchWhen, consumer host 1.1.1.1
        ("", True),
        ("host = 2.2.2.2,1.1.1.1,3.3.3.3", True),
        ("host = 2.2.2.2,1.1.1.1,3.3.3.3 & host !=1.1.1.1", False),
        ("host !=4.4.4.4 & host = 2.2.2.2,1.1.1.1,3.3.3.3", True),
        ("host !=4.4.4.* & host = 2.2.2.2,1.1.1.1,3.3.3.3", True),
        ("host = 2.2.2.2,1.1.1.*,3.3.3.3 & host != 1.1.1.1", False),
        ("host = 2.2.2.2,1.1.1.*,3.3.3.3 & host != 1.1.1.2", True),
    ],
)
def test_match_when(when: str, expected: bool) -> None:
    assert when_matches(when, "consumer://1.1.1.1/com.foo.BarService") is expected


@pytest.mark.parametrize(
    ("when", "consumer", "expected"),
    [
        # ConditionStateRouterTest.testRoute_methodRoute: method/methods read the invoked method
        ("methods=getFoo", "consumer://1.1.1.1/com.foo.BarService?methods=setFoo,getFoo", True),
        ("methods=getFoo", "consumer://1.1.1.1/com.foo.BarService?methods=getFoo", True),
        ("methods=getFoo & host!=1.1.1.1", "consumer://1.1.1.1/x?methods=getFoo", False),
        ("methods=getFoo & host=1.1.1.1", "consumer://1.1.1.1/x?methods=getFoo", True),
        ("method=getFoo", "consumer://1.1.1.1/x", True),
        ("method=get*", "consumer://1.1.1.1/x", True),
        ("method!=getFoo", "consumer://1.1.1.1/x", False),
    ],
)
def test_method_keys_read_the_invoked_method(when: str, consumer: str, expected: bool) -> None:
    assert when_matches(when, consumer, invocation("getFoo")) is expected


def test_method_route_filters() -> None:
    # ConditionStateRouterTest.testRoute_methodRoute (router4/router5)
    assert route(f"host = {LOCAL} & methods = getFoo => host = 10.20.3.3", force=True) == [THREE[0]]
    assert (
        len(route(f"host = {LOCAL} & methods = unvalidmethod => host = 10.20.3.3", force=True)) == 3
    )


def test_when_not_matching_passes_the_input_through() -> None:
    assert route("host = 8.8.8.8 => host = 10.20.3.3", force=True) == list(THREE)


@pytest.mark.parametrize("when", ["", "true"])
def test_empty_or_true_when_applies_to_every_call(when: str) -> None:
    # ConditionStateRouterTest.testRoute_Empty_HostFilter / testRoute_False_HostFilter
    assert route(f"{when} => host = {LOCAL}") == list(THREE[1:])


# --------------------------------------------------------------------------- then side


@pytest.mark.parametrize(
    ("then", "count"),
    [
        # ConditionStateRouterTest.testRoute_matchFilter (all forced)
        ("host = 10.20.3.3", 1),
        ("host = 10.20.3.* & host != 10.20.3.3", 0),
        ("host = 10.20.3.3  & host != 10.20.3.3", 0),
        ("host = 10.20.3.2,10.20.3.3,10.20.3.4", 1),
        ("host != 10.20.3.3", 2),
        ("serialization = fastjson", 1),
    ],
)
def test_match_filter(then: str, count: int) -> None:
    assert len(route(f"host = {LOCAL} => {then}", force=True)) == count


@pytest.mark.parametrize("rule", [f"host = {LOCAL} => false", f"host = {LOCAL} => ", "=>"])
def test_false_or_empty_then_blocks_even_without_force(rule: str) -> None:
    # ConditionStateRouterTest.testRoute_ReturnFalse / testRoute_ReturnEmpty
    assert route(rule, force=False) == []


def test_rule_without_arrow_routes_every_call() -> None:
    assert route(f"host = {LOCAL}") == list(THREE[1:])


def test_then_matching_all_returns_all() -> None:
    # ConditionStateRouterTest.testRoute_ReturnAll
    all_local = (f"dubbo://{LOCAL}:20880/a", f"dubbo://{LOCAL}:20881/a", f"dubbo://{LOCAL}:20882/a")
    assert route(f"host = {LOCAL} => host = {LOCAL}", all_local) == list(all_local)


def test_host_filter_keeps_order() -> None:
    # ConditionStateRouterTest.testRoute_HostFilter
    assert route(f"host = {LOCAL} => host = {LOCAL}") == list(THREE[1:])


def test_placeholder_reads_the_consumer_url() -> None:
    # ConditionStateRouterTest.testRoute_Placeholder
    assert route(f"host = {LOCAL} => host = $host") == list(THREE[1:])


def test_placeholder_of_a_consumer_parameter() -> None:
    consumer = f"{CONSUMER}?region=hangzhou"
    assert route("=> region = $region", consumer=consumer) == [THREE[0]]
    # a reference the consumer lacks is an empty pattern: matches nothing non-empty
    assert route("=> region = $zone", consumer=consumer, force=True) == []


def test_no_survivors_without_force_returns_the_input() -> None:
    # ConditionStateRouterTest.testRoute_NoForce
    assert route(f"host = {LOCAL} => host = 1.2.3.4") == list(THREE)


def test_no_survivors_with_force_returns_nothing() -> None:
    # ConditionStateRouterTest.testRoute_Force
    assert route(f"host = {LOCAL} => host = 1.2.3.4", force=True) == []


def test_disabled_rule_passes_everything() -> None:
    assert route("=> false", enabled=False) == list(THREE)
    router = ConditionRouter(parse_rule("=> false"), name="t", enabled=False)
    assert router.bind(Snapshot(()), URL.parse(CONSUMER)) is PASS_THROUGH


def test_survivors_are_taken_from_the_candidates_only() -> None:
    router = ConditionRouter(parse_rule(f"=> host = {LOCAL}"), name="t")
    snapshot = Snapshot(tuple(URL.parse(p) for p in THREE))
    bound = router.bind(snapshot, URL.parse(CONSUMER))
    assert bound.route(0b011, invocation()) == 0b010
    # no local provider among the candidates, not forced: the candidates come back unchanged
    assert bound.route(0b001, invocation()) == 0b001


# --------------------------------------------------------------------------- missing keys


def test_missing_key_never_matches() -> None:
    # ConditionStateRouterTest.testRoute_Key_Not_Exist
    providers = (
        "dubbo://10.20.3.3:20880/x?then_key=a",
        f"dubbo://{LOCAL}:20880/x",
        f"dubbo://{LOCAL}:1/x",
    )
    consumer = f"{CONSUMER}?when_key=a"
    assert (
        route("when_key=a => not_exist_then_key = any_value", providers, consumer, force=True) == []
    )
    assert len(route("not_exist_when_key=a => then_key = a", providers, consumer, force=True)) == 3


def test_missing_key_never_matches_even_with_not_equal() -> None:
    assert not when_matches("zone != a")
    assert route("=> zone != a", force=True) == []
    assert route("=> serialization != hessian", force=True) == [THREE[0]]


# --------------------------------------------------------------------------- arguments


def test_arguments() -> None:
    # ConditionStateRouterTest.testRoute_Arguments
    rule = "arguments[0] = a => host = 1.2.3.4"
    assert len(route(rule, call=invocation("getFoo", None), force=True)) == 3
    assert route(rule, call=invocation("getFoo", "a"), force=True) == []
    assert (
        len(
            route(
                "arguments[10].inner = a => host = 1.2.3.4", call=invocation("m", "a"), force=True
            )
        )
        == 3
    )


@pytest.mark.parametrize(
    "key", ["arguments", "arguments[x]", "arguments.name", "attachments", "attachments[]"]
)
def test_arguments_or_attachments_without_index_or_name_are_accepted_and_never_match(
    key: str,
) -> None:
    # Dubbo accepts such a key and reads it as "not found": the when side never matches, so
    # the rule never applies; on the then side no provider matches, so force decides.
    call = invocation("m", "b", b="b")
    assert len(route(f"{key} = b => host = 1.2.3.4", call=call, force=True)) == 3
    assert len(route(f"{key} != b => host = 1.2.3.4", call=call, force=True)) == 3
    assert route(f"=> {key} = b", call=call, force=True) == []
    assert len(route(f"=> {key} = b", call=call, force=False)) == 3


def test_argument_field_path_reads_nested_fields() -> None:
    # Dubbo 3.3 ignores what follows `arguments[N]` (`arguments[0].inner = 1` matches the
    # argument 1); dubbo-py reads the named field, which is what protobuf requests need.
    rule = "arguments[0].inner = 1 => host = 1.2.3.4"
    assert route(rule, call=invocation("m", SimpleNamespace(inner=1)), force=True) == []
    assert len(route(rule, call=invocation("m", 1), force=True)) == 3
    assert (
        route(
            "arguments[0].a.b = x => host = 1.2.3.4",
            call=invocation("m", {"a": {"b": "x"}}),
            force=True,
        )
        == []
    )


def test_arguments_of_a_protobuf_request_are_its_fields_in_order() -> None:
    request = timestamp_pb2.Timestamp(seconds=42, nanos=7)
    call = Invocation("demo.Clock", "Set", request)
    assert when_matches("arguments[0] = 42 & arguments[1] = 1~10", call=call)
    assert not when_matches("arguments[0] = 43", call=call)
    api = api_pb2.Api(
        name="x", source_context=source_context_pb2.SourceContext(file_name="f.proto")
    )
    # Api fields: name, methods, options, version, source_context, ...
    assert when_matches("arguments[4].file_name = *.proto", call=Invocation("s", "m", api))


def test_boolean_argument_reads_like_java() -> None:
    assert when_matches("arguments[0] = true", call=invocation("m", True))
    assert not when_matches("arguments[0] = True", call=invocation("m", True))


# --------------------------------------------------------------------------- attachments


def test_attachments() -> None:
    # ConditionStateRouterTest.testRoute_Attachments
    rule = "attachments[foo] = a => host = 1.2.3.4"
    assert len(route(rule, call=invocation(), force=True)) == 3
    assert route(rule, call=invocation(foo="a"), force=True) == []
    assert route(
        "attachments[foo] = a => region = hangzhou", call=invocation(foo="a"), force=True
    ) == [THREE[0]]


def test_attachment_names_may_contain_dots() -> None:
    assert when_matches("attachments[dubbo.tag] = gray", call=invocation(**{"dubbo.tag": "gray"}))


# --------------------------------------------------------------------------- ranges


def test_range_pattern() -> None:
    # ConditionStateRouterTest.testRoute_Range_Pattern
    rule = "attachments[user_id] = 1~100 => region=hangzhou"
    assert len(route(rule, call=invocation(), force=True)) == 3
    assert route(rule, call=invocation(user_id="80"), force=True) == [THREE[0]]
    assert len(route(rule, call=invocation(user_id="101"), force=True)) == 3
    rule = "attachments[user_id] = ~100 => region = hangzhou"
    assert route(rule, call=invocation(user_id="1"), force=True) == [THREE[0]]
    assert len(route(rule, call=invocation(user_id="101"), force=True)) == 3


def test_open_high_range() -> None:
    # Dubbo splits "10~" into one part and so never applies it; dubbo-py reads it as >= 10.
    assert when_matches("attachments[n] = 10~", call=invocation(n="10"))
    assert when_matches("attachments[n] = 10~", call=invocation(n="1000"))
    assert not when_matches("attachments[n] = 10~", call=invocation(n="9"))


def test_range_needs_an_integer_value() -> None:
    # Dubbo reads a non-integer as 0; dubbo-py says it is not in any range.
    assert not when_matches("attachments[n] = ~100", call=invocation(n="abc"))
    assert when_matches("attachments[n] = -10~-1", call=invocation(n="-5"))


def test_range_on_provider_parameters() -> None:
    providers = ("dubbo://a:1/x?weight=50", "dubbo://b:1/x?weight=150", "dubbo://c:1/x")
    assert route("=> weight = 100~", providers) == [providers[1]]
    assert route("=> weight != 100~", providers) == [providers[0]]


# --------------------------------------------------------------------------- several conditions


def test_multiple_conditions() -> None:
    # ConditionStateRouterTest.testRoute_Multiple_Conditions
    rule = f"application=consumer_app&arguments[0]=a => host = {LOCAL}"
    call = invocation("m", "a")
    assert route(
        rule, consumer=f"{CONSUMER}?application=consumer_app", call=call, force=True
    ) == list(THREE[1:])
    assert len(route(rule, consumer=f"{CONSUMER}?application=other", call=call, force=True)) == 3


def test_same_key_twice_merges_values_as_dubbo_does() -> None:
    # Dubbo's parseRule reuses the key's matcher on `&`: `host = a & host = b` means a or b.
    assert route("=> host = 10.20.3.3 & host = 127.0.0.1") == list(THREE)
    assert route("=> host = 10.20.3.3 & host != 10.20.3.3", force=True) == []


# --------------------------------------------------------------------------- URL keys


@pytest.mark.parametrize(
    ("then", "expected"),
    [
        ("port = 20881", [THREE[2]]),
        ("address = 127.0.0.1:20880", [THREE[1]]),
        ("address = *:20880", [THREE[0], THREE[1]]),
        ("protocol = dubbo", list(THREE)),
        ("path = com.foo.*", list(THREE)),
    ],
)
def test_special_url_keys(then: str, expected: list[str]) -> None:
    assert route(f"=> {then}", force=True) == expected


def test_application_is_the_providers_own() -> None:
    providers = (
        "tri://a:1/x?application=greeter",
        "tri://b:1/x?application=shop&remote.application=greeter",
        "tri://c:1/x?application=other",
    )
    consumer = "consumer://1.1.1.1/x?application=shop"
    assert route("application = shop => application = greeter", providers, consumer) == list(
        providers[:2]
    )


def test_method_on_the_then_side_reads_the_provider_url() -> None:
    providers = ("tri://a:1/x?methods=getFoo,setFoo", "tri://b:1/x?methods=setFoo")
    assert route("=> methods = getFoo*", providers) == [providers[0]]
    # Only the last '*' is a wildcard, so `*getFoo*` looks for a literal "*getFoo" prefix.
    assert route("=> methods = *getFoo*", providers, force=True) == []


def test_then_clause_reading_the_call_selects_all_or_none() -> None:
    rule = "=> region = hangzhou & attachments[lane] = blue"
    assert route(rule, call=invocation(lane="blue"), force=True) == [THREE[0]]
    assert route(rule, call=invocation(lane="green"), force=True) == []
    assert route(rule, call=invocation(lane="green"), force=False) == list(THREE)


# --------------------------------------------------------------------------- precomputation


class CountingTuple(tuple[URL, ...]):
    """A provider tuple that counts every way of reaching its items."""

    reads = 0

    def __iter__(self) -> Iterator[URL]:
        CountingTuple.reads += 1
        return super().__iter__()

    def __getitem__(self, index: SupportsIndex | slice) -> Any:
        CountingTuple.reads += 1
        return super().__getitem__(index)

    def __len__(self) -> int:
        CountingTuple.reads += 1
        return super().__len__()


@pytest.mark.parametrize(
    "rule",
    [
        "method = getFoo & arguments[0] = 1~100 => region = hangzhou",
        "attachments[lane] = blue => region = hangzhou & attachments[x] = y",
        "host = 127.0.0.1 => host = 10.20.3.*",
        "=> false",
    ],
)
def test_route_never_touches_the_providers(rule: str) -> None:
    providers = CountingTuple(
        URL.parse(f"dubbo://10.0.{i // 250}.{i % 250}:1/x?region=r{i % 3}") for i in range(300)
    )
    snapshot = Snapshot(providers)
    CountingTuple.reads = 0
    bound = ConditionRouter(parse_rule(rule), name="t").bind(snapshot, URL.parse(CONSUMER))
    assert CountingTuple.reads > 0 or "=> false" in rule  # binding evaluates the then side
    CountingTuple.reads = 0
    for n in range(200):
        bound.route(snapshot.all, invocation("getFoo", n, lane="blue", x=str(n % 2)))
    assert CountingTuple.reads == 0


def test_decisions_are_cached_by_the_values_read_only() -> None:
    router = ConditionRouter(parse_rule("attachments[lane] = blue => region = hangzhou"), name="t")
    snapshot = Snapshot(tuple(URL.parse(p) for p in THREE))
    bound = router.bind(snapshot, URL.parse(CONSUMER))
    decide: Any = bound.decide  # type: ignore[attr-defined]
    for n in range(50):  # the rule does not read `other`: one entry for all these calls
        assert bound.route(snapshot.all, invocation(lane="blue", other=str(n))) == 0b001
    assert decide.cache_info().currsize == 1
    for n in range(DEFAULT_CACHE_SIZE * 2):
        bound.route(snapshot.all, invocation(lane=str(n)))
    assert decide.cache_info().currsize == DEFAULT_CACHE_SIZE


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=12),
    st.sampled_from(["a", "b", "c", "a,b", "*"]),
    st.booleans(),
    st.sampled_from(["blue", "green"]),
)
def test_precomputed_routing_agrees_with_direct_evaluation(
    zones: list[str], wanted: str, negated: bool, lane: str
) -> None:
    providers = tuple(f"tri://10.0.0.{i}:1/x?zone={z}" for i, z in enumerate(zones))
    op = "!=" if negated else "="
    got = route(
        f"attachments[lane] = blue => zone {op} {wanted}", providers, call=invocation(lane=lane)
    )
    options = wanted.split(",")

    def keeps(zone: str) -> bool:
        hit = "*" in options or zone in options
        return hit != negated

    survivors = [p for p, z in zip(providers, zones, strict=True) if keeps(z)]
    expected = survivors if lane == "blue" and survivors else list(providers)
    assert got == expected


def test_consumer_and_provider_key_prefixes_route_like_plain_keys() -> None:
    # Dubbo strips `consumer.` / `provider.` (ConditionStateRouter.init); dubbo-py only from keys.
    assert route(f"consumer.host = {LOCAL} => provider.region = hangzhou") == [THREE[0]]
    providers = ("tri://a:1/x?owner=consumer.team", "tri://b:1/x?owner=team")
    assert route("=> owner = consumer.team", providers) == [providers[0]]


def test_reference_on_the_when_side_reads_the_consumer_url() -> None:
    # Dubbo compares `$name` literally on the when side; dubbo-py resolves it on both sides.
    consumer = f"{CONSUMER}?zone=a&home=a"
    assert when_matches("zone = $home", consumer)
    assert not when_matches("zone = $other", consumer)
