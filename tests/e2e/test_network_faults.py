"""Real network faults (iptables on loopback, tests/support/netfault.py) under load, with real
provider processes, on ZooKeeper and on etcd.

Sessions are short here (``?session=2000``: a 2 s ZooKeeper session, a 2 s etcd lease) so a
fault "past the session timeout" takes seconds; ``DUBBO_PY_FAULT_SECONDS`` stretches the faults
(the figures of docs/failure-modes.md come from ``scripts/network_faults.sh``, which sets it).
Each test prints its figures (calls, failed calls, time to recover): run with ``-s`` to see them.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.errors import StoreError
from dubbo_py.registry.registry import Registry
from dubbo_py.url import URL
from tests.e2e.conftest import wait_until
from tests.support.load import Load
from tests.support.netfault import NetFaults, in_group
from tests.support.processes import ProviderProcess

pytestmark = [pytest.mark.e2e]

#: The registry session (ZooKeeper's session timeout, etcd's lease TTL) of every process here.
SESSION_MS = int(os.environ.get("DUBBO_PY_FAULT_SESSION_MS", "2000"))
#: The providers' group id while cut off from the registry (their packets are matched by it).
CUT_GROUP = 47000 + os.getpid() % 1000
#: Run every combination and the long scenarios (scripts/network_faults.sh sets it).
LONG = os.environ.get("DUBBO_PY_LONG_FAULTS") == "1"
THREADS = 4
DEADLINE = 1.0  # the consumer's deadline, as in issue 33's report
#: How long each fault lasts: past the session timeout by default; longer for the figures.
FAULT_SECONDS = float(os.environ.get("DUBBO_PY_FAULT_SECONDS", "0")) or 2.5 * SESSION_MS / 1000
#: A fault on a provider's port has nothing to do with sessions: shorter by default.
PROVIDER_FAULT_SECONDS = float(os.environ.get("DUBBO_PY_FAULT_SECONDS", "0")) or 3.0
#: By then a provider under fault is left alone: no failure starts later, no call goes there.
SETTLE = 2.0


@dataclass
class FaultRegistry:
    """A registry for one test: its address (with the short session) and its server's ports."""

    address: str
    ports: list[int]


@pytest.fixture(params=["zookeeper", "etcd"])
def fault_registry(request: pytest.FixtureRequest) -> FaultRegistry:
    """A fresh chroot/prefix on the session's ZooKeeper or etcd, with 2 s sessions."""
    server = request.getfixturevalue(request.param)
    folder = f"/faults-{uuid.uuid4().hex[:8]}"
    return FaultRegistry(
        f"{request.param}://{server.address}{folder}?session={SESSION_MS}", [server.port]
    )


@pytest.fixture
def start_provider(fault_registry: FaultRegistry) -> Iterator[Callable[..., ProviderProcess]]:
    """Start provider processes (``cuttable``: in :data:`CUT_GROUP`); killed afterwards."""
    started: list[ProviderProcess] = []

    def start(*args: str, cuttable: bool = False) -> ProviderProcess:
        prefix = in_group(CUT_GROUP, []) if cuttable else []
        proc = ProviderProcess(fault_registry.address, *args, prefix=prefix).start()
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()


@pytest.fixture
def consumer(fault_registry: FaultRegistry, tmp_path: Path) -> Iterator[dubbo_py.Application]:
    """The consumer application ("shop"), closed afterwards."""
    with dubbo_py.Application(
        "shop", fault_registry.address, cache_path=tmp_path / "cache.json"
    ) as app:
        yield app


def _caller(ref: Any) -> Callable[[], str]:
    def call() -> str:
        return str(ref.stub.SayHello(greeter_pb2.HelloRequest(name="x")).provider)

    return call


def _report(name: str, load: Load, **figures: object) -> None:
    failed = load.errors()
    extra = ", ".join(f"{k}={v}" for k, v in figures.items())
    print(f"\n[{name}] calls={len(load.samples)} failed={len(failed)} {extra}")
    for sample in failed[:3]:
        print(f"  e.g. {sample.error[:200]}")


def _protection_setting() -> bool | None:
    # DUBBO_PY_FAULT_EMPTY_PROTECTION=false measures what happens without it (the script).
    value = os.environ.get("DUBBO_PY_FAULT_EMPTY_PROTECTION")
    return None if value is None else value == "true"


#: (registry, migration step) pairs: each registry and each level once in the default suite,
#: every pair with DUBBO_PY_LONG_FAULTS=1 (scripts/network_faults.sh).
CUT_CASES = (
    [(r, s) for r in ("zookeeper", "etcd") for s in ("APPLICATION_FIRST", "FORCE_INTERFACE")]
    if LONG
    else [("zookeeper", "APPLICATION_FIRST"), ("etcd", "FORCE_INTERFACE")]
)


