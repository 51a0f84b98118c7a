"""Incremental binding: a snapshot that follows another (its routers' masks patched for the
providers that arrived and left) routes every call exactly as a snapshot bound from scratch.

The property runs random rule sets (condition rules reading provider parameters, ``$``
references, ranges and globs, method/argument/attachment conditions; a dynamic tag rule; a
shard rule) over random sequences of provider arrivals, departures and replacements, kept
sorted as the directory keeps them, and compares the survivors (and each router's count) of
random invocations on both, and the per-provider values a snapshot keeps (``column``)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dubbo_py.invocation import Invocation
from dubbo_py.registry.directory import RegistryDirectory
from dubbo_py.router import factory
from dubbo_py.router.chain import BoundChain, RouterChain
from dubbo_py.router.condition.carriers import router_from_url
from dubbo_py.router.shard.router import ShardRouter
from dubbo_py.router.shard.rule import parse_shard_rule
from dubbo_py.router.snapshot import Delta, Snapshot
from dubbo_py.router.tag import TagRouter, parse_tag_rule
from dubbo_py.url import URL, encode_component

SERVICE = "demo.Greeter"
CONSUMER = URL.parse(
    f"consumer://10.1.0.1/{SERVICE}?application=shop&interface={SERVICE}&side=consumer"
    "&zone=z1&region=r2&dubbo.tag=gray"
)
APPS = ("shop", "cart", "billing", "ops-a")
ZONES = ("z0", "z1", "z2", "z3")
TAGS = ("", "gray", "blue", "gray|team1")

# Condition rules over a small vocabulary, so that random ones overlap with the providers.
WHENS = (
    "",
    "application = shop",
    "method = SayHello",
    "method != SayHello",
    "attachments[tenant] = t1,t2",
    "arguments[0] = vip-*",
    "zone = $zone",
    "region = r1,r2 & application = shop",
)
THENS = (
    "zone = $zone",
    "zone = z0,z2",
    "region != r1",
    "weight = 100~200",
    "application = sh*",
    "host = 10.0.0.*",
    "env = gray & zone != z3",
    "protocol = tri",
    "port = 50051",
)

TAG_RULE = """
configVersion: v3.0
key: greeter
force: {force}
tags:
  - name: gray
    addresses: ["10.0.0.1", "10.0.0.2:50052", "10.0.1.0/24"]
  - name: blue
    match:
      - key: env
        value: {{exact: blue}}
