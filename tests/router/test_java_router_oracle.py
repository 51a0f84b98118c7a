"""dubbo-py's routers and configurators against Apache Dubbo 3.3.6's own, case by case.

The fast vectors are cases on which the differential run (scripts/differential_routers.py)
once found dubbo-py answering differently from Dubbo Java; each holds the answer Dubbo 3.3.6
gave, checked here against dubbo-py alone. The live test asks the real JVM oracle
(tests/peers/java/oracle) the vectors and a few hundred generated cases, and requires every
difference to be one written down as deliberate (tests/support/router_oracle.documented).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import router_cases
from tests.support.router_oracle import JavaOracle, compare, documented, dubbo_py_answer

_PROVIDER = (
    "dubbo://{host}:20880/com.foo.BarService?side=provider&application=pay"
    "&remote.application=pay{extra}"
)

#: (name, case, Dubbo 3.3.6's answer)
VECTORS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        # Dubbo's ParamMatch hands a missing parameter to its matcher, so `empty` selects the
        # provider without `env`; dubbo-py matched none and the call fell back to static tags.
        "tag match `empty` selects the provider without the parameter",
        {
            "kind": "tag",
            "rule": (
                "configVersion: v3.0\nkey: pay\ntags:\n  - name: blue\n    match:\n"
                "      - key: env\n        value: {empty: 'true'}\n"
            ),
            "consumer": (
                "consumer://10.0.1.3/com.foo.BarService?side=consumer&interface=com.foo.BarService"
            ),
            "providers": [
                _PROVIDER.format(host="10.0.0.1", extra="&env=gray"),
                _PROVIDER.format(host="10.0.0.2", extra=""),
                _PROVIDER.format(host="10.0.0.3", extra="&env=normal"),
            ],
            "invocation": {
                "method": "sayHello",
                "arguments": ["foo"],
                "attachments": {"dubbo.tag": "blue"},
            },
        },
        {"kept": [1]},
    ),
    (
        # Dubbo applies one document's items sorted by host as text (0.0.0.0 first), so the
        # item for one host wins wherever it stands; dubbo-py applied document order.
        "a configurator item for one host wins over a later 0.0.0.0 item",
        {
            "kind": "configurator",
            "rule": (
                "configVersion: v2.7\nscope: service\nkey: com.foo.BarService\nconfigs:\n"
                "  - side: provider\n    addresses: ['10.0.0.1']\n    parameters:\n"
                "      timeout: '3000'\n"
                "  - side: provider\n    addresses: ['0.0.0.0']\n    parameters:\n"
                "      timeout: '1000'\n"
            ),
            "consumer": (
                "consumer://10.0.1.3/com.foo.BarService?side=consumer&interface=com.foo.BarService"
            ),
            "providers": [_PROVIDER.format(host="10.0.0.1", extra="")],
        },
        {
            "urls": [
                {
                    "application": "pay",
                    "providerAddresses": "10.0.0.1",
                    "remote.application": "pay",
                    "side": "provider",
                    "timeout": "3000",
                }
            ]
        },
    ),
]


_CONSUMER = (
    "consumer://10.0.0.1/com.foo.BarService?side=consumer&interface=com.foo.BarService"
    "&application=shop&region=hangzhou"
)
_HELD = [
    "dubbo://10.0.0.2:20880/com.foo.BarService?side=provider&application=cart"
    "&remote.application=cart",
    "dubbo://10.0.0.3:20880/com.foo.BarService?side=provider&application=cart"
    "&remote.application=cart&region=hangzhou",
]
_SERVICE_DOCUMENT = "configVersion: v3.0\nscope: service\nkey: com.foo.BarService\nconfigs:\n"


def _consumer_case(items: str) -> dict[str, Any]:
    return {
        "kind": "consumer-configurator",
        "rule": _SERVICE_DOCUMENT + items,
        "consumer": _CONSUMER,
        "providers": _HELD,
    }


#: Consumer-side configurator cases (the consumer-configurator kind) where dubbo-py differs
#: from Dubbo on purpose: (name, case, Dubbo 3.3.6's answer, the reason documented() gives).
#: dubbo-py has one set of consumer parameters, what Dubbo computes for the consumer URL;
#: Dubbo's RegistryDirectory also configures one override URL per provider (docs/cluster.md).
DOCUMENTED_VECTORS: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    (
        # The override URL carries application, side, group and version only: `region` of
        # the consumer is not there, so `exact` fails and `empty` holds -- the reverse of what
        # the consumer URL gets.
        "a consumer-side match.param is read on each provider's override URL too",
        _consumer_case(
            "  - side: consumer\n    match:\n      param:\n        - key: region\n"
            "          value: {exact: 'hangzhou'}\n    parameters:\n"
            "      loadbalance: 'roundrobin'\n"
            "  - side: consumer\n    match:\n      param:\n        - key: region\n"
            "          value: {empty: 'x'}\n    parameters:\n      timeout: '300'\n"
        ),
        {
            "consumer": {
                "application": "shop",
                "interface": "com.foo.BarService",
                "loadbalance": "roundrobin",
                "region": "hangzhou",
                "side": "consumer",
            },
            "urls": [{"timeout": "300"}, {"timeout": "300"}],
        },
        "match read on the consumer URL only",
    ),
    (
        "a consumer-side item narrowed by providerAddresses sets parameters for that provider",
        _consumer_case(
            "  - side: consumer\n    providerAddresses: ['10.0.0.2:20880']\n    parameters:\n"
            "      retries: '5'\n"
        ),
        {
            "consumer": {
                "application": "shop",
                "interface": "com.foo.BarService",
                "region": "hangzhou",
                "side": "consumer",
            },
            "urls": [{"providerAddresses": "10.0.0.2:20880", "retries": "5"}, {}],
        },
        "narrowed by providerAddresses not applied",
    ),
]

#: Where the two agree (held so that a change on either side shows): consumer items matched by
#: the consumer's host (an address's port is not read), a provider item applied to neither.
VECTORS.append(
    (
        "consumer-side items by the consumer's host; a provider item not applied at the consumer",
        _consumer_case(
            "  - side: consumer\n    addresses: ['10.0.0.1:20880']\n    parameters:\n"
            "      timeout: '300'\n"
            "  - side: consumer\n    addresses: ['10.0.0.2']\n    parameters:\n      retries: '5'\n"
            "  - side: provider\n    parameters:\n      weight: '0'\n"
        ),
        {
            "consumer": {
                "application": "shop",
                "interface": "com.foo.BarService",
                "region": "hangzhou",
                "side": "consumer",
                "timeout": "300",
            },
            "urls": [{"timeout": "300"}, {"timeout": "300"}],
        },
    )
)


@pytest.mark.parametrize(
    ("name", "case", "java", "reason"), DOCUMENTED_VECTORS, ids=[v[0] for v in DOCUMENTED_VECTORS]
)
def test_dubbo_py_differs_only_for_the_documented_reason(
    name: str, case: dict[str, Any], java: dict[str, Any], reason: str
) -> None:
    python = dubbo_py_answer(case)
    assert compare(java, python) == "different per-provider parameters", name
    assert reason in (documented(case, java, python) or ""), name


@pytest.mark.parametrize(("name", "case", "java"), VECTORS, ids=[v[0] for v in VECTORS])
def test_dubbo_py_answers_as_dubbo_did(
    name: str, case: dict[str, Any], java: dict[str, Any]
) -> None:
    assert compare(java, dubbo_py_answer(case)) is None, name


@pytest.fixture(scope="module")
def oracle() -> Iterator[JavaOracle]:
    with JavaOracle.start() as running:
        yield running


def test_the_vectors_hold_dubbo_s_answers_today(oracle: JavaOracle) -> None:
    cases = [case for _, case, _ in VECTORS] + [case for _, case, _, _ in DOCUMENTED_VECTORS]
    answers = list(oracle.ask(cases))
    assert answers == [java for _, _, java in VECTORS] + [j for _, _, j, _ in DOCUMENTED_VECTORS]


def test_generated_cases_differ_only_where_documented(oracle: JavaOracle) -> None:
    rng = random.Random(20261206)
    kinds = (*router_cases.KINDS, *router_cases.EXTRA_KINDS)
    cases = [router_cases.case(rng, kind) for kind in kinds for _ in range(80)]
    unexplained = []
    for case, java in zip(cases, oracle.ask(cases), strict=True):
        python = dubbo_py_answer(case)
        category = compare(java, python)
        if category is not None and documented(case, java, python) is None:
            unexplained.append((category, case, java, python))
    assert not unexplained, unexplained[:3]


def _tag_match_case(host_a: str, host_b: str) -> dict[str, Any]:
    provider = (
        "tri://{host}:{port}/demo.Greeter?side=provider&application=gp"
        "&remote.application=gp&region={region}"
    )
    return {
        "kind": "tag",
        "rule": (
            "configVersion: v3.0\nkey: gp\nenabled: true\nforce: false\ntags:\n"
            "  - name: gray\n    match:\n      - key: region\n        value: {exact: java}\n"
        ),
        "consumer": f"consumer://{host_a}/demo.Greeter?side=consumer&interface=demo.Greeter",
        "providers": [
            provider.format(host=host_a, port=20880, region="java"),
            provider.format(host=host_b, port=20881, region="py"),
        ],
        "invocation": {
            "method": "SayHello",
            "arguments": ["x"],
            "attachments": {"dubbo.tag": "gray"},
        },
    }


def test_dubbo_matches_no_tag_address_on_loopback_and_dubbo_py_does(oracle: JavaOracle) -> None:
    # Dubbo 3.3.6's NetUtils reads a loopback host as IPv6 (isValidV4Address is false for
    # loopback), so matching the tag's address 127.0.0.1:20880 throws, is logged and counts as
    # no match: the tagged call falls back to every untagged provider. dubbo-py matches it,
    # and off loopback both keep the tagged provider only (docs/routing.md, "Where the tag
    # router differs"). The live estate test shows the same on a real Java consumer.
    loopback, elsewhere = (
        _tag_match_case("127.0.0.1", "127.0.0.1"),
        _tag_match_case("10.0.0.1", "10.0.0.2"),
    )
    java_loopback, java_elsewhere = oracle.ask([loopback, elsewhere])
    assert java_loopback == {"kept": [0, 1]}
    assert java_elsewhere == {"kept": [0]}
    assert dubbo_py_answer(loopback) == dubbo_py_answer(elsewhere) == {"kept": [0]}
