"""An overloaded provider, written as the attack: eight callers hammer a slow method; provider A
runs at most two calls at once (``executes=2``), provider B has room. A sheds the rest at once
with RESOURCE_EXHAUSTED and the shed marker; the consumer retries those on B although the
method is not idempotent, never quarantines A, and no call fails."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import grpc
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL
from tests.e2e.conftest import wait_until
from tests.support.load import Load
from tests.support.processes import ProviderProcess

CALLERS = 8
DELAY = "0.1"  # seconds each SayHello takes


def test_a_provider_over_its_executes_limit_sheds_and_the_calls_land_elsewhere(
    registry_address: str,
    providers: Callable[..., ProviderProcess],
    app: dubbo_py.Application,
) -> None:
    busy = providers("--executes", "2", "--delay", DELAY)
    roomy = providers("--delay", DELAY)
    ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0", timeout=5.0)
    wait_until(lambda: len(ref.directory.providers) == 2, 15, "2 providers")
    context = ref.contexts["SayHello"]
    inner = context.call
    shed: list[str] = []
    lock = threading.Lock()

    def counted(provider: URL, invocation: Invocation, timeout: float | None) -> Any:
        try:
            return inner(provider, invocation, timeout)
        except grpc.RpcError as error:
            with lock:
                shed.append(f"{provider.address} {error.code().name}")
            raise

    context.call = counted

    def call() -> str:
        return str(ref.stub.SayHello(greeter_pb2.HelloRequest(name="x")).provider)

    with Load(call, CALLERS, pause=0.0) as load:
        time.sleep(2.5)

    served = [s.provider for s in load.samples if not s.error]
    print(
        f"calls: {len(load.samples)}, failed: {len(load.errors())}, shed attempts: {len(shed)}, "
        f"served by the busy one: {served.count(busy.address)}, "
        f"by the other: {served.count(roomy.address)}"
    )
    assert load.errors() == []
    assert shed and set(shed) == {f"{busy.address} RESOURCE_EXHAUSTED"}
    assert served.count(busy.address) > 0 and served.count(roomy.address) > 0
    assert not ref.quarantine.contains(ref.directory.providers[0])
    assert len(ref.quarantine) == 0
