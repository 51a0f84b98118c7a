"""The consumer stack's extension point: filters around each call and each attempt, in both
flavours, against real gRPC providers on loopback (direct ``tri://`` addresses, no registry)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.consumer.filters import ConsumerFilters
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL


@dubbo_py.service(version="1.0.0")
class Greeter(greeter_pb2_grpc.GreeterServicer):
    def __init__(self) -> None:
        self.address = ""

    def SayHello(self, request: Any, context: Any) -> Any:
        return greeter_pb2.HelloReply(message=f"Hello, {request.name}!", provider=self.address)


class Refused(grpc.RpcError):
    """What a provider that cannot be reached raises."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "refused by the test"


@pytest.fixture(scope="module")
def addresses() -> Iterator[list[str]]:
    """Two Greeter providers on loopback."""
    app = dubbo_py.Application("filters-provider", "tri://127.0.0.1:1")
    found = []
    for _ in range(2):
        greeter = Greeter()
        server = app.start(greeter, port=0, host="127.0.0.1")
        greeter.address = server.address
        found.append(server.address)
    yield found
    app.close()


def consumer(addresses: list[str], filters: ConsumerFilters) -> dubbo_py.Application:
    return dubbo_py.Application("filters-shop", "tri://" + ",".join(addresses), filters=filters)


def hello(name: str) -> Any:
    return greeter_pb2.HelloRequest(name=name)


class Log:
    """Filters of both kinds and flavours that write what they see into one list."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.refuse_first = False

    def call(self, name: str) -> Callable[[Invocation, Any], Any]:
        def filter_(invocation: Invocation, proceed: Callable[[Invocation], Any]) -> Any:
            self.events.append(f"{name}>{invocation.method}")
            try:
                return proceed(invocation)
            finally:
                self.events.append(f"{name}<")

        return filter_

    def async_call(self, name: str) -> Callable[[Invocation, Any], Awaitable[Any]]:
        async def filter_(invocation: Invocation, proceed: Any) -> Any:
            self.events.append(f"{name}>{invocation.method}")
            try:
                return await proceed(invocation)
            finally:
                self.events.append(f"{name}<")

        return filter_

    def attempt(
        self, provider: URL, invocation: Invocation, timeout: float | None, proceed: Any
    ) -> Any:
        self._attempted(provider)
        return proceed(provider, invocation, timeout)

    async def async_attempt(
        self, provider: URL, invocation: Invocation, timeout: float | None, proceed: Any
    ) -> Any:
        self._attempted(provider)
        return await proceed(provider, invocation, timeout)

    def _attempted(self, provider: URL) -> None:
        self.events.append(f"attempt {provider.address}")
        if self.refuse_first:
            self.refuse_first = False
            raise Refused()

    def filters(self) -> tuple[ConsumerFilters, ConsumerFilters]:
        """(the application's, the reference's)."""
        return (
            ConsumerFilters(calls=(self.call("app"),), async_calls=(self.async_call("app"),)),
            ConsumerFilters(
                calls=(self.call("ref"),),
                attempts=(self.attempt,),
                async_calls=(self.async_call("ref"),),
                async_attempts=(self.async_attempt,),
            ),
        )


def test_filters_wrap_each_call_and_each_attempt_application_outermost(
    addresses: list[str],
) -> None:
    log = Log()
    outer, inner = log.filters()
    with consumer(addresses, outer) as app:
        ref = app.reference_handle(
            greeter_pb2_grpc.GreeterStub, version="1.0.0", filters=inner, check=0
        )
        reply = ref.stub.SayHello(hello("ada"))
        assert reply.message == "Hello, ada!"
        assert log.events == [
            "app>SayHello",
            "ref>SayHello",
            f"attempt {reply.provider}",
            "ref<",
            "app<",
        ]
        # A failover retry is one more attempt inside the same call.
        log.events.clear()
        log.refuse_first = True
        reply = ref.stub.SayHello(hello("bob"))
        attempts = [e for e in log.events if e.startswith("attempt")]
        assert len(attempts) == 2 and attempts[1] == f"attempt {reply.provider}"
        assert [e for e in log.events if not e.startswith("attempt")] == [
            "app>SayHello",
            "ref>SayHello",
            "ref<",
            "app<",
        ]


def test_asyncio_filters_wrap_each_call_and_each_attempt(addresses: list[str]) -> None:
    log = Log()
    outer, inner = log.filters()

    async def scenario() -> None:
        app = consumer(addresses, outer)
        try:
            ref = await app.reference_handle_async(
                greeter_pb2_grpc.GreeterStub, version="1.0.0", filters=inner, check=0
            )
            reply = await ref.stub.SayHello(hello("ada"))
            assert log.events == [
                "app>SayHello",
                "ref>SayHello",
                f"attempt {reply.provider}",
                "ref<",
                "app<",
            ]
            log.events.clear()
            log.refuse_first = True
            reply = await ref.stub.SayHello(hello("bob"))
            assert reply.message == "Hello, bob!"
            assert len([e for e in log.events if e.startswith("attempt")]) == 2
        finally:
            await app.aclose()

    asyncio.run(scenario())


def test_a_filter_may_answer_without_calling_a_provider(addresses: list[str]) -> None:
    def cached(invocation: Invocation, proceed: Any) -> Any:
        if invocation.request.name == "cached":
            return greeter_pb2.HelloReply(message="from the cache")
        return proceed(invocation)

    with consumer(addresses, ConsumerFilters(calls=(cached,))) as app:
        stub = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0", check=0)
        assert stub.SayHello(hello("cached")).message == "from the cache"
        assert stub.SayHello(hello("ada")).message == "Hello, ada!"


def test_a_forced_mock_answers_outside_the_filters_as_in_dubbo(addresses: list[str]) -> None:
    log = Log()
    outer, inner = log.filters()
    with consumer(addresses, outer) as app:
        stub = app.reference_handle(
            greeter_pb2_grpc.GreeterStub,
            version="1.0.0",
            filters=inner,
            check=0,
            mock='force:return {"message": "degraded"}',
        ).stub
        assert stub.SayHello(hello("ada")).message == "degraded"
        assert log.events == []


class Hooked:
    """A call filter and an attempt filter with plan hooks, writing what they see (filter or
    hook) into one list."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.events: list[str] = []

    def __call__(self, invocation: Invocation, proceed: Any) -> Any:
        self.events.append(f"{self.name} filter")
        return proceed(invocation)

    def attempt(
        self, provider: URL, invocation: Invocation, timeout: float | None, proceed: Any
    ) -> Any:
        self.events.append(f"{self.name} attempt filter")
        return proceed(provider, invocation, timeout)

    def plan_hook(self, method: str) -> Any:
        events, name = self.events, self.name

        class Hook:
            def declines(self) -> bool:
                return False

            def start(self) -> str:
                events.append(f"{name} start {method}")
                return name

            def finish(self, token: str, error: BaseException | None) -> None:
                events.append(f"{token} finish {'ok' if error is None else 'error'}")

        return Hook()


