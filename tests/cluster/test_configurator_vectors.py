"""Apache Dubbo 3.3's configurator test cases as vectors (dubbo-cluster: ConfigParserTest and
its YAML fixtures, OverrideConfiguratorTest, StringMatchTest; AbstractConfigurator's rules).

Each row is a document (or an override URL), a URL it is judged for, and what Dubbo does: the
parameter value the URL ends with (None: untouched). Deliberate differences are listed in
docs/routing.md ("Where dubbo-py differs") and marked here where a Dubbo case is adapted.
"""

from __future__ import annotations

import textwrap

import pytest

from dubbo_py.cluster import configurators
from dubbo_py.cluster.configurator_match import glob_matches, parse_condition_match
from dubbo_py.errors import RuleError
from dubbo_py.router.string_match import parse_string_match
from dubbo_py.url import URL


def _doc(text: str) -> str:
    return textwrap.dedent(text)


# --- ConfigParserTest fixtures (dubbo-cluster/src/test/resources), with side added where the
# fixture has none: Dubbo 3.3 applies an item without side to nothing (see the last rows).
SERVICE_NO_APP = _doc("""\
    configVersion: v2.7
    scope: service
    key: serviceKey
    configs:
    - addresses: ['127.0.0.1:20880', '0.0.0.0:20881']
      side: provider
      parameters:
        weight: 222
    """)
SERVICE_MULTI_APPS = _doc("""\
    configVersion: v2.7
    scope: service
    key: serviceKey
    configs:
    - addresses: [127.0.0.1, 0.0.0.0]
      applications: [app1, app2]
      side: provider
      parameters:
        timeout: 6666
    """)
APP_MULTI_SERVICES = _doc("""\
    configVersion: v2.7
    scope: application
    key: demo-consumer
    configs:
    - addresses: [127.0.0.1, 0.0.0.0]
      services: ['service1', 'g/service2:1.0']
      side: provider
      parameters:
        loadbalance: random
        cluster: failfast
        timeout: 6666
    """)
APP_ANY_SERVICES = APP_MULTI_SERVICES.replace("['service1', 'g/service2:1.0']", "['*']")
APP_NO_SERVICE = APP_MULTI_SERVICES.replace("  services: ['service1', 'g/service2:1.0']\n", "")
CONSUMER_SPECIFIC_PROVIDERS = _doc("""\
    configVersion: v2.7
    scope: application
    key: demo-consumer
    configs:
    - addresses:
      - 127.0.0.1
      providerAddresses: ['127.0.0.1:20880']
      side: provider
      parameters:
        weight: 222
    """)
V3 = _doc("""\
    configVersion: v3.0
    scope: application
    key: demo-provider
    configs:
      - match:
          address:
            wildcard: "10.0.0.*"
          service:
            oneof:
              - exact: "DemoService"
              - exact: "DemoService2"
          param:
            - key: match_key1
              value:
                exact: value1
        side: provider
        parameters:
          weight: 200
    """)
V3_COMPATIBILITY = _doc("""\
    configVersion: v3.0
    scope: application
    key: demo-provider
    configs:
      - addresses:
          - "10.0.0.1:20880"
        services:
          - "DemoService"
        match:
          param:
            - key: match_key1
              value:
                exact: value1
        side: provider
        parameters:
          weight: 200
    """)
V3_DUPLICATE = _doc("""\
    configVersion: v3.0
    scope: application
    key: demo-provider
    configs:
      - addresses:
          - "10.0.0.1:20880"
        services: [ "DemoService" ]
        match:
          address:
            wildcard: "10.0.0.1"
          service:
            oneof:
              - exact: "DemoService"
              - exact: "DemoService2"
          param:
            - key: match_key1
              value:
                exact: value1
        side: provider
        parameters:
          weight: 200
    """)


def _zone_rule(version: str, value: str = "{exact: a}") -> str:
    return _doc(f"""\
        configVersion: {version}
        scope: service
        key: demo.Greeter
        configs:
          - side: provider
            match:
              param:
                - key: zone
                  value: {value}
            parameters:
              disabled: true
        """)


def _match_rule(match: str, side: str = "provider") -> str:
    return (
        "configVersion: v3.0\nscope: service\nkey: demo.Greeter\nconfigs:\n"
        f"  - side: {side}\n    match: {match}\n    parameters: {{timeout: 7}}\n"
    )


