"""Migration rules, live (issue 41 item 3): ``<app>.migration`` pushed with ``dubbo-py rules
push`` switches a live Apache Dubbo 3.3.6 consumer and a dubbo-py consumer of that application
between the interface and the application level alike -- and deleting it puts both back in
their configured step (``APPLICATION_FIRST``).

The levels differ observably: one dubbo-py provider of ``demo.Greeter`` registers at the
interface level only (``register_mode="interface"``, label ``iface``), another of the same
provider application at the application level only (``register_mode="instance"``, label
``app``). Each consumer makes its calls and reports which labels answered; each step waits
(polling calls) until both consumers reach the expected level, and a failure shows both sets.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.admin.cli import cli
from tests.support.java_estate import JavaConsumer

pytestmark = pytest.mark.zookeeper

VERSION = "1.0.0"
CALLS = 6  # one provider per level: a few calls show which level a consumer reads
INTERFACE = {"iface"}
APPLICATION = {"app"}


@dataclass
class Consumers:
    """Both consumers, of one application."""

    registry: str
    application: str
    java: JavaConsumer
    py: Any

    def reached(self) -> tuple[set[str], set[str]]:
        """The labels of the providers that answered each consumer's calls."""
        result = self.java.call(CALLS, name="mig")
        java = set(result["ok"]) | {f"error: {e}" for e in result["errors"]}
        py: set[str] = set()
        for _ in range(CALLS):
            try:
                reply = self.py.SayHello(greeter_pb2.HelloRequest(name="mig"))
                py.add(reply.message.split(":", 1)[0])
            except Exception as error:  # a failed call is a result here
                py.add(f"error: {type(error).__name__}")
        return java, py

    def agree(self, expected: set[str], what: str, timeout: float = 10.0) -> None:
        """Wait until both consumers reach exactly ``expected``; fail showing both sets."""
        deadline = time.monotonic() + timeout
        java, py = self.reached()
        while (java, py) != (expected, expected) and time.monotonic() < deadline:
            time.sleep(0.1)
            java, py = self.reached()
        assert (java, py) == (expected, expected), (
            f"{what}: Java consumer reached {sorted(java)}, dubbo-py consumer {sorted(py)}, "
            f"expected {sorted(expected)}"
        )

    def cli(self, *args: str) -> str:
        """``dubbo-py --registry <the estate's> ARGS``, as an operator types it (in this
        process: a CLI process would add its start-up to every step)."""
        result = CliRunner().invoke(cli, ["--registry", self.registry, *args])
        assert result.exit_code == 0, f"dubbo-py {' '.join(args)}: {result.output}"
        return result.stdout


def _provider(label: str) -> type:
    class Greeter(greeter_pb2_grpc.GreeterServicer):
        def SayHello(self, request: Any, context: Any) -> Any:
            return greeter_pb2.HelloReply(message=f"{label}: hello {request.name}")

    Greeter.__name__ = f"Greeter_{label}"
    return Greeter


@pytest.fixture(scope="module")
def consumers(
    estate_registry: str, estate_group: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Consumers]:
    tag = uuid.uuid4().hex[:8]
    provider_app = f"mig-provider-{tag}"
    consumer_app = f"mig-consumer-{tag}"
    cache = tmp_path_factory.mktemp("mig")
    options = {"version": VERSION, "group": estate_group, "warmup": 0}
    iface = dubbo_py.service(**options)(_provider("iface"))
    app = dubbo_py.service(**options)(_provider("app"))
    with (
        dubbo_py.Application(
            provider_app,
            estate_registry,
            cache_path=cache / "iface.json",
            register_mode="interface",
        ) as iface_app,
        dubbo_py.Application(
            provider_app, estate_registry, cache_path=cache / "app.json", register_mode="instance"
        ) as app_app,
    ):
        iface_app.start(iface(), port=0, bind_host="127.0.0.1")
        app_app.start(app(), port=0, bind_host="127.0.0.1")
        with dubbo_py.Application(
            consumer_app, estate_registry, cache_path=cache / "consumer.json"
        ) as consumer:
            py = consumer.reference(
                greeter_pb2_grpc.GreeterStub, version=VERSION, group=estate_group, timeout=5.0
            )
            with JavaConsumer(
                "--registry",
                estate_registry,
                "--application",
                consumer_app,
                "--version",
                VERSION,
                "--group",
                estate_group,
            ) as java:
                both = Consumers(estate_registry, consumer_app, java, py)
                # APPLICATION_FIRST (both consumers' default): the application level has a
                # provider, so both read it.
                both.agree(APPLICATION, "APPLICATION_FIRST, before any rule")
                yield both


def test_a_migration_rule_pushed_with_the_cli_switches_java_and_dubbo_py_consumers_alike(
    consumers: Consumers, tmp_path: Path
) -> None:
    key = f"{consumers.application}.migration"
    rule = tmp_path / "migration.yaml"
    try:
        for step, level in (
            ("FORCE_INTERFACE", INTERFACE),
            ("FORCE_APPLICATION", APPLICATION),
            ("FORCE_INTERFACE", INTERFACE),
        ):
            rule.write_text(f"key: {consumers.application}\nstep: {step}\n", encoding="utf-8")
            out = consumers.cli("rules", "push", str(rule))
            assert out.startswith(f"pushed {key} to "), out
            consumers.agree(level, f"{key} step: {step}")
        # Both consumers registered the application the CLI's key names.
        listed = consumers.cli("rules", "list", "--kind", "migration")
        assert key in listed, listed
    finally:
        consumers.cli("rules", "delete", key)
    # Deleted: both go back to their configured step, APPLICATION_FIRST.
    consumers.agree(APPLICATION, f"{key} deleted")