@pytest.mark.parametrize(("fault_registry", "step"), CUT_CASES, indirect=["fault_registry"])
def test_providers_cut_off_from_the_registry_keep_every_call_and_a_gone_one_stops_getting_calls(
    fault_registry: FaultRegistry,
    start_provider: Callable[..., ProviderProcess],
    netfaults: NetFaults,
    tmp_path: Path,
    step: str,
) -> None:
    """The providers' packets to the registry are dropped past their session timeout while
    they stay healthy (ZooKeeper or etcd expires their sessions and the consumer is told they
    are gone), and one of them is killed meanwhile. The consumer reads the application level
    (APPLICATION_FIRST, the default, providers registering at both levels) or the interface
    level."""
    healthy = [start_provider(cuttable=True), start_provider(cuttable=True)]
    doomed = start_provider(cuttable=True)
    consumer = dubbo_py.Application(
        "shop",
        fault_registry.address,
        cache_path=tmp_path / "cache.json",
        migration_step=step,
        enable_empty_protection=_protection_setting(),
    )
    with consumer:
        ref = consumer.reference_handle(
            greeter_pb2_grpc.GreeterStub, version="1.0.0", timeout=DEADLINE
        )
        wait_until(lambda: len(ref.directory.providers) == 3, 15, "3 providers")
        level = _level(ref)
        assert level == ("interface" if step == "FORCE_INTERFACE" else "application")
        protection = ref.directory.empty_protection
        lost: list[float] = []

        def sessions_expired() -> bool:
            # What the consumer was told: none of the healthy two registered any more.
            registered = {u.address for u in ref.directory._raw_providers}
            if not registered & {p.address for p in healthy}:
                lost.append(time.monotonic())
            return bool(lost)

        with Load(_caller(ref), THREADS) as load:
            time.sleep(1.0)
            cut = netfaults.cut_group(CUT_GROUP, fault_registry.ports)
            cut_at = time.monotonic()
            time.sleep(0.5)
            doomed.kill()  # really gone, in the same window
            killed_at = time.monotonic()
            # The registry drops the three once their sessions expire: protection keeps the
            # two that answer, and lets the gone one go.
            wait_until(sessions_expired, 15 + FAULT_SECONDS, "the sessions to expire")
            expired_at = lost[0]
            time.sleep(max(0.0, cut_at + FAULT_SECONDS - time.monotonic()))
            kept = sorted(k.url.address for k in protection.kept()) if protection else []
            cut.heal()
            healed_at = time.monotonic()
            wait_until(
                lambda: (
                    {u.address for u in ref.directory._raw_providers}
                    == {p.address for p in healthy}
                    and len(ref.directory.providers) == 2
                ),
                60,
                "the providers to register again",
            )
            relisted = time.monotonic() - healed_at
            time.sleep(0.5)
    _report(
        f"providers cut off from the registry ({level} level)",
        load,
        session_s=SESSION_MS / 1000,
        cut_s=round(healed_at - cut_at, 1),
        sessions_expired_after_s=round(expired_at - cut_at, 1),
        registered_again_after_heal_s=round(relisted, 1),
        calls_to_the_killed_one_after_2s=sum(
            1 for s in load.between(killed_at + 2.0) if s.provider == doomed.address
        ),
        kept=kept,
    )
    assert protection is not None  # on by default
    assert load.errors() == []
    assert kept == sorted(p.address for p in healthy)
    # The gone provider stopped getting calls (a call in flight when it died may still name
    # it only if it answered first; none may start there two seconds later).
    late = load.between(killed_at + 2.0)
    assert late and all(s.provider != doomed.address for s in late)
    # Both healthy providers served throughout the partition.
    during = load.between(expired_at, healed_at)
    assert {s.provider for s in during} == {p.address for p in healthy}


def test_a_service_retired_cleanly_is_not_kept(
    start_provider: Callable[..., ProviderProcess], consumer: dubbo_py.Application
) -> None:
    only = start_provider()
    ref = consumer.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0", timeout=DEADLINE)
    wait_until(lambda: len(ref.directory.providers) == 1, 15, "the provider")
    assert only.terminate() == 0  # graceful: NOT_SERVING, unregister, drain
    wait_until(lambda: not ref.directory.providers, 15, "the provider to be dropped")
    protection = ref.directory.empty_protection
    assert protection is not None and not protection.engaged


