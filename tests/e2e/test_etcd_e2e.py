"""etcd as the registry, end to end: provider processes and a consumer meeting through an
``etcd://`` address, a rule pushed with the ``dubbo-py`` CLI reaching the consumer, and an etcd
restart under load without a failed call."""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.registry.store.base import SessionState
from dubbo_py.registry.store.etcd import _api as api
from tests.e2e.conftest import wait_until
from tests.support.etcd import EtcdServer
from tests.support.load import Load
from tests.support.processes import ProviderProcess, dubbo_py_cli

pytestmark = [pytest.mark.etcd, pytest.mark.e2e]

KEY = "demo.Greeter:1.0.0:.condition-router"
#: A sanity bound for applying a rule, not the performance figure (printed by the test; the
#: target is 100 ms): a loaded 2-core machine must not fail the test for being slow.
APPLY_BOUND = 2.0


def _rule(port: int) -> str:
    return (
        "configVersion: v3.0\nscope: service\nkey: demo.Greeter\nforce: true\n"
        f"conditions:\n  - 'method = SayHello => port = {port}'\n"
    )


@pytest.fixture
def start_provider() -> Iterator[Callable[[str], ProviderProcess]]:
    started: list[ProviderProcess] = []

    def start(registry: str) -> ProviderProcess:
        proc = ProviderProcess(registry).start()
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()


class _KeyWatch:
    """When etcd told a client of its own about each write of one key: the moment the rule
    reached etcd's watchers, which the consumer's apply time is measured from."""

    def __init__(self, endpoint: str, key: str) -> None:
        self.seen: list[float] = []
        self._stop = threading.Event()
        self._channel = grpc.insecure_channel(endpoint)
        self._requests: list[object] = [
            api.WatchRequest(create_request=api.WatchCreateRequest(key=key.encode()))
        ]
        self._call = api.EtcdStub(self._channel).Watch(iter(self._requests_forever()))
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _requests_forever(self) -> Iterator[object]:
        yield from self._requests
        self._stop.wait()

    def _run(self) -> None:
        try:
            for response in self._call:
                if response.events:
                    self.seen.append(time.monotonic())
        except grpc.RpcError:
            pass

    def close(self) -> None:
        self._stop.set()
        self._call.cancel()
        self._channel.close()


def test_provider_and_consumer_meet_through_etcd_and_cli_rules_reach_the_consumer(
    etcd: EtcdServer,
    start_provider: Callable[[str], ProviderProcess],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    prefix = f"/e2e-{uuid.uuid4().hex[:8]}"
    registry = f"etcd://{etcd.address}{prefix}"
    p1, p2 = start_provider(registry), start_provider(registry)
    rule_key = f"{prefix}/dubbo/config/dubbo/{KEY}"
    watch = _KeyWatch(etcd.address, rule_key)
    try:
        with dubbo_py.Application("shop", registry, cache_path=tmp_path / "c.json") as app:
            ref = app.reference_handle(
                greeter_pb2_grpc.GreeterStub, version="1.0.0", loadbalance="roundrobin"
            )
            wait_until(lambda: len(ref.directory.providers) == 2, 20, "both providers")
            request = greeter_pb2.HelloRequest(name="etcd")
            answered = {ref.stub.SayHello(request).provider for _ in range(10)}
            assert answered == {p1.address, p2.address}
            # The provider nodes are where dubbo-go's etcdv3 registry looks for them.
            providers = dubbo_py_cli(registry, "providers", "demo.Greeter", timeout=120)
            assert p1.address in providers and p2.address in providers

            swaps: list[float] = []
            ref.directory.add_listener(lambda _chain: swaps.append(time.monotonic()))
            latencies: list[float] = []
            rule_file = tmp_path / "rule.yaml"
            for round_ in range(5):
                target = (p2, p1)[round_ % 2]
                rule_file.write_text(_rule(target.port), encoding="utf-8")
                before = len(watch.seen)
                dubbo_py_cli(registry, "rules", "push", str(rule_file), "--key", KEY, timeout=120)
                wait_until(lambda b=before: len(watch.seen) > b, 10, "etcd's notification")
                written = watch.seen[-1]
                wait_until(
                    lambda w=written: any(t >= w - 0.05 for t in swaps),
                    APPLY_BOUND,
                    "the rule applied",
                )
                latencies.append(max(0.0, min(t for t in swaps if t >= written - 0.05) - written))
                answers = {ref.stub.SayHello(request).provider for _ in range(10)}
                assert answers == {target.address}, (round_, answers)
            dubbo_py_cli(registry, "rules", "delete", KEY, timeout=120)
            wait_until(
                lambda: (
                    {ref.stub.SayHello(request).provider for _ in range(10)}
                    == {p1.address, p2.address}
                ),
                APPLY_BOUND,
                "both providers again after the delete",
            )
    finally:
        watch.close()
    with capsys.disabled():
        print(
            f"\netcd rule push -> consumer applied: median "
            f"{statistics.median(latencies) * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms "
            f"over {len(latencies)} pushes"
        )


def test_an_etcd_restart_under_load_fails_no_call(
    start_provider: Callable[[str], ProviderProcess],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with EtcdServer() as etcd:
        registry = f"etcd://{etcd.address}"
        p1, p2 = start_provider(registry), start_provider(registry)
        with dubbo_py.Application("shop", registry, cache_path=tmp_path / "c.json") as app:
            ref = app.reference_handle(
                greeter_pb2_grpc.GreeterStub,
                version="1.0.0",
                loadbalance="roundrobin",
                timeout=5.0,
            )
            wait_until(lambda: len(ref.directory.providers) == 2, 20, "both providers")
            events: list[SessionState] = []
            assert app.registry is not None
            app.registry.store.add_session_listener(events.append)
            request = greeter_pb2.HelloRequest(name="restart")
            with Load(lambda: ref.stub.SayHello(request).provider, threads=2) as load:
                time.sleep(1.0)
                down = time.monotonic()
                etcd.stop()
                time.sleep(1.0)
                etcd.start()
                up = time.monotonic()
                wait_until(
                    lambda: events[-1:] == [SessionState.RECONNECTED], 20, "the consumer back"
                )
                # Watches work again: a rule pushed after the restart reaches the consumer.
                app.registry.put_config(KEY, _rule(p2.port))
                wait_until(
                    lambda: (
                        {s.provider for s in load.between(time.monotonic() - 0.3)} == {p2.address}
                    ),
                    5,
                    "the rule pushed after the restart to apply",
                )
                app.registry.delete_config(KEY)
                time.sleep(1.0)
            errors = load.errors()
            during = load.between(down, up)
            assert not errors, errors[:3]
            assert {s.provider for s in during} == {p1.address, p2.address}
            assert len(ref.directory.providers) == 2
        with capsys.disabled():
            print(
                f"\netcd restart under load: {len(load.samples)} calls, {len(during)} while "
                f"etcd was down or starting ({up - down:.1f} s), {len(errors)} failed"
            )
