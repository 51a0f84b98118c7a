"""Closing an application under traffic costs no call: the calls in flight finish, the calls
after are refused with a clear error, and the wait is bounded.

Real provider processes on loopback (each SayHello takes ``--delay`` seconds, so calls are in
flight when the application closes), the embedded registry, blocking and asyncio references.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from tests.support.processes import ProviderProcess


@dataclass(frozen=True)
class Outcome:
    """One call: when it started and ended (monotonic), and its status."""

    started: float
    ended: float
    status: str
    details: str


def _outcome(started: float, exc: BaseException | None) -> Outcome:
    if exc is None:
        return Outcome(started, time.monotonic(), "OK", "")
    assert isinstance(exc, grpc.RpcError), f"not a gRPC error: {exc!r}"
    return Outcome(started, time.monotonic(), exc.code().name, str(exc.details()))  # type: ignore[attr-defined]


@pytest.fixture
def registry(tmp_path: Path) -> str:
    return f"sqlite://{tmp_path}/registry.db"


@pytest.fixture
def slow_providers(registry: str) -> Iterator[list[ProviderProcess]]:
    providers = [ProviderProcess(registry, "--delay", "0.4").start() for _ in range(2)]
    yield providers
    for p in providers:
        p.kill()


def test_closing_under_blocking_calls_lets_the_calls_in_flight_finish(
    registry: str, slow_providers: list[ProviderProcess], tmp_path: Path
) -> None:
    app = dubbo_py.Application("shop", registry, cache_path=tmp_path / "shop.json")
    stub = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
    outcomes: list[Outcome] = []
    lock = threading.Lock()

    def call_until_refused(n: int) -> None:
        while True:
            started = time.monotonic()
            try:
                stub.SayHello(
                    greeter_pb2.HelloRequest(name=f"c{n}"), metadata=(("tenant", f"t{n % 2}"),)
                )
            except grpc.RpcError as exc:
                with lock:
                    outcomes.append(_outcome(started, exc))
                return
            with lock:
                outcomes.append(_outcome(started, None))

    threads = [threading.Thread(target=call_until_refused, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    time.sleep(1.5)  # a few rounds of 0.4 s calls: four are always in flight
    closing = time.monotonic()
    app.close()
    for t in threads:
        t.join(10)

    statuses = {o.status for o in outcomes}
    assert statuses == {"OK", "UNAVAILABLE"}, outcomes
    refused = [o for o in outcomes if o.status == "UNAVAILABLE"]
    assert len(refused) == 4  # each thread's first call after the close, and nothing else
    assert all("the application is closed" in o.details for o in refused)
    # The calls running when close() began ended afterwards, answered.
    in_flight = [o for o in outcomes if o.started < closing < o.ended and o.status == "OK"]
    assert len(in_flight) == 4


def test_closing_waits_no_longer_than_asked(registry: str, tmp_path: Path) -> None:
    provider = ProviderProcess(registry, "--delay", "30").start()
    try:
        app = dubbo_py.Application("shop", registry, cache_path=tmp_path / "shop.json")
        stub = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
        outcomes: list[Outcome] = []

        def call() -> None:
            started = time.monotonic()
            try:
                stub.SayHello(greeter_pb2.HelloRequest(name="slow"))
            except grpc.RpcError as exc:
                outcomes.append(_outcome(started, exc))
            else:
                outcomes.append(_outcome(started, None))

        caller = threading.Thread(target=call)
        caller.start()
        deadline = time.monotonic() + 10
        while not app.references[0].calls_in_flight() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert app.references[0].calls_in_flight() == 1
        app.close(wait=0.3)
        caller.join(10)
    finally:
        provider.kill()
    # Still running after the wait: cancelled, long before the provider's 30 s answer.
    assert [o.status for o in outcomes] == ["CANCELLED"]


def test_closing_an_asyncio_application_lets_its_calls_finish(
    registry: str, slow_providers: list[ProviderProcess], tmp_path: Path
) -> None:
    async def main() -> list[Outcome]:
        app = dubbo_py.Application("shop", registry, cache_path=tmp_path / "shop.json")
        stub = await app.reference_async(greeter_pb2_grpc.GreeterStub, version="1.0.0")
        outcomes: list[Outcome] = []

        async def call_until_refused(n: int) -> None:
            while True:
                started = time.monotonic()
                try:
                    await stub.SayHello(greeter_pb2.HelloRequest(name=f"a{n}"))
                except grpc.RpcError as exc:
                    outcomes.append(_outcome(started, exc))
                    return
                outcomes.append(_outcome(started, None))

        tasks = [asyncio.create_task(call_until_refused(n)) for n in range(4)]
        await asyncio.sleep(1.5)
        closing = time.monotonic()
        await app.aclose()
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
        outcomes.append(Outcome(closing, closing, "CLOSING", ""))
        return outcomes

    outcomes = asyncio.run(main())
    closing = next(o.started for o in outcomes if o.status == "CLOSING")
    calls = [o for o in outcomes if o.status != "CLOSING"]
    assert {o.status for o in calls} == {"OK", "UNAVAILABLE"}, calls
    refused = [o for o in calls if o.status == "UNAVAILABLE"]
    assert len(refused) == 4
    assert all("the application is closed" in o.details for o in refused)
    in_flight = [o for o in calls if o.started < closing < o.ended and o.status == "OK"]
    assert len(in_flight) == 4


def test_a_with_call_refused_for_its_arguments_is_not_left_in_flight(
    registry: str, tmp_path: Path
) -> None:
    # A with_call whose gRPC arguments are refused (TypeError) never ran: it must not stay
    # counted, or closing the application would wait its whole shutdown wait for it.
    provider = ProviderProcess(registry).start()
    try:

        async def asyncio_side() -> int:
            app = dubbo_py.Application("shop-aio", registry, cache_path=tmp_path / "aio.json")
            stub = await app.reference_async(greeter_pb2_grpc.GreeterStub, version="1.0.0")
            await stub.SayHello(greeter_pb2.HelloRequest(name="first"))
            with pytest.raises(TypeError, match="compression"):
                await stub.SayHello.with_call(
                    greeter_pb2.HelloRequest(name="bad"),
                    compression="gzip",  # type: ignore[arg-type]
                )
            left = app.references[0].calls_in_flight()
            await app.aclose()
            return left

        with dubbo_py.Application("shop", registry, cache_path=tmp_path / "shop.json") as app:
            stub = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
            stub.SayHello(greeter_pb2.HelloRequest(name="first"))
            with pytest.raises(TypeError, match="wait_for_ready"):
                stub.SayHello.with_call(
                    greeter_pb2.HelloRequest(name="bad"),
                    wait_for_ready="yes",  # type: ignore[arg-type]
                )
            assert app.references[0].calls_in_flight() == 0
        assert asyncio.run(asyncio_side()) == 0
    finally:
        provider.kill()