P = "tri://{}/{}?application={}&side=provider{}"

# (case, document, provider URL, parameter, value Dubbo leaves it with)
PROVIDER_VECTORS = [
    ("ServiceNoApp: listed address", SERVICE_NO_APP, "127.0.0.1:20880", "weight", "222"),
    ("ServiceNoApp: 0.0.0.0:20881 any host", SERVICE_NO_APP, "10.1.1.1:20881", "weight", "222"),
    ("ServiceNoApp: other port", SERVICE_NO_APP, "127.0.0.1:20881", "weight", "222"),
    ("ServiceNoApp: unlisted", SERVICE_NO_APP, "10.1.1.1:20880", "weight", None),
    ("ServiceMultiApps: app1", SERVICE_MULTI_APPS, "10.1.1.1:1|svc|app1", "timeout", "6666"),
    ("ServiceMultiApps: app2", SERVICE_MULTI_APPS, "10.1.1.1:1|svc|app2", "timeout", "6666"),
    ("ServiceMultiApps: app3", SERVICE_MULTI_APPS, "10.1.1.1:1|svc|app3", "timeout", None),
    ("AppMultiServices: service1", APP_MULTI_SERVICES, "1.1.1.1:1|service1", "timeout", "6666"),
    (
        "AppMultiServices: group/service:version",
        APP_MULTI_SERVICES,
        "1.1.1.1:1|service2|a|&group=g&version=1.0",
        "timeout",
        "6666",
    ),
    (
        "AppMultiServices: other version",
        APP_MULTI_SERVICES,
        "1.1.1.1:1|service2|a|&group=g&version=2.0",
        "timeout",
        None,
    ),
    ("AppMultiServices: service3", APP_MULTI_SERVICES, "1.1.1.1:1|service3", "timeout", None),
    ("AppAnyServices: *", APP_ANY_SERVICES, "1.1.1.1:1|anything", "loadbalance", "random"),
    ("AppNoService: any", APP_NO_SERVICE, "1.1.1.1:1|anything", "cluster", "failfast"),
    (
        "ConsumerSpecificProviders: listed provider",
        CONSUMER_SPECIFIC_PROVIDERS,
        "127.0.0.1:20880",
        "weight",
        "222",
    ),
    (
        "ConsumerSpecificProviders: other port",
        CONSUMER_SPECIFIC_PROVIDERS,
        "127.0.0.1:20881",
        "weight",
        None,
    ),
    ("V3: match", V3, "10.0.0.1:20880|DemoService|a|&match_key1=value1", "weight", "200"),
    ("V3: match 2", V3, "10.0.0.1:20880|DemoService2|a|&match_key1=value1", "weight", "200"),
    ("V3: address", V3, "10.0.1.2:20880|DemoService|a|&match_key1=value1", "weight", None),
    ("V3: service", V3, "10.0.0.1:20880|Nope|a|&match_key1=value1", "weight", None),
    ("V3: param", V3, "10.0.0.1:20880|DemoService|a|&match_key1=value2", "weight", None),
    (
        "V3Compatibility: match",
        V3_COMPATIBILITY,
        "10.0.0.1:20880|DemoService|a|&match_key1=value1",
        "weight",
        "200",
    ),
    (
        "V3Compatibility: param",
        V3_COMPATIBILITY,
        "10.0.0.1:20880|DemoService|a|&match_key1=x",
        "weight",
        None,
    ),
    (
        "V3Compatibility: services",
        V3_COMPATIBILITY,
        "10.0.0.1:20880|DemoService2|a|&match_key1=value1",
        "weight",
        None,
    ),
    (
        "V3Duplicate: match",
        V3_DUPLICATE,
        "10.0.0.1:20880|DemoService|a|&match_key1=value1",
        "weight",
        "200",
    ),
    (
        "V3Duplicate: services narrows match.service",
        V3_DUPLICATE,
        "10.0.0.1:20880|DemoService2|a|&match_key1=value1",
        "weight",
        None,
    ),
    # The issue's own shape: only the zone=a provider is disabled.
    ("zone a", _zone_rule("v3.0"), "1.1.1.1:1|demo.Greeter|a|&zone=a", "disabled", "true"),
    ("zone b", _zone_rule("v3.0"), "1.1.1.1:1|demo.Greeter|a|&zone=b", "disabled", None),
    ("zone unset", _zone_rule("v3.0"), "1.1.1.1:1|demo.Greeter", "disabled", None),
    # configVersion: Dubbo reads match only when the version starts with v3.0.
    ("v3.0.1 reads match", _zone_rule("v3.0.1"), "1.1.1.1:1|x|a|&zone=b", "disabled", None),
    ("v2.7 ignores match", _zone_rule("v2.7"), "1.1.1.1:1|x|a|&zone=b", "disabled", "true"),
    ("v3.1 ignores match", _zone_rule("v3.1"), "1.1.1.1:1|x|a|&zone=b", "disabled", "true"),
    # Dubbo's configurator hands a missing parameter to the matcher: empty matches it.
    ("empty: missing", _zone_rule("v3.0", "{empty: x}"), "1.1.1.1:1|x", "disabled", "true"),
    ("empty: set", _zone_rule("v3.0", "{empty: x}"), "1.1.1.1:1|x|a|&zone=a", "disabled", None),
    (
        "noempty: set",
        _zone_rule("v3.0", "{noempty: x}"),
        "1.1.1.1:1|x|a|&zone=a",
        "disabled",
        "true",
    ),
    ("noempty: missing", _zone_rule("v3.0", "{noempty: x}"), "1.1.1.1:1|x", "disabled", None),
    ("prefix", _zone_rule("v3.0", "{prefix: eu-}"), "1.1.1.1:1|x|a|&zone=eu-1", "disabled", "true"),
    (
        "regex whole",
        _zone_rule("v3.0", "{regex: 'eu-\\d'}"),
        "1.1.1.1:1|x|a|&zone=eu-1",
        "disabled",
        "true",
    ),
    (
        "regex partial",
        _zone_rule("v3.0", "{regex: 'eu'}"),
        "1.1.1.1:1|x|a|&zone=eu-1",
        "disabled",
        None,
    ),
    (
        "wildcard *",
        _zone_rule("v3.0", "{wildcard: '*'}"),
        "1.1.1.1:1|x|a|&zone=q",
        "disabled",
        "true",
    ),
    ("wildcard *: missing", _zone_rule("v3.0", "{wildcard: '*'}"), "1.1.1.1:1|x", "disabled", None),
    (
        "wildcard other",
        _zone_rule("v3.0", "{wildcard: 'e*'}"),
        "1.1.1.1:1|x|a|&zone=eu",
        "disabled",
        None,
    ),
    # Address matches: host of the provider for address, host:port for providerAddress.
    ("address cird", _match_rule("{address: {cird: 10.0.0.0/8}}"), "10.9.9.9:1", "timeout", "7"),
    (
        "address cird out",
        _match_rule("{address: {cird: 10.0.0.0/8}}"),
        "11.0.0.1:1",
        "timeout",
        None,
    ),
    ("address range", _match_rule("{address: {cird: '10.0.0.1-5'}}"), "10.0.0.4:1", "timeout", "7"),
    ("address exact", _match_rule("{address: {exact: 10.0.0.4}}"), "10.0.0.4:1", "timeout", "7"),
    (
        "address exact port",
        _match_rule("{address: {exact: '10.0.0.4:1'}}"),
        "10.0.0.4:1",
        "timeout",
        None,
    ),
    ("address glob", _match_rule("{address: {wildcard: '10.*'}}"), "10.0.0.4:1", "timeout", "7"),
    ("address 0.0.0.0", _match_rule("{address: {wildcard: 0.0.0.0}}"), "9.0.0.4:1", "timeout", "7"),
    (
        "providerAddress exact",
        _match_rule("{providerAddress: {exact: '10.0.0.4:1'}}"),
        "10.0.0.4:1",
        "timeout",
        "7",
    ),
    (
        "providerAddress cird with port",
        _match_rule("{providerAddress: {cird: '10.0.0.*:2'}}"),
        "10.0.0.4:1",
        "timeout",
        None,
    ),
    (
        "providerAddress cird port",
        _match_rule("{providerAddress: {cird: '10.0.0.*:1'}}"),
        "10.0.0.4:1",
        "timeout",
        "7",
    ),
    (
        "app oneof",
        _match_rule("{app: {oneof: [{exact: x}, {prefix: shop-}]}}"),
        "1.1.1.1:1|s|shop-eu",
        "timeout",
        "7",
    ),
    ("app none", _match_rule("{app: {oneof: [{exact: x}]}}"), "1.1.1.1:1|s|y", "timeout", None),
    # Item type and enabled (ConfigParser.parseEnabled).
    (
        "disabled document",
        "enabled: false\n" + SERVICE_NO_APP,
        "127.0.0.1:20880",
        "weight",
        None,
    ),
    (
        "typed item is off without enabled",
        SERVICE_NO_APP.replace("  side: provider", "  side: provider\n  type: weight"),
        "127.0.0.1:20880",
        "weight",
        None,
    ),
    (
        "typed item on with enabled",
        SERVICE_NO_APP.replace(
            "  side: provider", "  side: provider\n  type: weight\n  enabled: true"
        ),
        "127.0.0.1:20880",
        "weight",
        "222",
    ),
    (
        "typed item on in a disabled document",
        "enabled: false\n"
        + SERVICE_NO_APP.replace(
            "  side: provider", "  side: provider\n  type: weight\n  enabled: true"
        ),
        "127.0.0.1:20880",
        "weight",
        "222",
    ),
    (
        "general item: its own enabled is not read",
        SERVICE_NO_APP.replace("  side: provider", "  side: provider\n  enabled: false"),
        "127.0.0.1:20880",
        "weight",
        "222",
    ),
    # v2.7 ~key conditions (AbstractConfigurator.isDeprecatedConditionMatch).
    (
        "~key holds",
        SERVICE_NO_APP.replace("weight: 222", "weight: 222\n    '~zone': a"),
        "127.0.0.1:20880|x|a|&zone=a",
        "weight",
        "222",
    ),
    (
        "~key fails",
        SERVICE_NO_APP.replace("weight: 222", "weight: 222\n    '~zone': a"),
        "127.0.0.1:20880|x|a|&zone=b",
        "weight",
        None,
    ),
    (
        "~key *",
        SERVICE_NO_APP.replace("weight: 222", "weight: 222\n    '~zone': '*'"),
        "127.0.0.1:20880",
        "weight",
        "222",
    ),
    (
        "~key not read in v3.0",
        SERVICE_NO_APP.replace("v2.7", "v3.0").replace(
            "weight: 222", "weight: 222\n    '~zone': a"
        ),
        "127.0.0.1:20880|x|a|&zone=b",
        "weight",
        "222",
    ),
]


