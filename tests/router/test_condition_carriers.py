"""Condition rules from their two carriers: registry router URLs and config-center YAML.

v3.1 cases are ported from Apache Dubbo 3.3's ``ConditionStateRouterTestV31``
(dubbo-cluster, org.apache.dubbo.rpc.cluster.router.condition.config), with its 40-provider
fixture; URL cases follow Dubbo's ``ConditionStateRouterFactory`` / ``RegistryDirectory``.
"""

from __future__ import annotations

import contextlib
import itertools
import random
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dubbo_py.errors import NoProviderError, RuleError
from dubbo_py.invocation import Invocation
from dubbo_py.router.base import Router
from dubbo_py.router.chain import RouterChain
from dubbo_py.router.condition import (
    APPLICATION_SCOPE_PRIORITY,
    SERVICE_SCOPE_PRIORITY,
    ConditionRuleSet,
    MultiDestinationRouter,
    router_from_url,
    routers_from_yaml,
    validate_rule,
    validate_yaml,
)
from dubbo_py.router.snapshot import Snapshot
from dubbo_py.url import URL, encode_component

SOURCE = "/dubbo/config/dubbo/com.foo.BarService.condition-router"
CALL = Invocation("com.foo.BarService", "getComment")


def _dubbo_v31_fixture() -> tuple[URL, ...]:
    """ConditionStateRouterTestV31.setUp: the same 20 parameter sets on two hosts."""
    params = (
        ["", ""]
        + ["env=normal"] * 3
        + ["region=beijing"] * 3
        + ["region=beijing&env=gray"] * 4
        + ["region=beijing&env=normal"]
        + ["region=hangzhou"] * 2
        + ["region=hangzhou&env=gray"] * 2
        + ["region=hangzhou&env=normal"] * 3
    )
    return tuple(
        URL.parse(f"dubbo://{host}/com.foo.BarService" + (f"?{p}" if p else ""))
        for host in ("127.0.0.1", "dubbo.apache.org")
        for p in params
    )


PROVIDERS = _dubbo_v31_fixture()
GRAY_BEIJING = URL.parse("consumer://127.0.0.1/com.foo.BarService?env=gray&region=beijing")


def route_all(
    routers: list[Router],
    providers: tuple[URL, ...] = PROVIDERS,
    consumer: URL = GRAY_BEIJING,
    call: Invocation = CALL,
) -> tuple[URL, ...]:
    snapshot = Snapshot(providers)
    mask = snapshot.all
    for router in routers:
        mask = router.bind(snapshot, consumer).route(mask, call)
    return snapshot.select(mask)


def yaml_rule(conditions: str, *, version: str = "v3.1", force: bool = False, **extra: str) -> str:
    head = f"configVersion: {version}\nscope: service\nkey: com.foo.BarService\n"
    head += f"force: {str(force).lower()}\nruntime: true\nenabled: {extra.get('enabled', 'true')}\n"
    return head + "conditions:\n" + conditions


def count(predicate: Callable[[URL], bool]) -> int:
    return sum(1 for p in PROVIDERS if predicate(p))


def env(p: URL) -> str | None:
    return p.parameters.get("env")


def region(p: URL) -> str | None:
    return p.parameters.get("region")


# --------------------------------------------------------------------------- v3.1 (Dubbo's tests)


def test_v31_parse_raw_rule() -> None:
    # ConditionStateRouterTestV31.testParseRawRule
    text = yaml_rule(
        "  - from:\n      match:\n    to:\n"
        "      - match: region=$region & version=v1\n"
        "      - match: region=$region & version=v2\n        weight: 200\n"
        "      - match: region=$region & version=v3\n        weight: 300\n"
        "  - from:\n      match: region=beijing & version=v1\n    to:\n"
        "      - match: env=$env & region=beijing\n"
    )
    (rule_set,) = routers_from_yaml(text, SOURCE)
    assert isinstance(rule_set, ConditionRuleSet)
    first, second = rule_set.members
    assert isinstance(first, MultiDestinationRouter) and isinstance(second, MultiDestinationRouter)
    assert [d.weight for d in first.destinations] == [100, 200, 300]
    assert len(second.destinations) == 1


