"""Access logs (Dubbo's AccessLogFilter), in process with real gRPC servers on the embedded
registry: the line's shape, a provider-side override switching the provider's log on and off,
a path set in code appending to a file, a path from an override rule refused for the logger,
and both flavours. The consumer side's override is shown with real processes in
tests/e2e/test_live_ops_e2e.py."""

from __future__ import annotations

import asyncio
import logging
import logging.handlers
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.qos.access_log import (
    ACCESS_LOGGER,
    AccessEntry,
    access_log_target,
    format_line,
    writer,
)
from dubbo_py.registry.registry import Registry
from tests.support.waiting import wait_until

SERVICE = "demo.Greeter"
KEY = f"{SERVICE}:1.0.0:.configurators"


@dubbo_py.service(version="1.0.0")
class Greeter(greeter_pb2_grpc.GreeterServicer):
    def SayHello(self, request: Any, context: Any) -> Any:
        if request.name == "fail":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "asked to fail")
        return greeter_pb2.HelloReply(message=f"Hello, {request.name}!")


@dubbo_py.service(version="1.0.0", accesslog="true")
class AsyncGreeter(greeter_pb2_grpc.GreeterServicer):
    async def SayHello(self, request: Any, context: Any) -> Any:
        return greeter_pb2.HelloReply(message=f"Hello, {request.name}!")


def override(side: str, value: str) -> str:
    return (
        f"configVersion: v3.0\nscope: service\nkey: {SERVICE}:1.0.0\nenabled: true\n"
        f"configs:\n  - side: {side}\n    parameters: {{accesslog: '{value}'}}\n"
    )