def _provider(spec: str) -> URL:
    parts = spec.split("|")
    address, interface, app, extra = [*parts, *("svc", "a", "")[len(parts) - 1 :]]
    return URL.parse(P.format(address, interface, app, extra))


@pytest.mark.parametrize(
    ("document", "provider", "key", "expected"),
    [v[1:] for v in PROVIDER_VECTORS],
    ids=[v[0] for v in PROVIDER_VECTORS],
)
def test_provider_vectors(document: str, provider: str, key: str, expected: str | None) -> None:
    [configured] = configurators.apply([_provider(provider)], [], {"k.configurators": document})
    assert configured.get(key) == expected


C = "consumer://{}/demo.Greeter?application={}&side=consumer{}"

# OverrideConfiguratorTest.testOverrideForVersion3 and consumer-side items.
CONSUMER_VECTORS = [
    (
        "v3 match param holds",
        _match_rule("{param: [{key: match_key, value: {exact: value}}]}", "consumer"),
        "172.24.160.179|foo|&match_key=value",
        "7",
    ),
    (
        "v3 match param fails",
        _match_rule("{param: [{key: match_key, value: {exact: not_match_value}}]}", "consumer"),
        "172.24.160.179|foo|&match_key=value",
        None,
    ),
    (
        "v3 match address is the consumer's host",
        _match_rule("{address: {cird: 172.24.0.0/16}}", "consumer"),
        "172.24.160.179|foo|",
        "7",
    ),
    (
        "v3 match address other host",
        _match_rule("{address: {cird: 10.0.0.0/8}}", "consumer"),
        "172.24.160.179|foo|",
        None,
    ),
    (
        "addresses are consumer hosts",
        _match_rule("{}", "consumer").replace(
            "  - side", "  - addresses: [172.24.160.179]\n    side"
        ),
        "172.24.160.179|foo|",
        "7",
    ),
    (
        "addresses: other consumer",
        _match_rule("{}", "consumer").replace("  - side", "  - addresses: [10.0.0.1]\n    side"),
        "172.24.160.179|foo|",
        None,
    ),
    (
        "for some providers only: not applied (dubbo-py has no per-provider consumer settings)",
        _match_rule("{providerAddress: {exact: '1.1.1.1:1'}}", "consumer"),
        "172.24.160.179|foo|",
        None,
    ),
]


