"""Provider-application condition rules and affinity rules on a real ZooKeeper, with provider
processes and a consumer under load (issue 31, items 3 and 4).

* Two providers of application ``bars-provider`` (``zone=a``, ``zone=b``) and a consumer of
  another application: ``bars-provider.condition-router`` ``=> zone = b`` sends every call to
  the zone=b provider with no failed call, and deleting it brings both back (Dubbo's
  ProviderAppStateRouter). A consumer *of* ``bars-provider`` does not read it as a provider
  application's rule: it reads it once, as its own application's (Dubbo's AppStateRouter, 150).
* Affinity on ``region`` for a consumer configured in ``dubbo.yaml`` with
  ``application.parameters: {region: x}``: the same-region provider only while it is at least
  ``ratio`` % of the candidates, every provider otherwise, every provider again on delete; a
  condition rule's ``$region`` reads the same parameter.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.registry.registry import Registry
from tests.e2e.conftest import wait_until
from tests.support.load import Load, Sample
from tests.support.processes import ProviderProcess

#: A sanity bound on applying a change (the latency figure is bench/bench_push_latency.py's).
APPLY_BOUND = 5.0
PROVIDER_KEY = "bars-provider.condition-router"


@pytest.fixture
def zk_address(zookeeper: Any, tmp_path: Path) -> str:
    return f"zookeeper://{zookeeper.address}/e2e-{tmp_path.name[-16:]}-{time.time_ns() % 10**9}"


@pytest.fixture
def start_provider(zk_address: str) -> Iterator[Callable[..., ProviderProcess]]:
    started: list[ProviderProcess] = []

    def start(*args: str) -> ProviderProcess:
        proc = ProviderProcess(zk_address, *args).start()
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()


class Phases:
    """Runs load against a reference and cuts it into phases at the chain swaps a change
    caused, so each phase's calls are those routed with that change in force."""

    def __init__(self, ref: Any, load: Load) -> None:
        self.load = load
        self.swaps: list[float] = []
        ref.directory.add_listener(lambda _chain: self.swaps.append(time.monotonic()))
        self.marks: list[float] = []

    def change(self, action: Callable[[], object]) -> None:
        """Do ``action`` (a push or a delete), wait until the consumer applied it, let calls run."""
        before = time.monotonic()
        action()
        wait_until(lambda: any(t >= before for t in self.swaps), APPLY_BOUND, "the change applied")
        self.marks.append(min(t for t in self.swaps if t >= before))
        time.sleep(0.8)

    def providers(self, phase: int) -> set[str]:
        """The providers called in phase ``phase`` (0: before the first change)."""
        start = 0.0 if phase == 0 else self.marks[phase - 1]
        end = self.marks[phase] if phase < len(self.marks) else float("inf")
        calls: list[Sample] = self.load.between(start, end)
        assert calls, f"no call in phase {phase}"
        return {s.provider for s in calls}

    def errors(self) -> list[Sample]:
        return [s for s in self.load.samples if s.error]


def _greeter(app: dubbo_py.Application) -> Any:
    return app.reference_handle(
        greeter_pb2_grpc.GreeterStub, version="1.0.0", loadbalance="roundrobin", timeout=5.0
    )


def _run(ref: Any, steps: list[Callable[[], object]]) -> Phases:
    request = greeter_pb2.HelloRequest(name="load")
    with Load(lambda: ref.stub.SayHello(request).provider, threads=2) as load:
        phases = Phases(ref, load)
        time.sleep(0.6)
        for step in steps:
            phases.change(step)
    return phases


