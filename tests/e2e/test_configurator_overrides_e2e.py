"""Configurator documents as a Dubbo estate writes them, on a real ZooKeeper with real gRPC
providers: a v3.0 ``match`` narrows a provider-side override to the providers it names, and
consumer-side overrides of ``mock`` (service downgrade), ``cluster`` and ``actives`` take effect
and are undone when the document is deleted."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.registry.registry import Registry
from tests.e2e.conftest import wait_until
from tests.support.load import Load
from tests.support.zookeeper import ZooKeeperServer

KEY = "demo.Greeter:1.0.0:.configurators"
HEAD = "configVersion: v3.0\nscope: service\nkey: demo.Greeter:1.0.0\nconfigs:\n"


class Counting:
    """What one provider saw: calls, and the most it had running at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls = 0
        self.running = 0
        self.most = 0

    def enter(self) -> None:
        with self.lock:
            self.calls += 1
            self.running += 1
            self.most = max(self.most, self.running)

    def leave(self) -> None:
        with self.lock:
            self.running -= 1


def greeter(zone: str, seen: Counting, delay: float = 0.0) -> Any:
    """A Greeter provider whose URL carries ``zone`` (Dubbo's URL parameter)."""

    @dubbo_py.service(version="1.0.0", tags={"zone": zone}, warmup=0)
    class Greeter(greeter_pb2_grpc.GreeterServicer):
        address = ""

        def SayHello(self, request: Any, context: Any) -> Any:
            seen.enter()
            try:
                if delay:
                    time.sleep(delay)
                if request.name == "fail":
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, "asked to fail")
                return greeter_pb2.HelloReply(
                    message=f"Hello, {request.name}!", provider=self.address
                )
            finally:
                seen.leave()

    return Greeter()


class Provider:
    def __init__(self, registry: str, zone: str, delay: float = 0.0) -> None:
        self.seen = Counting()
        self.app = dubbo_py.Application("bars-provider", registry)
        servicer = greeter(zone, self.seen, delay)
        self.server = self.app.start(servicer)
        servicer.address = self.address = self.server.address

    def close(self) -> None:
        self.server.stop(grace=0.2)
        self.app.close()


@pytest.fixture
def registry(zookeeper: ZooKeeperServer) -> str:
    return f"zookeeper://{zookeeper.address}/e2e-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def started(registry: str) -> Iterator[list[Provider]]:
    providers: list[Provider] = []
    yield providers
    for provider in providers:
        provider.close()


def _rules(app: dubbo_py.Application) -> Registry:
    assert isinstance(app.registry, Registry)
    return app.registry


def test_a_v3_match_disables_only_the_providers_it_names(
    registry: str, started: list[Provider]
) -> None:
    started += [Provider(registry, "a"), Provider(registry, "b")]
    zone_a, zone_b = (p.address for p in started)
    with dubbo_py.Application("shop", registry) as app:
        ref = app.reference_handle(
            greeter_pb2_grpc.GreeterStub, version="1.0.0", loadbalance="roundrobin", timeout=5.0
        )
        wait_until(lambda: len(ref.directory.providers) == 2, 10, "both providers")
        request = greeter_pb2.HelloRequest(name="load")

        def answered(n: int) -> set[str]:
            return {ref.stub.SayHello(request).provider for _ in range(n)}

        with Load(lambda: ref.stub.SayHello(request).provider, threads=2) as load:
            _rules(app).put_config(
                KEY,
                HEAD + "  - side: provider\n"
                "    match: {param: [{key: zone, value: {exact: a}}]}\n"
                "    parameters: {disabled: true}\n",
            )
            wait_until(lambda: answered(10) == {zone_b}, 10, "zone a disabled")
            applied = time.monotonic()
            time.sleep(0.5)
            assert answered(20) == {zone_b}
            during = load.between(applied, time.monotonic())
            _rules(app).delete_config(KEY)
            wait_until(lambda: answered(10) == {zone_a, zone_b}, 10, "zone a back")
        assert not load.errors(), load.errors()[:3]
        assert during and {s.provider for s in during} == {zone_b}