@pytest.mark.parametrize(
    ("document", "consumer", "expected"),
    [v[1:] for v in CONSUMER_VECTORS],
    ids=[v[0] for v in CONSUMER_VECTORS],
)
def test_consumer_vectors(document: str, consumer: str, expected: str | None) -> None:
    host, app, extra = consumer.split("|")
    url = URL.parse(C.format(host, app, extra))
    params = configurators.consumer_parameters(url, [], {"k.configurators": document})
    assert params.get("timeout") == expected


# OverrideConfiguratorTest (override URLs): (override URL, URL, key, expected).
URL_VECTORS = [
    (
        "override://0.0.0.0/com.foo.BarService?configVersion=2.7&side=consumer&application=foo"
        "&timeout=10000",
        "consumer://172.24.160.179/com.foo.BarService?application=foo&side=consumer&timeout=100",
        "10000",
    ),
    (
        "override://0.0.0.0/com.foo.BarService?configVersion=2.7&side=consumer&application=foo"
        "&timeout=10000",
        "consumer://172.24.160.179/com.foo.BarService?application=bar&side=consumer&timeout=100",
        None,
    ),
    (
        "override://0.0.0.0/com.foo.BarService?side=consumer&~zone=a&timeout=10000",
        "consumer://172.24.160.179/com.foo.BarService?application=foo&side=consumer&zone=a",
        "10000",
    ),
    (
        "override://0.0.0.0/com.foo.BarService?side=consumer&~zone=a&timeout=10000",
        "consumer://172.24.160.179/com.foo.BarService?application=foo&side=consumer&zone=b",
        None,
    ),
]


