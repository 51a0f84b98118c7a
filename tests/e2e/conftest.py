"""Fixtures for end-to-end tests: a registry address on each backend, provider processes."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import dubbo_py
from tests.support.processes import ProviderProcess


@pytest.fixture(params=["zookeeper", "embedded"])
def registry_address(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, isolated registry on a real ZooKeeper (own chroot) or the embedded store."""
    if request.param == "zookeeper":
        zk = request.getfixturevalue("zookeeper")
        return f"zookeeper://{zk.address}/e2e-{uuid.uuid4().hex[:8]}"
    return f"sqlite://{tmp_path}/registry.db"


@pytest.fixture
def providers(registry_address: str) -> Iterator[Callable[..., ProviderProcess]]:
    """Start provider processes on the test's registry; all are killed afterwards."""
    started: list[ProviderProcess] = []

    def start(*args: str, port: int = 0, registry: str | None = None) -> ProviderProcess:
        proc = ProviderProcess(registry or registry_address, *args, port=port).start()
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()


@pytest.fixture
def app(registry_address: str, tmp_path: Path) -> Iterator[dubbo_py.Application]:
    """A consumer application ("shop") on the test's registry, closed afterwards."""
    with dubbo_py.Application("shop", registry_address, cache_path=tmp_path / "c.json") as a:
        yield a


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``predicate`` until true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