@pytest.mark.parametrize("fault", ["blackhole", "reset", "one_way"])
def test_a_provider_under_a_network_fault_is_left_and_taken_back(
    fault: str,
    start_provider: Callable[..., ProviderProcess],
    consumer: dubbo_py.Application,
    netfaults: NetFaults,
) -> None:
    victim, other = start_provider(), start_provider()
    ref = consumer.reference_handle(
        greeter_pb2_grpc.GreeterStub, version="1.0.0", timeout=DEADLINE, quarantine_interval=0.5
    )
    wait_until(lambda: len(ref.directory.providers) == 2, 15, "2 providers")
    with Load(_caller(ref), THREADS) as load:
        time.sleep(1.0)
        before = len(load.between(time.monotonic() - 1.0))
        made = getattr(netfaults, fault)(victim.port)
        faulted_at = time.monotonic()
        time.sleep(PROVIDER_FAULT_SECONDS)
        healing_at = time.monotonic()
        made.heal()
        healed_at = time.monotonic()
        wait_until(
            lambda: any(s.provider == victim.address for s in load.between(healed_at)),
            30,
            "calls to reach the provider again",
        )
        back = time.monotonic() - healed_at
    failed = load.errors()
    last_failure = max((s.started for s in failed), default=faulted_at) - faulted_at
    # (A call started just before the heal may reach the provider just after it.)
    during = load.between(faulted_at + SETTLE, healing_at - 0.3)
    _report(
        f"provider {fault}",
        load,
        fault_s=round(healed_at - faulted_at, 1),
        calls_per_s_before=before,
        last_failed_call_after_s=round(last_failure, 1),
        calls_per_s_during=round(len(during) / max(healing_at - 0.3 - faulted_at - SETTLE, 0.1)),
        back_after_heal_s=round(back, 1),
    )
    # Failures only while calls already sent to the provider run out; then none.
    assert all(s.started < faulted_at + SETTLE for s in failed), failed
    assert len(failed) <= 4 * THREADS, failed
    assert during and all(s.provider == other.address for s in during)


def test_the_registry_blackholed_past_the_session_timeout_loses_nothing(
    fault_registry: FaultRegistry,
    start_provider: Callable[..., ProviderProcess],
    consumer: dubbo_py.Application,
    netfaults: NetFaults,
) -> None:
    started = [start_provider(), start_provider()]
    ref = consumer.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0", timeout=DEADLINE)
    wait_until(lambda: len(ref.directory.providers) == 2, 15, "2 providers")
    registry = consumer.registry
    assert registry is not None
    with Load(_caller(ref), THREADS) as load:
        time.sleep(1.0)
        dark = netfaults.blackhole(fault_registry.ports[0])
        dark_at = time.monotonic()
        time.sleep(FAULT_SECONDS)
        dark.heal()
        healed_at = time.monotonic()
        # Registrations come back: a fresh read of the registry lists both providers.
        wait_until(lambda: len(_registered(registry)) == 2, 30, "both providers registered again")
        back = time.monotonic() - healed_at
        # A rule pushed after the heal is obeyed: disable one provider by an override.
        victim = started[0]
        _disable(registry, victim.address)
        wait_until(
            lambda: victim.address not in {p.address for p in ref.directory.providers},
            30,
            "the override pushed after the heal to apply",
        )
        obeyed_at = time.monotonic()
        time.sleep(1.0)
    _report(
        "registry blackholed",
        load,
        dark_s=round(healed_at - dark_at, 1),
        registered_again_after_s=round(back, 1),
        rule_obeyed_after_heal_s=round(obeyed_at - healed_at, 1),
    )
    assert load.errors() == []
    late = load.between(obeyed_at + 0.5)
    assert late and all(s.provider != started[0].address for s in late)


def _level(ref: Any) -> str:
    """The level the reference reads providers from."""
    choice = getattr(ref.directory._subscribe, "choice", None)
    return "interface" if choice is None else str(choice().level)


def _registered(registry: Registry) -> list[URL]:
    try:
        return [u for u in registry.lookup("demo.Greeter") if u.protocol == "tri"]
    except StoreError:
        return []  # not reconnected yet


def _disable(registry: Registry, address: str) -> None:
    """An override disabling the provider at ``address``, retried while the registry
    connection settles after the heal (a loaded machine may see it drop once more)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            registry.put_config(
                "demo.Greeter:1.0.0:.configurators",
                "configVersion: v3.0\nscope: service\nkey: demo.Greeter\nconfigs:\n"
                f"  - addresses: ['{address}']\n    side: provider\n"
                "    parameters: {disabled: true}\n",
            )
            return
        except StoreError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
