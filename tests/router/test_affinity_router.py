"""The affinity router against the test cases of Dubbo 3.3 and dubbo-go 3.3, as vectors.

Sources (read, not copied): apache/dubbo ``dubbo-cluster/src/test/java/org/apache/dubbo/rpc/
cluster/router/affinity/AffinityRouteTest.java`` (PR #14787) and apache/dubbo-go
``cluster/router/affinity/router_test.go``. Both route the same 40 providers (20 on
127.0.0.1, 20 on dubbo.apache.org, 16 of them with region=beijing) for a consumer with
``env=gray&region=beijing``.

Deliberate differences (docs/routing.md, "Where dubbo-py differs"):

* dubbo-go's "bad ratio" case (ratio 101) leaves the rule without effect; Dubbo marks it
  invalid. dubbo-py refuses the document with an error naming the field, so the last good
  document stays in force -- the vector checks the refusal.
* dubbo-go reads ``enabled`` as false when the field is absent (Go's zero value); Dubbo's
  AbstractRouterRule defaults it to true, and so does dubbo-py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dubbo_py.errors import RuleError
from dubbo_py.invocation import Invocation
from dubbo_py.router import affinity
from dubbo_py.router.base import PASS_THROUGH
from dubbo_py.router.chain import RouterChain
from dubbo_py.router.snapshot import Snapshot
from dubbo_py.rule_fields import unread_fields
from dubbo_py.url import URL

_PARAMS = [
    "",
    "",
    "env=normal",
    "env=normal",
    "env=normal",
    "region=beijing",
    "region=beijing",
    "region=beijing",
    "region=beijing&env=gray",
    "region=beijing&env=gray",
    "region=beijing&env=gray",
    "region=beijing&env=gray",
    "region=beijing&env=normal",
    "region=hangzhou",
    "region=hangzhou",
    "region=hangzhou&env=gray",
    "region=hangzhou&env=gray",
    "region=hangzhou&env=normal",
    "region=hangzhou&env=normal",
    "region=hangzhou&env=normal",
]
#: The providers of both test suites (the ports only make each address distinct).
PROVIDERS = tuple(
    URL.parse(f"dubbo://{host}:{20000 + i}/com.foo.BarService" + (f"?{q}" if q else ""))
    for host in ("127.0.0.1", "dubbo.apache.org")
    for i, q in enumerate(_PARAMS)
)
CONSUMER = URL.parse("consumer://127.0.0.1/com.foo.BarService?env=gray&region=beijing")
CALL = Invocation("com.foo.BarService", "getComment")
BEIJING = tuple(p for p in PROVIDERS if p.parameters.get("region") == "beijing")


def _doc(key: str = "region", ratio: object = 20, **fields: object) -> str:
    head = {
        "configVersion": "v3.1",
        "scope": "service",
        "key": "service.apache.com",
        "enabled": "true",
        "runtime": "true",
    }
    head.update({k: str(v) for k, v in fields.items()})
    lines = [f"{k}: {v}" for k, v in head.items()]
    lines += ["affinityAware:", f"  key: {key}", f"  ratio: {ratio}"]
    return "\n".join(lines) + "\n"


def _route(text: str, consumer: URL = CONSUMER, providers: tuple[URL, ...] = PROVIDERS) -> tuple:
    routers = affinity.service_routers(text, "service.apache.com.affinity-router")
    chain = RouterChain(routers).bind(Snapshot(providers), consumer)
    return chain.route(CALL)


# name, document, expected survivors
VECTORS = [
    # Dubbo testMetAffinityRoute / dubbo-go "test base affinity router": 16 of 40 (40 %) >= 20 %
    ("dubbo: met, ratio 20", _doc(ratio=20), BEIJING),
    # Dubbo testUnMetAffinityRoute / dubbo-go "test ratio false": 40 % < 80 %: everyone
    ("dubbo: unmet, ratio 80", _doc(ratio=80), PROVIDERS),
    # Dubbo testRatioEqualsAffinityRoute: exactly 40 % >= 40 %
    ("dubbo: ratio equal to the share", _doc(ratio=40), BEIJING),
    # Dubbo testRatioNotEqualsAffinityRoute: 40 % < 40.1 %
    ("dubbo: ratio 40.1", _doc(ratio=40.1), PROVIDERS),
    # dubbo-go "test ignore affinity route": no provider (and not the consumer) has bad-key
    ("dubbo-go: key nobody has", _doc(key="bad-key", ratio=80), PROVIDERS),
    # Dubbo reads the ratio with Double.valueOf(String.valueOf(..)): a quoted number is one
    ("quoted ratio", _doc(ratio="'20'"), BEIJING),
    ("disabled", _doc(enabled="false"), PROVIDERS),
    ("valid: false", _doc(valid="false"), PROVIDERS),
    ("default ratio 0", _doc(ratio=0), BEIJING),
]


@pytest.mark.parametrize(("name", "text", "expected"), VECTORS, ids=[v[0] for v in VECTORS])
def test_vectors(name: str, text: str, expected: tuple[URL, ...]) -> None:
    assert _route(text) == expected


def test_dubbo_go_bad_ratio_is_refused_naming_the_field() -> None:
    # dubbo-go "test bad ratio" (101): there the rule is dropped; here the document is refused
    # so the consumer keeps its last good one.
    with pytest.raises(RuleError, match=r"affinityAware.ratio must be within 0..100"):
        _route(_doc(ratio=101))
    with pytest.raises(RuleError, match=r"affinityAware.ratio must be within 0..100"):
        _route(_doc(ratio=-1))


def test_dubbo_parser_refusals() -> None:
    # Dubbo's AffinityRuleParser: not v3.1, or no affinity key, is an invalid rule.
    with pytest.raises(RuleError, match=r"configVersion must be v3\.1"):
        affinity.parse_affinity_rule(_doc().replace("v3.1", "v3.0"), "x")
    with pytest.raises(RuleError, match=r"affinityAware\.key must name"):
        affinity.parse_affinity_rule(_doc(key="''"), "x")
    with pytest.raises(RuleError, match="affinityAware must be a mapping"):
        affinity.parse_affinity_rule("configVersion: v3.1\naffinityAware: region\n", "x")
    with pytest.raises(RuleError, match="ratio must be a number"):
        affinity.parse_affinity_rule(_doc(ratio="lots"), "x")


def test_a_consumer_without_the_parameter_is_not_routed() -> None:
    # Dubbo: the matcher has no value to compare with, the router returns its input.
    consumer = URL.parse("consumer://127.0.0.1/com.foo.BarService?env=gray")
    rule = affinity.service_routers(_doc(ratio=0), "k")[0]
    assert rule.bind(Snapshot(PROVIDERS), consumer) is PASS_THROUGH
    assert _route(_doc(ratio=0), consumer) == PROVIDERS


def test_ratio_zero_keeps_an_empty_affinity_result_as_dubbo_does() -> None:
    consumer = URL.parse("consumer://127.0.0.1/com.foo.BarService?region=shanghai")
    with pytest.raises(Exception, match="shanghai") as caught:
        _route(_doc(ratio=0), consumer)
    assert type(caught.value).__name__ == "NoProviderError"
    assert _route(_doc(ratio=1), consumer) == PROVIDERS  # 0 % < 1 %: everyone


def test_the_share_is_of_the_candidates_the_router_is_given() -> None:
    # Only the 20 providers of one host reach the router: 8 of them in beijing (40 %).
    bound = affinity.service_routers(_doc(ratio=40), "k")[0].bind(Snapshot(PROVIDERS), CONSUMER)
    first_host = sum(1 << i for i, p in enumerate(PROVIDERS) if p.host == "127.0.0.1")
    kept = bound.route(first_host, CALL)
    assert kept.bit_count() == 8
    three_beijing_of_five = sum(1 << i for i in (0, 1, 5, 6, 7))  # 3 of 5 = 60 %
    assert bound.route(three_beijing_of_five, CALL) == sum(1 << i for i in (5, 6, 7))
    two_of_six = sum(1 << i for i in (0, 1, 2, 3, 5, 6))  # 33 % < 40 %
    assert bound.route(two_of_six, CALL) == two_of_six


def test_priorities_and_place_in_the_chain() -> None:
    service = affinity.service_routers(_doc(), "a")[0]
    app = affinity.provider_application_routers(_doc(), "b")[0]
    assert (service.priority, app.priority) == (130, 135)


def test_fields_with_no_effect_are_in_the_table_and_named() -> None:
    text = _doc(ratio=20, force="true", priority=3) + "owner: team-a\n"
    rule = affinity.parse_affinity_rule(text, "src-1")
    names = [name for name, _ in rule.ignored]
    assert names == ["runtime", "force", "priority", "owner"]
    # The no-silent-drop table names the same fields: Dubbo's own as ignored, with a reason,
    # the unknown one as not a field (consumers log and count them once per document version,
    # tests/registry/test_rule_fields_consumers.py).
    notes = unread_fields(yaml.safe_load(text), affinity.FIELDS)
    assert [(n.path, n.known) for n in notes] == [
        ("runtime", True),
        ("force", True),
        ("priority", True),
        ("owner", False),
    ]


def test_the_example_in_the_routing_docs_is_valid() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "routing.md").read_text("utf-8")
    doc = doc[doc.index("## Affinity router") : doc.index("## Mock selector")]
    [text] = [b.removeprefix("yaml\n") for b in doc.split("```")[1::2] if b.startswith("yaml\n")]
    rule = affinity.parse_affinity_rule(text, "docs/routing.md")
    assert (rule.affinity_key, rule.ratio, rule.enabled, rule.ignored) == ("region", 20, True, ())
