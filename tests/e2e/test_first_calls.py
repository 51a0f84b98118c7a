"""Rules in force from the first call: consumers started under an existing forced rule never
send a call to a provider it excludes, because ``reference()`` returns only once the rule
documents have been read along with the provider list."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from demo import greeter_pb2_grpc

import dubbo_py
from dubbo_py.registry.registry import Registry
from dubbo_py.registry.store.zookeeper import ZooKeeperStore
from tests.support.processes import ROOT, ProviderProcess
from tests.support.zookeeper import ZooKeeperServer

CONSUMERS = 8
CALLS = 10


@pytest.mark.zookeeper
def test_fresh_consumers_under_a_forced_rule_never_call_the_excluded_provider(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    chroot = f"/first-{uuid.uuid4().hex[:8]}"
    address = f"zookeeper://{zookeeper.address}{chroot}"
    with ProviderProcess(address) as excluded, ProviderProcess(address) as kept:
        store = ZooKeeperStore(zookeeper.address, chroot)
        assert store.start(10.0)
        try:
            # Written before any consumer exists: it is "already in the config center".
            Registry(store).put_config(
                "demo.Greeter:1.0.0:.condition-router",
                "configVersion: v3.0\nscope: service\nkey: demo.Greeter\nforce: true\n"
                f"conditions:\n  - '=> port != {excluded.port}'\n",
            )
        finally:
            store.close()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.support.first_calls",
                    address,
                    str(CALLS),
                    str(tmp_path / f"cache-{i}.json"),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=ROOT,
                env=env,
            )
            for i in range(CONSUMERS)
        ]
        landed: list[list[str]] = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            landed.append(json.loads(out.strip().splitlines()[-1]))
    # Every consumer made all its calls, each to the provider the rule keeps.
    assert [len(calls) for calls in landed] == [CALLS] * CONSUMERS
    reached = {provider for calls in landed for provider in calls}
    assert reached == {kept.address}, (excluded.address, landed)


def test_reference_async_waits_for_the_registry_without_blocking_the_event_loop(
    tmp_path: Path,
) -> None:
    # A ZooKeeper that never answers: the reference waits its whole ``check`` time, as the
    # blocking flavour does, but on a worker thread -- the event loop keeps ticking meanwhile.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        silent = f"zookeeper://127.0.0.1:{sock.getsockname()[1]}"
    check = 1.0

    async def scenario() -> tuple[int, float]:
        app = dubbo_py.Application("shop", silent, cache_path=tmp_path / "c", connect_timeout=0.2)
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        try:
            started = time.monotonic()
            await app.reference_async(greeter_pb2_grpc.GreeterStub, version="1.0.0", check=check)
            waited = time.monotonic() - started
            stop.set()
            await task
            return ticks, waited
        finally:
            await app.aclose()

    ticks, waited = asyncio.run(scenario())
    assert waited >= check  # it did wait for the registry...
    # ...while the loop ran: a blocked loop would have ticked once or twice at most.
    assert ticks >= 10, ticks