def test_v31_multiply_condition_route() -> None:
    # ConditionStateRouterTestV31.testMultiplyConditionRoute
    text = yaml_rule(
        "  - from:\n      match: env=gray\n    to:\n      - match: env!=gray\n        weight: 100"
    )
    got = route_all(routers_from_yaml(text, SOURCE))
    assert len(got) == count(lambda p: env(p) is not None and env(p) != "gray")


def test_v31_duplicate_conditions_route_like_one() -> None:
    # ConditionStateRouterTestV31.testRemoveDuplicatesCondition
    one = (
        "  - from:\n      match: env=gray\n    to:\n      - match: env!=gray\n        weight: 100\n"
    )
    got = route_all(routers_from_yaml(yaml_rule(one + one), SOURCE))
    assert len(got) == count(lambda p: env(p) is not None and env(p) != "gray")


def test_v31_consequent_conditions_chain() -> None:
    # ConditionStateRouterTestV31.testConsequentCondition
    text = yaml_rule(
        "  - from:\n      match: env=gray\n    to:\n      - match: env!=gray\n        weight: 100\n"
        "  - from:\n      match: region=beijing\n    to:\n      - match: region=beijing\n"
        "        weight: 100\n"
        "  - from:\n    to:\n      - match: host!=127.0.0.1\n"
    )
    got = route_all(routers_from_yaml(text, SOURCE))
    expected = count(
        lambda p: env(p) not in (None, "gray") and region(p) == "beijing" and p.host != "127.0.0.1"
    )
    assert len(got) == expected == 1


def test_v31_unmatched_conditions_pass_through() -> None:
    # ConditionStateRouterTestV31.testUnMatchCondition
    text = yaml_rule(
        "  - from:\n      match: env!=gray\n    to:\n      - match: env=gray\n        weight: 100\n"
        "  - from:\n      match: region!=beijing\n    to:\n      - match: region=beijing\n"
        "        weight: 100\n"
        "  - from:\n    to:\n      - match: host!=127.0.0.1\n"
    )
    got = route_all(routers_from_yaml(text, SOURCE))
    assert len(got) == count(lambda p: p.host != "127.0.0.1") == 20


def test_v31_forced_rule_with_no_survivors_gives_nothing() -> None:
    # ConditionStateRouterTestV31.testMatchAndRouteZero
    text = yaml_rule(
        "  - from:\n      match: env=gray\n"
        "    to:\n      - match: env=ErrTag\n        weight: 100\n"
        "  - from:\n      match: region!=beijing\n    to:\n      - match: region=beijing\n"
        "  - from:\n    to:\n      - match: host!=127.0.0.1\n",
        force=True,
    )
    assert route_all(routers_from_yaml(text, SOURCE)) == ()


def test_v31_unforced_condition_with_no_survivors_is_ignored() -> None:
    # ConditionStateRouterTestV31.testMatchRouteZeroAndIgnore
    text = yaml_rule(
        "  - from:\n      match: region=beijing\n    to:\n      - match: region!=beijing\n"
        "        weight: 100\n"
        "  - from:\n    to:\n      - match: host!=127.0.0.1\n"
        "  - from:\n      match: env=gray\n"
        "    to:\n      - match: env=ErrTag\n        weight: 100\n"
    )
    got = route_all(routers_from_yaml(text, SOURCE))
    expected = count(lambda p: region(p) not in (None, "beijing") and p.host != "127.0.0.1")
    assert len(got) == expected == 7


def test_v31_condition_without_destinations_disables_traffic() -> None:
    # ConditionStateRouterTestV31.testTrafficDisabledAndIgnoreConditionRouteForce
    text = yaml_rule(
        "  - from:\n      match: host=127.0.0.1\n"
        "  - from:\n      match: env=gray\n    to:\n      - match: env!=gray\n        weight: 100\n"
        "  - to:\n      - match: region!=beijing\n"
    )
    assert route_all(routers_from_yaml(text, SOURCE)) == ()


