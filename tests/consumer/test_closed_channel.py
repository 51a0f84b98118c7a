"""A call made on a provider channel that closed under it is a transport failure, whichever of
grpcio's two wordings says so: it goes to another provider instead of reaching the caller as a
bare ``ValueError``.

grpcio says "Cannot invoke RPC on closed channel!" when the channel was closed before the call,
and "Cannot invoke RPC: Channel closed!" when it closed while the call was being set up (seen
when an application closed under calls in flight). The errors here are the ones grpcio raises.
"""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc

from dubbo_py.call_errors import is_closed_channel
from dubbo_py.cluster.strategies.failover import first_attempt
from dubbo_py.consumer.invoker import ChannelPool, MethodInvoker
from dubbo_py.consumer.method import StubMethod
from dubbo_py.errors import ProviderUnavailable
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

PROVIDER = URL.parse("tri://127.0.0.1:1/demo.Greeter?interface=demo.Greeter")
SAY_HELLO = StubMethod(
    "/demo.Greeter/SayHello",
    greeter_pb2.HelloRequest.SerializeToString,
    greeter_pb2.HelloReply.FromString,
)


def _closed_channel_errors() -> list[ValueError]:
    """The two ValueErrors grpcio raises for a call on a closed channel."""
    channel = grpc.insecure_channel("127.0.0.1:1")
    stub = greeter_pb2_grpc.GreeterStub(channel)
    channel.close()
    found: list[ValueError] = []
    for call in (stub.SayHello, stub.SayHello.future):
        try:
            call(greeter_pb2.HelloRequest(name="x"), timeout=1)
        except ValueError as exc:
            found.append(exc)
    return found


def test_both_of_grpcios_closed_channel_errors_are_recognised() -> None:
    errors = _closed_channel_errors()
    assert sorted(str(e) for e in errors) == [
        "Cannot invoke RPC on closed channel!",
        "Cannot invoke RPC: Channel closed!",
    ]
    assert all(is_closed_channel(e) for e in errors)
    assert not is_closed_channel(ValueError("invalid literal for int() with base 10: 'x'"))
    assert not is_closed_channel(RuntimeError("Cannot invoke RPC: Channel closed!"))


@pytest.mark.parametrize("wording", [0, 1])
def test_the_invoker_turns_a_closed_channel_into_unavailable(wording: int) -> None:
    error = _closed_channel_errors()[wording]
    invoker = MethodInvoker(ChannelPool(), SAY_HELLO)

    def closed(*_args: Any, **_kwargs: Any) -> Any:
        raise error

    # The provider's cached call, its channel closed under it.
    invoker._targets[PROVIDER.address] = (closed, ())
    with pytest.raises(ProviderUnavailable) as info:
        invoker(PROVIDER, Invocation("demo.Greeter", "SayHello", greeter_pb2.HelloRequest()), 1.0)
    assert info.value.code() is grpc.StatusCode.UNAVAILABLE
    # The stale call is forgotten: the next call opens the provider's channel again.
    assert PROVIDER.address not in invoker._targets


def test_a_planned_call_whose_channel_closed_mid_set_up_goes_to_the_provider_call() -> None:
    error = _closed_channel_errors()[1]  # "Cannot invoke RPC: Channel closed!"

    def direct(*_args: Any, **_kwargs: Any) -> Any:
        raise error

    answered: list[str] = []

    class Context:
        budget = None
        outliers = None
        service = "demo.Greeter"

        @staticmethod
        def call(provider: URL, invocation: Invocation, timeout: float | None) -> str:
            answered.append(provider.address)
            return "answer"

    response = first_attempt(
        Context(),  # type: ignore[arg-type]
        PROVIDER,
        "SayHello",
        greeter_pb2.HelloRequest(),
        1.0,
        direct=direct,
    )
    assert response == "answer"
    assert answered == [PROVIDER.address]
