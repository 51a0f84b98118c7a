"""Register modes and the consumer's migration step on a real Nacos server (issue 44).

In-process Applications on ``nacos://...`` (tests/support/nacos.py), each test with
applications and a service group of its own, so the session's other providers of demo.Greeter
do not answer: a provider's register mode decides which levels it writes (checked with Nacos's
own API: the service ``providers:demo.Greeter:1.0.0:<group>`` of the interface level, the
service ``<app>`` of the application level), and an ``APPLICATION_FIRST`` consumer uses the
application level while it has a provider, falls back to the interface level when it has none
and goes back when one returns (on ZooKeeper too: the level choice is no store's own).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import grpc
import pytest
import v2.nacos as nacos_v2
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.registry.store.address import parse_registry_address
from dubbo_py.registry.store.nacos.store import NacosStore
from tests.e2e.conftest import wait_until
from tests.support.nacos import NacosServer
from tests.support.zookeeper import ZooKeeperServer

VERSION = "1.0.0"


@pytest.fixture
def tag() -> str:
    """This test's own suffix for application names and the service group."""
    return uuid.uuid4().hex[:8]


@pytest.fixture
def store(nacos: NacosServer) -> Iterator[NacosStore]:
    """A store of the test's own, to look at what the providers wrote."""
    opened = parse_registry_address(f"nacos://{nacos.address}").new_store()
    assert isinstance(opened, NacosStore)
    assert opened.start(30), f"{opened} did not start"
    yield opened
    opened.close()


def nacos_instances(store: NacosStore, service: str) -> list[tuple[str, int]]:
    """``(ip, port)`` of the Nacos service's instances, asked of Nacos's own API."""
    found = store._run(
        store._naming.list_instances(
            nacos_v2.ListInstanceParam(service_name=service, subscribe=False, healthy_only=None)
        )
    )
    return sorted((i.ip, int(i.port)) for i in found)


def provider(
    stack: ExitStack, registry: str, app: str, group: str, mode: str, tmp_path: Path
) -> tuple[dubbo_py.Application, str]:
    """A provider application in register mode ``mode`` serving Greeter (its replies name
    ``app``); closed with ``stack`` unless closed before. Returns it and its address."""
    application = stack.enter_context(
        dubbo_py.Application(
            app,
            registry,
            cache_path=tmp_path / f"{app}.json",
            register_mode=mode,
        )
    )

    @dubbo_py.service(version=VERSION, group=group)
    class Greeter(greeter_pb2_grpc.GreeterServicer):
        def SayHello(self, request: Any, context: Any) -> Any:
            return greeter_pb2.HelloReply(message=app, provider=app)

    server = application.start(Greeter(), port=0, bind_host="127.0.0.1")
    return application, server.address


def consumer(
    stack: ExitStack, registry: str, tag: str, step: str, tmp_path: Path
) -> dubbo_py.Application:
    return stack.enter_context(
        dubbo_py.Application(
            f"shop-{step.lower()}-{tag}",
            registry,
            cache_path=tmp_path / f"consumer-{step}.json",
            migration_step=step,
        )
    )


def served(greeter: Any, calls: int = 10) -> set[str]:
    """The applications that answered ``calls`` calls (``none``: no provider to call; a failed
    call as ``error <code>``, so a wait sees it and a final check names it)."""
    seen: set[str] = set()
    for _ in range(calls):
        try:
            seen.add(greeter.SayHello(greeter_pb2.HelloRequest(name="n")).message)
        except grpc.RpcError as failed:
            if "(no provider registered)" in str(failed.details()):
                seen.add("none")
            else:
                seen.add(f"error {failed.code()} {failed.details()}")
    return seen


def level_of(app: dubbo_py.Application) -> str:
    """The level the consumer's one reference reads now."""
    level = app.application_level
    assert level is not None
    [(_url, choice)] = level.choices()
    return choice.level


