"""Call plans: a stub's plain calls under failover take a compiled plan, and get exactly what
the failover strategy gives -- the same provider, call after call, or the same error. Both
flavours: every test runs on a blocking stub and on an asyncio one.

Only the gRPC call itself is faked (the method invoker's multicallables for the plan, a
provider call for the strategy); chain, routers, balancers, budget and quarantine are real.
End-to-end tests against real provider processes run every stub call through plans as well.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc
from hypothesis import given, settings
from hypothesis import strategies as st

from dubbo_py.cluster.budget import RetryBudget
from dubbo_py.cluster.loadbalance import (
    LOADBALANCE_NAMES,
    RoundRobinLoadBalance,
    get_loadbalance,
)
from dubbo_py.cluster.loadbalance.base import LoadBalance
from dubbo_py.cluster.method_settings import MethodSettings, SettingsTable
from dubbo_py.cluster.quarantine import Quarantine
from dubbo_py.cluster.stats import CallStats
from dubbo_py.cluster.strategies.failover import failover, failover_async
from dubbo_py.cluster.support.context import ClusterContext
from dubbo_py.consumer.channel import AsyncClusterChannel, ClusterChannel
from dubbo_py.consumer.invoker import (
    AsyncChannelPool,
    AsyncMethodInvoker,
    ChannelPool,
    MethodInvoker,
)
from dubbo_py.consumer.method import BoundMethod, StubMethod
from dubbo_py.errors import ClusterError
from dubbo_py.invocation import Invocation
from dubbo_py.router.chain import BoundChain, RouterChain
from dubbo_py.router.condition import ConditionRouter, parse_rule
from dubbo_py.router.condition.router import ConditionRuleSet
from dubbo_py.router.factory import builtin_routers
from dubbo_py.router.snapshot import Snapshot
from dubbo_py.url import URL

SERVICE = "demo.Greeter"
CONSUMER = URL.parse("consumer://10.0.0.9/demo.Greeter?application=shop")

FLAVOURS = ("blocking", "asyncio")
_loop: asyncio.AbstractEventLoop | None = None


@pytest.fixture(scope="module", autouse=True)
def event_loop_for_asyncio_stubs() -> Iterator[None]:
    """The loop the asyncio stubs' calls run on (one for the module, closed after it)."""
    global _loop
    _loop = asyncio.new_event_loop()
    yield
    _loop.close()
    _loop = None