def test_v31_multiple_destinations_are_chosen_by_weight() -> None:
    # ConditionStateRouterTestV31.testMultiplyDestination: sizes 8, 6, 4 and 2 all occur
    text = yaml_rule(
        "  - from:\n      match: env=gray\n    to:\n"
        "      - match: env!=gray\n        weight: 100\n"
        "      - match: env=gray\n        weight: 900\n"
        "  - from:\n      match: region=beijing\n    to:\n"
        "      - match: region!=beijing\n        weight: 100\n"
        "      - match: region=beijing\n        weight: 200\n"
    )
    (rule_set,) = routers_from_yaml(text, SOURCE)
    assert isinstance(rule_set, ConditionRuleSet)
    rng = random.Random(20240611).random
    seeded = ConditionRuleSet(
        rule_set.name,
        rule_set.priority,
        tuple(_with_rng(m, rng) for m in rule_set.members),
    )
    sizes = [len(route_all([seeded])) for _ in range(400)]
    assert set(sizes) == {8, 6, 4, 2}
    # env=gray (weight 900 of 1000) is picked far more often than env!=gray
    gray = sum(1 for s in sizes if s in (8, 4))
    assert gray > 300


def _with_rng(member: Router, rng: Callable[[], float]) -> Router:
    assert isinstance(member, MultiDestinationRouter)
    return MultiDestinationRouter(
        member.when,
        member.destinations,
        name=member.name,
        priority=member.priority,
        force=member.force,
        ratio=member.ratio,
        traffic_disable=member.traffic_disable,
        enabled=member.enabled,
        rng=rng,
    )


def _single(conditions: str, rng: Callable[[], float] = random.random) -> list[Router]:
    (rule_set,) = routers_from_yaml(yaml_rule(conditions), SOURCE)
    assert isinstance(rule_set, ConditionRuleSet)
    return [_with_rng(m, rng) for m in rule_set.members]


@pytest.mark.parametrize(
    ("draw", "expected_env"), [(0.05, "normal"), (0.5, "gray"), (0.99, "gray")]
)
def test_v31_weighted_pick_follows_the_draw(draw: float, expected_env: str) -> None:
    routers = _single(
        "  - to:\n      - match: env=normal\n        weight: 100\n"
        "      - match: env=gray\n        weight: 900\n",
        rng=lambda: draw,
    )
    assert {env(p) for p in route_all(routers)} == {expected_env}


def test_v31_ratio_rejects_too_small_a_share() -> None:
    # MultiDestConditionRouter: keep the destination only if size*100/candidates > ratio
    base = "  - to:\n      - match: region=hangzhou\n"
    hangzhou = count(lambda p: region(p) == "hangzhou")  # 14 of 40 = 35%
    assert len(route_all(_single(base + "    ratio: 34\n"))) == hangzhou
    assert route_all(_single(base + "    ratio: 35\n")) == ()


def test_v31_traffic_disable_blocks_matching_calls() -> None:
    text = (
        "  - from:\n      match: env=gray\n"
        "    trafficDisable: true\n    to:\n      - match: env=gray\n"
    )
    assert route_all(_single(text)) == ()
    other = URL.parse("consumer://127.0.0.1/com.foo.BarService?env=normal")
    assert len(route_all(_single(text), consumer=other)) == 40


def test_v31_condition_force() -> None:
    text = "  - to:\n      - match: env=nowhere\n"
    assert len(route_all(_single(text))) == 40
    assert route_all(_single(text + "    force: true\n")) == ()


def test_v31_empty_match_selects_all_and_false_selects_none() -> None:
    assert len(route_all(_single("  - to:\n      - match:\n"))) == 40
    assert (
        len(route_all(_single("  - to:\n      - match: false\n"))) == 40
    )  # no survivors, not forced
    assert route_all(_single("  - to:\n      - match: false\n    force: true\n")) == ()


def test_v31_priority_orders_conditions() -> None:
    # `to` selecting nothing with force stops the walk; which runs first decides the result.
    text = (
        "  - priority: 2\n    to:\n      - match: env=nowhere\n    force: true\n"
        "  - priority: 1\n    trafficDisable: true\n"
    )
    routers = _single(text)
    assert [r.priority for r in routers] == [1, 2]


