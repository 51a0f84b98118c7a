"""Applications end to end through the real Nacos server (tests/support/nacos.py): provider
processes on ``nacos://...?register-mode=interface`` register, a consumer Application on the
same address calls them, a second provider joining gets calls, a condition rule written to Nacos
routes calls, and a provider stopping gracefully leaves without a failed call (its instance
deregistered and no longer listed). A provider in the default register mode is found at the
application level. Addresses with ``group=`` keep their providers apart (Nacos naming groups, as
Dubbo's NacosRegistry and NacosServiceDiscovery), and a rule pushed by ``dubbo-py rules push``
on a group's address reaches that group's consumer."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.admin.cli import cli
from tests.e2e.conftest import wait_until
from tests.support.nacos import NacosServer
from tests.support.processes import ProviderProcess

pytestmark = pytest.mark.nacos


@pytest.fixture
def started() -> Iterator[list[ProviderProcess]]:
    procs: list[ProviderProcess] = []
    yield procs
    for proc in procs:
        proc.kill()


def test_calls_through_nacos_follow_providers_joining_and_leaving(
    nacos: NacosServer, started: list[ProviderProcess], tmp_path: Path
) -> None:
    # Interface-level only: application-level discovery (/dubbo/metadata, /services) has no
    # place in the store yet, and the default register mode (all) is refused by name.
    address = f"nacos://{nacos.address}?register-mode=interface"
    started.append(ProviderProcess(address).start())
    first = started[0]
    with dubbo_py.Application("shop", address, cache_path=tmp_path / "c.json") as app:
        greeter = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")

        def served_by() -> str:
            return str(greeter.SayHello(greeter_pb2.HelloRequest(name="n")).provider)

        wait_until(lambda: served_by() == first.address, 15, "a call answered through Nacos")
        started.append(ProviderProcess(address).start())
        second = started[1]
        seen: set[str] = set()
        wait_until(
            lambda: seen.add(served_by()) or second.address in seen, 15, "the joiner gets calls"
        )
        # A condition rule written to Nacos (data id <key> in group dubbo) routes every call.
        assert app.registry is not None
        key = "demo.Greeter:1.0.0:.condition-router"
        app.registry.put_config(
            key,
            "configVersion: v3.0\nscope: service\nkey: demo.Greeter\nforce: true\n"
            f"conditions:\n  - 'method = SayHello => port = {second.port}'\n",
        )
        wait_until(
            lambda: {served_by() for _ in range(5)} == {second.address}, 10, "the rule routes"
        )
        app.registry.delete_config(key)
        wait_until(lambda: served_by() == first.address, 10, "the rule's removal")
        # A graceful stop deregisters; every call meanwhile is answered, then only by the other.
        assert first.terminate() == 0
        deadline = time.monotonic() + 10
        last: list[str] = []
        while time.monotonic() < deadline:
            last = [served_by() for _ in range(5)]
            if set(last) == {second.address}:
                break
        assert set(last) == {second.address}


def test_a_default_register_mode_provider_is_found_at_the_application_level_on_nacos(
    nacos: NacosServer, started: list[ProviderProcess], tmp_path: Path
) -> None:
    # register-mode "all" (the default) publishes the instance (Nacos service <app>), its
    # MetadataInfo (data id <app>, group <revision>) and the mapping: a FORCE_APPLICATION
    # consumer finds the provider through them alone.
    address = f"nacos://{nacos.address}"
    started.append(ProviderProcess(address).start())
    with dubbo_py.Application(
        "shop-app", address, cache_path=tmp_path / "c.json", migration_step="FORCE_APPLICATION"
    ) as app:
        greeter = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
        wait_until(
            lambda: (
                greeter.SayHello(greeter_pb2.HelloRequest(name="n")).provider == started[0].address
            ),
            15,
            "a call answered through the application level on Nacos",
        )


def test_groups_keep_providers_apart_and_a_pushed_rule_reaches_its_group(
    nacos: NacosServer,
    started: list[ProviderProcess],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Two providers on group blue, one on green (interface level); a blue consumer is only ever
    # answered by blue's, and a condition rule pushed with the CLI on blue's address (data id
    # <key> in group dubbo, where Dubbo reads rules whatever its registry group) steers it.
    # A namespace of its own: the rule is config of the namespace, read by every group's
    # consumer in it (as in Dubbo), so it must not reach the other tests' consumers.
    base = (
        f"nacos://{nacos.address}?namespace=groups-{uuid.uuid4().hex[:8]}&register-mode=interface"
    )
    blue, green = f"{base}&group=blue", f"{base}&group=green"
    for address in (blue, blue, green):
        started.append(ProviderProcess(address).start())
    first, second, other = (p.address for p in started)
    with dubbo_py.Application("shop", blue, cache_path=tmp_path / "c.json") as app:
        greeter = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")

        def served_by() -> str:
            return str(greeter.SayHello(greeter_pb2.HelloRequest(name="n")).provider)

        seen: set[str] = set()
        wait_until(
            lambda: seen.add(served_by()) or {first, second} <= seen, 15, "both blue providers"
        )
        seen |= {served_by() for _ in range(20)}
        assert seen == {first, second}, f"green's provider {other} answered a blue consumer"

        monkeypatch.delenv("DUBBO_PY_REGISTRY", raising=False)
        monkeypatch.delenv("DUBBO_PY_REGISTRY_AUTH", raising=False)
        rule = tmp_path / "rule.yaml"
        rule.write_text(
            "configVersion: v3.0\nscope: service\nkey: demo.Greeter:1.0.0\nforce: true\n"
            f"conditions:\n  - 'method = SayHello => port = {started[1].port}'\n"
        )
        pushed = CliRunner().invoke(cli, ["rules", "push", str(rule), "--registry", blue])
        assert pushed.exit_code == 0, pushed.output
        wait_until(
            lambda: {served_by() for _ in range(5)} == {second}, 10, "the pushed rule routes"
        )


def test_an_application_level_provider_is_found_only_in_its_group_on_nacos(
    nacos: NacosServer, started: list[ProviderProcess], tmp_path: Path
) -> None:
    # Register mode "all" on group blue: the instance (Nacos service <app> in group blue), its
    # MetadataInfo and the mapping; a FORCE_APPLICATION consumer on blue finds it, one on green
    # finds no instance of the application although the mapping names it.
    blue = f"nacos://{nacos.address}?group=blue"
    green = f"nacos://{nacos.address}?group=green"
    started.append(ProviderProcess(blue).start())
    with (
        dubbo_py.Application(
            "shop-blue", blue, cache_path=tmp_path / "b.json", migration_step="FORCE_APPLICATION"
        ) as on_blue,
        dubbo_py.Application(
            "shop-green", green, cache_path=tmp_path / "g.json", migration_step="FORCE_APPLICATION"
        ) as on_green,
    ):
        greeter = on_blue.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
        wait_until(
            lambda: (
                greeter.SayHello(greeter_pb2.HelloRequest(name="n")).provider == started[0].address
            ),
            15,
            "a call answered through the application level on group blue",
        )
        stranger = on_green.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0", timeout=1)
        with pytest.raises(Exception, match=r"(?i)no provider"):
            stranger.SayHello(greeter_pb2.HelloRequest(name="n"))


def test_a_provider_on_nacos_waits_for_its_consumers_to_hear_it_left(
    nacos: NacosServer, tmp_path: Path
) -> None:
    # A Nacos consumer hears an unregistration by the naming push or its 0.5 s poll, not at
    # once as a ZooKeeper watch does: a provider stopping after 0.5 s lost calls to consumers
    # still sending to it (bench/soak_rule_churn.py --registry nacos: 5 and 2 failed calls in
    # 60 s runs). Its default wait after unregistering is the registry's notice time; an
    # explicit unregister_wait still wins.
    class Greeter(greeter_pb2_grpc.GreeterServicer):
        def SayHello(self, request: greeter_pb2.HelloRequest, context: object) -> object:
            return greeter_pb2.HelloReply(message="hi")

    address = f"nacos://{nacos.address}?namespace=stop-{uuid.uuid4().hex[:8]}"
    with dubbo_py.Application("nacos-stop-wait", address, cache_path=tmp_path / "c.json") as app:
        default = app.start(Greeter(), port=0, bind_host="127.0.0.1")
        given = app.start(Greeter(), port=0, bind_host="127.0.0.1", unregister_wait=0.1)
        assert (default.unregister_wait, given.unregister_wait) == (2.0, 0.1)
    with dubbo_py.Application(
        "embedded-stop-wait", f"sqlite://{tmp_path}/r.db", cache_path=tmp_path / "e.json"
    ) as embedded:
        assert embedded.start(Greeter(), port=0, bind_host="127.0.0.1").unregister_wait == 0.5