class HookedAttempt:
    def __init__(self, events: list[str]) -> None:
        self.events = events

    def __call__(
        self, provider: URL, invocation: Invocation, timeout: float | None, proceed: Any
    ) -> Any:
        self.events.append("attempt filter")
        return proceed(provider, invocation, timeout)

    def plan_hook(self, method: str) -> Any:
        return lambda provider: self.events.append(f"attempt hook {method}")


def test_filters_with_plan_hooks_keep_the_fast_path_in_stack_order(
    addresses: list[str],
) -> None:
    outer, inner = Hooked("outer"), Hooked("inner")
    events = outer.events
    inner.events = events
    filters = ConsumerFilters(calls=(outer, inner), attempts=(HookedAttempt(events),))
    with consumer(addresses, filters) as app:
        stub = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0", check=0)
        assert stub.SayHello(hello("ada")).message == "Hello, ada!"  # compiles the plan
        assert events == ["outer filter", "inner filter", "attempt filter"]
        events.clear()
        assert stub.SayHello(hello("bob")).message == "Hello, bob!"
        assert stub.SayHello._plan is not None
    assert events == [
        "outer start SayHello",
        "inner start SayHello",
        "attempt hook SayHello",
        "inner finish ok",
        "outer finish ok",
    ]


def test_one_filter_without_a_plan_hook_turns_the_fast_path_off(addresses: list[str]) -> None:
    hooked = Hooked("hooked")

    def plain(invocation: Invocation, proceed: Any) -> Any:
        hooked.events.append("plain filter")
        return proceed(invocation)

    with consumer(addresses, ConsumerFilters(calls=(hooked, plain))) as app:
        stub = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0", check=0)
        for name in ("ada", "bob"):
            stub.SayHello(hello(name))
        assert stub.SayHello._plan is None
    assert hooked.events == ["hooked filter", "plain filter"] * 2