def test_v31_reads_invocation_in_from() -> None:
    text = (
        "  - from:\n      match: method=getComment & attachments[lane]=blue\n"
        "    to:\n      - match: env=gray\n"
    )
    blue = Invocation("com.foo.BarService", "getComment", attachments={"lane": "blue"})
    assert {env(p) for p in route_all(_single(text), call=blue)} == {"gray"}
    assert len(route_all(_single(text), call=CALL)) == 40


# --------------------------------------------------------------------------- v3.0 documents


V30 = """configVersion: v3.0
scope: {scope}
force: {force}
runtime: true
enabled: {enabled}
key: com.foo.BarService
conditions:
{conditions}"""


def v30(
    conditions: str, scope: str = "service", force: str = "false", enabled: str = "true"
) -> str:
    return V30.format(scope=scope, force=force, enabled=enabled, conditions=conditions)


def test_v30_conditions_apply_in_order() -> None:
    text = v30("  - => region = hangzhou,beijing\n  - => region != beijing\n")
    got = route_all(routers_from_yaml(text, SOURCE))
    assert {region(p) for p in got} == {"hangzhou"}


def test_v30_document_force_and_enabled() -> None:
    assert route_all(routers_from_yaml(v30("  - => region = mars\n", force="true"), SOURCE)) == ()
    assert len(route_all(routers_from_yaml(v30("  - => region = mars\n"), SOURCE))) == 40
    assert len(route_all(routers_from_yaml(v30("  - => false\n", enabled="false"), SOURCE))) == 40


def test_v30_example_from_dubbo_docs() -> None:
    text = v30("  - method=getComment => region=hangzhou\n", force="true")
    got = route_all(routers_from_yaml(text, SOURCE))
    assert {region(p) for p in got} == {"hangzhou"}
    other = Invocation("com.foo.BarService", "addComment")
    assert len(route_all(routers_from_yaml(text, SOURCE), call=other)) == 40


def test_v30_bare_false_condition_blocks() -> None:
    assert route_all(routers_from_yaml(v30("  - false\n"), SOURCE)) == ()


def test_missing_config_version_is_v30() -> None:
    text = "scope: service\nkey: com.foo.BarService\nconditions:\n  - => region = hangzhou\n"
    assert {region(p) for p in route_all(routers_from_yaml(text, SOURCE))} == {"hangzhou"}


@pytest.mark.parametrize(
    ("scope", "priority"),
    [("service", SERVICE_SCOPE_PRIORITY), ("application", APPLICATION_SCOPE_PRIORITY)],
)
def test_scope_sets_priority(scope: str, priority: int) -> None:
    (router,) = routers_from_yaml(v30("  - => a = b\n", scope=scope), SOURCE)
    assert router.priority == priority
    assert (SERVICE_SCOPE_PRIORITY, APPLICATION_SCOPE_PRIORITY) == (140, 150)


def test_router_names_identify_kind_and_source() -> None:
    (router,) = routers_from_yaml(
        v30("  - => a = b\n  - => c = d\n"), "demo.Greeter:1.0.0.condition-router"
    )
    assert isinstance(router, ConditionRuleSet)
    assert router.name == "condition(demo.Greeter:1.0.0.condition-router)"
    assert [m.name for m in router.members] == [
        "condition(demo.Greeter:1.0.0.condition-router#0)",
        "condition(demo.Greeter:1.0.0.condition-router#1)",
    ]
    (unnamed,) = routers_from_yaml(v30("  - => a = b\n"), "")
    assert unnamed.name == "condition(service:com.foo.BarService)"


# --------------------------------------------------------------------------- YAML errors

V31_HEAD = "configVersion: v3.1\nscope: service\nkey: x\nconditions:\n"