def test_provider_application_condition_rule(
    zk_address: str, start_provider: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    pa = start_provider("--application", "bars-provider", "--param", "zone=a")
    pb = start_provider("--application", "bars-provider", "--param", "zone=b")
    with dubbo_py.Application("shop", zk_address, cache_path=tmp_path / "c.json") as app:
        ref = _greeter(app)
        wait_until(lambda: len(ref.directory.providers) == 2, 10, "both providers")
        registry = app.registry
        assert registry is not None
        phases = _run(
            ref,
            [
                lambda: registry.put_config(PROVIDER_KEY, "conditions: ['=> zone = b']\n"),
                lambda: registry.delete_config(PROVIDER_KEY),
            ],
        )
    assert not phases.errors(), phases.errors()[:3]
    assert phases.providers(0) == {pa.address, pb.address}
    assert phases.providers(1) == {pb.address}
    assert phases.providers(2) == {pa.address, pb.address}


def test_the_providers_own_application_reads_it_once_as_its_application_rule(
    zk_address: str, start_provider: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    start_provider("--application", "bars-provider", "--param", "zone=a")
    pb = start_provider("--application", "bars-provider", "--param", "zone=b")
    with dubbo_py.Application("bars-provider", zk_address, cache_path=tmp_path / "c.json") as app:
        ref = _greeter(app)
        wait_until(lambda: len(ref.directory.providers) == 2, 10, "both providers")
        registry = app.registry
        assert registry is not None
        phases = _run(
            ref, [lambda: registry.put_config(PROVIDER_KEY, "conditions: ['=> zone = b']\n")]
        )
        # Not read as the provider application's rule (145): once, as its own (150).
        rules = [r for r in ref.directory._rulebook.routers() if "condition" in r.name]
        assert [(r.priority, PROVIDER_KEY in r.name) for r in rules] == [(150, True)]
    assert not phases.errors(), phases.errors()[:3]
    assert phases.providers(1) == {pb.address}


def test_affinity_rule_with_consumer_parameters_from_dubbo_yaml(
    zk_address: str, start_provider: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    px = start_provider("--application", "bars-provider", "--param", "region=x")
    py = start_provider("--application", "bars-provider", "--param", "region=y")
    config = tmp_path / "dubbo.yaml"
    config.write_text(
        "application:\n  name: shop\n  parameters:\n    region: x\n"
        f"registry:\n  address: {zk_address}\n"
    )
    app_key = "bars-provider.affinity-router"
    service_key = "demo.Greeter:1.0.0:.affinity-router"
    condition_key = "demo.Greeter:1.0.0:.condition-router"
    doc = "configVersion: v3.1\nscope: {}\nkey: {}\naffinityAware:\n  key: region\n  ratio: {}\n"
    with dubbo_py.Application.from_config(config) as app:
        ref = _greeter(app)
        wait_until(lambda: len(ref.directory.providers) == 2, 10, "both providers")
        assert ref.directory.consumer.parameters["region"] == "x"
        registry: Registry | None = app.registry
        assert registry is not None
        phases = _run(
            ref,
            [
                # 1: one of two shares region=x: 50 % >= 50 %
                lambda: registry.put_config(app_key, doc.format("application", "b", 50)),
                # 2: 50 % < 60 %: every provider
                lambda: registry.put_config(app_key, doc.format("application", "b", 60)),
                # 3: back to 50, then 4: deleted
                lambda: registry.put_config(app_key, doc.format("application", "b", 50)),
                lambda: registry.delete_config(app_key),
                # 5: the service's affinity rule, 6: deleted
                lambda: registry.put_config(service_key, doc.format("service", "g", 40)),
                lambda: registry.delete_config(service_key),
                # 7: a condition rule reading the consumer's parameter, 8: deleted
                lambda: registry.put_config(
                    condition_key, "force: true\nconditions: ['=> region = $region']\n"
                ),
                lambda: registry.delete_config(condition_key),
            ],
        )
    assert not phases.errors(), phases.errors()[:3]
    both = {px.address, py.address}
    expected = [both, {px.address}, both, {px.address}, both, {px.address}, both, {px.address}]
    expected.append(both)
    assert [phases.providers(i) for i in range(9)] == expected
