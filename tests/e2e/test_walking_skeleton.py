"""The walking skeleton end to end: real provider processes, a real registry, generated stubs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.errors import ClusterError
from tests.e2e.scenarios import kill9_and_restart
from tests.support.processes import ProviderProcess

SERVICE = "demo.Greeter"


def _addresses(app: dubbo_py.Application) -> set[str]:
    assert app.registry is not None
    return {u.address for u in app.registry.lookup(SERVICE)}


def test_calls_spread_survive_kill9_and_return_after_restart(
    registry_address: str, providers: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    with dubbo_py.Application("shop", registry_address, cache_path=tmp_path / "c.json") as app:
        # Gone from the registry itself, not only from the consumer's directory.
        kill9_and_restart(app, providers, gone=lambda address: address not in _addresses(app))


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