@pytest.mark.parametrize(
    ("text", "line", "column", "reason"),
    [
        (
            v30("  - method=getComment => region==hangzhou\n"),
            8,
            33,
            "conditions[0]: expected a value",
        ),
        (v30('  - "method=getComment => region==hangzhou"\n'), 8, 34, "expected a value after '='"),
        (
            v30("  - >\n    method=getComment =>\n    region==x\n"),
            8,
            5,
            "line 1, column 29 of the rule",
        ),
        (
            v30("  - |\n    method=getComment =>\n      region==x\n"),
            10,
            14,
            "expected a value after '='",
        ),
        (v30("  - => a = b\n  - {x: 1}\n"), 9, 5, "conditions[1] must be a 'when => then' string"),
        ("scope: [service\nkey: x\n", 2, 4, "invalid YAML"),
        ("a: 1\n---\nb: 2\n", 2, 1, "single document"),
        ("- a\n- b\n", 1, 1, "must be a mapping"),
        ("scope: service\nkey: \x1f\n", 2, 6, "character '\\x1f' is not allowed"),
        ("scope: service\nkey: x\nconditions: []\n", 3, 13, "non-empty list"),
        (
            "scope: service\nkey: x\nforce: maybe\nconditions: ['=> a=b']\n",
            3,
            8,
            "force must be true or false",
        ),
        (
            "scope: service\nkey: x\npriority: high\nconditions: ['=> a=b']\n",
            3,
            11,
            "priority must be an integer",
        ),
        (
            "configVersion: v9\nscope: service\nkey: x\nconditions: ['=> a=b']\n",
            1,
            16,
            "configVersion",
        ),
        (
            V31_HEAD + "  - from:\n      match: a=\n",
            6,
            16,
            "conditions[0].from.match: expected a value after '='",
        ),
        (
            V31_HEAD + "  - to:\n      - match: a=b\n        weight: -1\n",
            7,
            17,
            "weight must not be negative",
        ),
        (
            V31_HEAD + "  - to:\n      - match: a=b\n    ratio: 120\n",
            7,
            12,
            "ratio must be within 0..100",
        ),
        (
            V31_HEAD + "  - to: {match: a=b}\n",
            5,
            9,
            "must be a list of destinations",
        ),
        (
            V31_HEAD + "  - '=> a = b'\n",
            5,
            5,
            "must be a mapping with 'from' and 'to'",
        ),
    ],
)
def test_yaml_errors_name_source_place_and_reason(
    text: str, line: int, column: int, reason: str
) -> None:
    with pytest.raises(RuleError) as info:
        routers_from_yaml(text, SOURCE)
    err = info.value
    assert err.source == SOURCE
    assert reason in err.reason, err.reason
    assert (err.line, err.column) == (line, column), str(err)


@pytest.mark.parametrize("text", ["", "# only a comment\n"])
def test_empty_yaml_is_an_error(text: str) -> None:
    with pytest.raises(RuleError, match="empty"):
        routers_from_yaml(text, SOURCE)


def test_yaml_is_safe_loaded() -> None:
    text = "scope: !!python/object/apply:os.system ['echo pwned']\nkey: x\nconditions: ['=> a=b']\n"
    with pytest.raises(RuleError, match="invalid YAML"):
        routers_from_yaml(text, SOURCE)


def test_validate_yaml_and_rule() -> None:
    validate_yaml(v30("  - => a = b\n"), SOURCE)  # valid: no exception
    validate_rule("host = 1.1.1.1 => host = 2.2.2.2", "cli")
    with pytest.raises(RuleError):
        validate_yaml(v30("  - => a = \n"), SOURCE)
    with pytest.raises(RuleError, match="cli:1:6"):
        validate_rule("host 1 => x = y", "cli")


def test_arbitrary_yaml_raises_only_rule_error() -> None:
    # a small, deterministic fuzz over YAML-ish fragments
    parts = [
        "scope: service\n",
        "key: x\n",
        "conditions:\n",
        "  - => a = b\n",
        "  - from: {match: a=b}\n",
        "configVersion: v3.1\n",
        "  - [1, 2]\n",
        "force: [\n",
        "  - to: 3\n",
        "\t",
        "enabled: 7\n",
    ]
    for combo in itertools.islice(itertools.permutations(parts, 4), 3000):
        with contextlib.suppress(RuleError):
            routers_from_yaml("".join(combo), SOURCE)


_yaml_pieces = st.sampled_from(
    [
        "scope: service\n",
        "scope: application\n",
        "key: x\n",
        "conditions:\n",
        "  - => a = b\n",
        "  - a = $b => c != 1~2\n",
        "  - from: {match: a=b}\n",
        "    to: [{match: c=d, weight: 5}]\n",
        "configVersion: v3.1\n",
        "configVersion: v3.0\n",
        "force: [\n",
        "&x [*x]\n",
        "? [a]\n: b\n",
        "!!binary AAA\n",
        "\t",
        "'",
        '"',
        "- ",
        "enabled: 7\n",
        "  - {to: 3, ratio: x}\n",
        "1: 2\n",
        "priority: 1e3\n",
    ]
)


