"""Binding condition rules to a snapshot: the precomputed masks are exactly what evaluating each
rule against each provider gives (binding reads provider values by key, once per snapshot)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dubbo_py.invocation import Invocation
from dubbo_py.router.condition import ConditionRouter, parse_rule
from dubbo_py.router.condition.matcher import all_match, merge_clauses, sample_value, url_sample
from dubbo_py.router.snapshot import Snapshot
from dubbo_py.url import URL

KEYS = [
    "application",
    "remote.application",
    "protocol",
    "username",
    "password",
    "host",
    "port",
    "path",
    "address",
    "region",
    "methods",
]
VALUES = ["", "a", "b", "10.0.0.1", "20880", "a*", "x:1"]

params = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=6)
urls = st.builds(
    lambda protocol, user, host, port, path, p: URL(
        protocol, host, port, path, user, "pw" if user else "", {k: v for k, v in p.items() if v}
    ),
    st.sampled_from(["tri", "dubbo", ""]),
    st.sampled_from(["", "u"]),
    st.sampled_from(["", "10.0.0.1", "10.0.0.2"]),
    st.sampled_from([0, 20880, 50051]),
    st.sampled_from(["", "demo.Greeter"]),
    params,
)


@given(urls, st.sampled_from([*KEYS, "missing"]))
def test_sample_value_reads_what_url_sample_holds(url: URL, name: str) -> None:
    assert sample_value(url, name) == url_sample(url).get(name)


CONSUMER = URL.parse("consumer://10.0.0.9/demo.Greeter?application=a&region=b")
THEN_SIDES = [
    "host = 10.0.0.1",
    "host != 10.0.0.1",
    "port = 20000~30000",
    "address = 10.0.0.*",
    "application = $application",
    "region = a,b & protocol = tri",
    "region != a & path = demo.*",
    "methods = x:1 & port != 50051",
    "username = u & password = pw",
]


@settings(max_examples=80, deadline=None)
@given(st.lists(urls, max_size=30), st.sampled_from(THEN_SIDES))
def test_a_bound_rule_keeps_exactly_the_providers_its_then_side_matches(
    providers: list[URL], then: str
) -> None:
    snapshot = Snapshot(tuple(providers))
    rule = parse_rule(f"=> {then}")
    bound = ConditionRouter(rule, name="t", force=True).bind(snapshot, CONSUMER)
    survivors = snapshot.select(bound.route(snapshot.all, Invocation("demo.Greeter", "m")))
    assert rule.then is not None
    matchers = merge_clauses(rule.then, url_sample(CONSUMER))
    assert survivors == tuple(p for p in providers if all_match(matchers, url_sample(p)))
