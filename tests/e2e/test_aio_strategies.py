"""The asyncio consumer's cluster strategies and mocks against real provider processes.

Providers record every call they serve (``--record``), so what each strategy sent where is
read from the providers themselves. ZooKeeper only: the strategies do not depend on the registry.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.cluster.strategies.failback import FailbackQueue
from dubbo_py.errors import ClusterError
from tests.e2e.conftest import wait_until
from tests.support.processes import ProviderProcess
from tests.support.zookeeper import ZooKeeperServer

Providers = Callable[..., ProviderProcess]


@pytest.fixture
def registry_address(zookeeper: ZooKeeperServer) -> str:
    return f"zookeeper://{zookeeper.address}/aio-{uuid.uuid4().hex[:8]}"


class Recorded:
    """A provider process and the file it records its calls in."""

    def __init__(self, providers: Providers, path: Path, *args: str, port: int = 0) -> None:
        self.path = path
        self.process = providers("--record", str(path), *args, port=port)
        self.address = self.process.address

    def served(self, name: str) -> int:
        """How many calls named ``name`` this provider served."""
        if not self.path.exists():
            return 0
        lines = self.path.read_text(encoding="utf-8").splitlines()
        return sum(line.split("\t")[1] == name for line in lines)


def hello(name: str) -> greeter_pb2.HelloRequest:
    return greeter_pb2.HelloRequest(name=name)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def stub(app: dubbo_py.Application, count: int, **options: Any) -> Any:
    options.setdefault("version", "1.0.0")
    options.setdefault("loadbalance", "roundrobin")
    made = await app.reference_async(greeter_pb2_grpc.GreeterStub, **options)
    directory = app.references[-1].directory
    wait_until(lambda: len(directory.providers) == count, 15, f"{count} providers")
    return made


async def served_by_all(recorded: list[Recorded], name: str, n: int) -> None:
    """Wait until ``n`` providers served the call ``name`` (a fork may still be on its way)."""
    await asyncio.to_thread(
        wait_until,
        lambda: sum(r.served(name) > 0 for r in recorded) >= n,
        5,
        f"{n} providers to serve {name}",
    )


def test_asyncio_strategies_against_live_and_killed_providers(
    app: dubbo_py.Application, providers: Providers, tmp_path: Path
) -> None:
    recorded = [Recorded(providers, tmp_path / f"p{i}.log") for i in range(3)]
    everyone = {r.address for r in recorded}

    async def scenario() -> None:
        try:
            failfast = await stub(app, 3, cluster="failfast")
            failsafe = await stub(app, 3, cluster="failsafe")
            forking = await stub(app, 3, cluster="forking", forks=2)
            broadcast = await stub(app, 3, cluster="broadcast")
            forced = await stub(app, 3, mock='force:return {"message": "busy", "shard": 3}')

            # An application error is the provider's answer: failfast raises it as is, and
            # failsafe swallows it into an empty reply.
            with pytest.raises(grpc.RpcError) as info:
                await failfast.SayHello(hello("fail"))
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert not isinstance(info.value, ClusterError)
            assert await failsafe.SayHello(hello("fail")) == greeter_pb2.HelloReply()
            # forking reaches two distinct providers per call; broadcast all three.
            for _ in range(3):
                name = unique("fork")
                assert (await forking.SayHello(hello(name))).provider in everyone
                await served_by_all(recorded, name, 2)
                assert [r.served(name) for r in recorded].count(1) == 2
            name = unique("all")
            await broadcast.SayHello(hello(name))
            assert [r.served(name) for r in recorded] == [1, 1, 1]
            # A forced mock answers without calling anyone.
            name = unique("forced")
            reply = await forced.SayHello(hello(name))
            assert reply == greeter_pb2.HelloReply(message="busy", shard=3)
            assert [r.served(name) for r in recorded] == [0, 0, 0]

            dead = recorded[2]
            dead.process.kill()  # still registered for a while: a dead provider in the list
            # failfast: the call that meets it fails, naming it alone; the quarantine then keeps
            # the next calls away from it.
            outcomes: list[Any] = []
            for _ in range(9):
                try:
                    outcomes.append((await failfast.SayHello(hello("x"))).provider)
                except ClusterError as error:
                    outcomes.append(error)
            errors = [o for o in outcomes if isinstance(o, ClusterError)]
            assert len(errors) == 1, outcomes
            assert errors[0].tried == (dead.address,)
            assert errors[0].code() == grpc.StatusCode.UNAVAILABLE
            # broadcast fails naming it; forking and failsafe carry on.
            with pytest.raises(ClusterError) as failed:
                await broadcast.SayHello(hello(unique("all")))
            assert dead.address in failed.value.details()
            assert set(failed.value.tried) == everyone
            for _ in range(6):
                assert (await forking.SayHello(hello("x"))).provider != dead.address
                assert (await failsafe.SayHello(hello("x"))).provider != dead.address
        finally:
            await app.aclose()

    asyncio.run(scenario())


def test_asyncio_failback_retries_in_the_background_until_the_provider_is_back(
    app: dubbo_py.Application, providers: Providers, tmp_path: Path
) -> None:
    log = tmp_path / "only.log"
    only = Recorded(providers, log, "--version", "2.0.0")
    queue = FailbackQueue(period=0.2, max_attempts=50)

    async def scenario() -> None:
        try:
            greeter = await stub(app, 1, version="2.0.0", cluster="failback", failback=queue)
            assert (await greeter.SayHello(hello("now"))).provider == only.address
            only.process.kill()
            with pytest.raises(ClusterError) as failed:  # the caller learns it at once
                await greeter.SayHello(hello("later"))
            assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
            assert only.served("later") == 0
            back = Recorded(providers, log, "--version", "2.0.0", port=only.process.port)
            # Retried by the queue's thread, over the blocking channels.
            await asyncio.to_thread(
                wait_until, lambda: back.served("later") == 1, 15, "the retried call"
            )
            assert queue.succeeded == 1
        finally:
            await app.aclose()

    asyncio.run(scenario())


def test_asyncio_fail_mock_and_failsafe_answer_for_a_dead_service(
    app: dubbo_py.Application, providers: Providers, tmp_path: Path
) -> None:
    live = Recorded(providers, tmp_path / "live.log")
    dead = Recorded(providers, tmp_path / "dead.log", "--version", "2.0.0")
    dead.process.kill()

    async def scenario() -> None:
        try:
            on_live = await stub(app, 1, mock='fail:return {"message": "later"}')
            assert (await on_live.SayHello(hello("ada"))).message == "Hello, ada!"
            with pytest.raises(grpc.RpcError) as info:  # an application error is not mocked
                await on_live.SayHello(hello("fail"))
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            on_dead = await stub(app, 1, version="2.0.0", mock='fail:return {"message": "later"}')
            assert await on_dead.SayHello(hello("x")) == greeter_pb2.HelloReply(message="later")
            assert live.served("ada") == 1
            # A streaming method answers with a stream: the mock's one reply, or failsafe's none.
            streamed = greeter_pb2.HelloRequest(name="s", count=3)
            assert [r.message async for r in on_dead.SayHelloStream(streamed)] == ["later"]
            failsafe = await stub(app, 1, version="2.0.0", cluster="failsafe")
            assert [r async for r in failsafe.SayHelloStream(streamed)] == []
            assert await failsafe.SayHello(hello("x")) == greeter_pb2.HelloReply()
        finally:
            await app.aclose()

    asyncio.run(scenario())