def test_a_repeated_field_takes_its_last_value() -> None:
    """As PyYAML and Dubbo's SnakeYAML load it; errors point at that last occurrence."""
    text = "scope: service\nkey: x\nconditions:\nconditions:\n  - => a = b\n"
    (router,) = routers_from_yaml(text, SOURCE)
    assert router.name.startswith("condition(")
    repeated_empty = "scope: service\nkey: x\nconditions: [' => a = b']\nconditions:\n"
    with pytest.raises(RuleError) as err:
        routers_from_yaml(repeated_empty, SOURCE)
    assert err.value.line == 4


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=60), st.lists(_yaml_pieces, max_size=8).map("".join)))
def test_arbitrary_yaml_text_raises_only_rule_error(text: str) -> None:
    try:
        routers = routers_from_yaml(text, SOURCE)
    except RuleError as err:
        assert err.source == SOURCE
    else:
        assert len(routers) == 1 and routers[0].name.startswith("condition(")


# --------------------------------------------------------------------------- registry URLs


def rule_url(rule: str, protocol: str = "condition", **params: str) -> URL:
    query = "&".join(f"{k}={v}" for k, v in {"category": "routers", **params}.items())
    return URL.parse(
        f"{protocol}://0.0.0.0/com.foo.BarService?{query}&rule={encode_component(rule)}"
    )


def test_url_router_reads_rule_priority_force() -> None:
    url = rule_url(
        "host = 127.0.0.1 => region = hangzhou",
        dynamic="false",
        enabled="true",
        force="false",
        priority="1",
        runtime="true",
    )
    router = router_from_url(url, "/dubbo/com.foo.BarService/routers/x")
    assert router.priority == 1
    assert router.name == "condition(/dubbo/com.foo.BarService/routers/x)"
    assert {region(p) for p in route_all([router])} == {"hangzhou"}


def test_url_router_from_a_registry_node_name() -> None:
    inner = rule_url("=> region = beijing", force="true")
    node = inner.encode()  # what Dubbo writes under /dubbo/<service>/routers/
    router = router_from_url(URL.decode(node))
    assert {region(p) for p in route_all([router])} == {"beijing"}
    assert router.priority == 0  # Dubbo's default


def test_route_protocol_with_router_parameter() -> None:
    router = router_from_url(rule_url("=> region = beijing", protocol="route", router="condition"))
    assert {region(p) for p in route_all([router])} == {"beijing"}


def test_url_router_force_and_enabled() -> None:
    assert route_all([router_from_url(rule_url("=> region = mars", force="true"))]) == ()
    assert len(route_all([router_from_url(rule_url("=> region = mars"))])) == 40
    assert len(route_all([router_from_url(rule_url("=> false", enabled="false"))])) == 40


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        (rule_url("=> a = b", protocol="route"), "not a condition router URL"),
        (rule_url("=> a = b", router="script"), "router type 'script'"),
        (URL.parse("condition://0.0.0.0/x?category=routers"), "no 'rule' parameter"),
        (rule_url("=> a = b", priority="high"), "priority 'high' is not an integer"),
        (URL.parse("condition://0.0.0.0/x?category=providers&rule=a%3Db"), "category 'providers'"),
    ],
)
def test_bad_router_urls(url: URL, reason: str) -> None:
    with pytest.raises(RuleError, match=reason):
        router_from_url(url, "node")


def test_bad_rule_in_url_names_source_and_place() -> None:
    with pytest.raises(RuleError) as info:
        router_from_url(rule_url("host = 1.1.1.1 => region =="), "/dubbo/x/routers/n")
    assert (info.value.source, info.value.line, info.value.column) == ("/dubbo/x/routers/n", 1, 27)


# --------------------------------------------------------------------------- in a chain


