"""Condition rules of the same text share one parsed rule across services (issue 42, item 1:
a consumer of 1 000 services with the same 20 rules kept 20 000 parsed copies, ~115 MB), and
still route each service's own providers, per consumer where a ``$`` reference reads it.

End to end on a real ZooKeeper: two services' providers and router URLs registered by one
session, two consumers' directories reading them through another.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from dubbo_py.errors import RuleError
from dubbo_py.invocation import Invocation
from dubbo_py.registry.directory import RegistryDirectory
from dubbo_py.registry.registry import Registry
from dubbo_py.router import factory
from dubbo_py.router.condition import ConditionRouter
from dubbo_py.router.condition.parser import parse_rule
from dubbo_py.router.condition.router import _prepared
from dubbo_py.url import URL, encode_component
from tests.conftest import ZK_SESSION_TIMEOUT
from tests.support.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.zookeeper

SERVICES = ("demo.SharedA", "demo.SharedB")
#: The same three texts in both services: a plain rule, a ``$`` reference (the consumer's own
#: zone), and one whose when side matches one consumer's application only.
PLAIN = "application = shop => region = r1"
REFERENCE = "method = SayHello => zone = $zone"
ONE_CONSUMER = "application = cart => false"


def _provider(service: str, index: int, region: str, zone: str) -> URL:
    return URL.parse(
        f"tri://127.0.0.{10 + index}:{20880 + index}/{service}?application=greeter"
        f"&interface={service}&region={region}&zone={zone}&methods=SayHello,Other"
    )


def _rule_url(service: str, priority: int, rule: str) -> URL:
    return URL.parse(
        f"condition://0.0.0.0/{service}?category=routers&dynamic=false&force=false"
        f"&priority={priority}&rule={encode_component(rule)}"
    )


def _consumer(service: str, application: str, zone: str) -> URL:
    return URL.parse(
        f"consumer://127.0.0.1/{service}?application={application}&interface={service}"
        f"&zone={zone}&side=consumer"
    )


@pytest.fixture
def registries(zookeeper: ZooKeeperServer) -> Iterator[tuple[Registry, Registry]]:
    from dubbo_py.registry.store.zookeeper import ZooKeeperStore

    chroot = f"/test-{uuid.uuid4().hex[:12]}"
    stores = [
        ZooKeeperStore(zookeeper.address, chroot, session_timeout=ZK_SESSION_TIMEOUT)
        for _ in range(2)
    ]
    for store in stores:
        assert store.start(20)
    yield Registry(stores[0]), Registry(stores[1])
    for store in stores:
        store.close()


def _condition_routers(directory: RegistryDirectory) -> dict[str, ConditionRouter]:
    """The directory's condition routers by rule text."""
    return {
        r.rule.text(): r for r in directory._rulebook.routers() if isinstance(r, ConditionRouter)
    }


def _hosts(directory: RegistryDirectory, method: str) -> list[str]:
    service = directory.rules.service
    return sorted(p.host for p in directory.chain.route(Invocation(service, method)))


def test_identical_rules_of_two_services_share_one_rule_and_route_their_own_providers(
    registries: tuple[Registry, Registry],
) -> None:
    admin, consumer_side = registries
    # Each service: r1/z1, r1/z2, r2/z1, r2/z2 (hosts differ between the services).
    for s, service in enumerate(SERVICES):
        for i, (region, zone) in enumerate(
            [("r1", "z1"), ("r1", "z2"), ("r2", "z1"), ("r2", "z2")]
        ):
            admin.register(_provider(service, s * 4 + i, region, zone))
        for priority, rule in enumerate((PLAIN, REFERENCE, ONE_CONSUMER)):
            admin.register(_rule_url(service, priority, rule))
    # Consumer of A in zone z1, of B in zone z2; both of application shop.
    directories = [
        RegistryDirectory(
            _consumer(service, "shop", zone),
            consumer_side,
            factory.new_rulebook(),
            assemble=factory.chain_routers,
        )
        for service, zone in zip(SERVICES, ("z1", "z2"), strict=True)
    ]
    try:
        for directory in directories:
            directory.start(wait=20)
        a, b = (_condition_routers(d) for d in directories)
        assert set(a) == set(b) == {parse_rule(t).text() for t in (PLAIN, REFERENCE, ONE_CONSUMER)}
        for text in a:
            # Two routers (each with its own name, naming its own service's router URL) ...
            assert a[text] is not b[text] and a[text].name != b[text].name
            # ... on one parsed rule.
            assert a[text].rule is b[text].rule
        # The rule without references shares its bind-time preparation too; the one with a
        # reference prepares per consumer.
        plain = a[parse_rule(PLAIN).text()].rule
        assert "prepared" in plain.memo
        reference = a[parse_rule(REFERENCE).text()].rule
        assert "prepared" not in reference.memo and reference.references

        # Routing: each directory's own hosts; SayHello also keeps the consumer's own zone.
        assert _hosts(directories[0], "Other") == ["127.0.0.10", "127.0.0.11"]
        assert _hosts(directories[1], "Other") == ["127.0.0.14", "127.0.0.15"]
        assert _hosts(directories[0], "SayHello") == ["127.0.0.10"]  # r1 & z1
        assert _hosts(directories[1], "SayHello") == ["127.0.0.15"]  # r1 & z2
    finally:
        for directory in directories:
            directory.close()


