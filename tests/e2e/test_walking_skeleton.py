"""The walking skeleton end to end: real provider processes, a real registry, generated stubs."""

from __future__ import annotations

import collections
from collections.abc import Callable
from pathlib import Path

from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.errors import ClusterError
from tests.e2e.conftest import wait_until
from tests.support.processes import ProviderProcess

SERVICE = "demo.Greeter"


def _addresses(app: dubbo_py.Application) -> set[str]:
    assert app.registry is not None
    return {u.address for u in app.registry.lookup(SERVICE)}


def test_calls_spread_survive_kill9_and_return_after_restart(
    registry_address: str, providers: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    p1, p2 = providers(), providers()
    with dubbo_py.Application("shop", registry_address, cache_path=tmp_path / "c.json") as app:
        ref = app.reference_handle(
            greeter_pb2_grpc.GreeterStub, version="1.0.0", loadbalance="roundrobin", timeout=5.0
        )
        wait_until(lambda: len(ref.directory.providers) == 2, 10, "both providers")
        served: collections.Counter[str] = collections.Counter()
        for i in range(200):
            if i == 100:
                p1.kill()
            reply = ref.stub.SayHello(greeter_pb2.HelloRequest(name=f"n{i}"))
            served[reply.provider] += 1
        assert sum(served.values()) == 200
        assert served[p1.address] >= 40 and served[p2.address] >= 100, served

        # The crashed provider's ephemeral node goes with its session / lease.
        wait_until(lambda: p1.address not in _addresses(app), 15, "the dead provider's node")

        restarted = providers(port=p1.port)
        wait_until(
            lambda: restarted.address in {u.address for u in ref.directory.providers},
            10,
            "the restarted provider in the consumer's directory",
        )
        back = collections.Counter(
            ref.stub.SayHello(greeter_pb2.HelloRequest(name="again")).provider for _ in range(40)
        )
        assert back[restarted.address] > 0, back


def test_streaming_and_direct_registry_less_calls(
    registry_address: str, providers: Callable[..., ProviderProcess]
) -> None:
    p1 = providers()
    with dubbo_py.Application("direct-shop", registry=f"tri://{p1.address}") as app:
        greeter = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
        replies = list(greeter.SayHelloStream(greeter_pb2.HelloRequest(name="s", count=3)))
        assert [r.message for r in replies] == [f"Hello #{i}, s!" for i in range(3)]
        assert greeter.SayHello(greeter_pb2.HelloRequest(name="d")).provider == p1.address


def test_application_errors_are_not_retried(
    registry_address: str, providers: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    import grpc
    import pytest

    providers(), providers()
    with dubbo_py.Application("shop", registry_address, cache_path=tmp_path / "c.json") as app:
        greeter = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
        with pytest.raises(grpc.RpcError) as info:
            greeter.SayHello(greeter_pb2.HelloRequest(name="fail"))
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        # Raised as the provider's own error, not as a cluster error after retries.
        assert not isinstance(info.value, ClusterError)