@pytest.mark.parametrize(("override", "consumer", "expected"), URL_VECTORS)
def test_override_url_vectors(override: str, consumer: str, expected: str | None) -> None:
    params = configurators.consumer_parameters(URL.parse(consumer), [URL.parse(override)], {})
    assert params.get("timeout") == expected


def test_provider_override_urls_v27() -> None:
    # OverrideConfiguratorTest.testOverrideForVersion27, provider half.
    override = URL.parse(
        "override://172.24.160.179:21880/com.foo.BarService?side=provider&configVersion=2.7"
        "&application=foo&weight=200"
    )
    provider = URL.parse(
        "dubbo://172.24.160.179:21880/com.foo.BarService?application=foo&side=provider&weight=100"
    )
    assert configurators.apply([provider], [override], {})[0].get("weight") == "200"


def test_parse_url_json_array() -> None:
    # ConfigParserTest.parseURLJsonArrayCompatible: a JSON array of override URLs.
    text = (
        '["override://0.0.0.0/com.xx.Service?category=configurators&timeout=6666&disabled=true'
        '&dynamic=false&enabled=true&group=dubbo&priority=1&version=1.0"]'
    )
    [override] = configurators.parse_configurators_yaml(text, "k")
    assert override.parameters["timeout"] == "6666"
    assert "group" not in override.parameters


def test_a_document_without_parameters_is_refused() -> None:
    # ConfigParserTest.parseConfiguratorsServiceNoRuleTest
    with pytest.raises(RuleError, match="needs parameters"):
        configurators.parse_configurators_yaml(
            "configVersion: v2.7\nscope: service\nkey: k\nconfigs:\n"
            "- addresses: [127.0.0.1]\n  applications: [app1]\n",
            "k",
        )


# StringMatchTest, as the matchers configurators read.
STRING_VECTORS = [
    ({"exact": "qinliujie"}, "qinliujie", True),
    ({"exact": "qinliujie"}, "other", False),
    ({"exact": "qinliujie"}, None, False),
    ({"prefix": "org.apache.dubbo.rpc"}, "org.apache.dubbo.rpc.test", True),
    ({"prefix": "org.apache.dubbo.rpc"}, "com.alibaba.hsf", False),
    ({"prefix": "org.apache.dubbo.rpc"}, None, False),
    ({"regex": "org.apache.dubbo.rpc.*"}, "org.apache.dubbo.rpc", True),
    ({"regex": "org.apache.dubbo.rpc.*"}, "org.apache.dubbo.rpc.test", True),
    ({"regex": "org.apache.dubbo.rpc.*"}, "com.taobao", False),
    ({"empty": "empty"}, "com.alibaba.hsf", False),
    ({"empty": "empty"}, "", True),
    ({"empty": "empty"}, None, True),
    ({"noempty": "noempty"}, "com.alibaba.hsf", True),
    ({"noempty": "noempty"}, "", False),
    ({"noempty": "noempty"}, None, False),
]


