"""Tag router: static dubbo.tag, dynamic tag rules, Dubbo 3.3's fallback behaviour.

Known answers ported from Apache Dubbo: TagStateRouterTest (dubbo-cluster, router/tag),
StringMatchTest (router/mesh/rule/virtualservice/match) and NetUtilsTest's matchIpRange /
matchIpExpression cases (dubbo-common).
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dubbo_py import URL, Invocation
from dubbo_py.errors import NoProviderError, RuleError
from dubbo_py.router.address_pattern import parse_address_pattern
from dubbo_py.router.chain import RouterChain
from dubbo_py.router.snapshot import Snapshot, iter_bits
from dubbo_py.router.string_match import parse_string_match
from dubbo_py.router.tag import TagRouter, parse_tag_rule, validate_tag_yaml

SOURCE = "/dubbo/config/dubbo/demo-provider.tag-router"
CONSUMER = URL.parse("consumer://10.9.9.9/demo.Greeter?application=shop")


def call(**attachments: str) -> Invocation:
    return Invocation("demo.Greeter", "SayHello", attachments=attachments)


def chosen(
    router: TagRouter, snapshot: Snapshot, invocation: Invocation, **kw: object
) -> list[int]:
    consumer = kw.get("consumer", CONSUMER)
    assert isinstance(consumer, URL)
    candidates = kw.get("candidates", snapshot.all)
    assert isinstance(candidates, int)
    return list(iter_bits(router.bind(snapshot, consumer).route(candidates, invocation)))


# ---------------------------------------------------------------- ported from TagStateRouterTest


def test_static_tag_picks_the_tagged_provider() -> None:
    # testTagRoutePickInvokers
    snapshot = Snapshot(
        (
            URL.parse("test://127.0.0.1:7777/DemoInterface?dubbo.tag=tag2"),
            URL.parse("test://127.0.0.1:7778/DemoInterface"),
            URL.parse("test://127.0.0.1:7779/DemoInterface"),
        )
    )
    assert chosen(TagRouter(), snapshot, call(**{"dubbo.tag": "tag2"})) == [0]


def test_dynamic_v3_match_rule_selects_by_parameters() -> None:
    # testTagRouteWithDynamicRuleV3
    snapshot = Snapshot(
        (
            URL.parse(
                "test://127.0.0.1:7777/DemoInterface?application=foo&dubbo.tag=tag2&match_key=value"
            ),
            URL.parse("test://127.0.0.1:7778/DemoInterface?application=foo&match_key=value"),
            URL.parse("test://127.0.0.1:7779/DemoInterface?application=foo"),
        )
    )
    rule = parse_tag_rule(
        """---
configVersion: v3.0
force: false
runtime: true
enabled: true
priority: 1
key: demo-provider
tags:
  - name: tag2
    match:
    - key: match_key
      value:
       exact: value
...""",
        SOURCE,
    )
    assert chosen(TagRouter(rule), snapshot, call(**{"dubbo.tag": "tag2"})) == [0, 1]


def test_rule_with_null_and_empty_addresses_parses() -> None:
    # tagRouterRuleParseTest: "~", null and [] all mean "no addresses"
    rule = parse_tag_rule(
        """---
force: false
runtime: true
enabled: false
priority: 1
key: demo-provider
tags:
  - name: tag1
    addresses: null
  - name: tag2
    addresses: ["30.5.120.37:20880"]
  - name: tag3
    addresses: []
  - name: tag4
    addresses: ~
...""",
        SOURCE,
    )
    assert rule.key == "demo-provider"
    assert rule.priority == 1
    assert rule.enabled is False
    assert rule.tag_names == ("tag1", "tag2", "tag3", "tag4")
    by_name = {t.name: t for t in rule.tags}
    assert by_name["tag1"].addresses is None
    assert by_name["tag3"].addresses is None
    assert by_name["tag4"].addresses is None
    tag2 = by_name["tag2"].addresses
    assert tag2 is not None and [p.text for p in tag2] == ["30.5.120.37:20880"]


def test_v3_rule_address_sets_from_matches() -> None:
    # tagRouterRuleParseTestV3: addresses win over match; wildcard "*" needs the key present.
    rule = parse_tag_rule(
        """---
