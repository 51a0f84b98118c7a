"""TLS and mutual TLS between consumers and providers, on real gRPC servers."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.config.tls import ClientTLS, ServerTLS
from dubbo_py.errors import TLSConfigError
from examples.quickstart.provider import make_greeter
from tests.e2e.conftest import wait_until
from tests.support.certs import Certs, make_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def _serve(registry: str, tls: ServerTLS) -> tuple[dubbo_py.Application, str]:
    app = dubbo_py.Application("tls-provider", registry)
    greeter = make_greeter("1.0.0", None, None)
    server = app.start(greeter, tls=tls)
    greeter.address = server.address
    # The provider URL says so, to dubbo-py and to Apache Dubbo's consumers.
    assert server.urls[0].get("tls") == server.urls[0].get("ssl-enabled") == "true"
    return app, server.address


def test_tls_call(certs: Certs, tmp_path: Path) -> None:
    registry = f"sqlite://{tmp_path}/r.db"
    provider, address = _serve(registry, ServerTLS(certs.server_cert, certs.server_key))
    try:
        with dubbo_py.Application("shop", registry, cache_path=tmp_path / "c") as app:
            ref = app.reference_handle(
                greeter_pb2_grpc.GreeterStub, version="1.0.0", tls=ClientTLS(ca=certs.ca)
            )
            wait_until(lambda: len(ref.directory.providers) == 1, 10, "the TLS provider")
            assert ref.stub.SayHello(greeter_pb2.HelloRequest(name="t")).provider == address
    finally:
        provider.close()


def test_mtls_call_and_plaintext_or_certless_clients_refused(certs: Certs, tmp_path: Path) -> None:
    registry = f"sqlite://{tmp_path}/r.db"
    tls = ServerTLS(certs.server_cert, certs.server_key, client_ca=certs.ca)
    provider, address = _serve(registry, tls)
    try:
        with dubbo_py.Application("shop", registry, cache_path=tmp_path / "c") as app:
            mutual = ClientTLS(
                ca=certs.ca, cert_chain=certs.client_cert, private_key=certs.client_key
            )
            greeter = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0", tls=mutual)
            assert greeter.SayHello(greeter_pb2.HelloRequest(name="m")).provider == address

            certless = app.reference(
                greeter_pb2_grpc.GreeterStub, version="1.0.0", tls=ClientTLS(ca=certs.ca)
            )
            with pytest.raises(grpc.RpcError) as refused:
                certless.SayHello(greeter_pb2.HelloRequest(name="x"), timeout=3)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE

        with grpc.insecure_channel(address) as plaintext:
            with pytest.raises(grpc.RpcError) as info:
                greeter_pb2_grpc.GreeterStub(plaintext).SayHello(
                    greeter_pb2.HelloRequest(name="p"), timeout=3
                )
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        provider.close()


def test_asyncio_consumer_calls_a_tls_provider(certs: Certs, tmp_path: Path) -> None:
    registry = f"sqlite://{tmp_path}/r.db"
    tls = ServerTLS(certs.server_cert, certs.server_key, client_ca=certs.ca)
    provider, address = _serve(registry, tls)
    mutual = ClientTLS(ca=certs.ca, cert_chain=certs.client_cert, private_key=certs.client_key)

    async def scenario() -> None:
        app = dubbo_py.Application("shop", registry, cache_path=tmp_path / "c")
        try:
            greeter = await app.reference_async(
                greeter_pb2_grpc.GreeterStub, version="1.0.0", tls=mutual
            )
            reply = await greeter.SayHello(greeter_pb2.HelloRequest(name="a"), timeout=5)
            assert reply.provider == address
            parts = [
                r.message
                async for r in greeter.SayHelloStream(
                    greeter_pb2.HelloRequest(name="s", count=2), timeout=5
                )
            ]
            assert len(parts) == 2
        finally:
            await app.aclose()

    try:
        asyncio.run(scenario())
    finally:
        provider.close()


def test_bad_tls_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(TLSConfigError, match=r"missing\.pem"):
        ServerTLS(tmp_path / "missing.pem", tmp_path / "k").credentials()
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(TLSConfigError, match="not a PEM"):
        ClientTLS(ca=tmp_path / "junk.pem").credentials()
    with pytest.raises(TLSConfigError, match="go together"):
        ClientTLS(cert_chain=tmp_path / "c.pem")


def test_tls_chosen_by_the_consumers_configuration(certs: Certs, tmp_path: Path) -> None:
    # A TLS provider whose URL does not announce it (as a Java provider whose TLS comes from
    # its SSL configuration alone may): consumers choose TLS by their own configuration.
    registry = f"sqlite://{tmp_path}/r.db"
    provider, address = _serve(registry, ServerTLS(certs.server_cert, certs.server_key))
    try:
        assert provider.registry is not None
        (announced,) = provider.registry.lookup("demo.Greeter")
        silent = announced.without_parameters("tls", "ssl-enabled")
        provider.registry.unregister(announced)
        provider.registry.register(silent)
        # The rewritten interface-level URL is what the consumer must read.
        with dubbo_py.Application(
            "shop", registry, cache_path=tmp_path / "c", migration_step="FORCE_INTERFACE"
        ) as app:

            def greeter(**options: Any) -> Any:
                ref = app.reference_handle(
                    greeter_pb2_grpc.GreeterStub, version="1.0.0", retries=0, **options
                )
                wait_until(lambda: len(ref.directory.providers) == 1, 10, "the provider")
                assert ref.directory.providers[0].get("tls") is None
                return ref.stub

            plaintext = greeter(tls=ClientTLS(ca=certs.ca))
            with pytest.raises(grpc.RpcError) as refused:
                plaintext.SayHello(greeter_pb2.HelloRequest(name="p"), timeout=3)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE

            for chosen in (
                greeter(tls=ClientTLS(ca=certs.ca, enabled=True)),
                greeter(tls=ClientTLS(ca=certs.ca), parameters={"ssl-enabled": "true"}),
            ):
                reply = chosen.SayHello(greeter_pb2.HelloRequest(name="t"), timeout=5)
                assert reply.provider == address
    finally:
        provider.close()