@pytest.mark.parametrize(("spec", "value", "expected"), STRING_VECTORS)
def test_string_match_vectors(spec: dict[str, str], value: str | None, expected: bool) -> None:
    assert parse_string_match(spec).matches(value) is expected


GLOB_VECTORS = [
    ("*", "anything", True),
    ("", "", True),
    ("", "x", False),
    ("abc", "abc", True),
    ("ab*", "abc", True),
    ("*bc", "abc", True),
    ("a*c", "abbbc", True),
    ("a*c", "abbb", False),
    ("a*b*c", "a-x-c", True),  # Dubbo: prefix up to the first *, suffix after the last
]


@pytest.mark.parametrize(("pattern", "value", "expected"), GLOB_VECTORS)
def test_glob_vectors(pattern: str, value: str, expected: bool) -> None:
    assert glob_matches(pattern, value) is expected


def test_config_parser_v3_matcher_called_with_an_address_as_dubbo_test_does() -> None:
    # ConfigParserTest.parseProviderConfigurationV3 calls the matcher with host:port as host.
    match = parse_condition_match(
        {
            "address": {"wildcard": "10.0.0.1:20880"},
            "service": {"oneof": [{"exact": "DemoService"}, {"exact": "DemoService2"}]},
            "param": [{"key": "match_key1", "value": {"exact": "value1"}}],
        }
    )
    cases = [
        ("10.0.0.1:20880", "DemoService", "value1", True),
        ("10.0.0.1:20880", "DemoService2", "value1", True),
        ("10.0.0.2:20880", "DemoService", "value1", False),
        ("10.0.0.1:20880", "DemoServiceNotMatch", "value1", False),
        ("10.0.0.1:20880", "DemoService", "value_not_match", False),
    ]
    for address, service, value, expected in cases:
        params = {"match_key1": value}
        assert match.matches(address, address, service, None, params) is expected


BAD_MATCHES = [
    ("{param: [{key: zone}]}", "configs[0].match.param[0]", "key and value"),
    ("{param: [{key: zone, value: {regex: '(a)\\1'}}]}", "param[0].value.regex", "backreference"),
    ("{service: {exact: x}}", "configs[0].match.service", "oneof"),
    ("{address: {cird: 10.0.0.0/99}}", "address.cird", ""),
    ("{address: {}}", "configs[0].match.address", "one of cird"),
    ("[1]", "configs[0].match", "mapping"),
]


@pytest.mark.parametrize(("match", "where", "words"), BAD_MATCHES)
def test_a_match_that_cannot_be_used_is_refused_naming_its_place(
    match: str, where: str, words: str
) -> None:
    with pytest.raises(RuleError) as caught:
        configurators.parse_configurators_yaml(_match_rule(match), "k")
    assert where in str(caught.value)
    assert words in str(caught.value)


UNACTED = [
    ("{params: [{key: zone, value: {exact: a}}]}", "configs[0].match.params"),
    ("{param: [{key: zone, value: {exact: a, prefix: b}}]}", "param[0].value.prefix"),
    ("{address: {wildcard: '10.0.0.1:20880'}}", "a pattern with a port matches no host"),
]


@pytest.mark.parametrize(("match", "named"), UNACTED)
def test_fields_not_acted_on_are_named(match: str, named: str) -> None:
    found = configurators.unacted_fields(_match_rule(match), "k")
    assert any(named in f for f in found), found


