"""The operators' live tools through a real Nacos server (tests/support/nacos.py) rather than
ZooKeeper: ``dubbo-py call``, ``snapshot``, ``log-level`` and ``top`` find the provider and the
consumer processes through what they registered on Nacos (their QoS ports travel in the
registered URLs), in a Nacos namespace of this test's own. The same tools on ZooKeeper are
tests/e2e/test_live_ops_e2e.py, test_call_e2e.py and test_observability_e2e.py."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tests.e2e.test_live_ops_e2e import KEY, Consumer, ok
from tests.e2e.test_observability_e2e import LABELS, Peer
from tests.support.nacos import NacosServer
from tests.support.processes import ProviderProcess

pytestmark = [pytest.mark.e2e, pytest.mark.nacos]


def namespace(nacos: NacosServer) -> str:
    """A registry address in a Nacos namespace of the test's own."""
    return f"nacos://{nacos.address}?namespace=ops-{uuid.uuid4().hex[:8]}"


def test_call_snapshot_and_log_level_work_through_nacos(nacos: NacosServer, tmp_path: Path) -> None:
    registry = namespace(nacos)
    provider = ProviderProcess(registry).start()
    consumer: Consumer | None = None
    try:
        consumer = Consumer(registry, tmp_path / "access.log")
        assert consumer.call(3) == [provider.address] * 3

        # call: the provider found through Nacos answers.
        called = json.loads(
            ok(
                registry,
                "call",
                "demo.Greeter",
                "SayHello",
                '{"name": "ada"}',
                "--version",
                "1.0.0",
                "--json",
            )
        )
        assert called["reply"]["message"] == "Hello, ada!"
        assert called["provider"] == provider.address

        # snapshot: the consumer's QoS port is read from its registration on Nacos.
        chain = json.loads(ok(registry, "snapshot", "show", "demo.Greeter", "--json"))
        (shop,) = chain["consumers"]
        assert shop["application"] == "shop"
        assert shop["references"][0]["providers"] == [provider.address]
        consumer.qos_json("/enableRouterSnapshot?service=demo.Greeter.*")
        consumer.call(2)
        recent = json.loads(ok(registry, "snapshot", "recent", KEY, "--json"))
        assert [c["attempts"][0]["provider"] for c in recent["calls"]] == [provider.address] * 2

        # log-level: switched in the consumer process, found through Nacos.
        assert consumer.send("level", "LEVEL") == "LEVEL WARNING"
        shown = json.loads(
            ok(registry, "log-level", "DEBUG", "--service", "demo.Greeter", "--json")
        )
        assert ("shop", "DEBUG") in [(r["application"], r["level"]) for r in shown["applications"]]
        assert consumer.send("level", "LEVEL") == "LEVEL DEBUG"

    finally:
        if consumer is not None:
            consumer.stop()
        provider.kill()


def test_top_reads_the_figures_of_processes_found_through_nacos(
    nacos: NacosServer, tmp_path: Path
) -> None:
    registry = namespace(nacos)
    calls = 12
    provider = Peer("provider", registry, tmp_path / "p.jsonl")
    consumer: Peer | None = None
    try:
        consumer = Peer("consumer", registry, tmp_path / "c.jsonl", "--calls", str(calls))
        assert consumer.done() == (calls, 0)
        view = json.loads(
            ok(registry, "top", "demo.Greeter", "--once", "--json", "--interval", "0.2")
        )
        [provided] = [r for r in view["providers"] if r["method"] == "SayHello"]
        [consumed] = [r for r in view["consumers"] if r["method"] == "SayHello"]
        assert provided["address"] == provider.address
        assert provided["requests_total"] == provider.metric(
            "dubbo_provider_requests_total", **LABELS
        )
        assert consumed["requests_total"] == consumer.metric(
            "dubbo_consumer_requests_total", **LABELS
        )
        assert consumed["providers"] == [provider.address]
        assert view["unreachable"] == []
    finally:
        for peer in (consumer, provider):
            if peer is not None:
                peer.stop()