def test_a_consumer_side_mock_answers_without_calling_providers(
    registry: str, started: list[Provider]
) -> None:
    started += [Provider(registry, "a"), Provider(registry, "b")]
    with dubbo_py.Application("shop", registry) as app:
        ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0", timeout=5.0)
        wait_until(lambda: len(ref.directory.providers) == 2, 10, "both providers")
        request = greeter_pb2.HelloRequest(name="x")
        assert ref.stub.SayHello(request).message == "Hello, x!"
        _rules(app).put_config(
            KEY,
            HEAD + "  - side: consumer\n"
            '    parameters: {mock: \'force:return {"message": "downgraded"}\'}\n',
        )
        wait_until(
            lambda: ref.stub.SayHello(request).message == "downgraded", 10, "the mock applied"
        )
        calls = [p.seen.calls for p in started]
        assert {ref.stub.SayHello(request).message for _ in range(20)} == {"downgraded"}
        assert [p.seen.calls for p in started] == calls  # no provider was called

        # A spec that does not parse is logged and ignored: the last good one stays.
        _rules(app).put_config(
            KEY, HEAD + "  - side: consumer\n    parameters: {mock: 'force:retrun x'}\n"
        )
        wait_until(
            lambda: ref.assembly.applied_overrides.get("mock") == "force:retrun x",
            10,
            "the bad spec read",
        )
        assert ref.stub.SayHello(request).message == "downgraded"

        _rules(app).delete_config(KEY)
        wait_until(
            lambda: ref.stub.SayHello(request).message == "Hello, x!", 10, "providers called again"
        )


def test_a_cluster_override_changes_the_strategy_until_deleted(
    registry: str, started: list[Provider]
) -> None:
    started += [Provider(registry, "a")]
    with dubbo_py.Application("shop", registry) as app:
        ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0", timeout=5.0)
        wait_until(lambda: len(ref.directory.providers) == 1, 10, "the provider")
        failing = greeter_pb2.HelloRequest(name="fail")

        def fails() -> bool:
            try:
                ref.stub.SayHello(failing)
            except grpc.RpcError as error:
                assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
                return True
            return False

        assert fails()
        _rules(app).put_config(
            KEY, HEAD + "  - side: consumer\n    parameters: {cluster: failsafe}\n"
        )
        # failsafe answers a failed call with the empty response.
        wait_until(lambda: not fails(), 10, "failsafe in force")
        assert ref.stub.SayHello(failing).message == ""
        _rules(app).delete_config(KEY)
        wait_until(fails, 10, "the reference's own failover back")


def _concurrent(call: Any, n: int) -> None:
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def one() -> None:
        barrier.wait()
        try:
            call()
        except BaseException as exc:  # collected: every call must succeed
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def _actives(value: int) -> str:
    return HEAD + f"  - side: consumer\n    parameters: {{actives: {value}}}\n"


def test_an_actives_override_limits_calls_in_flight_per_provider(
    registry: str, started: list[Provider]
) -> None:
    started += [Provider(registry, "a", delay=0.2)]
    (provider,) = started
    with dubbo_py.Application("shop", registry) as app:
        ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0", timeout=20.0)
        wait_until(lambda: len(ref.directory.providers) == 1, 10, "the provider")
        request = greeter_pb2.HelloRequest(name="x")
        _rules(app).put_config(KEY, _actives(1))
        wait_until(lambda: ref.assembly.applied_overrides.get("actives") == "1", 10, "actives")
        _concurrent(lambda: ref.stub.SayHello(request), 4)
        # Every call waited for its turn and succeeded; never two at once on the provider.
        assert provider.seen.most == 1
        assert provider.seen.calls == 4

        _rules(app).delete_config(KEY)
        wait_until(lambda: "actives" not in ref.assembly.applied_overrides, 10, "removed")
        _concurrent(lambda: ref.stub.SayHello(request), 4)
        assert provider.seen.most > 1