@pytest.mark.parametrize(
    ("mode", "interface_level", "application_level"),
    [("instance", False, True), ("interface", True, False), ("all", True, True)],
)
@pytest.mark.nacos
def test_a_register_mode_writes_only_its_levels_on_nacos(
    nacos: NacosServer,
    store: NacosStore,
    tag: str,
    tmp_path: Path,
    mode: str,
    interface_level: bool,
    application_level: bool,
) -> None:
    app, group = f"greeter-{mode}-{tag}", f"g-{tag}"
    with ExitStack() as stack:
        registry = f"nacos://{nacos.address}"
        _provider, address = provider(stack, registry, app, group, mode, tmp_path)
        host, port = address.rsplit(":", 1)
        mine = [(host, int(port))]
        # Each level as Dubbo's Nacos registry and service discovery name it.
        interface_service = f"providers:demo.Greeter:{VERSION}:{group}"
        wait_until(
            lambda: (
                (nacos_instances(store, interface_service) == mine) == interface_level
                and (nacos_instances(store, app) == mine) == application_level
            ),
            10,
            f"register mode {mode}'s levels in Nacos",
        )
        assert bool(store.children(f"/dubbo/metadata/{app}")) == application_level
        mapped = store.get("/dubbo/mapping/demo.Greeter")[0].decode().split(",")
        assert (app in mapped) == application_level
        # Each FORCE_* consumer finds the provider only at a level it wrote.
        for step, found in (
            ("FORCE_INTERFACE", interface_level),
            ("FORCE_APPLICATION", application_level),
        ):
            greeter = consumer(stack, registry, tag, step, tmp_path).reference(
                greeter_pb2_grpc.GreeterStub, version=VERSION, group=group, timeout=5.0
            )
            assert served(greeter, 3) == ({app} if found else {"none"}), step


@pytest.fixture(
    params=[
        pytest.param("nacos", marks=pytest.mark.nacos),
        pytest.param("zookeeper", marks=pytest.mark.zookeeper),
    ],
)
def registry(request: pytest.FixtureRequest, tag: str) -> str:
    """The registry address: Nacos, and ZooKeeper (a chroot of this test's own) to show that
    what APPLICATION_FIRST does is the store's no matter."""
    if request.param == "nacos":
        server: NacosServer = request.getfixturevalue("nacos")
        return f"nacos://{server.address}"
    zk: ZooKeeperServer = request.getfixturevalue("zookeeper")
    return f"zookeeper://{zk.address}/migration-{tag}"


def test_application_first_prefers_the_application_level_and_falls_back(
    registry: str, tag: str, tmp_path: Path
) -> None:
    group = f"g-{tag}"
    both, interface_only, returning = f"both-{tag}", f"iface-{tag}", f"back-{tag}"
    with ExitStack() as stack:
        first, _ = provider(stack, registry, both, group, "all", tmp_path)
        provider(stack, registry, interface_only, group, "interface", tmp_path)
        app = consumer(stack, registry, tag, "APPLICATION_FIRST", tmp_path)
        greeter = app.reference(
            greeter_pb2_grpc.GreeterStub, version=VERSION, group=group, timeout=5.0
        )
        # Both levels hold a provider: the application level (one provider) is used, though
        # the interface level holds two (the share 1/2 passes the default threshold, 0).
        wait_until(lambda: served(greeter) == {both}, 10, "the application level's provider")
        assert level_of(app) == "application"
        # The application level empties (the only provider there stops): the consumer falls
        # back to the interface level, whose remaining provider answers every call.
        first.close()
        wait_until(lambda: served(greeter) == {interface_only}, 10, "the interface level")
        assert level_of(app) == "interface"
        # An application-level provider appears: the consumer goes back to that level.
        provider(stack, registry, returning, group, "instance", tmp_path)
        wait_until(lambda: served(greeter) == {returning}, 10, "back to the application level")
        assert level_of(app) == "application"