"""

SHARD_RULE = """
scheme: elasticsearch-modulo
shards: 4
split_from: 2
key: attachments[tenant]
"""


@st.composite
def provider_urls(draw: st.DrawFn) -> URL:
    params = {
        "interface": SERVICE,
        "application": draw(st.sampled_from(APPS)),
        "zone": draw(st.sampled_from(ZONES)),
        "region": draw(st.sampled_from(("r1", "r2", "r3"))),
        "weight": draw(st.sampled_from(("50", "100", "150", "300", "x"))),
        "env": draw(st.sampled_from(("prod", "gray", "blue"))),
        "pid": str(draw(st.integers(0, 10**6))),
    }
    tag = draw(st.sampled_from(TAGS))
    if tag:
        params["dubbo.tag"] = tag
    shard = draw(st.sampled_from((None, "0", "1", "2", "3", "7", "x")))
    if shard is not None:
        params["shard"] = shard
    shards = draw(st.sampled_from((None, None, "2", "4", "5")))
    if shards is not None:
        params["shards"] = shards
    protocol = draw(st.sampled_from(("tri", "tri", "tri", "mock")))
    host = f"10.0.{draw(st.integers(0, 1))}.{draw(st.integers(0, 3))}"
    return URL(protocol, host, draw(st.sampled_from((50051, 50052))), SERVICE, parameters=params)


@st.composite
def rule_sets(draw: st.DrawFn) -> RouterChain:
    routers = []
    for priority in range(draw(st.integers(0, 6))):
        when = draw(st.sampled_from(WHENS))
        clauses = draw(st.lists(st.sampled_from(THENS), max_size=2))
        then = " & ".join(clauses) if clauses else "false"
        url = URL.parse(
            f"condition://0.0.0.0/{SERVICE}?category=routers&priority={priority}"
            f"&force={draw(st.booleans())}&rule={encode_component(f'{when} => {then}')}"
        )
        routers.append(router_from_url(url, f"/rules/{priority}"))
    if draw(st.booleans()):
        text = TAG_RULE.format(force=str(draw(st.booleans())).lower())
        routers.append(TagRouter(parse_tag_rule(text, "/tags")))
    if draw(st.booleans()):
        routers.append(ShardRouter(parse_shard_rule(SHARD_RULE, "/shard"), "/shard"))
    return RouterChain(factory.chain_routers(routers))


# An edit: (kind, position drawn as a fraction of the list, the provider it brings).
edits = st.lists(
    st.tuples(st.sampled_from(("add", "remove", "replace")), st.floats(0, 1), provider_urls()),
    min_size=1,
    max_size=4,
)

calls = st.lists(
    st.builds(
        lambda method, name, attachments: Invocation(
            SERVICE, method, attachments=attachments, explicit_arguments=(name,)
        ),
        st.sampled_from(("SayHello", "SayHelloStream")),
        st.sampled_from(("vip-1", "user-2")),
        st.dictionaries(
            st.sampled_from(("tenant", "dubbo.tag", "dubbo.force.tag")),
            st.sampled_from(("t1", "t3", "gray", "blue", "gray|team1", "true", "false")),
            max_size=3,
        ),
    ),
    min_size=1,
    max_size=6,
)


def address_of(url: URL) -> str:
    return url.address


def ordered(urls: list[URL]) -> tuple[URL, ...]:
    """As the directory orders providers."""
    return tuple(sorted(set(urls), key=lambda u: u.to_string()))


def outcome(chain: BoundChain, call: Invocation) -> object:
    survivors, steps = chain.trace(call)
    try:
        routed: object = chain.route(call)
    except Exception as exc:  # NoProviderError: compared by the router it names
        routed = (type(exc).__name__, str(exc))
    return survivors, [(s.router, s.count_in, s.count_out) for s in steps], routed


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rule_sets(),
    st.lists(provider_urls(), max_size=12),
    st.lists(edits, min_size=1, max_size=5),
    calls,
)
def test_a_following_snapshot_routes_as_one_bound_from_scratch(
    chain: RouterChain,
    start: list[URL],
    notifications: list[list[tuple[str, float, URL]]],
    invocations: list[Invocation],
) -> None:
    raw = list(start)
    previous = Snapshot(ordered(raw))
    chain.bind(previous, CONSUMER)
    previous.column("address", address_of)
    patched = 0
    for version, notification in enumerate(notifications, 1):
        for kind, where, url in notification:
            at = min(int(where * len(raw)), len(raw) - 1)
            if kind == "add" or not raw:
                raw.insert(max(at, 0), url)
            elif kind == "remove":
                del raw[at]
            else:
                raw[at] = url
        providers = ordered(raw)
        following = Snapshot.following(previous, providers, version, limit=1_000)
        patched += following.delta is not None
        incremental = chain.bind(following, CONSUMER)
        # Per-provider values (a script rule's invoker records) are patched alike.
        assert following.column("address", address_of) == tuple(map(address_of, providers))
        following.settle()
        scratch = chain.bind(Snapshot(providers, version), CONSUMER)
        for call in invocations:
            assert outcome(incremental, call) == outcome(scratch, call)
        previous = following
    # Every notification after the first bind is patched (nothing keeps it from it here).
    assert patched == len(notifications)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=40, unique=True), st.data())
def test_delta_shift_moves_each_kept_bit_to_its_new_index(
    old_ids: list[int], data: st.DataObject
) -> None:
    urls = {i: URL("tri", f"10.0.0.{i}", 1, SERVICE) for i in range(60)}
    old = tuple(urls[i] for i in sorted(old_ids))
    new_ids = sorted(data.draw(st.lists(st.integers(0, 59), max_size=40, unique=True)))
    new = tuple(urls[i] for i in new_ids)
    delta = Delta.between(old, new)
    assert delta is not None
    mask = data.draw(st.integers(0, (1 << len(old)) - 1))
    expected = sum(1 << j for j, u in enumerate(new) if u in old and mask >> old.index(u) & 1)
    assert delta.shift(mask) == expected
    assert delta.size == len(set(old) ^ set(new))


def test_a_reordered_provider_list_is_bound_from_scratch() -> None:
    a, b = URL("tri", "10.0.0.1", 1, SERVICE), URL("tri", "10.0.0.2", 1, SERVICE)
    assert Delta.between((a, b), (b, a)) is None
    assert Delta.between((a,), (a, b), limit=0) is None
    assert Delta.between((a, b), (a, a, b)) is None


def test_directory_patches_a_one_provider_change_and_routes_as_from_scratch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A registry-less directory whose provider list changes by one: the new chain's snapshot
    was patched from the previous one, and routes like a fresh bind."""
    deltas: list[Delta | None] = []
    following = Snapshot.following

    def spy(*args: Any, **kwargs: Any) -> Snapshot:
        made = following(*args, **kwargs)
        deltas.append(made.delta)
        return made

    monkeypatch.setattr(Snapshot, "following", spy)
    rule = URL.parse(
        f"condition://0.0.0.0/{SERVICE}?category=routers&priority=1"
        f"&rule={encode_component('application = shop => zone = $zone')}"
    )
    fleet = [
        URL(
            "tri",
            f"10.0.{i // 250}.{i % 250}",
            50051,
            SERVICE,
            parameters={"interface": SERVICE, "zone": ZONES[i % 4]},
        )
        for i in range(200)
    ]
    rulebook = factory.new_rulebook()
    rulebook.set_urls("/rules", [rule])
    directory = RegistryDirectory(
        CONSUMER, None, rulebook, assemble=factory.chain_routers, static_providers=fleet
    )
    seen: list[BoundChain] = []
    directory.add_listener(seen.append)
    directory._apply_category("providers", [*fleet[:50], *fleet[51:], fleet[50].replace(port=1)])
    (chain,) = seen
    delta = deltas[-1]  # the first was the directory's first list: bound from scratch
    assert delta is not None and delta.size == 2
    scratch = RouterChain(factory.chain_routers(rulebook.routers())).bind(
        Snapshot(chain.snapshot.providers), CONSUMER
    )
    call = Invocation(SERVICE, "SayHello")
    assert chain.route(call) == scratch.route(call)
    assert {p.parameters["zone"] for p in chain.route(call)} == {"z1"}
    assert len(chain.route(call)) == 50