class Unavailable(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "connection refused"


class Routes:
    """A directory stand-in whose chain a test swaps, as a notification does."""

    def __init__(self, chain: BoundChain) -> None:
        self.chain = chain


def bind(providers: tuple[URL, ...], rules: Sequence[str] = (), as_set: bool = False) -> BoundChain:
    routers: list[Any] = [
        ConditionRouter(parse_rule(rule), f"rule{i}", 140 + i) for i, rule in enumerate(rules)
    ]
    if as_set and routers:
        routers = [ConditionRuleSet("set", 150, tuple(routers))]
    return RouterChain([*builtin_routers(), *routers]).bind(Snapshot(providers), CONSUMER)


class Client:
    """A stub on a cluster channel of the ``flavour`` (blocking or asyncio) whose provider
    calls are fakes: ``down`` addresses fail with UNAVAILABLE; every attempt is recorded, and
    whether it went through the plan (straight to the multicallable) or the strategy (the
    invoker)."""

    def __init__(
        self,
        routes: Routes,
        balancer: LoadBalance,
        flavour: str = "blocking",
        *,
        table: SettingsTable | None = None,
        quarantine: Quarantine | None = None,
        budget: RetryBudget | None = None,
    ) -> None:
        self.attempts: list[tuple[str, str]] = []
        self.down: set[str] = set()
        self.contexts: list[ClusterContext] = []
        self.asyncio = flavour == "asyncio"
        client = self

        class Invoker(MethodInvoker):
            def __call__(self, provider: URL, invocation: Invocation, timeout: float | None) -> Any:
                return client.answer("strategy", provider.address)

        class AsyncInvoker(AsyncMethodInvoker):
            async def __call__(
                self, provider: URL, invocation: Invocation, timeout: float | None
            ) -> Any:
                return client.answer("strategy", provider.address)

        invokers: list[Any] = []

        class Binder:
            def bind(self, method: StubMethod) -> BoundMethod[Any]:
                if client.asyncio:
                    invoker: Any = AsyncInvoker(AsyncChannelPool(), method)
                    strategy: Any = failover_async
                else:
                    invoker, strategy = Invoker(ChannelPool(), method), failover
                ctx = ClusterContext(
                    SERVICE,
                    routes,
                    balancer,
                    invoker,
                    settings=table if table is not None else SettingsTable(),
                    quarantine=quarantine,
                    budget=budget,
                )
                client.contexts.append(ctx)
                invokers.append(invoker)
                return BoundMethod(method, ctx, partial(strategy, ctx), plannable=True)

        channel = AsyncClusterChannel(Binder()) if self.asyncio else ClusterChannel(Binder())
        self.stub = greeter_pb2_grpc.GreeterStub(channel)
        self.invoker = invokers[0]
        self.routes = routes

    def say_hello(self, request: Any, **options: Any) -> Any:
        """``stub.SayHello(request, **options)``, run to its end on the asyncio flavour."""
        made = self.stub.SayHello(request, **options)
        if not self.asyncio:
            return made
        assert _loop is not None
        return _loop.run_until_complete(made)

    def serve(self, providers: tuple[URL, ...]) -> None:
        """Give every provider a fake multicallable (what the plan calls): in both of the
        invoker's dicts, as its own calls fill them (a plan without filter hooks calls the
        bare one, with its headers: ``targets``)."""
        for url in providers:
            self.invoker.multicallables[url.address] = self._fake(url.address)
            self.invoker.targets[url.address] = (self._fake(url.address), ())

    def _fake(self, address: str) -> Callable[..., Any]:
        if self.asyncio:

            async def awaited(
                request: Any, timeout: float | None = None, metadata: Any = None
            ) -> Any:
                return self.answer("plan", address)

            return awaited
        return lambda request, timeout=None, metadata=None: self.answer("plan", address)

    def answer(self, path: str, address: str) -> Any:
        self.attempts.append((path, address))
        if address in self.down:
            raise Unavailable()
        return greeter_pb2.HelloReply(provider=address)


class Reference:
    """The failover strategy itself over the same chain, with its own balancer."""

    def __init__(self, routes: Routes, balancer: LoadBalance) -> None:
        self.ctx = ClusterContext(SERVICE, routes, balancer, self._call)

    def _call(self, provider: URL, invocation: Invocation, timeout: float | None) -> Any:
        return greeter_pb2.HelloReply(provider=provider.address)

    def say_hello(self, request: Any) -> Any:
        return failover(self.ctx, Invocation(SERVICE, "SayHello", request))


def outcome(call: Callable[[], Any]) -> tuple[str, str]:
    try:
        return "ok", call().provider
    except ClusterError as exc:
        return "error", str(exc)


WHEN = ["arguments[0] = vip", "arguments[0] = v*", "arguments[0] != bob", "method = SayHello"]
THEN = ["host = 10.0.0.1", "host != 10.0.0.1", "region = a", "port = 1", ""]

provider_lists = st.lists(
    st.builds(
        lambda host, port, region, weight: URL(
            "tri",
            host,
            port,
            SERVICE,
            parameters={"region": region, "weight": str(weight)},
        ),
        st.sampled_from(["10.0.0.1", "10.0.0.2", "10.0.0.3"]),
        st.sampled_from([20880, 50051]),
        st.sampled_from(["a", "b"]),
        st.sampled_from([100, 100, 50, 0]),
    ),
    min_size=0,
    max_size=6,
    unique_by=lambda url: url.address,
)


@pytest.mark.parametrize("flavour", FLAVOURS)
@settings(max_examples=120, deadline=None)
@given(
    providers=provider_lists,
    rules=st.lists(st.tuples(st.sampled_from(WHEN), st.sampled_from(THEN)), max_size=3),
    as_set=st.booleans(),
    balancer=st.sampled_from(LOADBALANCE_NAMES),
    names=st.lists(st.sampled_from(["vip", "vic", "bob", ""]), min_size=1, max_size=12),
)
def test_a_planned_call_reaches_what_failover_reaches(
    flavour: str,
    providers: list[URL],
    rules: list[tuple[str, str]],
    as_set: bool,
    balancer: str,
    names: list[str],
) -> None:
    texts = [f"{when} => {then}" for when, then in rules]
    chain = bind(tuple(providers), texts, as_set)
    seed = random.randrange(2**32)

    def make() -> LoadBalance:
        # Every balancer, each side with its own statistics and an equally seeded generator:
        # the random and round-robin ones run as the plan's pickers, the others through
        # ``balancer.select`` from the plan (on the express path too).
        return get_loadbalance(balancer, stats=CallStats(), rng=random.Random(seed))

    client = Client(Routes(chain), make(), flavour)
    client.serve(tuple(providers))
    reference = Reference(Routes(chain), make())
    for name in names:
        request = greeter_pb2.HelloRequest(name=name)
        expected = outcome(lambda r=request: reference.say_hello(r))
        assert outcome(lambda r=request: client.say_hello(r)) == expected
    # The first call compiled the plan; every later attempt went straight to a multicallable.
    assert all(path == "plan" for path, _ in client.attempts[1:])


def urls(n: int) -> tuple[URL, ...]:
    return tuple(URL.parse(f"tri://10.0.0.{i}:50051/{SERVICE}") for i in range(1, n + 1))


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_plain_calls_take_the_plan_and_others_the_strategy(flavour: str) -> None:
    providers = urls(3)
    client = Client(Routes(bind(providers)), RoundRobinLoadBalance(), flavour)
    client.serve(providers)
    hello = greeter_pb2.HelloRequest(name="x")
    for _ in range(4):
        client.say_hello(hello)
    # The first call compiles the plan (and runs through the strategy); the rest use it.
    assert [path for path, _ in client.attempts] == ["strategy", "plan", "plan", "plan"]
    client.say_hello(hello, metadata=[("x-trace", "1")])
    assert client.attempts[-1][0] == "strategy"
    # The rotation is one rotation whichever path a call took.
    assert [address for _, address in client.attempts] == [
        p.address for p in (*providers, providers[0], providers[1])
    ]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_new_chain_is_used_by_the_next_call(flavour: str) -> None:
    first, second = urls(2), urls(3)[2:]
    client = Client(Routes(bind(first)), RoundRobinLoadBalance(), flavour)
    client.serve(urls(3))
    hello = greeter_pb2.HelloRequest(name="x")
    for _ in range(3):
        client.say_hello(hello)
    client.routes.chain = bind(second)
    assert client.say_hello(hello).provider == second[0].address
    assert client.say_hello(hello).provider == second[0].address
    assert client.attempts[-1] == ("plan", second[0].address)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_rule_reading_the_request_is_decided_in_the_plan(flavour: str) -> None:
    providers = urls(3)
    chain = bind(providers, ["arguments[0] = vip => host = 10.0.0.2"])
    client = Client(Routes(chain), RoundRobinLoadBalance(), flavour)
    client.serve(providers)
    for _ in range(3):
        assert client.say_hello(greeter_pb2.HelloRequest(name="vip")).provider == (
            providers[1].address
        )
    assert client.attempts[-1][0] == "plan"
    others = {client.say_hello(greeter_pb2.HelloRequest(name="bob")).provider for _ in range(3)}
    assert others == {p.address for p in providers}


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_forced_rule_leaving_no_provider_names_it(flavour: str) -> None:
    providers = urls(2)
    chain = RouterChain(
        [
            *builtin_routers(),
            ConditionRouter(parse_rule("arguments[0] = vip => host = 10.9.9.9"), "vip", 140, True),
        ]
    ).bind(Snapshot(providers), CONSUMER)
    client = Client(Routes(chain), RoundRobinLoadBalance(), flavour)
    client.serve(providers)
    client.say_hello(greeter_pb2.HelloRequest(name="bob"))
    with pytest.raises(ClusterError, match="after routing by vip"):
        client.say_hello(greeter_pb2.HelloRequest(name="vip"))


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_failed_first_attempt_fails_over_and_quarantines(flavour: str) -> None:
    providers = urls(3)
    quarantine = Quarantine(lambda _url: False, interval=60)
    client = Client(
        Routes(bind(providers)), RoundRobinLoadBalance(), flavour, quarantine=quarantine
    )
    client.serve(providers)
    hello = greeter_pb2.HelloRequest(name="x")
    client.say_hello(hello)  # compiles the plan; goes to 10.0.0.1
    client.down.add(providers[1].address)
    reply = client.say_hello(hello)  # the plan picks 10.0.0.2, which is down
    assert reply.provider != providers[1].address
    assert client.attempts[-2] == ("plan", providers[1].address)
    assert providers[1].address in quarantine.addresses
    # While a provider is quarantined calls take the strategy, which skips it.
    served = {client.say_hello(hello).provider for _ in range(6)}
    assert providers[1].address not in served
    assert {path for path, _ in client.attempts[-6:]} == {"strategy"}


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_sticky_methods_and_setting_changes_leave_the_plan(flavour: str) -> None:
    providers = urls(3)
    table = SettingsTable()
    client = Client(Routes(bind(providers)), RoundRobinLoadBalance(), flavour, table=table)
    client.serve(providers)
    hello = greeter_pb2.HelloRequest(name="x")
    client.say_hello(hello)
    client.say_hello(hello)
    assert client.attempts[-1][0] == "plan"
    table["SayHello"] = MethodSettings(sticky=True)
    served = [client.say_hello(hello).provider for _ in range(4)]
    assert len(set(served)) == 1
    assert {path for path, _ in client.attempts[-4:]} == {"strategy"}


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_swapped_balancer_is_used_by_the_next_call(flavour: str) -> None:
    providers = urls(2)
    client = Client(Routes(bind(providers)), RoundRobinLoadBalance(), flavour)
    client.serve(providers)
    hello = greeter_pb2.HelloRequest(name="x")
    client.say_hello(hello)
    client.say_hello(hello)

    class Second(LoadBalance):
        name = "second"

        def select(self, candidates: tuple[URL, ...], invocation: Invocation, **_: Any) -> URL:
            return candidates[1]

    for ctx in client.contexts:
        ctx.balancer = Second()
    assert {client.say_hello(hello).provider for _ in range(3)} == {providers[1].address}


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_planned_calls_count_in_the_retry_budget(flavour: str) -> None:
    providers = urls(2)
    budget = RetryBudget(ratio=0.5, min_retries_per_second=0)
    client = Client(Routes(bind(providers)), RoundRobinLoadBalance(), flavour, budget=budget)
    client.serve(providers)
    hello = greeter_pb2.HelloRequest(name="x")
    for _ in range(10):
        client.say_hello(hello)
    assert [path for path, _ in client.attempts].count("plan") == 9
    assert budget.balance() == 5


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_plan_picks_again_after_the_rotation_moved_to_other_candidates(flavour: str) -> None:
    providers = urls(3)

    class Counting(RoundRobinLoadBalance):
        selects = 0

        def select(self, candidates: tuple[URL, ...], invocation: Invocation, **kw: Any) -> URL:
            Counting.selects += 1
            return super().select(candidates, invocation, **kw)

    balancer = Counting()
    client = Client(Routes(bind(providers)), balancer, flavour)
    client.serve(providers)
    hello = greeter_pb2.HelloRequest(name="x")
    client.say_hello(hello)
    client.say_hello(hello)
    # Another candidate tuple of the same method takes the rotation over (as a call routed
    # elsewhere would); the plan's kept pick can no longer choose.
    balancer.select(providers[:2], Invocation(SERVICE, "SayHello"))
    Counting.selects = 0
    served = [client.say_hello(hello).provider for _ in range(6)]
    assert set(served) == {p.address for p in providers}
    assert {path for path, _ in client.attempts[-6:]} == {"plan"}
    assert Counting.selects == 0  # picked afresh once, not through select on every call


def test_an_asyncio_plan_whose_channel_was_closed_calls_through_the_invoker() -> None:
    providers = urls(1)
    client = Client(Routes(bind(providers)), RoundRobinLoadBalance(), "asyncio")
    hello = greeter_pb2.HelloRequest(name="x")
    client.say_hello(hello)  # compiles the plan

    def closed(request: Any, timeout: float | None = None, metadata: Any = None) -> Any:
        raise grpc.aio.UsageError("Channel is closed.")

    # The provider's channel was closed after the plan picked it (grpc.aio says so before
    # sending): the call goes to the invoker, which opens a fresh one, and does not fail.
    client.invoker.multicallables[providers[0].address] = closed
    client.invoker.targets[providers[0].address] = (closed, ())
    assert client.say_hello(hello).provider == providers[0].address
    assert client.attempts[-1] == ("strategy", providers[0].address)


@pytest.mark.parametrize(
    "wording", ["Cannot invoke RPC: Channel closed!", "Cannot invoke RPC on closed channel!"]
)
def test_a_blocking_plan_whose_channel_was_closed_calls_through_the_invoker(wording: str) -> None:
    providers = urls(1)
    client = Client(Routes(bind(providers)), RoundRobinLoadBalance())
    client.serve(providers)
    hello = greeter_pb2.HelloRequest(name="x")
    client.say_hello(hello)  # compiles the plan
    client.say_hello(hello)
    assert client.attempts[-1] == ("plan", providers[0].address)

    def closed(request: Any, timeout: float | None = None, metadata: Any = None) -> Any:
        raise ValueError(wording)

    # grpcio raises a bare ValueError for a call on a closed channel (the provider left after
    # the plan picked it): the call goes to the invoker, which opens a fresh one.
    client.invoker.targets[providers[0].address] = (closed, ())
    assert client.say_hello(hello).provider == providers[0].address
    assert client.attempts[-1] == ("strategy", providers[0].address)
    # Any other ValueError is the caller's.
    client.invoker.targets[providers[0].address] = (closed, ())
    wording = "invalid literal"
    with pytest.raises(ValueError, match="invalid literal"):
        client.say_hello(hello)
