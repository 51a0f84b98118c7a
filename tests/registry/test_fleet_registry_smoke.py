"""A small fleet in a real registry, through ``bench/bench_fleet_registry.py``'s own code: a
consumer's first read sees every provider written in bulk, and one provider's restart (one
registry transaction: its node deleted, a new address created) reaches the consumer's chain --
at the interface level (a ``RegistryDirectory``) and at the application level (an
``ApplicationDiscovery`` subscribed to every service), on ZooKeeper and on etcd."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import bench_fleet_registry as fleet

PROVIDERS, INSTANCES, SERVICES, CHANGES = 200, 20, 5, 2


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param("zookeeper", marks=pytest.mark.zookeeper),
        pytest.param("etcd", marks=pytest.mark.etcd),
    ],
)
@pytest.mark.parametrize("level", ["interface", "application"])
def test_consumer_reads_the_whole_fleet_and_one_change(
    backend: str, level: str, request: pytest.FixtureRequest
) -> None:
    server: Any = request.getfixturevalue(backend)
    writer = fleet.writer_for(backend, server.address)
    roots = fleet.estate_roots(SERVICES)
    try:
        if level == "interface":
            nodes = fleet.interface_nodes(PROVIDERS)
        else:
            nodes, _ = fleet.app_nodes(INSTANCES, SERVICES)
        writer.create_all(nodes)
        figures = fleet.run_consumer(
            argparse.Namespace(
                backend=backend,
                level=level,
                address=server.address,
                providers=PROVIDERS,
                instances=INSTANCES,
                services=SERVICES,
                changes=CHANGES,
                tracemalloc=False,
                timeout=20.0,
            )
        )
    finally:
        writer.delete(roots)
        writer.close()
    # run_consumer raises TimeoutError unless every service's list held all n providers, and,
    # after each change, the new address and not the old one.
    expected = PROVIDERS if level == "interface" else INSTANCES * SERVICES
    assert figures["providers"] == expected
    assert len(figures["change_ms"]) == CHANGES
    assert all(ms > 0 for ms in figures["change_ms"])


@pytest.mark.parametrize("downstream", [False, True])
def test_the_cpu_mode_notifies_each_service_the_change_concerns(downstream: bool) -> None:
    # --cpu [--downstream]: an instance serving every service reaches every list (or every
    # directory's bound chain), one serving a single service reaches that one alone.
    figures = fleet.cpu_consumer(INSTANCES, SERVICES, CHANGES, downstream)
    assert figures["notified"] == {"join": SERVICES, "leave": SERVICES, "join one service": 1}
    assert all(len(ms) == CHANGES for ms in figures["ms"].values())