def test_an_actives_override_limits_asyncio_calls_too(
    registry: str, started: list[Provider]
) -> None:
    started += [Provider(registry, "a", delay=0.2)]
    (provider,) = started

    async def scenario() -> None:
        app = dubbo_py.Application("shop", registry)
        try:
            stub = await app.reference_async(
                greeter_pb2_grpc.GreeterStub, version="1.0.0", timeout=20.0
            )
            directory = app.references[-1].directory
            applied = app.references[-1].assembly
            await asyncio.to_thread(
                wait_until, lambda: len(directory.providers) == 1, 10, "the provider"
            )
            request = greeter_pb2.HelloRequest(name="x")
            _rules(app).put_config(KEY, _actives(1))
            await asyncio.to_thread(
                wait_until,
                lambda: applied.applied_overrides.get("actives") == "1",
                10,
                "actives",
            )
            await asyncio.gather(*(stub.SayHello(request) for _ in range(4)))
            assert provider.seen.most == 1
            _rules(app).delete_config(KEY)
            await asyncio.to_thread(
                wait_until, lambda: "actives" not in applied.applied_overrides, 10, "removed"
            )
            await asyncio.gather(*(stub.SayHello(request) for _ in range(4)))
            assert provider.seen.most > 1
        finally:
            await app.aclose()

    asyncio.run(scenario())


def test_a_dubbo_26_downgrade_url_answers_with_the_mock_until_removed(
    registry: str, started: list[Provider]
) -> None:
    from dubbo_py.url import URL

    started += [Provider(registry, "a")]
    with dubbo_py.Application("shop", registry) as app:
        ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0", timeout=5.0)
        wait_until(lambda: len(ref.directory.providers) == 1, 10, "the provider")
        request = greeter_pb2.HelloRequest(name="x")
        # What Dubbo's docs (and Dubbo Admin 2.6) write for service downgrade: no side, no port.
        downgrade = URL.parse(
            "override://0.0.0.0/demo.Greeter?category=configurators&dynamic=false"
            "&application=shop&mock=force:return+null"
        )
        _rules(app).register(downgrade)
        wait_until(lambda: ref.stub.SayHello(request).message == "", 10, "the downgrade")
        calls = started[0].seen.calls
        assert {ref.stub.SayHello(request).message for _ in range(10)} == {""}
        assert started[0].seen.calls == calls
        _rules(app).unregister(downgrade)
        wait_until(lambda: ref.stub.SayHello(request).message == "Hello, x!", 10, "restored")


def test_mock_and_cluster_overrides_on_asyncio_stubs(
    registry: str, started: list[Provider]
) -> None:
    started += [Provider(registry, "a")]

    async def scenario() -> None:
        app = dubbo_py.Application("shop", registry)
        try:
            stub = await app.reference_async(
                greeter_pb2_grpc.GreeterStub, version="1.0.0", timeout=5.0
            )
            directory = app.references[-1].directory
            applied = app.references[-1].assembly
            await asyncio.to_thread(
                wait_until, lambda: len(directory.providers) == 1, 10, "the provider"
            )
            request = greeter_pb2.HelloRequest(name="x")
            text = HEAD + "  - side: consumer\n    parameters: {mock: 'force:return null'}\n"
            _rules(app).put_config(KEY, text)
            await asyncio.to_thread(
                wait_until, lambda: "mock" in applied.applied_overrides, 10, "the mock"
            )
            calls = started[0].seen.calls
            assert (await stub.SayHello(request)).message == ""
            assert started[0].seen.calls == calls
            _rules(app).put_config(
                KEY, HEAD + "  - side: consumer\n    parameters: {cluster: failsafe}\n"
            )
            await asyncio.to_thread(
                wait_until, lambda: "mock" not in applied.applied_overrides, 10, "failsafe"
            )
            assert (await stub.SayHello(greeter_pb2.HelloRequest(name="fail"))).message == ""
            _rules(app).delete_config(KEY)
            await asyncio.to_thread(
                wait_until, lambda: not applied.applied_overrides, 10, "removed"
            )
            with pytest.raises(grpc.RpcError):
                await stub.SayHello(greeter_pb2.HelloRequest(name="fail"))
            assert (await stub.SayHello(request)).message == "Hello, x!"
        finally:
            await app.aclose()

    asyncio.run(scenario())
