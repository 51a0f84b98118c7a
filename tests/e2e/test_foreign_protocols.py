"""A Java service registers a ``dubbo://`` (Hessian2) endpoint of the same interface next to its
Triple one; a dubbo-py consumer, which cannot speak it, must never call it."""

from __future__ import annotations

import logging
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.registry import layout
from dubbo_py.url import URL
from tests.e2e.conftest import wait_until
from tests.support.processes import ProviderProcess

SERVICE = "demo.Greeter"

pytestmark = pytest.mark.zookeeper


@pytest.fixture
def registry_address(zookeeper: object) -> str:
    """A real ZooKeeper only (its own chroot): this is about what Java writes there."""
    return f"zookeeper://{zookeeper.address}/e2e-{uuid.uuid4().hex[:8]}"  # type: ignore[attr-defined]


class ConnectionCounter:
    """A loopback TCP listener that counts the connections made to it (the fake Java port)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


@pytest.fixture
def java_port() -> Iterator[ConnectionCounter]:
    counter = ConnectionCounter()
    yield counter
    counter.close()


def test_a_dubbo_protocol_url_of_the_same_interface_is_never_called(
    registry_address: str,
    providers: Callable[..., ProviderProcess],
    java_port: ConnectionCounter,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    real = providers()
    # The protocol filter of the interface level is the subject: the consumer reads that level
    # (at the application level a Java dubbo:// endpoint is an endpoint of its instance).
    with dubbo_py.Application(
        "shop", registry_address, cache_path=tmp_path / "c.json", migration_step="FORCE_INTERFACE"
    ) as app:
        assert app.registry is not None
        registered = [u for u in app.registry.lookup(SERVICE) if u.address == real.address]
        assert registered, "the real provider's URL"
        # What a Java provider of the same interface writes beside it: everything alike but
        # the protocol (and its port), with Hessian2 serialization.
        java = registered[0].replace(protocol="dubbo", port=java_port.port)
        java = java.with_parameters(serialization="hessian2", application="java-shop")
        app.registry.register(java)
        assert layout.node_path(java).startswith(f"/dubbo/{SERVICE}/providers/")

        with caplog.at_level(logging.WARNING, logger="dubbo_py.registry.matching"):
            ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0", timeout=5)
            served = [
                ref.stub.SayHello(greeter_pb2.HelloRequest(name=f"n{i}")).provider
                for i in range(30)
            ]
            # Another provider comes and goes: more notifications, no new warning.
            second = providers()
            wait_until(lambda: len(ref.directory.providers) == 2, 15, "the second provider")
            second.terminate()  # a graceful stop unregisters at once
            wait_until(lambda: len(ref.directory.providers) == 1, 30, "the second one gone")
            served += [
                ref.stub.SayHello(greeter_pb2.HelloRequest(name=f"m{i}")).provider
                for i in range(30)
            ]

        assert served == [real.address] * 60
        assert java_port.connections == 0
        assert java in app.registry.lookup(SERVICE)  # it was there all along
        assert [p.address for p in ref.directory.providers] == [real.address]
        warnings = [
            r.getMessage() for r in caplog.records if f":{java_port.port}" in r.getMessage()
        ]
        assert len(warnings) == 1, warnings
        assert "cannot call dubbo://" in warnings[0]
        assert "generic_reference('demo.Greeter')" in warnings[0]  # and says what can
        assert URL.parse(str(java)).protocol == "dubbo"
