"""A generic reference with no ``protocol=`` does not send ``$invoke`` to ``tri://`` providers it
cannot call generically: gRPC / IDL (protobuf) servers. Beside a live Apache Dubbo 3.3.6
``dubbo://`` provider of estate.UserService, the same interface is registered at a real gRPC
server (dubbo-py's, which serves no ``$invoke``: it answers UNIMPLEMENTED, as any IDL server
does) twice: once with a plain URL, once saying ``serialization=protobuf``.

Dubbo's generic consumer picks every provider and its ``$invoke`` fails on an IDL one; dubbo-py
never picks the one whose URL says protobuf, sets the other aside at its first UNIMPLEMENTED
(failing over, logged once by name), and a reference that has only such providers raises an
error that names the problem (docs/java-services.md).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from demo import greeter_pb2_grpc

import dubbo_py
from dubbo_py.protocol.triple_wrapper import TripleWrapperError
from dubbo_py.url import URL
from tests.support.java_estate import JavaDubboProvider

pytestmark = pytest.mark.zookeeper

SERVICE = "estate.UserService"


class Greeter(greeter_pb2_grpc.GreeterServicer):
    pass


@pytest.fixture(scope="module")
def java(estate_registry: str, estate_group: str) -> Iterator[JavaDubboProvider]:
    with JavaDubboProvider(
        "--registry", estate_registry, "--application", "java-estate-generic-idl",
        "--name", "d1", "--version", "1.0.0", "--group", estate_group,
    ) as provider:  # fmt: skip
        yield provider


def test_idl_triple_providers_are_not_called_generically(
    java: JavaDubboProvider,
    estate_registry: str,
    estate_group: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with (
        dubbo_py.Application("py-idl-server", estate_registry, cache_path=tmp_path / "s") as server,
        dubbo_py.Application("py-generic-idl", estate_registry, cache_path=tmp_path / "c") as app,
    ):
        exported = server.start(Greeter(), port=0, host="127.0.0.1")
        registry = server.registry
        assert registry is not None
        idl = {"interface": SERVICE, "version": "1.0.0", "group": estate_group}
        idl |= {"side": "provider", "methods": "getUser", "application": "py-idl-server"}
        plain = URL("tri", "127.0.0.1", exported.port, SERVICE, parameters=idl)
        # The same server under another address (localhost), so that both URLs are kept.
        protobuf = URL(
            "tri",
            "localhost",
            exported.port,
            SERVICE,
            parameters=idl | {"serialization": "protobuf"},
        )
        registry.register(plain)
        registry.register(protobuf)
        users = app.generic_reference(SERVICE, version="1.0.0", group=estate_group, timeout=5.0)
        deadline = time.monotonic() + 10
        while len(users.providers) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        # The URL that says protobuf is never a generic call's provider.
        assert sorted(p.address for p in users.providers) == sorted([java.address, plain.address])
        attempts = []
        for _ in range(20):
            done = users.invoke_result("getUser", ["java.lang.Long"], [7])
            assert done.provider is not None and done.provider.address == java.address
            attempts.append(len(done.attempts))
        # The plain one was met once at most (UNIMPLEMENTED, failed over), then set aside.
        assert sorted(attempts)[:-1] == [1] * 19, attempts
        if 2 in attempts:
            assert list(users.set_aside) == [plain.address]
            assert "does not serve $invoke" in caplog.text and "IDL (protobuf)" in caplog.text
        assert [p.address for p in users.providers] == [java.address]

        only_tri = app.generic_reference(
            SERVICE, version="1.0.0", group=estate_group, timeout=5.0, protocol="tri"
        )
        with pytest.raises(TripleWrapperError) as raised:
            only_tri.invoke("getUser", ["java.lang.Long"], [7])
        assert f"tri://{plain.address} does not serve $invoke" in str(raised.value)
        assert "IDL (protobuf) service" in str(raised.value)
        assert "give protocol='dubbo'" in str(raised.value)
