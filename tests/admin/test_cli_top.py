"""``dubbo-py top``: applications found through the registry's qos.port, figures read from their
QoS ports, in process on the embedded registry."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.admin.cli import cli
from tests.app.test_qos_port import Greeter, get, sample


def run_top(registry: str, *args: str) -> dict[str, object]:
    result = CliRunner().invoke(
        cli, ["top", *args, "--once", "--json", "--interval", "0.2", "--registry", registry]
    )
    assert result.exit_code == 0, result.output
    parsed: dict[str, object] = json.loads(result.stdout)
    return parsed


def test_top_once_json_agrees_with_the_qos_endpoints(tmp_path: Path) -> None:
    registry = f"sqlite://{tmp_path}/registry.db"
    with (
        dubbo_py.Application("greeter", registry, qos_port=0) as provider,
        dubbo_py.Application("shop", registry, qos_port=0, cache_path=tmp_path / "c") as shop,
    ):
        server = provider.start(Greeter(), port=0)
        stub = shop.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
        for _ in range(12):
            stub.SayHello(greeter_pb2.HelloRequest(name="ada"))
        assert provider.qos is not None
        _, text = get(provider.qos.port, "/metrics")
        served = sample(text, "dubbo_provider_requests_total", method="SayHello")
        assert served == 12

        view = run_top(registry)
        [row] = view["providers"]  # type: ignore[misc]
        assert row["application"] == "greeter"
        assert row["address"] == server.address
        assert row["qos"] == f"127.0.0.1:{provider.qos.port}"
        assert (row["interface"], row["method"], row["version"]) == (
            "demo.Greeter",
            "SayHello",
            "1.0.0",
        )
        assert row["requests_total"] == served
        assert row["failed_total"] == 0 and row["error_rate"] == 0
        assert row["weight"] == 100 and row["quarantined_by"] == []
        assert view["unreachable"] == []
        assert run_top(registry, "demo.Greeter")["providers"] == view["providers"]


def test_top_names_an_unknown_service(tmp_path: Path) -> None:
    registry = f"sqlite://{tmp_path}/registry.db"
    with dubbo_py.Application("greeter", registry, qos_port=0) as provider:
        provider.start(Greeter(), port=0)
        result = CliRunner().invoke(cli, ["top", "nope.Service", "--once", "--registry", registry])
    assert result.exit_code != 0
    assert "no service 'nope.Service'" in result.output


def test_top_table_lists_idle_providers(tmp_path: Path) -> None:
    registry = f"sqlite://{tmp_path}/registry.db"
    with dubbo_py.Application("greeter", registry, qos_port=0) as provider:
        provider.start(Greeter(), port=0)
        result = CliRunner().invoke(
            cli, ["top", "--once", "--interval", "0.1", "--registry", registry]
        )
    assert result.exit_code == 0, result.output
    assert "providers" in result.output and "greeter" in result.output
