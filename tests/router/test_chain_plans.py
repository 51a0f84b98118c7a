"""The chain's shortcut for plain calls (no attachments) gives exactly what walking every router
gives: the same providers, or the same error naming the same router."""

from __future__ import annotations

from typing import Any

from demo import greeter_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from dubbo_py.errors import NoProviderError
from dubbo_py.invocation import Invocation
from dubbo_py.router.base import Router
from dubbo_py.router.chain import RouterChain
from dubbo_py.router.condition import ConditionRouter, parse_rule
from dubbo_py.router.condition.matcher import invocation_reader, read_invocation
from dubbo_py.router.condition.router import ConditionRuleSet
from dubbo_py.router.condition.rule import Key, KeyKind
from dubbo_py.router.factory import builtin_routers
from dubbo_py.router.snapshot import Snapshot
from dubbo_py.router.tag import TagRouter, parse_tag_rule
from dubbo_py.url import URL

SERVICE = "demo.Greeter"
METHODS = ["SayHello", "SayHelloStream", "Other"]
CONSUMER = URL.parse("consumer://10.0.0.9/demo.Greeter?application=shop&dubbo.tag=gray")

WHEN = [
    "",
    "method = SayHello",
    "method != SayHello",
    "method = SayHelloStream,Other",
    "arguments[0] = vip",
    "arguments[0] = v*",
    "arguments[1] = 3",
    "method = SayHello & arguments[0] != vip",
    "attachments[dubbo.tag] = gray",
    "application = shop",
    "application = other",
]
THEN = [
    "host = 10.0.0.1",
    "host != 10.0.0.1",
    "region = a",
    "region = a,b & port = 20880",
    "port = 1",
    "",
]

providers = st.lists(
    st.builds(
        lambda protocol, host, port, region, tag: URL(
            protocol,
            host,
            port,
            SERVICE,
            parameters={
                k: v for k, v in {"region": region, "dubbo.tag": tag}.items() if v is not None
            },
        ),
        st.sampled_from(["tri", "tri", "mock"]),
        st.sampled_from(["10.0.0.1", "10.0.0.2", "10.0.0.3"]),
        st.sampled_from([20880, 50051]),
        st.sampled_from([None, "a", "b"]),
        st.sampled_from([None, None, "gray", "blue"]),
    ),
    max_size=12,
)
rules = st.lists(
    st.tuples(st.sampled_from(WHEN), st.sampled_from(THEN), st.booleans(), st.booleans()),
    max_size=4,
)
calls = st.lists(
    st.tuples(
        st.sampled_from(METHODS), st.sampled_from(["vip", "vic", "bob", ""]), st.integers(0, 4)
    ),
    min_size=1,
    max_size=6,
)

TAG_RULE = """\
configVersion: v3.0
force: false
enabled: true
key: shop
tags:
  - name: gray
    addresses: [10.0.0.2:20880]
"""


def compile_rules(spec: list[tuple[str, str, bool, bool]], as_set: bool) -> list[Router]:
    routers: list[Router] = [
        ConditionRouter(parse_rule(f"{when} => {then}"), f"rule{i}", 140 + i, force=force)
        for i, (when, then, force, _) in enumerate(spec)
    ]
    if as_set and routers:
        return [ConditionRuleSet("set", 150, tuple(routers))]
    return routers


def outcome(route: Any) -> tuple[str, Any]:
    try:
        return "ok", route()
    except NoProviderError as exc:
        return "error", exc.router


@settings(max_examples=150, deadline=None)
@given(providers, rules, st.booleans(), st.booleans(), calls)
def test_plain_calls_route_as_the_full_walk_does(
    urls: list[URL],
    spec: list[tuple[str, str, bool, bool]],
    as_set: bool,
    tag_rule: bool,
    invocations: list[tuple[str, str, int]],
) -> None:
    routers = builtin_routers()
    if tag_rule:
        routers = [r for r in routers if not isinstance(r, TagRouter)]
        routers.append(TagRouter(parse_tag_rule(TAG_RULE, "tag-rule")))
    chain = RouterChain([*routers, *compile_rules(spec, as_set)]).bind(
        Snapshot(tuple(urls)), CONSUMER
    )
    for method, name, count in invocations:
        call = Invocation(SERVICE, method, greeter_pb2.HelloRequest(name=name, count=count))
        survivors, steps = chain.trace(call)
        expected = (
            ("ok", survivors) if survivors else ("error", steps[-1].router if steps else None)
        )
        # Twice: the first call plans, the second takes the plan.
        assert outcome(lambda c=call: chain.route(c)) == expected
        assert outcome(lambda c=call: chain.route(c)) == expected


def test_a_rule_about_another_method_drops_out_of_the_plan() -> None:
    urls = (URL("tri", "10.0.0.1", 1, SERVICE), URL("tri", "10.0.0.2", 1, SERVICE))
    rules = compile_rules(
        [
            ("method = SayHelloStream", "host = 10.0.0.1", False, False),
            ("arguments[0] = vip", "host = 10.0.0.2", False, False),
        ],
        as_set=True,
    )
    chain = RouterChain([*builtin_routers(), *rules]).bind(Snapshot(urls), CONSUMER)
    plan = chain.plan(Invocation(SERVICE, "SayHello"))
    assert plan is not None
    mask, left = plan
    assert mask == 0b11 and [name for name, _ in left] == ["set"]
    vip = Invocation(SERVICE, "SayHello", greeter_pb2.HelloRequest(name="vip"))
    assert chain.route(vip) == (urls[1],)
    stream = Invocation(SERVICE, "SayHelloStream", greeter_pb2.HelloRequest(name="bob"))
    assert chain.route(stream) == (urls[0],)


class Holder:
    """A request that is not a protobuf message (a plain object with attributes)."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


REQUESTS = st.one_of(
    st.builds(
        greeter_pb2.HelloRequest,
        name=st.sampled_from(["", "vip", "ä"]),
        count=st.integers(-2, 2),
        key=st.sampled_from(["", "k"]),
    ),
    st.builds(greeter_pb2.HelloReply, message=st.sampled_from(["", "m"]), shard=st.integers(-1, 1)),
    st.builds(Holder, name=st.sampled_from(["x", None])),
    st.none(),
    st.text(max_size=3),
)
ARGUMENT_KEYS = st.builds(
    lambda index, path: Key(KeyKind.ARGUMENT, "arguments", index, path),
    st.integers(0, 3),
    st.sampled_from([(), ("name",), ("missing", "deeper")]),
)


@given(ARGUMENT_KEYS, st.lists(st.tuples(REQUESTS, st.booleans()), min_size=1, max_size=8))
def test_an_argument_reader_reads_what_read_invocation_reads(
    key: Key, requests: list[tuple[Any, bool]]
) -> None:
    # One reader over calls of several request types: it learns a field per type.
    reader = invocation_reader(key)
    for request, explicit in requests:
        arguments = (request, True) if explicit else None
        call = Invocation(SERVICE, "SayHello", request, explicit_arguments=arguments)
        assert reader(call) == read_invocation(call, key)