configVersion: v3.0
force: false
runtime: true
enabled: true
priority: 1
key: demo-provider
tags:
  - name: tag1
    match:
    - key: match_key1
      value:
       exact: value1
  - name: tag2
    addresses:
     - "10.20.3.3:20880"
     - "10.20.3.4:20880"
    match:
    - key: match_key2
      value:
       exact: value2
  - name: tag3
    match:
    - key: match_key2
      value:
       exact: value2
  - name: tag4
    match:
    - key: not_exist
      value:
       exact: not_exist
  - name: tag5
    match:
    - key: match_key2
      value:
       wildcard: "*"
...""",
        SOURCE,
    )
    snapshot = Snapshot(
        (
            URL.parse(
                "dubbo://10.20.3.3:20880/com.foo.BarService?match_key1=value1&match_key2=value2"
            ),
            URL.parse("dubbo://10.20.3.4:20880/com.foo.BarService?match_key1=value1"),
        )
    )
    dynamic = TagRouter(rule).bind(snapshot, CONSUMER).dynamic
    assert dynamic == {"tag1": 0b11, "tag2": 0b11, "tag3": 0b01, "tag5": 0b01}


# ---------------------------------------------------------------- the fallback table

PROVIDERS = (
    URL.parse("tri://10.0.0.1:20880/demo.Greeter?dubbo.tag=blue"),  # 0 static blue
    URL.parse("tri://10.0.0.2:20880/demo.Greeter"),  # 1 untagged
    URL.parse("tri://10.0.0.3:20880/demo.Greeter?env=gray"),  # 2 dynamic gray (match)
    URL.parse("tri://10.1.0.4:20880/demo.Greeter"),  # 3 dynamic canary (CIDR)
    URL.parse("tri://10.0.0.5:20881/demo.Greeter?dubbo.tag=red"),  # 4 static red
)
SNAPSHOT = Snapshot(PROVIDERS)

RULE_YAML = """\
configVersion: v3.0
key: demo-provider
force: {force}
enabled: {enabled}
tags:
  - name: gray
    match:
      - key: env
        value:
          exact: gray
  - name: canary
    addresses: ["10.1.0.0/16"]
  - name: ghost
    addresses: ["192.168.0.1:1"]
  - name: blue
