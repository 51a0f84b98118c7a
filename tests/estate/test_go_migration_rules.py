"""Migration rules and a live dubbo-go 3.3.2 consumer: dubbo-go does not read them.

dubbo-go 3.3.2 has no migration support (its module has no code reading ``<app>.migration``;
a consumer's level is its registry's ``registry-type``: interface, service or all). Here one
provider application has a provider at each level (labels ``iface`` and ``app``); a Go consumer
at the application level (``--discovery instance``, with the registry as its config center) and
a dubbo-py consumer share one application name. ``dubbo-py rules push`` of a FORCE_INTERFACE
rule for that application moves the dubbo-py consumer to the interface level (so the rule is
live in the config center the Go consumer watches), while every Go call still reaches the
application level.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.admin.cli import cli
from tests.estate.test_migration_rules_live import _provider
from tests.support.go_estate import GoConsumer
from tests.support.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.zookeeper

VERSION = "1.0.0"
GROUP = "mig-go"
CALLS = 4


def _labels(py: Any) -> set[str]:
    seen: set[str] = set()
    for _ in range(CALLS):
        try:
            seen.add(py.SayHello(greeter_pb2.HelloRequest(name="m")).message.split(":", 1)[0])
        except Exception as error:  # a failed call is a result here
            seen.add(f"error: {type(error).__name__}")
    return seen


def _go_labels(go: GoConsumer) -> set[str]:
    result = go.call(CALLS, name="m")
    return {k.split(":", 1)[0] for k in result["ok"]} | {f"error: {e}" for e in result["errors"]}


def test_dubbo_go_ignores_a_force_interface_migration_rule(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    provider_app, consumer_app = f"mig-go-provider-{tag}", f"mig-go-consumer-{tag}"
    options = {"version": VERSION, "group": GROUP, "warmup": 0}
    iface = dubbo_py.service(**options)(_provider("iface"))
    app = dubbo_py.service(**options)(_provider("app"))
    with ZooKeeperServer() as zookeeper:
        registry = f"zookeeper://{zookeeper.address}"
        with (
            dubbo_py.Application(
                provider_app, registry, cache_path=tmp_path / "i.json", register_mode="interface"
            ) as iface_app,
            dubbo_py.Application(
                provider_app, registry, cache_path=tmp_path / "a.json", register_mode="instance"
            ) as app_app,
            dubbo_py.Application(consumer_app, registry, cache_path=tmp_path / "c.json") as py_app,
        ):
            iface_app.start(iface(), port=0, bind_host="127.0.0.1")
            app_app.start(app(), port=0, bind_host="127.0.0.1")
            py = py_app.reference(
                greeter_pb2_grpc.GreeterStub, version=VERSION, group=GROUP, timeout=5.0
            )
            with GoConsumer(
                "--registry",
                registry,
                "--application",
                consumer_app,
                "--version",
                VERSION,
                "--group",
                GROUP,
                "--discovery",
                "instance",
                "--config-center",
                registry,
            ) as go:
                # Before any rule: both read the application level (dubbo-py: APPLICATION_FIRST).
                assert _go_labels(go) == {"app"}, go.logs()
                assert _labels(py) == {"app"}
                rule = tmp_path / "migration.yaml"
                rule.write_text(f"key: {consumer_app}\nstep: FORCE_INTERFACE\n", encoding="utf-8")
                pushed = CliRunner().invoke(
                    cli, ["--registry", registry, "rules", "push", str(rule)]
                )
                assert pushed.exit_code == 0, pushed.output
                # The rule is live: the dubbo-py consumer of the same application moves.
                deadline = time.monotonic() + 10
                while _labels(py) != {"iface"} and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert _labels(py) == {"iface"}
                # dubbo-go stays where its registry-type put it, call after call.
                for _ in range(5):
                    assert _go_labels(go) == {"app"}, go.logs()
                    time.sleep(0.2)
