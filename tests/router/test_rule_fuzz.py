"""Fuzzing every rule parser the way an attacker would write rules: valid documents mutated at
any place (a value replaced by text full of regex and glob metacharacters, a number, a list, a
mapping; a field removed or added), arbitrary text, router URLs with arbitrary rule text, mock
specs and registry node names.

Whatever comes in, the parser returns a rule or raises its documented error naming the source
and -- for YAML documents -- the line and column; a rule that parses binds to providers with
long parameter values and routes calls without raising. Example counts are bounded so each test
takes a few seconds; pytest-timeout turns a hang into a failure.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import yaml
from demo import greeter_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dubbo_py.cluster.configurators import apply as apply_overrides
from dubbo_py.cluster.configurators import parse_configurators_yaml
from dubbo_py.cluster.mock import parse_mock
from dubbo_py.errors import MockSpecError, RuleError, URLError
from dubbo_py.invocation import Invocation
from dubbo_py.registry import rule_kinds
from dubbo_py.registry.rule_kinds import Target
from dubbo_py.router import factory
from dubbo_py.router.base import Router
from dubbo_py.router.chain import RouterChain
from dubbo_py.router.script import InlineSandbox, ScriptRouter
from dubbo_py.router.snapshot import Snapshot
from dubbo_py.url import URL, encode_component

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SERVICE = "demo.Greeter"
CONSUMER = URL.parse(f"consumer://127.0.0.9/{SERVICE}?application=shop&interface={SERVICE}")
LONG = "a" * 5_000
PROVIDERS = Snapshot(
    tuple(
        URL.parse(
            f"tri://127.0.0.{i}:5005{i}/{SERVICE}?application=greeter&interface={SERVICE}"
            f"&env={'gray' if i % 2 else LONG}&shard={i - 1}&shards=4&dubbo.tag=t{i}"
        )
        for i in range(1, 5)
    )
)
CALLS = (
    Invocation(SERVICE, "SayHello"),
    Invocation(
        SERVICE,
        "SayHello",
        attachments={"tenant": LONG, "dubbo.tag": "gray", "env": "(((("},
        explicit_arguments=(LONG, 7, None),
    ),
)

#: Valid documents of every kind, the seeds the mutations start from.
SEEDS: dict[str, dict[str, Any]] = {
    "condition-router": {
        "configVersion": "v3.0",
        "scope": "service",
        "key": SERVICE,
        "force": False,
        "enabled": True,
        "runtime": True,
        "priority": 1,
        "conditions": [
            "method = SayHello => host = 127.0.0.1,127.0.0.2",
            "attachments[env] = gr*y & arguments[1] = 1~9 => env != gray",
            "=> port = 50051~50053",
        ],
    },
    "condition-router-app": {
        "configVersion": "v3.0",
        "scope": "application",
        "key": "shop",
        "conditions": ["application = shop => address = 127.0.0.*"],
    },
    "tag-router": {
        "configVersion": "v3.0",
        "key": "greeter",
        "force": False,
        "enabled": True,
        "tags": [
            {"name": "gray", "match": [{"key": "env", "value": {"regex": "gr(a|e)y.*"}}]},
            {"name": "long", "match": [{"key": "env", "value": {"prefix": "aaa"}}]},
            {"name": "canary", "addresses": ["127.0.0.3:50053", "127.0.0.0/24"]},
        ],
    },
    "script-router": {
        "type": "starlark",
        "key": "greeter",
        "force": False,
        "script": (
            "def route(invokers, invocation, context):\n"
            "    return [i for i in invokers if i.port != 50052]\n"
        ),
    },
    "shard-router": {
        "scheme": "elasticsearch",
        "shards": 4,
        "key": "attachments[tenant]",
    },
    "configurators": {
        "configVersion": "v3.0",
        "scope": "service",
        "key": SERVICE,
        "enabled": True,
        "configs": [
            {
                "side": "provider",
                "addresses": ["127.0.0.1:50051"],
                "parameters": {"weight": 5, "timeout": 1000},
            },
            {"side": "consumer", "applications": ["shop"], "parameters": {"retries": 0}},
        ],
    },
}

#: Text an attacker would try: regex, glob, range and condition metacharacters.
_NASTY = st.text(
    alphabet=st.sampled_from([*list("()[]{}*+?|.^$\\-=!<>:&,~ aAz09#'\"\n\t%@/"), "é"]),
    max_size=24,
)
_SCALARS = st.one_of(
    _NASTY,
    st.sampled_from(["((.+)+)+Q", "(a)\\1", "a(?=b)", "*", "", "true", "v3.0", "=>", LONG]),
    st.integers(-(2**70), 2**70),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(_NASTY, inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += _paths(item, (*path, i))
    return out


@st.composite
def mutated(draw: st.DrawFn, kind: str) -> str:
    """A seed document of ``kind`` with a few random changes, as YAML text."""
    doc = yaml.safe_load(yaml.safe_dump(SEEDS[kind]))  # a deep copy
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(doc)))
        if not path:
            continue
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        op = draw(st.sampled_from(["replace", "delete", "add"]))
        if op == "replace":
            parent[path[-1]] = draw(_VALUES)
        elif op == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(_NASTY)] = draw(_VALUES)
        else:
            parent.append(draw(_VALUES))
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


def _source(kind: str) -> str:
    return f"/dubbo/config/dubbo/fuzz.{kind}"


def _compile(kind: str, text: str) -> list[Router]:
    # "condition-router-app": a condition document read from an application key.
    name = "condition-router" if kind == "condition-router-app" else kind
    rule_kind = rule_kinds.kind_named(name)
    assert rule_kind is not None
    target = (
        Target.APPLICATION
        if kind == "condition-router-app"
        else rule_kinds.target_for_document(rule_kind, None)
    )
    routers = rule_kind.compile(target, text, _source(kind))
    # Scripts run inline here: the process sandbox is tested on its own.
    return [
        ScriptRouter(r.rule, sandbox=InlineSandbox()) if isinstance(r, ScriptRouter) else r
        for r in routers
    ]


def _exercise(routers: list[Router]) -> None:
    """Bind and route as a consumer does: never raises for a rule that parsed."""
    bound = RouterChain(factory.chain_routers(routers)).bind(PROVIDERS, CONSUMER)
    for call in CALLS:
        with contextlib.suppress(LookupError):  # NoProviderError: a rule may leave nobody
            bound.route(call)
        bound.trace(call)


def _check_error(exc: RuleError, kind: str) -> None:
    assert exc.source == _source(kind)
    assert exc.line is not None and exc.column is not None, str(exc)


ROUTER_KINDS = [k for k in SEEDS if k != "configurators"]


@pytest.mark.parametrize("kind", ROUTER_KINDS)
def test_seed_documents_are_valid(kind: str) -> None:
    _exercise(_compile(kind, yaml.safe_dump(SEEDS[kind])))


@pytest.mark.parametrize("kind", ROUTER_KINDS)
@FUZZ
@given(data=st.data())
def test_mutated_rule_is_a_router_or_an_error_with_its_position(
    kind: str, data: st.DataObject
) -> None:
    text = data.draw(mutated(kind))
    try:
        routers = _compile(kind, text)
    except RuleError as exc:
        _check_error(exc, kind)
        return
    _exercise(routers)


@pytest.mark.parametrize("kind", ROUTER_KINDS)
@FUZZ
@given(text=st.one_of(st.text(max_size=120), _NASTY))
def test_arbitrary_text_is_a_router_or_a_rule_error(kind: str, text: str) -> None:
    try:
        routers = _compile(kind, text)
    except RuleError as exc:
        assert exc.source == _source(kind)
        return
    _exercise(routers)


@FUZZ
@given(text=mutated("configurators"))
def test_mutated_override_document_applies_or_errs_with_its_position(text: str) -> None:
    source = _source("configurators")
    try:
        parse_configurators_yaml(text, source)
    except RuleError as exc:
        _check_error(exc, "configurators")
        return
    changed = apply_overrides(list(PROVIDERS.providers), [], {source: text})
    assert len(changed) <= len(PROVIDERS.providers)


@FUZZ
@given(
    protocol=st.sampled_from(["condition", "route", "script", "override", "empty", "junk"]),
    router=st.sampled_from(["condition", "script", "tag", ""]),
    rule=st.one_of(
        _NASTY,
        st.sampled_from(["=> host = 127.0.0.1", "method = SayHello => port != 50052"]),
        st.text(max_size=40),
    ),
    extra=st.dictionaries(
        st.sampled_from(["force", "enabled", "priority", "runtime", "type", "key"]),
        _NASTY,
        max_size=3,
    ),
)
def test_router_url_is_a_router_or_a_rule_error(
    protocol: str, router: str, rule: str, extra: dict[str, str]
) -> None:
    params = {"category": "routers", "rule": encode_component(rule), **extra}
    if router:
        params["router"] = router
    source = f"/dubbo/{SERVICE}/routers/fuzz"
    try:
        url = URL.decode(
            encode_component(
                URL("x", "0.0.0.0", 0, SERVICE, parameters=params)
                .replace(protocol=protocol)
                .to_string()
            )
        )
        compiled = factory.compile_url(url, source)
    except (RuleError, URLError) as exc:
        if isinstance(exc, RuleError):
            assert exc.source == source
        return
    if isinstance(compiled, ScriptRouter):
        compiled = ScriptRouter(compiled.rule, sandbox=InlineSandbox())
    _exercise([compiled])


@FUZZ
@given(
    prefix=st.sampled_from(["", "force:", "fail:", "force: ", "FAIL:"]),
    verb=st.sampled_from(["return", "throw", "return ", "throw ", "retrun", ""]),
    value=st.one_of(
        _NASTY,
        st.sampled_from(['{"message": "busy"}', "empty", "null", '{"nope": 1}', "[1]", "{"]),
    ),
)
def test_mock_spec_is_a_spec_or_a_mock_spec_error(prefix: str, verb: str, value: str) -> None:
    text = f"{prefix}{verb}{value}"
    if ":" in text.removeprefix(prefix).split(" ", 1)[0]:
        return  # module:Class mocks import code: not fuzzed
    try:
        spec = parse_mock(text)
        if spec is not None:
            spec.check("SayHello", greeter_pb2.HelloReply)
    except MockSpecError as exc:
        assert text.strip()[:20] in str(exc) or "mock" in str(exc)


@FUZZ
@given(
    host=st.sampled_from(["0.0.0.0", "127.0.0.1", "*", "127.0.0.2:50052", "[::1]"]),
    params=st.dictionaries(
        st.one_of(
            st.sampled_from(["weight", "timeout", "disabled", "enabled", "side", "application"]),
            _NASTY,
        ),
        _NASTY,
        max_size=5,
    ),
)
def test_override_url_applies_or_is_skipped(host: str, params: dict[str, str]) -> None:
    text = URL("override", "h", 0, SERVICE, parameters={"category": "configurators"}).to_string()
    query = "&".join(f"{encode_component(k)}={encode_component(v)}" for k, v in params.items())
    node = encode_component(text.replace("//h/", f"//{host}/") + ("&" + query if query else ""))
    try:
        url = URL.decode(node)
    except URLError:
        return
    changed = apply_overrides(list(PROVIDERS.providers), [url], {})
    assert len(changed) <= len(PROVIDERS.providers)
