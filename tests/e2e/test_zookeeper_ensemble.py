"""A three-server ZooKeeper ensemble losing members under load: the leader is killed (an
election follows), then a follower freezes (SIGSTOP, its connections left hanging). Consumers,
providers and the CLI all list the three servers; no call may fail, the providers stay
registered, and a rule pushed while the follower is frozen is obeyed."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from tests.e2e.conftest import wait_until
from tests.e2e.test_cli_e2e import dubbo_py as run_cli
from tests.support.load import Load
from tests.support.processes import ProviderProcess
from tests.support.zookeeper import ZooKeeperEnsemble


def only_to(port: int) -> str:
    """A condition rule sending every call to the provider on ``port``."""
    return (
        "configVersion: v3.0\nscope: service\nkey: demo.Greeter:1.0.0\nforce: true\n"
        f"conditions:\n  - '=> port = {port}'\n"
    )


@pytest.fixture(scope="module")
def ensemble() -> Iterator[ZooKeeperEnsemble]:
    with ZooKeeperEnsemble(3) as servers:
        yield servers


@pytest.mark.zookeeper
def test_leader_killed_and_follower_frozen_under_load(
    ensemble: ZooKeeperEnsemble, tmp_path: Path
) -> None:
    registry = f"zookeeper://{ensemble.hosts}/ensemble-{uuid.uuid4().hex[:8]}"
    providers = [ProviderProcess(registry).start() for _ in range(3)]
    listed: list[int] = []
    stop_watching = threading.Event()
    try:
        with dubbo_py.Application("shop", registry, cache_path=tmp_path / "c.json") as app:
            ref = app.reference_handle(
                greeter_pb2_grpc.GreeterStub, version="1.0.0", retries=2, timeout=2.0
            )
            wait_until(lambda: len(ref.directory.providers) == 3, 20, "three providers")
            request = greeter_pb2.HelloRequest(name="ensemble")

            def watch_listing() -> None:
                # How many providers the consumer lists, sampled all along.
                while not stop_watching.wait(0.05):
                    listed.append(len(ref.directory.providers))

            watcher = threading.Thread(target=watch_listing)
            watcher.start()
            with Load(lambda: ref.stub.SayHello(request).provider, threads=4) as load:
                wait_until(lambda: len(load.samples) > 100, 20, "calls to flow")

                # 1. The leader dies; the other two elect a new one; it comes back as follower.
                old_leader = ensemble.leader()
                old_leader.kill()
                new_leader = ensemble.leader()
                assert new_leader is not old_leader
                old_leader.launch()
                old_leader.wait_serving()

                # 2. A follower freezes with its connections open: its clients must notice
                #    and move to another server before their sessions expire.
                frozen = ensemble.followers()[0]
                frozen.pause()
                try:
                    time.sleep(1.0)
                    rule = tmp_path / "only-p2.yaml"
                    rule.write_text(only_to(providers[1].port))
                    pushed = run_cli(registry, "--timeout", "60", "rules", "push", str(rule))
                    assert pushed.returncode == 0, pushed.stderr
                    wait_until(
                        lambda: {s.provider for s in load.samples[-20:]} == {providers[1].address},
                        20,
                        "calls to obey the rule pushed while a follower is frozen",
                    )
                    # Longer than a session timeout (10 s): a session stuck on the frozen
                    # server would have expired by now, and its provider vanished.
                    time.sleep(11.0)
                    assert app.registry is not None
                    assert len(app.registry.lookup("demo.Greeter")) == 3
                finally:
                    frozen.resume()
                samples_after_rule = len(load.samples)
                wait_until(lambda: len(load.samples) > samples_after_rule + 50, 20, "more calls")
            stop_watching.set()
            watcher.join()
            errors = load.errors()
            assert not errors, f"{len(errors)} failed calls, first: {errors[0].error}"
            assert len(load.samples) > 200
            assert min(listed) == 3, "a provider was dropped from the consumer's list"
            assert len(ref.directory.providers) == 3
    finally:
        stop_watching.set()
        for provider in providers:
            provider.kill()