def test_routers_compose_in_a_chain_by_priority() -> None:
    url_router = router_from_url(
        rule_url("=> env = gray", priority="200", force="true"), "routers/n"
    )
    (yaml_router,) = routers_from_yaml(v30("  - => region = beijing\n", force="true"), SOURCE)
    chain = RouterChain([url_router, yaml_router])
    bound = chain.bind(Snapshot(PROVIDERS), GRAY_BEIJING)
    got = bound.route(CALL)
    assert {(region(p), env(p)) for p in got} == {("beijing", "gray")}
    _, steps = bound.trace(CALL)
    assert [s.router for s in steps] == [yaml_router.name, url_router.name]


def test_chain_names_the_condition_router_that_emptied_the_list() -> None:
    router = router_from_url(rule_url("=> false"), "/dubbo/com.foo.BarService/routers/block")
    bound = RouterChain([router]).bind(Snapshot(PROVIDERS), GRAY_BEIJING)
    with pytest.raises(NoProviderError, match="routers/block"):
        bound.route(CALL)


# --------------------------------------------------------------------------- the docs


def test_examples_in_the_routing_docs_are_valid() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "routing.md").read_text("utf-8")
    # The condition router's section; the other routers' examples are checked by their tests.
    doc = doc[doc.index("## Condition router") : doc.index("## Affinity router")]
    blocks = doc.split("```")[1::2]
    yaml_docs = [b.removeprefix("yaml\n") for b in blocks if b.startswith("yaml\n")]
    assert len(yaml_docs) == 2
    for text in yaml_docs:
        (router,) = routers_from_yaml(text, "docs/routing.md")
        assert router.priority == SERVICE_SCOPE_PRIORITY
    urls = [line for b in blocks for line in b.splitlines() if line.startswith("condition://")]
    assert len(urls) == 1
    router = router_from_url(URL.parse(urls[0]), "docs")
    assert router.priority == 1
    validate_rule("method = SayHello & attachments[lane] = gray => env = gray", "docs")


# --------------------------------------------------------------------------- what Dubbo accepts


def test_a_document_without_scope_or_key_is_accepted_and_its_location_decides() -> None:
    # Dubbo 3.3 reads neither field: the key the document is stored at makes it a service
    # (ServiceStateRouter, 140) or application (AppStateRouter, 150) rule.
    from dubbo_py.registry.rule_kinds import Target, kind_named

    condition = kind_named("condition-router")
    assert condition is not None

    bare = "configVersion: v3.0\nforce: true\nconditions:\n  - '=> host = 10.0.0.5'\n"
    service = condition.compile(Target.SERVICE, bare, "demo.Greeter::.condition-router")
    app = condition.compile(Target.APPLICATION, bare, "shop.condition-router")
    assert [r.priority for r in service] == [SERVICE_SCOPE_PRIORITY]
    assert [r.priority for r in app] == [APPLICATION_SCOPE_PRIORITY]
    # a scope contradicting the location, or one Dubbo does not know, is read as Dubbo reads it
    odd = "scope: application\nkey: shop\nconditions: ['=> host = 10.0.0.5']\n"
    routed = condition.compile(Target.SERVICE, odd, "demo.Greeter::.condition-router")
    assert routed[0].priority == SERVICE_SCOPE_PRIORITY
    region = odd.replace("scope: application", "scope: region")
    assert condition.compile(Target.APPLICATION, region, "x")[0].priority == 150
    # with no location (route test, validate without a key) the scope field says, default service
    assert routers_from_yaml(bare, "f")[0].priority == SERVICE_SCOPE_PRIORITY
    assert routers_from_yaml(odd, "f")[0].priority == APPLICATION_SCOPE_PRIORITY


def test_a_document_without_scope_routes_with_force() -> None:
    bare = "conditions:\n  - '=> host = 10.9.9.9'\nforce: true\n"
    [router] = routers_from_yaml(bare, "demo.Greeter::.condition-router", "service")
    providers = (
        URL.parse("tri://10.0.0.5:1/demo.Greeter"),
        URL.parse("tri://10.0.0.6:1/demo.Greeter"),
    )
    bound = router.bind(Snapshot(providers), URL.parse("consumer://10.0.0.1/demo.Greeter"))
    assert bound.route(0b11, Invocation("demo.Greeter", "SayHello")) == 0
