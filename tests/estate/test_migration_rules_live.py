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

import logging
import time
import uuid
from collections.abc import Callable, Iterator
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
#: Dubbo 3.3.6's MigrationRuleHandler when a FORCE_INTERFACE step finds no provider there.
JAVA_REFUSES = "Migrate to FORCE_INTERFACE mode failed"
#: dubbo-py's MigrationSubscriber likewise.
PY_REFUSES = "migration rule asks for FORCE_INTERFACE, but that level has no provider"
#: A call with no provider, as each consumer reports it (see Consumers.reached).
JAVA_NO_PROVIDER = "error: RpcException: No provider available"
PY_NO_PROVIDER = "error: ClusterError"


@dataclass
class Consumers:
    """Both consumers, of one application."""

    registry: str
    application: str
    java: JavaConsumer
    py: Any
    #: The interface-level provider's server (taken offline to leave that level empty).
    iface_server: Any = None

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

    def agree(
        self, expected: set[str], what: str, timeout: float = 10.0, both_differ: bool = False
    ) -> None:
        """Wait until both consumers reach exactly ``expected``; fail showing both sets. With
        ``both_differ``, ``expected`` is {Java's, dubbo-py's} error (each consumer's replies
        all start with its own)."""
        deadline = time.monotonic() + timeout

        def met(java: set[str], py: set[str]) -> bool:
            if not both_differ:
                return (java, py) == (expected, expected)
            java_error, py_error = sorted(expected, key=lambda e: e != JAVA_NO_PROVIDER)
            return all(j.startswith(java_error) for j in java) and all(
                p.startswith(py_error) for p in py
            )

        java, py = self.reached()
        while not met(java, py) and time.monotonic() < deadline:
            time.sleep(0.1)
            java, py = self.reached()
        assert met(java, py), (
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
        iface_server = iface_app.start(iface(), port=0, bind_host="127.0.0.1")
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
                both = Consumers(estate_registry, consumer_app, java, py, iface_server)
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


def _wait_for(found: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not found():
        assert time.monotonic() < deadline, f"no sign within {timeout:.0f} s: {what}"
        time.sleep(0.1)


def test_a_step_to_a_level_with_no_provider_needs_force_on_both_consumers(
    consumers: Consumers, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Taken offline (still serving), the interface-only provider leaves that level empty.
    key = f"{consumers.application}.migration"
    rule = tmp_path / "migration.yaml"
    java_log = consumers.java.log
    refusals = java_log.read_text(errors="replace").count(JAVA_REFUSES)
    caplog.set_level(logging.WARNING, logger="dubbo_py.registry.application.migration")
    consumers.iface_server.offline()
    try:
        consumers.agree(APPLICATION, "the interface level empty, APPLICATION_FIRST")
        # Without force: both read the rule and refuse it (Dubbo's MigrationRuleHandler keeps
        # the invokers it has), so both keep calling the application level.
        rule.write_text(f"key: {consumers.application}\nstep: FORCE_INTERFACE\n")
        consumers.cli("rules", "push", str(rule))
        _wait_for(
            lambda: java_log.read_text(errors="replace").count(JAVA_REFUSES) > refusals,
            f"the Java consumer refusing FORCE_INTERFACE ({JAVA_REFUSES!r} in its log)",
        )
        _wait_for(
            lambda: any(PY_REFUSES in r.getMessage() for r in caplog.records),
            f"the dubbo-py consumer refusing FORCE_INTERFACE ({PY_REFUSES!r})",
        )
        consumers.agree(APPLICATION, f"{key} FORCE_INTERFACE without force, no such provider")
        # force: true: both move to the empty level, and their calls find no provider.
        rule.write_text(f"key: {consumers.application}\nstep: FORCE_INTERFACE\nforce: true\n")
        consumers.cli("rules", "push", str(rule))
        consumers.agree(
            {JAVA_NO_PROVIDER, PY_NO_PROVIDER},
            f"{key} FORCE_INTERFACE with force: true, no such provider",
            both_differ=True,
        )
    finally:
        consumers.cli("rules", "delete", key)
    try:
        # Deleted: both back in APPLICATION_FIRST, on the application level's provider.
        consumers.agree(APPLICATION, f"{key} deleted")
    finally:
        consumers.iface_server.online()
