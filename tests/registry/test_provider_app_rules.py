"""Rules read from the providers' application key: condition rules (Dubbo's
ProviderAppStateRouter, priority 145) and affinity rules (AffinityProviderAppStateRouter, 135).

A consumer reads ``<provider-app>.condition-router`` for the application its providers belong
to, not when that application is its own (it reads its own application's document once, as an
application rule at 150), and switches when the providers' application changes. The first test
is Dubbo's ProviderAppConditionStateRouterTest as a vector (dubbo-cluster, router/condition/
config); the store is the in-memory one, the end-to-end tests on ZooKeeper are in
tests/e2e/test_app_routers_e2e.py. dubbo-go's TestApplicationRouter is the second vector (its
ApplicationRouter runs both the consumer's and the providers' application rules at 145;
dubbo-py follows Dubbo's 150 and 145, docs/routing.md).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dubbo_py.invocation import Invocation
from dubbo_py.registry import rule_kinds
from dubbo_py.registry.directory import RegistryDirectory
from dubbo_py.registry.registry import Registry
from dubbo_py.router import factory
from dubbo_py.url import URL
from tests.support.memory_store import MemoryStore, MemoryTree

SERVICE = "com.foo.BarService"
#: Dubbo's test rule, as written there (v3.0, scope application, key demo-provider).
DUBBO_RULE = (
    "---\nconfigVersion: v3.0\nscope: application\nforce: true\nruntime: false\n"
    "enabled: true\npriority: 1\nkey: demo-provider\nconditions:\n"
    "- method=sayHello => region=hangzhou\n...\n"
)


def _provider(host: str, port: int, app: str, extra: str = "", key: str = "application") -> URL:
    return URL.parse(f"tri://{host}:{port}/{SERVICE}?interface={SERVICE}&{key}={app}{extra}")


def _consumer(app: str) -> URL:
    return URL.parse(f"consumer://10.0.0.9/{SERVICE}?application={app}&interface={SERVICE}")


class World:
    def __init__(self) -> None:
        self.tree = MemoryTree()
        # One session for all: the in-memory store fires a session's watches on its own writes.
        self.admin = Registry(MemoryStore(self.tree))
        self.directories: list[RegistryDirectory] = []

    def consumer(self, app: str) -> RegistryDirectory:
        directory = RegistryDirectory(
            _consumer(app),
            self.admin,
            factory.new_rulebook(),
            assemble=factory.chain_routers,
        )
        directory.start(wait=1.0)
        self.directories.append(directory)
        return directory


@pytest.fixture
def world() -> Iterator[World]:
    w = World()
    yield w
    for d in w.directories:
        d.close()


def _ports(directory: RegistryDirectory, method: str) -> list[int]:
    return sorted(p.port for p in directory.chain.route(Invocation(SERVICE, method)))


#: (name, provider URL parameters by port, the key naming their application, rule, consumer
#: application, method -> ports expected)
PROVIDER_APP_VECTORS = [
    # Dubbo's ProviderAppConditionStateRouterTest: providers merged the Dubbo 2.7 way carry
    # remote.application.
    (
        "dubbo ProviderAppConditionStateRouterTest",
        {20880: "", 20881: "&region=hangzhou", 20882: ""},
        "remote.application",
        DUBBO_RULE,
        "shop",
        {"sayHello": [20881], "sayHi": [20880, 20881, 20882]},
    ),
    # dubbo-go's TestApplicationRouter: application=demo-provider, configVersion 'V3.0'.
    (
        "dubbo-go TestApplicationRouter",
        {20880: "", 20881: "&region=hangzhou", 20882: ""},
        "application",
        DUBBO_RULE.replace("v3.0", "V3.0"),
        "shop",
        {"sayHello": [20881], "sayHi": [20880, 20881, 20882]},
    ),
]


@pytest.mark.parametrize(
    ("name", "providers", "app_key", "rule", "consumer_app", "expected"),
    PROVIDER_APP_VECTORS,
    ids=[v[0] for v in PROVIDER_APP_VECTORS],
)
def test_provider_app_condition_vectors(
    world: World,
    name: str,
    providers: dict[int, str],
    app_key: str,
    rule: str,
    consumer_app: str,
    expected: dict[str, list[int]],
) -> None:
    for port, extra in providers.items():
        world.admin.register(_provider("127.0.0.1", port, "demo-provider", extra, key=app_key))
    world.admin.put_config("demo-provider.condition-router", rule)
    directory = world.consumer(consumer_app)
    for method, ports in expected.items():
        assert _ports(directory, method) == ports, method
    stages = [n for n, _ in directory.chain.stages]
    assert any("demo-provider.condition-router" in n for n in stages)


def test_rule_runs_at_145_between_service_and_application_rules(world: World) -> None:
    world.admin.register(_provider("127.0.0.1", 1, "bars-provider", "&zone=a"))
    world.admin.put_config("bars-provider.condition-router", "conditions: ['=> zone = a']\n")
    directory = world.consumer("shop")
    priorities = {
        r.name: r.priority for r in directory._rulebook.routers() if "condition" in r.name
    }
    assert list(priorities.values()) == [145]


def test_not_read_when_the_providers_application_is_the_consumers_own(world: World) -> None:
    for port, zone in ((1, "a"), (2, "b")):
        world.admin.register(_provider("127.0.0.1", port, "bars-provider", f"&zone={zone}"))
    world.admin.put_config("bars-provider.condition-router", "conditions: ['=> zone = b']\n")
    own = world.consumer("bars-provider")
    other = world.consumer("shop")
    # Both apply it -- once each: the own application's consumer as its application rule (150).
    assert _ports(own, "Any") == [2] and _ports(other, "Any") == [2]
    own_rules = [r for r in own._rulebook.routers() if "condition" in r.name]
    assert [r.priority for r in own_rules] == [150]
    keys = rule_kinds.provider_application_keys("bars-provider", "bars-provider")
    assert "bars-provider.condition-router" not in [w.key for w in keys]
    assert "bars-provider.affinity-router" not in [w.key for w in keys]
    assert "bars-provider.tag-router" in [w.key for w in keys]  # Dubbo's tag router reads it


def test_switches_when_the_providers_application_changes(world: World) -> None:
    a1 = _provider("127.0.0.1", 1, "app-a", "&zone=a")
    a2 = _provider("127.0.0.1", 2, "app-a", "&zone=b")
    world.admin.register(a1)
    world.admin.register(a2)
    # Forced: were it still applied to app-b's providers, it would leave none.
    world.admin.put_config("app-a.condition-router", "force: true\nconditions: ['=> zone = a']\n")
    world.admin.put_config("app-b.condition-router", "conditions: ['=> zone = c']\n")
    directory = world.consumer("shop")
    assert _ports(directory, "Any") == [1]
    # The application's providers leave for those of app-b: app-a's rule no longer applies,
    # app-b's does.
    b3 = _provider("127.0.0.1", 3, "app-b", "&zone=c")
    b4 = _provider("127.0.0.1", 4, "app-b", "&zone=d")
    world.admin.register(b3)
    world.admin.register(b4)
    world.admin.unregister(a1)
    world.admin.unregister(a2)
    assert _ports(directory, "Any") == [3]
    world.admin.put_config(
        "app-a.condition-router", "force: true\nconditions: ['=> zone = nowhere']\n"
    )
    assert _ports(directory, "Any") == [3]  # app-a is no longer watched
    world.admin.delete_config("app-b.condition-router")
    assert _ports(directory, "Any") == [3, 4]


def test_an_empty_provider_list_keeps_the_subscription(world: World) -> None:
    a1 = _provider("127.0.0.1", 1, "app-a", "&zone=a")
    world.admin.register(a1)
    world.admin.put_config("app-a.condition-router", "conditions: ['=> zone = a']\n")
    directory = world.consumer("shop")
    world.admin.unregister(a1)
    assert directory.providers == ()
    world.admin.register(_provider("127.0.0.1", 2, "app-a", "&zone=b"))
    world.admin.register(a1)
    assert _ports(directory, "Any") == [1]


def test_provider_app_affinity_rule(world: World) -> None:
    for port, region in ((1, "x"), (2, "x"), (3, "y")):
        world.admin.register(_provider("127.0.0.1", port, "bars-provider", f"&region={region}"))
    directory = RegistryDirectory(
        URL.parse(f"consumer://10.0.0.9/{SERVICE}?application=shop&interface={SERVICE}&region=x"),
        world.admin,
        factory.new_rulebook(),
        assemble=factory.chain_routers,
    )
    directory.start(wait=1.0)
    world.directories.append(directory)
    doc = "configVersion: v3.1\naffinityAware: {key: region, ratio: %s}\n"
    world.admin.put_config("bars-provider.affinity-router", doc % 50)
    assert _ports(directory, "Any") == [1, 2]  # 2 of 3 >= 50 %
    world.admin.put_config("bars-provider.affinity-router", doc % 70)
    assert _ports(directory, "Any") == [1, 2, 3]  # 67 % < 70 %
    world.admin.put_config("bars-provider.affinity-router", doc % 500)  # refused: kept
    assert _ports(directory, "Any") == [1, 2, 3]
    assert any("affinity-router" in source for source in directory.rule_errors)
    world.admin.put_config(f"{SERVICE}::.affinity-router", doc % 10)
    world.admin.delete_config("bars-provider.affinity-router")
    assert _ports(directory, "Any") == [1, 2]  # the service's rule
    world.admin.delete_config(f"{SERVICE}::.affinity-router")
    assert _ports(directory, "Any") == [1, 2, 3]


def test_route_test_reads_an_application_document_of_another_application_at_145() -> None:
    kind = rule_kinds.kind_named("condition-router")
    assert kind is not None
    doc = {"scope": "application", "key": "greeter"}
    target = rule_kinds.target_for_document
    assert target(kind, doc, "shop") is rule_kinds.Target.PROVIDER_APPLICATION
    assert target(kind, doc, "greeter") is rule_kinds.Target.APPLICATION
    assert target(kind, doc) is rule_kinds.Target.APPLICATION
    [router] = kind.compile(rule_kinds.Target.PROVIDER_APPLICATION, "conditions: ['=> a=b']", "s")
    assert router.priority == 145


def test_a_document_marked_invalid_routes_nothing(world: World) -> None:
    # Dubbo's ListenableStateRouter builds no router from a rule with valid: false.
    for port, zone in ((1, "a"), (2, "b")):
        world.admin.register(_provider("127.0.0.1", port, "bars-provider", f"&zone={zone}"))
    directory = world.consumer("shop")
    rule = "force: true\nconditions: ['=> zone = b']\n"
    world.admin.put_config("bars-provider.condition-router", rule)
    assert _ports(directory, "Any") == [2]
    world.admin.put_config("bars-provider.condition-router", "valid: false\n" + rule)
    assert _ports(directory, "Any") == [1, 2]
