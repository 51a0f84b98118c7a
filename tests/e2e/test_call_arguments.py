"""gRPC's per-call arguments on dubbo-py stubs, end to end (issue 31, item 6), blocking and
asyncio, ``__call__``, ``with_call`` and ``future`` alike:

* ``credentials=`` reach a TLS provider found in a real ZooKeeper (it reads the token); a call
  with credentials to a provider called in plaintext fails with CallCredentialsError, nothing
  sent;
* ``compression=`` compresses what reaches the provider (bytes counted by a TCP relay in front
  of it: a 1 MiB request of one letter crosses as a few KiB);
* ``wait_for_ready=True`` waits for a provider that is not listening yet, where a call without
  it fails at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py import CallCredentialsError
from dubbo_py.config.tls import ClientTLS, ServerTLS
from tests.e2e.conftest import wait_until
from tests.support.certs import Certs, make_certs
from tests.support.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.e2e]

TOKEN = "tok-31"
BIG = greeter_pb2.HelloRequest(name="a" * (1 << 20))


@dubbo_py.service(version="1.0.0")
class Echo(greeter_pb2_grpc.GreeterServicer):
    """Answers with the call's ``authorization`` header (empty when none came) and the size
    of the name it received."""

    def SayHello(self, request: Any, context: Any) -> Any:
        headers = dict(context.invocation_metadata())
        return greeter_pb2.HelloReply(
            message=headers.get("authorization", ""), shard=len(request.name)
        )

    def SayHelloStream(self, request: Any, context: Any) -> Any:
        yield self.SayHello(request, context)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def zookeeper() -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer() as server:
        yield server


def _provider(registry: str, tls: ServerTLS | None) -> tuple[dubbo_py.Application, str]:
    app = dubbo_py.Application("echo-provider", registry)
    server = app.start(Echo(), tls=tls)
    return app, server.address


@pytest.mark.zookeeper
def test_call_credentials_reach_a_tls_provider_and_refuse_a_plaintext_one(
    zookeeper: ZooKeeperServer, certs: Certs, tmp_path: Path
) -> None:
    registry = f"zookeeper://{zookeeper.address}/creds-{tmp_path.name}"
    secure, _ = _provider(registry, ServerTLS(certs.server_cert, certs.server_key))
    try:
        with dubbo_py.Application("shop", registry, cache_path=tmp_path / "c") as app:
            ref = app.reference_handle(
                greeter_pb2_grpc.GreeterStub, version="1.0.0", tls=ClientTLS(ca=certs.ca)
            )
            wait_until(lambda: len(ref.directory.providers) == 1, 20, "the TLS provider")
            stub = ref.stub
            creds = grpc.access_token_call_credentials(TOKEN)
            req = greeter_pb2.HelloRequest(name="c")
            assert stub.SayHello(req).message == ""
            assert stub.SayHello(req, credentials=creds).message == f"Bearer {TOKEN}"
            reply, call = stub.SayHello.with_call(req, credentials=creds)
            assert reply.message == f"Bearer {TOKEN}" and call.code() is grpc.StatusCode.OK
            assert stub.SayHello.future(req, credentials=creds).result().message.endswith(TOKEN)
            streamed = list(stub.SayHelloStream(req, credentials=creds))
            assert [r.message for r in streamed] == [f"Bearer {TOKEN}"]

            async def asyncio_calls() -> list[str]:
                aio = dubbo_py.Application("shop-aio", registry, cache_path=tmp_path / "a")
                try:
                    aref = await aio.reference_handle_async(
                        greeter_pb2_grpc.GreeterStub, version="1.0.0", tls=ClientTLS(ca=certs.ca)
                    )
                    while not aref.directory.providers:
                        await asyncio.sleep(0.05)
                    first = await aref.stub.SayHello(req, credentials=creds)
                    second, _ = await aref.stub.SayHello.with_call(req, credentials=creds)
                    streamed = [r async for r in aref.stub.SayHelloStream(req, credentials=creds)]
                    return [first.message, second.message, streamed[0].message]
                finally:
                    await aio.aclose()

            assert asyncio.run(asyncio_calls()) == [f"Bearer {TOKEN}"] * 3
    finally:
        secure.close()


def test_call_credentials_to_a_plaintext_provider_fail_clearly(tmp_path: Path) -> None:
    registry = f"sqlite://{tmp_path}/r.db"
    plain, address = _provider(registry, None)
    creds = grpc.access_token_call_credentials(TOKEN)
    req = greeter_pb2.HelloRequest(name="p")
    try:
        with dubbo_py.Application("shop", registry, cache_path=tmp_path / "c") as app:
            stub = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
            assert stub.SayHello(req).message == ""
            for call in (stub.SayHello, stub.SayHello.with_call):
                with pytest.raises(CallCredentialsError) as info:
                    call(req, credentials=creds)
                assert address in str(info.value) and "TLS" in str(info.value)
            with pytest.raises(CallCredentialsError):
                stub.SayHello.future(req, credentials=creds).result()

            async def asyncio_call() -> None:
                aio = dubbo_py.Application("aio", registry, cache_path=tmp_path / "a")
                try:
                    astub = await aio.reference_async(greeter_pb2_grpc.GreeterStub, version="1.0.0")
                    await astub.SayHello(req, credentials=creds)
                finally:
                    await aio.aclose()

            with pytest.raises(CallCredentialsError):
                asyncio.run(asyncio_call())
            # A value gRPC would not take is refused when the call is made.
            with pytest.raises(TypeError, match="credentials"):
                stub.SayHello(req, credentials="Bearer x")
    finally:
        plain.close()


class Relay:
    """A TCP relay to ``target`` on loopback that counts the bytes the client sent."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self._target = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self.sent = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._target)
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, count: bool) -> None:
        try:
            while data := src.recv(65536):
                if count:
                    with self._lock:
                        self.sent += len(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def take(self) -> int:
        with self._lock:
            sent, self.sent = self.sent, 0
        return sent

    def close(self) -> None:
        self._listener.close()


def test_compression_reaches_the_provider_compressed(tmp_path: Path) -> None:
    plain, address = _provider(f"sqlite://{tmp_path}/r.db", None)
    relay = Relay(address)
    direct = f"tri://{relay.address}"
    try:
        with dubbo_py.Application("shop", direct, cache_path=tmp_path / "c") as app:
            stub = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
            assert stub.SayHello(greeter_pb2.HelloRequest(name="warm")).shard == 4
            relay.take()
            assert stub.SayHello(BIG).shard == 1 << 20
            uncompressed = relay.take()
            for gzip in (
                lambda: stub.SayHello(BIG, compression=grpc.Compression.Gzip),
                lambda: stub.SayHello.with_call(BIG, compression=grpc.Compression.Deflate)[0],
                lambda: stub.SayHello.future(BIG, compression=grpc.Compression.Gzip).result(),
            ):
                assert gzip().shard == 1 << 20  # the provider read it whole
                compressed = relay.take()
                assert uncompressed > 1 << 20 > 64 * compressed, (uncompressed, compressed)

            async def asyncio_call() -> int:
                aio = dubbo_py.Application("aio", direct, cache_path=tmp_path / "a")
                try:
                    astub = await aio.reference_async(greeter_pb2_grpc.GreeterStub, version="1.0.0")
                    reply = await astub.SayHello(BIG, compression=grpc.Compression.Gzip)
                    return int(reply.shard)
                finally:
                    await aio.aclose()

            assert asyncio.run(asyncio_call()) == 1 << 20
            assert relay.take() < (1 << 20) // 64

            # The same as a reference option and as a method option, both flavours.
            for options in (
                {"compression": "gzip"},
                {"methods": {"SayHello": {"compression": "deflate"}}},
            ):
                configured = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0", **options)
                relay.take()
                assert configured.SayHello(BIG).shard == 1 << 20
                assert relay.take() < (1 << 20) // 64, options
                # A call's own argument wins over the option.
                assert configured.SayHello(BIG, compression=grpc.Compression.NoCompression).shard
                assert relay.take() > 1 << 20

            async def asyncio_option() -> int:
                aio = dubbo_py.Application("aio2", direct, cache_path=tmp_path / "b")
                try:
                    astub = await aio.reference_async(
                        greeter_pb2_grpc.GreeterStub, version="1.0.0", compression="gzip"
                    )
                    return int((await astub.SayHello(BIG)).shard)
                finally:
                    await aio.aclose()

            relay.take()
            assert asyncio.run(asyncio_option()) == 1 << 20
            assert relay.take() < (1 << 20) // 64
    finally:
        relay.close()
        plain.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_wait_for_ready_waits_for_a_provider_not_listening_yet(tmp_path: Path) -> None:
    port = _free_port()
    req = greeter_pb2.HelloRequest(name="w")
    with dubbo_py.Application("shop", f"tri://127.0.0.1:{port}", cache_path=tmp_path / "c") as app:
        stub = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0", timeout=20.0)
        # Nothing listens: without wait_for_ready the call fails at once (gRPC's fail-fast).
        with pytest.raises(grpc.RpcError) as info:
            stub.SayHello(req)
        assert info.value.code() is grpc.StatusCode.UNAVAILABLE
        waiting = stub.SayHello.future(req, wait_for_ready=True)
        server = grpc.server(futures.ThreadPoolExecutor(2))
        greeter_pb2_grpc.add_GreeterServicer_to_server(Echo(), server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        server.start()
        try:
            assert waiting.result(timeout=30).shard == 1
            assert stub.SayHello(req, wait_for_ready=False).shard == 1
        finally:
            server.stop(None)


def test_wait_for_ready_on_asyncio_stubs(tmp_path: Path) -> None:
    port = _free_port()
    req = greeter_pb2.HelloRequest(name="aw")

    async def run() -> int:
        app = dubbo_py.Application("aio", f"tri://127.0.0.1:{port}", cache_path=tmp_path / "a")
        try:
            stub = await app.reference_async(
                greeter_pb2_grpc.GreeterStub, version="1.0.0", timeout=20.0
            )
            with pytest.raises(grpc.RpcError):
                await stub.SayHello(req)
            waiting = asyncio.ensure_future(stub.SayHello(req, wait_for_ready=True))
            await asyncio.sleep(0)
            server = grpc.server(futures.ThreadPoolExecutor(2))
            greeter_pb2_grpc.add_GreeterServicer_to_server(Echo(), server)
            server.add_insecure_port(f"127.0.0.1:{port}")
            server.start()
            try:
                return int((await waiting).shard)
            finally:
                server.stop(None)
        finally:
            await app.aclose()

    assert asyncio.run(run()) == 2