class Lines(logging.Handler):
    """Collects the messages of the access log loggers."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def messages(self) -> list[str]:
        writer().flush()
        return [r.getMessage() for r in self.records]


@pytest.fixture
def lines() -> Iterator[Lines]:
    handler = Lines()
    logger = logging.getLogger(ACCESS_LOGGER)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(logging.NOTSET)


@pytest.fixture
def registry(tmp_path: Path) -> str:
    return f"sqlite://{tmp_path}/registry.db"


def test_a_line_has_dubbos_shape_with_outcome_and_duration() -> None:
    entry = AccessEntry(
        1_700_000_000.0,
        1_700_000_000.25,
        "127.0.0.1:53190",
        "127.0.0.1:50051",
        SERVICE,
        "1.0.0",
        "blue",
        "SayHello",
        greeter_pb2.HelloRequest(name="ada", count=2),
        "OK",
        250.0,
    )
    line = format_line(entry)
    day = datetime.fromtimestamp(1_700_000_000.0).strftime("%Y-%m-%d %H:%M:%S")
    assert line.startswith(f"[{day}.00000] -> [{day}.25000]")
    assert line.endswith(
        "] 127.0.0.1:53190 -> 127.0.0.1:50051 - blue/demo.Greeter:1.0.0 "
        "SayHello(demo.HelloRequest) [name: 'ada', count: 2] OK 250.000ms"
    )


def test_accesslog_values_as_dubbo_reads_them() -> None:
    assert access_log_target(None) is None
    assert access_log_target("") is None
    assert access_log_target("false") is None
    assert access_log_target("true") == ""
    assert access_log_target("default") == ""
    assert access_log_target("/var/log/access.log") == "/var/log/access.log"
    # A rule may not choose a file: the logger instead.
    assert access_log_target("/etc/cron.d/x", from_rule=True) == ""


def test_a_provider_side_override_switches_the_providers_access_log(
    registry: str, tmp_path: Path, lines: Lines
) -> None:
    provider = dubbo_py.Application("greeter", registry)
    consumer = dubbo_py.Application("shop", registry, cache_path=tmp_path / "c.json")
    try:
        server = provider.start(Greeter(), port=0)
        stub: Any = consumer.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0", retries=0)
        stub.SayHello(greeter_pb2.HelloRequest(name="before"))
        assert lines.messages() == []

        assert provider.registry is not None
        operator = Registry(provider.registry.store)
        operator.put_config(KEY, override("provider", "true"))
        wait_until(
            lambda: provider.access_logs.switch(SERVICE, "1.0.0", "").target == "",
            10,
            "the provider's override applied",
        )
        stub.SayHello(greeter_pb2.HelloRequest(name="ada"))
        with pytest.raises(grpc.RpcError):
            stub.SayHello(greeter_pb2.HelloRequest(name="fail"))
        logged = lines.messages()
        assert len(logged) == 2, logged
        assert (
            f" -> {server.address} - demo.Greeter:1.0.0 SayHello(demo.HelloRequest) " in (logged[0])
        )
        assert "[name: 'ada']" in logged[0] and logged[0].endswith("ms")
        assert " OK " in logged[0] and " INVALID_ARGUMENT " in logged[1]
        assert {r.name for r in lines.records} == {f"{ACCESS_LOGGER}.{SERVICE}"}

        operator.delete_config(KEY)
        wait_until(
            lambda: provider.access_logs.switch(SERVICE, "1.0.0", "").target is None,
            10,
            "the provider's override removed",
        )
        stub.SayHello(greeter_pb2.HelloRequest(name="after"))
        assert len(lines.messages()) == 2
    finally:
        consumer.close()
        provider.close()


def test_a_path_set_in_code_appends_to_that_file_and_one_from_a_rule_does_not(
    registry: str, tmp_path: Path, lines: Lines
) -> None:
    path = tmp_path / "logs" / "access.log"
    provider = dubbo_py.Application("greeter", registry)
    consumer = dubbo_py.Application("shop", registry, cache_path=tmp_path / "c.json")
    try:
        server = provider.start(Greeter(), port=0)
        stub: Any = consumer.reference(
            greeter_pb2_grpc.GreeterStub, version="1.0.0", parameters={"accesslog": str(path)}
        )
        for name in ("a", "b", "c"):
            stub.SayHello(greeter_pb2.HelloRequest(name=name))
        writer().flush()
        written = path.read_text(encoding="utf-8").splitlines()
        assert len(written) == 3
        assert all(f" -> {server.address} - demo.Greeter:1.0.0 SayHello(" in w for w in written)
        assert lines.messages() == []

        # An override naming another file: logged to the logger, no file written there.
        rule_path = tmp_path / "elsewhere.log"
        assert consumer.registry is not None
        Registry(consumer.registry.store).put_config(KEY, override("consumer", str(rule_path)))
        ref = consumer.references[0]
        wait_until(lambda: ref.assembly.access_log == "", 10, "the consumer's override applied")
        stub.SayHello(greeter_pb2.HelloRequest(name="d"))
        assert len(lines.messages()) == 1
        assert not rule_path.exists()
        assert len(path.read_text(encoding="utf-8").splitlines()) == 3
    finally:
        consumer.close()
        provider.close()


def test_a_path_in_dubbo_yaml_appends_to_that_file(
    registry: str, tmp_path: Path, lines: Lines
) -> None:
    config = tmp_path / "dubbo.yaml"
    config.write_text(
        f"application: shop\nregistry: {registry}\n"
        "references:\n  demo.Greeter:\n    version: 1.0.0\n"
        f"    parameters: {{accesslog: '{tmp_path / 'access.log'}'}}\n",
        encoding="utf-8",
    )
    provider = dubbo_py.Application("greeter", registry)
    consumer = dubbo_py.Application.from_config(config)
    try:
        provider.start(Greeter(), port=0)
        stub: Any = consumer.reference(greeter_pb2_grpc.GreeterStub)
        stub.SayHello(greeter_pb2.HelloRequest(name="yaml"))
        writer().flush()
        written = (tmp_path / "access.log").read_text(encoding="utf-8")
        assert "[name: 'yaml'] OK " in written
        assert lines.messages() == []
    finally:
        consumer.close()
        provider.close()


def test_both_sides_of_the_asyncio_flavour_log_from_code_options(
    registry: str, tmp_path: Path, lines: Lines
) -> None:
    async def run() -> None:
        provider = dubbo_py.Application("greeter", registry)
        consumer = dubbo_py.Application("shop", registry, cache_path=tmp_path / "c.json")
        try:
            server = await provider.start_async(AsyncGreeter(), port=0)
            stub: Any = await consumer.reference_async(
                greeter_pb2_grpc.GreeterStub, version="1.0.0", parameters={"accesslog": "true"}
            )
            await stub.SayHello(greeter_pb2.HelloRequest(name="ada"))
            await server.stop(0)
        finally:
            await consumer.aclose()
            await provider.aclose()

    asyncio.run(run())
    logged = lines.messages()
    assert len(logged) == 2, logged
    assert all("SayHello(demo.HelloRequest) [name: 'ada'] OK " in line for line in logged)


def test_a_file_is_rotated_at_midnight_under_dubbos_name(tmp_path: Path) -> None:
    from dubbo_py.qos.access_log import _file_handler

    path = tmp_path / "access.log"
    handler = _file_handler(str(path))
    try:
        handler.emit(logging.LogRecord("x", logging.INFO, "", 0, "first", None, None))
        assert isinstance(handler, logging.handlers.TimedRotatingFileHandler)
        assert handler.when == "MIDNIGHT"
        handler.doRollover()  # what midnight does
        handler.emit(logging.LogRecord("x", logging.INFO, "", 0, "second", None, None))
    finally:
        handler.close()
    rotated = [p.name for p in tmp_path.iterdir() if p.name != "access.log"]
    assert len(rotated) == 1 and re.fullmatch(r"access\.log\.\d{8}", rotated[0])
    assert (tmp_path / rotated[0]).read_text(encoding="utf-8") == "first\n"
    assert path.read_text(encoding="utf-8") == "second\n"