"""


def rule(force: bool = False, enabled: bool = True) -> TagRouter:
    text = RULE_YAML.format(force=str(force).lower(), enabled=str(enabled).lower())
    return TagRouter(parse_tag_rule(text, SOURCE))


@pytest.mark.parametrize(
    ("attachments", "expected"),
    [
        ({}, [1, 2, 3]),  # untagged: providers without a static tag
        ({"dubbo.tag": "red"}, [4]),
        ({"dubbo.tag": "green"}, [1, 2, 3]),  # no such tag: fall back to untagged
        ({"dubbo.tag": "green", "dubbo.force.tag": "true"}, []),
        ({"dubbo.tag": "red", "dubbo.force.tag": "true"}, [4]),
        ({"dubbo.tag": "green", "dubbo.force.tag": "false"}, [1, 2, 3]),
    ],
)
def test_static_tags_without_rule(attachments: dict[str, str], expected: list[int]) -> None:
    assert chosen(TagRouter(), SNAPSHOT, call(**attachments)) == expected


@pytest.mark.parametrize(
    ("router", "attachments", "expected"),
    [
        (rule(), {}, [1]),  # untagged: not in any address set and no static tag
        (rule(), {"dubbo.tag": "gray"}, [2]),
        (rule(), {"dubbo.tag": "canary"}, [3]),
        (rule(), {"dubbo.tag": "blue"}, [0]),  # rule tag without addresses: static tag
        (rule(), {"dubbo.tag": "red"}, [4]),  # not a rule tag: static tag
        (rule(), {"dubbo.tag": "green"}, [1]),  # nobody: failover to the untagged
        (rule(), {"dubbo.tag": "green", "dubbo.force.tag": "true"}, []),
        (rule(), {"dubbo.tag": "ghost"}, [1]),  # address set selects nobody: failover
        (rule(force=True), {"dubbo.tag": "ghost"}, []),  # ... unless the rule forces
        (rule(), {"dubbo.tag": "ghost", "dubbo.force.tag": "TRUE"}, []),
        (rule(), {"dubbo.tag": "gray|team1"}, [2]),  # hierarchical: falls back to "gray"
        (rule(), {"dubbo.tag": "gray|team1", "dubbo.force.tag": "true"}, []),
        (rule(enabled=False), {}, [1, 2, 3]),  # disabled rule: static tags only
        (rule(enabled=False), {"dubbo.tag": "gray"}, [1, 2, 3]),
    ],
)
def test_dynamic_rule_fallback_table(
    router: TagRouter, attachments: dict[str, str], expected: list[int]
) -> None:
    assert chosen(router, SNAPSHOT, call(**attachments)) == expected


def test_tagged_call_falls_over_within_candidates_only() -> None:
    # gray's provider (2) was removed by an earlier router: fall back to untagged candidates.
    assert chosen(rule(), SNAPSHOT, call(**{"dubbo.tag": "gray"}), candidates=0b01011) == [1]


def test_consumer_url_supplies_tag_and_force() -> None:
    consumer = CONSUMER.with_parameter_map({"dubbo.tag": "canary"})
    assert chosen(rule(), SNAPSHOT, call(), consumer=consumer) == [3]
    # the attachment wins over the consumer's parameter
    assert chosen(rule(), SNAPSHOT, call(**{"dubbo.tag": "gray"}), consumer=consumer) == [2]
    forcing = CONSUMER.with_parameter_map({"dubbo.tag": "green", "dubbo.force.tag": "true"})
    assert chosen(rule(), SNAPSHOT, call(), consumer=forcing) == []
    # an explicit attachment overrides the consumer's force
    assert chosen(rule(), SNAPSHOT, call(**{"dubbo.force.tag": "false"}), consumer=forcing) == [1]


def test_chain_reports_the_tag_router_when_forced_empty() -> None:
    chain = RouterChain([rule(force=True)]).bind(SNAPSHOT, CONSUMER)
    with pytest.raises(NoProviderError, match="tag:demo-provider"):
        chain.route(call(**{"dubbo.tag": "ghost"}))


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("*", [0, 1, 2, 3, 4]),
        ("*:20881", [4]),
        ("0.0.0.0:20881", [4]),
        ("10.0.0.2", [1]),
        ("10.0.0.2:20880", [1]),
        ("10.0.0.2:20881", []),
        ("10.0.0.1-3", [0, 1, 2]),
        ("10.0.0.*:20880", [0, 1, 2]),
        ("10.0.0.0/30", [0, 1, 2]),
    ],
)
def test_address_forms(address: str, expected: list[int]) -> None:
    text = f'key: demo-provider\ntags:\n  - name: t\n    addresses: ["{address}"]\n'
    router = TagRouter(parse_tag_rule(text, SOURCE))
    assert (
        chosen(router, SNAPSHOT, call(**{"dubbo.tag": "t", "dubbo.force.tag": "true"})) == expected
    )


# ---------------------------------------------------------------- rule errors


@pytest.mark.parametrize(
    ("text", "message", "line"),
    [
        ("key: a\ntags: [\n", "invalid YAML", 3),
        ("- just\n- a list\n", "expected a mapping", 1),
        ("tags:\n  - name: a\n", "'key' is required", 1),
        ("key: a\n", "'tags' must be a non-empty list", 1),
        ("key: a\ntags: []\n", "'tags' must be a non-empty list", 2),
        ("key: a\ntags:\n  - addresses: ['1.2.3.4']\n", "'name' is required", 3),
        ("key: a\ntags:\n  - name: x\n  - name: x\n", "duplicate tag name 'x'", 4),
        (
            "key: a\ntags:\n  - name: x\n    addresses:\n      - 10.0.0.0/8\n      - 10.0.0.0/33\n",
            "tags[0].addresses[1]: '10.0.0.0/33': invalid CIDR",
            6,
        ),
        (
            "key: a\ntags:\n  - name: x\n    addresses: ['10.0.0.0/8:80']\n",
            "cannot carry a port",
            4,
        ),
        ("key: a\ntags:\n  - name: x\n    addresses: ['1.2.3.999']\n", "out of range", 4),
        (
            "key: a\ntags:\n  - name: x\n    match:\n      - key: env\n        value: {exact: a}\n",
            "'match' needs configVersion: v3.0",
            5,
        ),
        (
            "configVersion: v3.0\nkey: a\ntags:\n  - name: x\n    match:\n"
            "      - key: env\n        value: {regex: '('}\n",
            "does not compile",
            7,
        ),
        (
            "configVersion: v3.0\nkey: a\ntags:\n  - name: x\n    match:\n"
            "      - key: env\n        value: {exact: a, prefix: b}\n",
            "exactly one of",
            7,
        ),
        ("configVersion: v3.0\nkey: a\ntags:\n  - name: x\n    match: []\n", "at least one", 5),
        ("key: a\nenabled: maybe\ntags:\n  - name: x\n", "expected true or false", 2),
        ("key: a\nother: &k b\ntags:\n  - name: x\n", "anchors and aliases", 2),
        ("key: a\ntags:\n  - name: x\n  - *k\n", "anchors and aliases", 4),
    ],
)
def test_bad_rules_are_rule_errors_with_position(text: str, message: str, line: int) -> None:
    with pytest.raises(RuleError) as info:
        parse_tag_rule(text, SOURCE)
    assert message in str(info.value)
    assert info.value.source == SOURCE
    assert info.value.line == line


def test_validate_tag_yaml() -> None:
    validate_tag_yaml("key: a\ntags:\n  - name: x\n    addresses: ['10.0.0.0/8']\n", SOURCE)
    with pytest.raises(RuleError, match="non-empty"):
        validate_tag_yaml("key: a\ntags: []\n", SOURCE)


@given(st.text(max_size=200))
def test_any_text_is_a_rule_or_a_rule_error(text: str) -> None:
    try:
        parse_tag_rule(text, SOURCE)
    except RuleError as exc:
        assert exc.source == SOURCE


# ---------------------------------------------------------------- address expressions
# Known answers from Dubbo's NetUtilsTest (matchIpRange / matchIpExpression).

MATCHING = [
    ("*.*.*.*", "192.168.1.63", 90, True),
    ("192.168.1.*", "192.168.1.63", 90, True),
    ("192.168.1.63", "192.168.1.63", 90, True),
    ("192.168.1.1-65", "192.168.1.63", 90, True),
    ("192.168.1.1-61", "192.168.1.63", 90, False),
    ("192.168.1.62", "192.168.1.63", 90, False),
    ("234e:0:4567:0:0:0:3d:*", "234e:0:4567::3d:ff", 90, True),
    ("234e:0:4567:0:0:0:3d:ee", "234e:0:4567::3d:ee", 90, True),
    ("234e:0:4567::3d:ee", "234e:0:4567::3d:ee", 90, True),
    ("234e:0:4567:0:0:0:3d:0-ff", "234e:0:4567::3d:ee", 90, True),
    ("234e:0:4567:0:0:0:3d:0-ee", "234e:0:4567::3d:ee", 90, True),
    ("234e:0:4567:0:0:0:3d:ff", "234e:0:4567::3d:ee", 90, False),
    ("234e:0:4567:0:0:0:3d:0-ea", "234e:0:4567::3d:ee", 90, False),
    ("192.168.1.192/26", "192.168.1.199", 90, True),
    ("[234e:0:4567::3d:ee]", "234e:0:4567::3d:ee", 8090, True),
    ("[234e:0:4567:0:0:0:3d:ee]", "234e:0:4567::3d:ee", 8090, True),
    ("[234e:0:4567:0:0:0:3d:ee]:8090", "234e:0:4567::3d:ee", 8090, True),
    ("[234e:0:4567:0:0:0:3d:0-ee]:8090", "234e:0:4567::3d:ee", 8090, True),
    ("[234e:0:4567:0:0:0:3d:ee-ff]:8090", "234e:0:4567::3d:ee", 8090, True),
    ("[234e:0:4567:0:0:0:3d:*]:90", "234e:0:4567::3d:ff", 90, True),
    ("[234e:0:4567:0:0:0:3d:ee]:7289", "234e:0:4567::3d:ee", 8090, False),
    ("[234e:0:4567:0:0:0:3d:ee-ff]:8090", "234e:0:4567::3d:ee", 9090, False),
    ("*.*.*.*:90", "192.168.1.63", 90, True),
    ("192.168.1.*:90", "192.168.1.63", 90, True),
    ("192.168.1.63:90", "192.168.1.63", 90, True),
    ("192.168.1.63-65:90", "192.168.1.63", 90, True),
    ("192.168.1.1-63:90", "192.168.1.63", 90, True),
    ("*.*.*.*:80", "192.168.1.63", 90, False),
    ("192.168.1.*:80", "192.168.1.63", 90, False),
    ("192.168.1.63:80", "192.168.1.63", 90, False),
    ("192.168.1.63-65:80", "192.168.1.63", 90, False),
    ("192.168.1.1-63:80", "192.168.1.63", 90, False),
    ("192.168.1.1-61:90", "192.168.1.62", 90, False),
    ("192.168.1.62:90", "192.168.1.63", 90, False),
    # ours: bracketed IPv6 hosts as URL.parse leaves them, host names by text
    ("[::1]:50051", "[::1]", 50051, True),
    ("Provider-1.example:20880", "provider-1.example", 20880, True),
    ("10.0.0.0/8", "provider-1.example", 20880, False),
]


@pytest.mark.parametrize(("pattern", "host", "port", "expected"), MATCHING)
def test_address_pattern_known_answers(pattern: str, host: str, port: int, expected: bool) -> None:
    assert parse_address_pattern(pattern).matches(host, port) is expected


@pytest.mark.parametrize(
    "pattern",
    ["234e:0:4567::3d:*", "234e:0:4567:3d", "192.168.1.1-65-3", "192.168.1.192/26:90", "", "a b"],
)
def test_bad_address_patterns(pattern: str) -> None:
    # Dubbo throws for these at match time; we refuse them when the rule is read.
    with pytest.raises(ValueError):
        parse_address_pattern(pattern)


@given(
    address=st.integers(min_value=0, max_value=2**32 - 1),
    network=st.integers(min_value=0, max_value=2**32 - 1),
    prefix=st.integers(min_value=0, max_value=32),
)
def test_cidr_agrees_with_ipaddress(address: int, network: int, prefix: int) -> None:
    net = ipaddress.ip_network(f"{ipaddress.IPv4Address(network)}/{prefix}", strict=False)
    host = str(ipaddress.IPv4Address(address))
    assert parse_address_pattern(str(net)).matches(host, 1) is (
        ipaddress.IPv4Address(address) in net
    )


octet_spec = st.one_of(
    st.just("*"),
    st.integers(0, 255).map(str),
    st.tuples(st.integers(0, 255), st.integers(0, 255)).map(lambda t: f"{min(t)}-{max(t)}"),
)


@given(
    specs=st.lists(octet_spec, min_size=4, max_size=4),
    octets=st.lists(st.integers(0, 255), min_size=4, max_size=4),
)
def test_ipv4_expression_is_per_octet(specs: list[str], octets: list[int]) -> None:
    def octet_ok(spec: str, value: int) -> bool:
        if spec == "*":
            return True
        lo, _, hi = spec.partition("-")
        return int(lo) <= value <= int(hi or lo)

    expected = all(octet_ok(s, o) for s, o in zip(specs, octets, strict=True))
    pattern = parse_address_pattern(".".join(specs))
    assert pattern.matches(".".join(map(str, octets)), 20880) is expected


# ---------------------------------------------------------------- string matchers (StringMatchTest)


def test_string_match_known_answers() -> None:
    exact = parse_string_match({"exact": "qinliujie"})
    assert exact.matches("qinliujie") and not exact.matches("other") and not exact.matches(None)
    prefix = parse_string_match({"prefix": "org.apache.dubbo.rpc.cluster.router.mesh"})
    assert prefix.matches("org.apache.dubbo.rpc.cluster.router.mesh.test")
    assert not prefix.matches("com.alibaba.hsf") and not prefix.matches(None)
    regex = parse_string_match({"regex": "org.apache.dubbo.rpc.cluster.router.mesh.*"})
    assert regex.matches("org.apache.dubbo.rpc.cluster.router.mesh")
    assert regex.matches("org.apache.dubbo.rpc.cluster.router.mesh.test")
    assert not regex.matches("com.alibaba.hsf") and not regex.matches("com.taobao")
    empty = parse_string_match({"empty": "empty"})
    assert not empty.matches("com.alibaba.hsf") and empty.matches("") and empty.matches(None)
    noempty = parse_string_match({"noempty": "noempty"})
    assert (
        noempty.matches("com.alibaba.hsf") and not noempty.matches("") and not noempty.matches(None)
    )


@given(pattern=st.text(max_size=20), value=st.text(max_size=20))
def test_string_match_properties(pattern: str, value: str) -> None:
    assert parse_string_match({"exact": pattern}).matches(value) is (value == pattern)
    assert parse_string_match({"prefix": pattern}).matches(value) is value.startswith(pattern)
    import re

    assert parse_string_match({"regex": re.escape(pattern)}).matches(pattern)
    assert parse_string_match({"wildcard": "*"}).matches(value)


# ---------------------------------------------------------------- router-wide properties

tags_strategy = st.lists(st.sampled_from(["", "a", "b", "c"]), min_size=1, max_size=10)


@given(
    tags=tags_strategy,
    request_tag=st.sampled_from(["", "a", "b", "z"]),
    force=st.booleans(),
    candidates=st.integers(min_value=1),
)
def test_static_routing_properties(
    tags: list[str], request_tag: str, force: bool, candidates: int
) -> None:
    snapshot = Snapshot(
        tuple(
            URL.parse(f"tri://10.0.0.{i}:1/s" + (f"?dubbo.tag={t}" if t else ""))
            for i, t in enumerate(tags)
        )
    )
    candidates &= snapshot.all
    attachments = {"dubbo.tag": request_tag} if request_tag else {}
    if force:
        attachments["dubbo.force.tag"] = "true"
    result = set(chosen(TagRouter(), snapshot, call(**attachments), candidates=candidates))
    offered = set(iter_bits(candidates))
    assert result <= offered
    same_tag = {i for i in offered if tags[i] == request_tag}
    untagged = {i for i in offered if not tags[i]}
    if not request_tag:
        assert result == untagged
    elif same_tag:
        assert result == same_tag
    else:
        assert result == (set() if force else untagged)


# ---------------------------------------------------------------- the documentation's example

DOC = Path(__file__).resolve().parents[2] / "docs" / "routing.md"


def doc_block(marker: str) -> str:
    text = DOC.read_text()
    start = text.index(marker)
    return text[start : text.index("```", start)]


def test_documented_tag_example_is_true() -> None:
    router = TagRouter(parse_tag_rule(doc_block("# tag-router example"), SOURCE))
    providers = Snapshot(
        (
            URL.parse("tri://10.0.0.1:20880/demo.Greeter?dubbo.tag=blue"),  # A
            URL.parse("tri://10.0.0.2:20880/demo.Greeter"),  # B
            URL.parse("tri://10.0.0.3:20880/demo.Greeter?env=gray"),  # C
            URL.parse("tri://10.1.0.4:20880/demo.Greeter"),  # D
        )
    )
    table = [
        ({}, [1]),
        ({"dubbo.tag": "gray"}, [2]),
        ({"dubbo.tag": "gray|team1"}, [2]),
        ({"dubbo.tag": "blue"}, [0]),
        ({"dubbo.tag": "green"}, [1]),
        ({"dubbo.tag": "green", "dubbo.force.tag": "true"}, []),
        ({"dubbo.tag": "canary"}, [3]),
    ]
    for attachments, expected in table:
        assert chosen(router, providers, call(**attachments)) == expected, attachments
    chain = RouterChain([router]).bind(providers, CONSUMER)
    with pytest.raises(NoProviderError, match="after routing by tag:shop-detail"):
        chain.route(call(**{"dubbo.tag": "green", "dubbo.force.tag": "true"}))
