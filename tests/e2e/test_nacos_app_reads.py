"""How many queries a first read of an application on Nacos costs (issue 44 notes: it was n²).

Application-level discovery (dubbo_py/registry/application/discovery.py) lists an
application's instances (``/services/<app>``) and then reads each instance node; on Nacos an
instance node is not a node of its own but one entry of the naming service ``<app>``, so each
of those reads was a query of the whole service: n queries of n instances. The store now
answers an instance read made while a watch of that application is being told of a read from
that same read (the children and their documents come from one query). Counted here with a
counter on the SDK's query, on a real Nacos (the session's server).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dubbo_py.registry.application.discovery import ApplicationDiscovery
from dubbo_py.registry.application.instance import ServiceInstance
from dubbo_py.registry.store.nacos.store import NacosStore
from tests.e2e.conftest import wait_until
from tests.support.nacos import NacosServer

pytestmark = pytest.mark.nacos


@pytest.fixture
def namespace() -> str:
    return f"reads-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def writer(nacos: NacosServer, namespace: str, tmp_path: Path) -> Iterator[NacosStore]:
    store = NacosStore(nacos.address, namespace=namespace, work_dir=tmp_path / "writer")
    assert store.start(20)
    with contextlib.closing(store):
        yield store


def counted_reader(nacos: NacosServer, namespace: str, tmp_path: Path) -> tuple[NacosStore, Any]:
    """A started store whose queries of a naming service are counted (``counter["n"]``)."""
    # Polls only when woken (a watch joining, the server's push): every read is counted
    # whatever the machine's speed.
    store = NacosStore(
        nacos.address, namespace=namespace, work_dir=tmp_path / "reader", poll_interval=60
    )
    assert store.start(20)
    proxy = store._naming.grpc_client_proxy
    query = proxy.query_instance_of_service
    counter = {"n": 0}

    async def counting(*args: Any, **kwargs: Any) -> Any:
        counter["n"] += 1
        return await query(*args, **kwargs)

    proxy.query_instance_of_service = counting
    return store, counter


@pytest.mark.parametrize("count", [3, 12])
def test_a_first_read_of_an_application_costs_queries_independent_of_its_instances(
    nacos: NacosServer, writer: NacosStore, namespace: str, tmp_path: Path, count: int
) -> None:
    app = f"wide-{uuid.uuid4().hex[:6]}"
    for i in range(count):
        doc = ServiceInstance(app, "127.0.0.1", 30000 + i, {}).to_json(stamped=False)
        writer.create(f"/services/{app}/127.0.0.1:{30000 + i}", doc.encode(), ephemeral=True)
    wait_until(lambda: len(writer.children(f"/services/{app}")) == count, 10, "registered")
    reader, counter = counted_reader(nacos, namespace, tmp_path)
    discovery = ApplicationDiscovery(reader)
    with contextlib.closing(reader):
        watch = discovery.acquire_app(app)
        assert watch is not None
        watch.start()
        try:
            wait_until(lambda: len(discovery.instances(app)) == count, 10, "all instances read")
            # The poller's next read (the instance watches joining wake it) lands too.
            wait_until(lambda: counter["n"] >= 2, 5, "the second read")
            first_read = counter["n"]
        finally:
            watch.close()
    print(f"{count} instances: {first_read} queries of the service for the first read")
    # One read lists the instances (and gives their documents), one more as their watches
    # join (the server's push on subscribing may add one); no query per instance (before:
    # count + 2, i.e. 5 and 14).
    assert first_read <= 3, f"{first_read} queries for {count} instances"