def test_document_level_fields_not_acted_on_are_named() -> None:
    text = (
        "configVersion: v2.7\nscope: application\nkey: a\nrunmode: x\nconfigs:\n"
        "  - side: consumer\n    applications: [x]\n    providerAddresses: ['1.1.1.1:1']\n"
        "    match: {param: [{key: k, value: {exact: v}}]}\n    priority: 3\n"
        "    parameters: {timeout: 5, '~zone': a, group: g}\n"
    )
    found = "\n".join(configurators.unacted_fields(text, "k"))
    for named in (
        "runmode",
        "configs[0].priority",
        "configs[0].applications",
        "configs[0].match: read only with configVersion v3.0",
        "per-provider",
        "parameters.group",
    ):
        assert named in found
    # A ~key before v3.0 is a condition, acted on.
    assert "~zone" not in found


def test_consumer_parameters_without_a_meaning_here_are_named() -> None:
    text = (
        "configVersion: v3.0\nscope: service\nkey: k\nconfigs:\n  - side: consumer\n"
        "    parameters: {validation: 'true', SayHello.timeout: 5, mock: 'force:retrun x',"
        " cluster: nope, actives: 3}\n"
    )
    found = "\n".join(configurators.unacted_fields(text, "k"))
    assert "parameters.validation: dubbo-py consumers have no 'validation' setting" in found
    assert "parameters.mock: mock 'force:retrun x'" in found
    assert "parameters.cluster: unknown strategy 'nope'" in found
    per_method = text.replace("actives: 3", "SayHello.loadbalance: random")
    assert "SayHello.loadbalance: per method; dubbo-py sets loadbalance per reference" in "\n".join(
        configurators.unacted_fields(per_method, "k")
    )
    named = [line.split(":")[0] for line in found.splitlines()]
    assert "configs[0].parameters.SayHello.timeout" not in named
    assert "configs[0].parameters.actives" not in named


# Dubbo 2.6 override URLs without configVersion (AbstractConfigurator.configureDeprecated).
DEPRECATED_VECTORS = [
    # The service-downgrade URL of Dubbo's 2.7 docs: no side, no port -> consumers of app foo.
    (
        "override://0.0.0.0/com.foo.BarService?category=configurators&dynamic=false"
        "&application=foo&mock=force:return+null",
        "foo",
        "force:return+null",
    ),
    (
        "override://0.0.0.0/com.foo.BarService?category=configurators&application=foo"
        "&mock=force:return+null",
        "bar",
        None,
    ),
    # A port names a provider: consumers never match it.
    ("override://0.0.0.0:20880/com.foo.BarService?mock=force:return+null", "foo", None),
    # With a configVersion and no side, dubbo-py reads it as a provider override.
    ("override://0.0.0.0/com.foo.BarService?configVersion=v2.7&mock=x", "foo", None),
    # Written by Dubbo Admin for 2.6 clients next to a document: Dubbo 3 ignores it.
    (
        "override://0.0.0.0/com.foo.BarService?side=consumer&compatible_config=true&mock=x",
        "foo",
        None,
    ),
]


@pytest.mark.parametrize(("override", "app", "expected"), DEPRECATED_VECTORS)
def test_deprecated_override_url_vectors(override: str, app: str, expected: str | None) -> None:
    consumer = URL.parse(
        f"consumer://172.24.160.179/com.foo.BarService?application={app}&side=consumer"
    )
    params = configurators.consumer_parameters(consumer, [URL.parse(override)], {})
    assert params.get("mock") == expected


def test_an_access_log_is_acted_on_per_service_and_named_per_method() -> None:
    text = _match_rule("{}").replace("{timeout: 7}", "{accesslog: 'true'}")
    assert not any("accesslog" in f for f in configurators.unacted_fields(text, "k"))
    per_method = text.replace("accesslog:", "SayHello.accesslog:")
    assert any("SayHello.accesslog" in f for f in configurators.unacted_fields(per_method, "k"))
    a_path = text.replace("'true'", "/tmp/calls.log")
    assert any("may not choose a file" in f for f in configurators.unacted_fields(a_path, "k"))


