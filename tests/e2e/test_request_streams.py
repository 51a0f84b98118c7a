"""Client-streaming and bidirectional calls through dubbo-py, blocking and asyncio.

Two real gRPC servers serve ``demo.Chat`` on loopback, registered in an embedded registry, and a
third provider URL points at a port nothing listens on. A request stream can be read only once,
so these calls are never replayed on another provider: they run fail-fast whatever the
reference's strategy, and the dead provider is quarantined by the call that met it.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from demo import chat_pb2, chat_pb2_grpc

import dubbo_py
from dubbo_py.errors import ClusterError
from dubbo_py.url import URL
from tests.e2e.conftest import wait_until

SERVICE = "demo.Chat"


@dubbo_py.service(version="1.0.0")
class Chatter(chat_pb2_grpc.ChatServicer):
    address = ""

    def Collect(self, request_iterator: Iterator[Any], context: Any) -> Any:
        texts = [line.text for line in request_iterator]
        return chat_pb2.Summary(count=len(texts), joined=" ".join(texts), provider=self.address)

    def Echo(self, request_iterator: Iterator[Any], context: Any) -> Iterator[Any]:
        for line in request_iterator:
            yield chat_pb2.Line(text=line.text.upper(), provider=self.address)


def lines(*texts: str) -> Iterator[chat_pb2.Line]:
    return iter([chat_pb2.Line(text=t) for t in texts])


def dead_provider_url() -> URL:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    return URL.parse(
        f"tri://127.0.0.1:{port}/{SERVICE}?interface={SERVICE}&version=1.0.0&side=provider"
        "&methods=Collect,Echo"
    )


@pytest.fixture
def chat(tmp_path: Path) -> Iterator[tuple[str, set[str], URL]]:
    """(registry address, the live providers' addresses, the dead provider's URL)."""
    registry = f"sqlite://{tmp_path}/registry.db"
    apps, addresses = [], set()
    for _ in range(2):
        # Interface level only, like the dead provider's hand-written URL beside them (an
        # APPLICATION_FIRST consumer would otherwise read the two live instances alone).
        app = dubbo_py.Application("chat-provider", registry, register_mode="interface")
        chatter = Chatter()
        server = app.start(chatter)
        chatter.address = server.address
        apps.append(app)
        addresses.add(server.address)
    dead = dead_provider_url()
    assert apps[0].registry is not None
    apps[0].registry.register(dead)
    try:
        yield registry, addresses, dead
    finally:
        for app in apps:
            app.close()


def test_blocking_client_streaming_and_bidi_calls(
    chat: tuple[str, set[str], URL], tmp_path: Path
) -> None:
    registry, live, dead = chat
    with dubbo_py.Application("shop", registry, cache_path=tmp_path / "c") as app:
        ref = app.reference_handle(
            chat_pb2_grpc.ChatStub, version="1.0.0", loadbalance="roundrobin", retries=2
        )
        wait_until(lambda: len(ref.directory.providers) == 3, 10, "3 providers")
        outcomes: list[Any] = []
        for i in range(6):
            try:
                outcomes.append(ref.stub.Collect(lines("a", "b", str(i)), timeout=5))
            except ClusterError as error:
                outcomes.append(error)
        errors = [o for o in outcomes if isinstance(o, ClusterError)]
        # The one call that met the dead provider failed (not replayed, although the reference
        # says failover with 2 retries), naming it; the quarantine kept the others away.
        assert len(errors) == 1, outcomes
        assert errors[0].tried == (dead.address,)
        assert errors[0].code() == grpc.StatusCode.UNAVAILABLE
        summaries = [o for o in outcomes if not isinstance(o, ClusterError)]
        assert {s.provider for s in summaries} == live
        assert all(s.count == 3 and s.joined.startswith("a b ") for s in summaries)

        echoed = list(ref.stub.Echo(lines("x", "y", "z"), timeout=5))
        assert [e.text for e in echoed] == ["X", "Y", "Z"]
        assert len({e.provider for e in echoed}) == 1 and echoed[0].provider in live


def test_asyncio_client_streaming_and_bidi_calls(
    chat: tuple[str, set[str], URL], tmp_path: Path
) -> None:
    registry, live, dead = chat

    async def agen(*texts: str) -> AsyncIterator[chat_pb2.Line]:
        for text in texts:
            yield chat_pb2.Line(text=text)

    async def scenario() -> None:
        app = dubbo_py.Application("shop", registry, cache_path=tmp_path / "c")
        try:
            stub = await app.reference_async(
                chat_pb2_grpc.ChatStub, version="1.0.0", loadbalance="roundrobin", retries=2
            )
            directory = app.references[-1].directory
            await asyncio.to_thread(
                wait_until, lambda: len(directory.providers) == 3, 10, "3 providers"
            )
            outcomes: list[Any] = []
            for i in range(6):
                try:
                    outcomes.append(await stub.Collect(agen("a", "b", str(i)), timeout=5))
                except ClusterError as error:
                    outcomes.append(error)
            errors = [o for o in outcomes if isinstance(o, ClusterError)]
            assert len(errors) == 1, outcomes
            assert errors[0].tried == (dead.address,)
            summaries = [o for o in outcomes if not isinstance(o, ClusterError)]
            assert {s.provider for s in summaries} == live
            assert all(s.count == 3 for s in summaries)
            # A plain iterator works as a request stream too, as with grpc.aio itself.
            echoed = [e async for e in stub.Echo(lines("x", "y"), timeout=5)]
            assert [e.text for e in echoed] == ["X", "Y"]
            assert echoed[0].provider in live
        finally:
            await app.aclose()

    asyncio.run(scenario())
