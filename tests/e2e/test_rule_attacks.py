"""Rules written as an attacker (or a careless operator) would, straight into ZooKeeper, against
a consumer under steady load: a catastrophic regex tag rule, a construct RE2 lacks, and a script
rule that exhausts its time budget on every call. Calls keep flowing, none fails."""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.app.application import Reference
from dubbo_py.registry.registry import Registry
from tests.e2e.conftest import wait_until
from tests.support.load import Load
from tests.support.processes import ProviderProcess
from tests.support.zookeeper import ZooKeeperServer

# The provider application name is a URL parameter of every provider; a long one is the long
# value the catastrophic regex is matched against (a backtracking engine never finishes).
APPLICATION = "greeter-" + "a" * 400
WINDOW = 1.5  # seconds of load measured before and after the rule


@pytest.fixture
def registry_address(zookeeper: ZooKeeperServer) -> str:
    """These attacks write to ZooKeeper directly: a real ZooKeeper only."""
    return f"zookeeper://{zookeeper.address}/attack-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def two_providers(
    providers: Callable[..., ProviderProcess],
) -> Iterator[tuple[ProviderProcess, ProviderProcess]]:
    yield (
        providers("--application", APPLICATION, "--warmup", "0"),
        providers("--application", APPLICATION, "--warmup", "0"),
    )


def _rate(load: Load, start: float, end: float) -> float:
    return len(load.between(start, end)) / (end - start)


def _reference(app: dubbo_py.Application) -> Reference:
    ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0", timeout=5.0)
    wait_until(lambda: len(ref.directory.providers) == 2, 15, "both providers")
    return ref


def _applied(ref: Reference, name: str) -> bool:
    return any(stage == name for stage, _ in ref.directory.chain.stages)


def test_catastrophic_regex_tag_rule_leaves_calls_flowing(
    registry_address: str,
    two_providers: tuple[ProviderProcess, ProviderProcess],
    tmp_path: Path,
) -> None:
    catastrophic = (
        "configVersion: v3.0\n"
        f"key: {APPLICATION}\n"
        "tags:\n"
        "  - name: gray\n"
        "    match:\n"
        "      - key: application\n"
        "        value: {regex: '((.+)+)+Q'}\n"
    )
    key = f"{APPLICATION}.tag-router"
    with dubbo_py.Application("shop", registry_address, cache_path=tmp_path / "c.json") as app:
        ref = _reference(app)
        registry = app.registry
        assert isinstance(registry, Registry)
        request = greeter_pb2.HelloRequest(name="load")
        with Load(lambda: ref.stub.SayHello(request).provider, threads=2) as load:
            time.sleep(0.5)
            before_start = time.monotonic()
            time.sleep(WINDOW)
            pushed = time.monotonic()
            registry.put_config(key, catastrophic)
            wait_until(lambda: _applied(ref, f"tag:{APPLICATION}"), 5, "the tag rule applied")
            after_start = time.monotonic()
            time.sleep(WINDOW)
            after_end = time.monotonic()
            # A construct RE2 lacks: refused with its place, the catastrophic rule stays.
            registry.put_config(key, catastrophic.replace("((.+)+)+Q", "gr(?=ay).*"))
            wait_until(lambda: bool(ref.directory.rule_errors), 5, "the lookahead refused")
            time.sleep(0.3)
        errors = load.errors()
        assert not errors, errors[:3]
        before = _rate(load, before_start, pushed)
        after = _rate(load, after_start, after_end)
        assert after >= before / 2, (before, after)
        assert {s.provider for s in load.between(after_start)} == {p.address for p in two_providers}
        ((source, reason),) = ref.directory.rule_errors.items()
        assert source.endswith(f"/{key}")
        assert ":7:" in reason and "column 3" in reason and "lookahead" in reason
        assert _applied(ref, f"tag:{APPLICATION}")  # the last good rule is still in force


def test_script_rule_always_over_budget_is_switched_off_and_calls_recover(
    registry_address: str,
    two_providers: tuple[ProviderProcess, ProviderProcess],
    tmp_path: Path,
) -> None:
    spinning = (
        "type: starlark\n"
        f"key: {APPLICATION}\n"
        "script: |\n"
        "  def route(invokers, invocation, context):\n"
        "      n = 0\n"
        "      for i in range(100000000):\n"
        "          n += i\n"
        "      return invokers\n"
    )
    key = f"{APPLICATION}.script-router"
    names = itertools.count()
    with dubbo_py.Application("shop", registry_address, cache_path=tmp_path / "c.json") as app:
        ref = _reference(app)
        registry = app.registry
        assert isinstance(registry, Registry)

        def call() -> str:
            # A new request each time: no cached script answer, the script runs on every call.
            request = greeter_pb2.HelloRequest(name=f"n{next(names)}")
            return str(ref.stub.SayHello(request).provider)

        with Load(call, threads=2) as load:
            time.sleep(0.5)
            before_start = time.monotonic()
            time.sleep(WINDOW)
            pushed = time.monotonic()
            registry.put_config(key, spinning)
            wait_until(lambda: bool(ref.directory.rules_switched_off), 10, "the switch-off")
            wait_until(
                lambda: not _applied(ref, f"script:{APPLICATION}"), 5, "the rule left the chain"
            )
            after_start = time.monotonic()
            time.sleep(WINDOW)
            after_end = time.monotonic()
        errors = load.errors()
        assert not errors, errors[:3]
        before = _rate(load, before_start, pushed)
        after = _rate(load, after_start, after_end)
        assert after >= before / 2, (before, after)
        ((source, count),) = ref.directory.rules_switched_off.items()
        assert source.endswith(f"/{key}") and count == 1
        assert "exhausted its time budget" in ref.directory.rule_errors[source]
        # The same rule written again (a reconnect re-delivers it) stays off.
        registry.put_config(key, spinning)
        time.sleep(0.5)
        assert not _applied(ref, f"script:{APPLICATION}")