def test_consumers_log_fields_not_acted_on_once_per_document_version(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = _match_rule("{params: [{key: zone, value: {exact: a}}]}")
    source = "/dubbo/config/dubbo/once.configurators"
    with caplog.at_level("WARNING", logger="dubbo_py.cluster.configurators"):
        for _ in range(3):
            configurators.validate_document(text, source)
        configurators.validate_document(text.replace("timeout: 7", "timeout: 8"), source)
    logged = [r.getMessage() for r in caplog.records if "not acted on" in r.getMessage()]
    assert len(logged) == 2
    assert all("configs[0].match.params" in m and source in m for m in logged)


def test_an_unknown_side_is_accepted_applies_to_nothing_and_is_named() -> None:
    text = _match_rule("{}", side="both")
    provider = _provider("1.1.1.1:1")
    assert configurators.apply([provider], [], {"k": text}) == [provider]
    consumer = URL.parse("consumer://1.1.1.1/demo.Greeter?application=a")
    assert configurators.consumer_parameters(consumer, [], {"k": text}) == {}
    assert any("'both' is neither" in f for f in configurators.unacted_fields(text, "k"))


# OverrideConfiguratorTest / AbsentConfiguratorTest (UrlConstant URLs; the consumer's host is
# its URL's host here, Dubbo's NetUtils.getLocalHost() in Dubbo's tests).
URL_ONE = "dubbo://10.20.153.10:20880/com.foo.BarService?application=foo&timeout=1000&side=consumer"
URL_CONSUMER = "dubbo://10.20.153.10:20880/com.foo.BarService?application=foo&side=consumer"
BAR_11 = "dubbo://10.20.153.11:20880/com.foo.BarService?application=bar&side=consumer"
BAR_11_TIMEOUT = BAR_11 + "&timeout=1000"
CONFIGURATOR_VECTORS = [
    ("override://foo@0.0.0.0/com.foo.BarService?timeout=200", URL_CONSUMER, "200"),
    ("override://foo@0.0.0.0/com.foo.BarService?timeout=200", URL_ONE, "200"),
    ("override://foo@0.0.0.0/com.foo.BarService?timeout=200", BAR_11, None),
    ("override://foo@0.0.0.0/com.foo.BarService?timeout=200", BAR_11_TIMEOUT, None),
    ("override://10.20.153.10/com.foo.BarService?timeout=200", URL_CONSUMER, "200"),
    ("override://10.20.153.10/com.foo.BarService?timeout=200", BAR_11, None),
    ("absent://foo@0.0.0.0/com.foo.BarService?timeout=200", URL_CONSUMER, "200"),
    ("absent://foo@0.0.0.0/com.foo.BarService?timeout=200", URL_ONE, None),  # keeps its 1000
    ("absent://foo@0.0.0.0/com.foo.BarService?timeout=200", BAR_11, None),
    (
        "absent://0.0.0.0/com.foo.BarService?side=consumer&configVersion=2.7&application=foo"
        "&timeout=10000",
        "dubbo://172.24.160.179/com.foo.BarService?application=foo&side=consumer&timeout=100",
        None,  # AbsentConfiguratorTest.testAbsentForVersion27: the consumer keeps 100
    ),
]


@pytest.mark.parametrize(("override", "consumer", "expected"), CONFIGURATOR_VECTORS)
def test_configurator_test_vectors(override: str, consumer: str, expected: str | None) -> None:
    params = configurators.consumer_parameters(URL.parse(consumer), [URL.parse(override)], {})
    assert params.get("timeout") == expected


def test_absent_for_version_27_provider() -> None:
    # AbsentConfiguratorTest.testAbsentForVersion27, provider half: timeout set, weight kept.
    override = URL.parse(
        "absent://172.24.160.179:21880/com.foo.BarService?side=provider&configVersion=2.7"
        "&application=foo&timeout=20000&weight=200"
    )
    provider = URL.parse(
        "dubbo://172.24.160.179:21880/com.foo.BarService?application=foo&side=provider&weight=100"
    )
    [configured] = configurators.apply([provider], [override], {})
    assert (configured.get("timeout"), configured.get("weight")) == ("20000", "100")


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("override://0.0.0.0/demo.Greeter?version=1.0.0&weight=5", "5"),
        ("override://0.0.0.0/demo.Greeter?version=2.0.0&weight=5", None),
        ("override://0.0.0.0/demo.Greeter?version=*&weight=5", "5"),
        ("override://0.0.0.0/demo.Greeter?group=g&weight=5", None),
        ("override://0.0.0.0/demo.Greeter?weight=5", "5"),  # names none: every version
    ],
)
def test_an_override_url_naming_a_version_or_group_changes_only_those(
    override: str, expected: str | None
) -> None:
    provider = URL.parse("tri://1.1.1.1:1/demo.Greeter?version=1.0.0&side=provider")
    [configured] = configurators.apply([provider], [URL.parse(override)], {})
    assert configured.get("weight") == expected