def test_a_rule_read_by_one_consumer_and_not_another_binds_per_consumer() -> None:
    # The shared rule of ONE_CONSUMER blocks the cart application's calls and passes the shop
    # application's: the when side is judged against each consumer at bind.
    from dubbo_py.router.snapshot import Snapshot

    rule = parse_rule(ONE_CONSUMER)
    router = ConditionRouter(rule, name="one")
    providers = (_provider(SERVICES[0], 0, "r1", "z1"), _provider(SERVICES[0], 1, "r2", "z2"))
    snapshot = Snapshot(providers)
    cart = router.bind(snapshot, _consumer(SERVICES[0], "cart", "z1"))
    shop = router.bind(snapshot, _consumer(SERVICES[0], "shop", "z1"))
    call = Invocation(SERVICES[0], "SayHello")
    assert cart.route(snapshot.all, call) == 0
    assert shop.route(snapshot.all, call) == snapshot.all


def test_references_resolve_per_consumer_on_a_shared_rule() -> None:
    rule = parse_rule(REFERENCE)
    assert parse_rule(REFERENCE) is rule
    _, then_z1, _ = _prepared(rule, {"zone": "z1"})
    _, then_z2, _ = _prepared(rule, {"zone": "z2"})
    assert [m.matches for m in then_z1.static] != [m.matches for m in then_z2.static]


def test_a_bad_rule_raises_with_each_callers_source_every_time() -> None:
    for source in ("first", "second"):
        with pytest.raises(RuleError) as raised:
            parse_rule("a = => b", source)
        assert str(raised.value).startswith(source)


def test_a_rule_no_router_holds_any_more_is_not_kept() -> None:
    import gc
    import weakref

    text = f"application = gone-{uuid.uuid4().hex[:6]} => region = r1"
    held = weakref.ref(parse_rule(text))
    gc.collect()
    assert held() is None


def test_documents_of_two_scopes_share_the_rule_and_keep_their_own_priority_and_force() -> None:
    from dubbo_py.router.condition import ConditionRuleSet, routers_from_yaml

    text = "method = SayHello => region = r1"
    service_doc = f"configVersion: v3.0\nforce: true\nconditions:\n- '{text}'\n"
    app_doc = f"configVersion: v3.0\nforce: false\nconditions:\n- '{text}'\n"
    (service,) = routers_from_yaml(service_doc, "demo.SharedA::.condition-router", "service")
    (app,) = routers_from_yaml(app_doc, "shop.condition-router", "application")
    assert isinstance(service, ConditionRuleSet) and isinstance(app, ConditionRuleSet)
    assert (service.priority, app.priority) == (140, 150)
    (in_service,) = service.members
    (in_app,) = app.members
    assert isinstance(in_service, ConditionRouter) and isinstance(in_app, ConditionRouter)
    assert in_service.rule is in_app.rule
    assert (in_service.force, in_app.force) == (True, False)
    # Forced, the service document leaves a consumer whose call finds no r1 provider nothing;
    # the application document gives the input back.
    from dubbo_py.router.snapshot import Snapshot

    snapshot = Snapshot((_provider(SERVICES[0], 0, "r2", "z1"),))
    consumer = _consumer(SERVICES[0], "shop", "z1")
    call = Invocation(SERVICES[0], "SayHello")
    assert service.bind(snapshot, consumer).route(snapshot.all, call) == 0
    assert app.bind(snapshot, consumer).route(snapshot.all, call) == snapshot.all
