"""A provider-application configurator, as an operator of a Dubbo estate writes it, pushed with
``dubbo-py rules push`` to a real ZooKeeper: the dubbo-py providers of that application read it
(Dubbo's ProviderConfigurationListener), apply the provider-side items that match them and
register again with the overridden URL -- at the interface level and in the application's
instance metadata (Dubbo's re-export updates the MetadataInfo and the instance's revision) -- so
consumers on either level stop calling a provider it disables. Deleting the rule restores them.

The consumer does not read ``<provider-app>.configurators`` itself (Dubbo's consumers read their
own application's and the service's): only the providers' re-registration can take one out,
which is what issue 41 found missing for consumers on the application level.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.registry.application.paths import instance_path, metadata_path
from dubbo_py.registry.registry import Registry
from tests.e2e.conftest import wait_until
from tests.e2e.test_cli_e2e import dubbo_py as run_cli
from tests.support.zookeeper import ZooKeeperServer

PROVIDER_APP = "bars-provider"


def _rule(match_zone: str, parameters: str, services: str = "demo.Greeter:1.0.0") -> str:
    return (
        "configVersion: v3.0\n"
        "scope: application\n"
        f"key: {PROVIDER_APP}\n"
        "enabled: true\n"
        "configs:\n"
        "  - side: provider\n"
        f"    services: ['{services}']\n"
        f"    parameters: {parameters}\n"
        f"    match: {{param: [{{key: zone, value: {{exact: {match_zone}}}}}]}}\n"
    )


class Counted:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls = 0

    def hit(self) -> None:
        with self.lock:
            self.calls += 1


class Provider:
    """A dubbo-py Greeter provider of ``bars-provider`` whose URL carries ``zone``."""

    def __init__(self, registry: str, zone: str) -> None:
        self.seen = Counted()
        seen = self.seen

        @dubbo_py.service(version="1.0.0", tags={"zone": zone}, warmup=0)
        class Greeter(greeter_pb2_grpc.GreeterServicer):
            address = ""

            def SayHello(self, request: Any, context: Any) -> Any:
                seen.hit()
                return greeter_pb2.HelloReply(message="hi", provider=self.address)

        servicer = Greeter()
        self.app = dubbo_py.Application(PROVIDER_APP, registry)
        self.server = self.app.start(servicer)
        servicer.address = self.address = self.server.address

    def close(self) -> None:
        self.server.stop(grace=0.2)
        self.app.close()


@pytest.fixture
def registry(zookeeper: ZooKeeperServer) -> str:
    return f"zookeeper://{zookeeper.address}/e2e-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def two(registry: str) -> Iterator[tuple[Provider, Provider]]:
    a = Provider(registry, "a")
    try:
        b = Provider(registry, "b")
    except BaseException:
        a.close()
        raise
    yield a, b
    a.close()
    b.close()


def _instance(app: dubbo_py.Application, provider: Provider) -> tuple[str, dict[str, Any]]:
    """The provider's instance revision and that revision's document, as ZooKeeper holds them."""
    registry = app.registry
    assert isinstance(registry, Registry)
    data, _ = registry.store.get(instance_path(PROVIDER_APP, provider.address))
    revision = json.loads(data)["payload"]["metadata"]["dubbo.metadata.revision"]
    document, _ = registry.store.get(metadata_path(PROVIDER_APP, revision))
    return revision, json.loads(document)


def _push(registry: str, tmp_path: Path, text: str) -> None:
    path = tmp_path / "rule.yaml"
    path.write_text(text, encoding="utf-8")
    result = run_cli(registry, "rules", "push", str(path))
    assert result.returncode == 0, result.stderr


def _delete(registry: str) -> None:
    result = run_cli(registry, "rules", "delete", f"{PROVIDER_APP}.configurators")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("step", ["APPLICATION_FIRST", "FORCE_INTERFACE", "FORCE_APPLICATION"])
def test_a_provider_app_configurator_disables_the_matched_provider_until_deleted(
    registry: str, two: tuple[Provider, Provider], tmp_path: Path, step: str
) -> None:
    a, b = two
    with dubbo_py.Application("shop", registry, migration_step=step) as shop:
        ref = shop.reference_handle(
            greeter_pb2_grpc.GreeterStub, version="1.0.0", loadbalance="roundrobin", timeout=5.0
        )
        request = greeter_pb2.HelloRequest(name="x")

        def answered(n: int) -> set[str]:
            return {ref.stub.SayHello(request).provider for _ in range(n)}

        wait_until(lambda: answered(10) == {a.address, b.address}, 10, "both providers")
        revision_a, _ = _instance(shop, a)
        revision_b, _ = _instance(shop, b)
        _push(registry, tmp_path, _rule("a", "{disabled: 'true'}"))
        wait_until(lambda: answered(10) == {b.address}, 10, "zone a taken out")
        calls = a.seen.calls
        assert answered(30) == {b.address}
        assert a.seen.calls == calls  # the matched provider gets no call at all
        # As Dubbo's re-export: the instance names a new revision whose document carries the
        # overridden service URL; the other provider's instance is untouched.
        revision, document = _instance(shop, a)
        assert revision != revision_a
        (service,) = document["services"].values()
        assert service["params"]["disabled"] == "true"
        assert _instance(shop, b)[0] == revision_b

        _delete(registry)
        wait_until(lambda: answered(10) == {a.address, b.address}, 10, "zone a back")
        assert _instance(shop, a)[0] == revision_a  # the original URL, so the original revision


@pytest.mark.parametrize("step", ["FORCE_INTERFACE", "FORCE_APPLICATION"])
def test_weight_and_timeout_overrides_reach_consumers_of_the_matched_provider_only(
    registry: str, two: tuple[Provider, Provider], tmp_path: Path, step: str
) -> None:
    a, b = two
    with dubbo_py.Application("shop", registry, migration_step=step) as shop:
        ref = shop.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0")

        def seen(name: str) -> dict[str, str | None]:
            return {u.address: u.get(name) for u in ref.directory.providers}

        wait_until(lambda: len(ref.directory.providers) == 2, 10, "both providers")
        weights, timeouts = seen("weight"), seen("timeout")
        assert set(weights.values()) == {"100"}  # what the providers' code says
        # An item for another version of the service is not these providers'.
        _push(
            registry,
            tmp_path,
            _rule("a", "{weight: 7}", services="demo.Greeter:2.0.0")
            + _rule("b", "{weight: 9}").split("configs:\n", 1)[1],
        )
        wait_until(lambda: seen("weight")[b.address] == "9", 10, "zone b's weight")
        assert seen("weight")[a.address] == "100"
        _push(registry, tmp_path, _rule("a", "{weight: 7, timeout: 4500}"))
        wait_until(lambda: seen("weight")[a.address] == "7", 10, "zone a's weight")
        assert seen("timeout") == {**timeouts, a.address: "4500"}
        assert seen("weight")[b.address] == "100"  # the second push replaced the first
        _delete(registry)
        wait_until(lambda: seen("weight") == weights, 10, "weights restored")
        assert seen("timeout") == timeouts


def test_an_invalid_document_leaves_the_last_good_rules_in_force(
    registry: str, two: tuple[Provider, Provider], tmp_path: Path
) -> None:
    a, b = two
    with dubbo_py.Application("shop", registry) as shop:
        ref = shop.reference_handle(
            greeter_pb2_grpc.GreeterStub, version="1.0.0", loadbalance="roundrobin", timeout=5.0
        )
        request = greeter_pb2.HelloRequest(name="x")

        def answered(n: int) -> set[str]:
            return {ref.stub.SayHello(request).provider for _ in range(n)}

        wait_until(lambda: answered(10) == {a.address, b.address}, 10, "both providers")
        _push(registry, tmp_path, _rule("a", "{disabled: 'true'}"))
        wait_until(lambda: answered(10) == {b.address}, 10, "zone a taken out")
        revision, _ = _instance(shop, a)
        rules = shop.registry
        assert isinstance(rules, Registry)
        # Written past the CLI (which refuses it), as a broken tool would: not a mapping.
        rules.put_config(f"{PROVIDER_APP}.configurators", "configs: [side: provider\n")
        # A valid rule of the service's own key, read after the broken one, proves the provider
        # has seen the broken document and is still following its rules.
        rules.put_config(
            "demo.Greeter:1.0.0:.configurators",
            "configVersion: v3.0\nscope: service\nkey: demo.Greeter\nconfigs:\n"
            "  - side: provider\n    parameters: {weight: 11}\n",
        )
        wait_until(
            lambda: {u.get("weight") for u in ref.directory.providers} == {"11"}, 10, "weight 11"
        )
        assert answered(20) == {b.address}  # the last good provider-application rule stands
        assert _instance(shop, a)[0] != revision  # re-registered with weight, still disabled
        _delete(registry)
        wait_until(lambda: answered(10) == {a.address, b.address}, 10, "zone a back")
