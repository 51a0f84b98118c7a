"""docs/grafana-dashboard.json reads only metrics dubbo-py exports (names checked against a real
scrape of a provider and a consumer), and is a dashboard Grafana can import."""

from __future__ import annotations

import json
import re
from pathlib import Path

from demo import greeter_pb2, greeter_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

import dubbo_py
from tests.app.test_qos_port import Greeter, get

SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}
DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json"


def exported_names(tmp_path: Path) -> set[str]:
    registry = f"sqlite://{tmp_path}/registry.db"
    names: set[str] = set()
    with (
        dubbo_py.Application("greeter", registry, qos_port=0) as provider,
        dubbo_py.Application("shop", registry, qos_port=0, cache_path=tmp_path / "c") as shop,
    ):
        provider.start(Greeter(), port=0)
        stub = shop.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
        stub.SayHello(greeter_pb2.HelloRequest(name="ada"))
        for app in (provider, shop):
            assert app.qos is not None
            for family in text_string_to_metric_families(get(app.qos.port, "/metrics")[1]):
                # Families without samples yet (no ejection so far) count by their type.
                suffixes = SUFFIXES.get(family.type, ("",))
                names.update(family.name + suffix for suffix in suffixes)
                names.update(sample.name for sample in family.samples)
    return names


def test_every_query_reads_an_exported_metric(tmp_path: Path) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["panels"]
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    used = {name for expr in exprs for name in re.findall(r"\b(dubbo_\w+)", expr)}
    assert "dubbo_consumer_requests_total" in used and "dubbo_provider_requests_total" in used
    missing = used - exported_names(tmp_path)
    assert not missing, f"the dashboard reads metrics dubbo-py does not export: {missing}"
