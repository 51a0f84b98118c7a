"""Cluster strategies, mock specs and per-method settings, against fake provider calls.

The fakes stand in for the gRPC call only; routing (a real bound router chain), balancing (real
balancers), the quarantine and the retry budget are the real ones.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

import grpc
import pytest
from demo import greeter_pb2

from dubbo_py.cluster.budget import RetryBudget
from dubbo_py.cluster.loadbalance import get_loadbalance
from dubbo_py.cluster.method_settings import SettingsTable
from dubbo_py.cluster.mock import Mock, MockSpec, parse_mock
from dubbo_py.cluster.quarantine import Quarantine
from dubbo_py.cluster.strategies import get_strategy
from dubbo_py.cluster.strategies.broadcast import broadcast
from dubbo_py.cluster.strategies.failback import FailbackQueue, failback
from dubbo_py.cluster.strategies.failfast import failfast
from dubbo_py.cluster.strategies.failover import failover
from dubbo_py.cluster.strategies.failsafe import failsafe
from dubbo_py.cluster.strategies.forking import forking
from dubbo_py.cluster.support.context import ChainSource, ClusterContext, FixedRoutes
from dubbo_py.config.options import MethodOptions
from dubbo_py.consumer.settings import (
    MethodSettings,
    base_parameters,
    check_method_options,
    resolve_settings,
)
from dubbo_py.errors import ClusterError, MockSpecError
from dubbo_py.invocation import RETRIES_ATTACHMENT, Invocation
from dubbo_py.router.chain import BoundChain, RouterChain
from dubbo_py.router.snapshot import Snapshot
from dubbo_py.url import URL
from tests.support.waiting import wait_until

SERVICE = "demo.Greeter"
CONSUMER = URL.parse("consumer://127.0.0.1/demo.Greeter?application=shop")


class FakeRpcError(grpc.RpcError):
    """A status error as grpc raises it."""

    def __init__(self, code: grpc.StatusCode, details: str = "") -> None:
        super().__init__(details)
        self._code, self._details = code, details or code.name

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def urls(n: int) -> tuple[URL, ...]:
    return tuple(URL.parse(f"tri://10.0.0.{i}:50051/{SERVICE}") for i in range(1, n + 1))


def chain_of(providers: Iterable[URL]) -> BoundChain:
    return RouterChain().bind(Snapshot(tuple(providers)), CONSUMER)


class Providers:
    """A fake ProviderCall: each address behaves as told (``ok`` by default) and every attempt
    is recorded (address, in order)."""

    def __init__(self, **behaviour: str) -> None:
        self.behaviour = dict(behaviour)  # host -> ok | down | invalid | deadline | slow
        self.calls: list[str] = []
        self.finished: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, provider: URL, invocation: Invocation, timeout: float | None) -> Any:
        with self._lock:
            self.calls.append(provider.address)
        kind = self.behaviour.get(provider.host, "ok")
        if kind == "down":
            raise FakeRpcError(grpc.StatusCode.UNAVAILABLE, "connection refused")
        if kind == "invalid":
            raise FakeRpcError(grpc.StatusCode.INVALID_ARGUMENT, "asked to fail")
        if kind == "deadline":
            raise FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
        if kind.startswith("slow"):
            time.sleep(float(kind.partition(":")[2] or 0.3))
        self.finished.append(provider.address)
        return greeter_pb2.HelloReply(message="hi", provider=provider.address)


class ChangingRoutes:
    """Routes that hand out the next of several chains each time they are read."""

    def __init__(self, *chains: BoundChain) -> None:
        self._chains = iter(chains)

    @property
    def chain(self) -> BoundChain:
        return next(self._chains)


def settings(default: MethodSettings | None = None, **per_method: MethodSettings) -> SettingsTable:
    return SettingsTable(per_method, default)


def context(
    providers: Providers,
    candidates: tuple[URL, ...],
    *,
    routes: ChainSource | None = None,
    **options: Any,
) -> ClusterContext:
    return ClusterContext(
        service=SERVICE,
        routes=routes or FixedRoutes(chain_of(candidates)),
        balancer=options.pop("balancer", get_loadbalance("roundrobin")),
        call=providers,
        empty_response=greeter_pb2.HelloReply,
        **options,
    )


def call(**attachments: str) -> Invocation:
    return Invocation(SERVICE, "SayHello", greeter_pb2.HelloRequest(name="x"), attachments)


# ---------------------------------------------------------------------------------- failover


def test_failover_tries_three_distinct_providers_and_names_them_all() -> None:
    ps = urls(4)
    fake = Providers(**{p.host: "down" for p in ps})
    with pytest.raises(ClusterError) as info:
        failover(context(fake, ps), call())
    assert len(fake.calls) == 3 and len(set(fake.calls)) == 3  # default retries = 2
    error = info.value
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    assert error.tried == tuple(fake.calls)
    for part in (SERVICE, "SayHello", *fake.calls, "connection refused"):
        assert part in error.details()


def test_failover_never_repeats_a_provider_while_others_remain() -> None:
    ps = urls(5)
    fake = Providers(**{p.host: "down" for p in ps[:4]})
    reply = failover(context(fake, ps, settings=settings(MethodSettings(retries=4))), call())
    assert reply.provider == ps[4].address
    assert sorted(fake.calls) == sorted(p.address for p in ps)


def test_failover_repeats_only_after_every_provider_was_tried() -> None:
    ps = urls(2)
    fake = Providers(**{p.host: "down" for p in ps})
    with pytest.raises(ClusterError):
        failover(context(fake, ps, settings=settings(MethodSettings(retries=3))), call())
    assert len(fake.calls) == 4
    assert set(fake.calls[:2]) == {p.address for p in ps}


def test_retries_per_method_and_per_call() -> None:
    ps = urls(5)
    fake = Providers(**{p.host: "down" for p in ps})
    ctx = context(
        fake, ps, settings=settings(MethodSettings(retries=4), SayHello=MethodSettings(retries=0))
    )
    with pytest.raises(ClusterError):
        failover(ctx, call())
    assert len(fake.calls) == 1
    fake.calls.clear()
    with pytest.raises(ClusterError):
        failover(ctx, call(**{RETRIES_ATTACHMENT: "3"}))
    assert len(fake.calls) == 4
    fake.calls.clear()
    with pytest.raises(ClusterError):
        failover(context(fake, ps), call(**{RETRIES_ATTACHMENT: "0"}))
    assert len(fake.calls) == 1


def test_unparsable_per_call_retries_falls_back_to_the_method_setting(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ps = urls(3)
    fake = Providers(**{p.host: "down" for p in ps})
    with caplog.at_level(logging.WARNING), pytest.raises(ClusterError):
        failover(context(fake, ps), call(**{RETRIES_ATTACHMENT: "many"}))
    assert len(fake.calls) == 3
    assert "dubbo.retries" in caplog.text and "'many'" in caplog.text


def test_application_errors_are_raised_as_is_and_never_retried() -> None:
    ps = urls(3)
    fake = Providers(**{p.host: "invalid" for p in ps})
    with pytest.raises(FakeRpcError) as info:
        failover(context(fake, ps), call())
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert len(fake.calls) == 1


def test_deadline_exceeded_is_retried_only_for_idempotent_methods() -> None:
    ps = urls(3)
    fake = Providers(**{ps[0].host: "deadline", ps[1].host: "deadline"})
    balancer = get_loadbalance("roundrobin")
    with pytest.raises(ClusterError) as info:
        failover(context(fake, ps, balancer=balancer), call())
    assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert info.value.tried == (fake.calls[0],) and fake.calls[0] in info.value.details()
    fake.calls.clear()
    ctx = context(fake, ps, idempotent=frozenset({"SayHello"}))
    for _ in range(3):
        assert failover(ctx, call()).provider == ps[2].address
    assert fake.calls.count(ps[2].address) == 3


def test_failover_routes_again_before_each_retry() -> None:
    first, second = urls(2)
    routes = ChangingRoutes(chain_of([first]), chain_of([second]))
    fake = Providers(**{first.host: "down"})
    reply = failover(context(fake, (first,), routes=routes), call())
    assert reply.provider == second.address
    assert fake.calls == [first.address, second.address]


def test_no_provider_is_a_cluster_error_naming_the_service() -> None:
    fake = Providers()
    with pytest.raises(ClusterError) as info:
        failover(context(fake, ()), call())
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "demo.Greeter" in info.value.details() and not fake.calls


def test_transport_failures_quarantine_the_provider_and_later_calls_skip_it() -> None:
    ps = urls(3)
    fake = Providers(**{ps[0].host: "down"})
    quarantine = Quarantine(lambda _u: False)
    ctx = context(fake, ps, quarantine=quarantine)
    for _ in range(10):
        failover(ctx, call())
    assert [e.address for e in quarantine.entries()] == [ps[0].address]
    assert fake.calls.count(ps[0].address) == 1


def test_sticky_keeps_one_provider_while_it_works_then_sticks_to_the_next() -> None:
    ps = urls(3)
    fake = Providers()
    ctx = context(fake, ps, settings=settings(MethodSettings(sticky=True)))
    served = {failover(ctx, call()).provider for _ in range(6)}
    assert len(served) == 1
    (held,) = served
    fake.behaviour[held.split(":")[0]] = "down"
    fake.calls.clear()
    after = [failover(ctx, call()).provider for _ in range(6)]
    assert held not in after and len(set(after)) == 1
    assert fake.calls.count(held) == 1


def test_without_sticky_roundrobin_spreads() -> None:
    ps = urls(3)
    ctx = context(Providers(), ps)
    assert len({failover(ctx, call()).provider for _ in range(6)}) == 3


def test_retry_budget_caps_attempts_under_a_total_outage() -> None:
    ps = urls(3)
    fake = Providers(**{p.host: "down" for p in ps})
    now = [0.0]
    budget = RetryBudget(ratio=0.2, min_retries_per_second=1, ttl=10, clock=lambda: now[0])
    ctx = context(fake, ps, budget=budget)
    requests = 500
    for _ in range(requests):
        with pytest.raises(ClusterError):
            failover(ctx, call())
    # 20 % of the requests plus the reserve (1/s x 10 s); without a budget it would be 1 500.
    assert requests < len(fake.calls) <= requests * 1.2 + 10


def test_budget_exhaustion_is_named_in_the_error() -> None:
    ps = urls(3)
    fake = Providers(**{p.host: "down" for p in ps})
    budget = RetryBudget(ratio=0, min_retries_per_second=0, ttl=10)
    with pytest.raises(ClusterError) as info:
        failover(context(fake, ps, budget=budget), call())
    assert len(fake.calls) == 1 and "retry budget exhausted" in info.value.details()


# ---------------------------------------------------------------------------------- failfast etc.


def test_failfast_makes_one_attempt_and_names_the_provider() -> None:
    ps = urls(3)
    fake = Providers(**{p.host: "down" for p in ps})
    with pytest.raises(ClusterError) as info:
        failfast(context(fake, ps), call())
    assert len(fake.calls) == 1 and info.value.tried == (fake.calls[0],)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE


@pytest.mark.parametrize("kind", ["down", "invalid"])
def test_failsafe_logs_and_returns_the_empty_response(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    ps = urls(2)
    fake = Providers(**{p.host: kind for p in ps})
    with caplog.at_level(logging.ERROR):
        reply = failsafe(context(fake, ps), call())
    assert reply == greeter_pb2.HelloReply() and len(fake.calls) == 1
    assert "failsafe: demo.Greeter.SayHello failed" in caplog.text


def test_failback_raises_now_and_retries_in_the_background() -> None:
    ps = urls(1)
    fake = Providers(**{ps[0].host: "down"})
    queue = FailbackQueue(period=0.02, max_attempts=50)
    ctx = context(fake, ps, failback=queue)
    try:
        with pytest.raises(ClusterError):
            failback(ctx, call())
        assert len(queue) == 1
        wait_until(lambda: len(fake.calls) >= 3, what="background retries")
        fake.behaviour[ps[0].host] = "ok"
        wait_until(lambda: queue.succeeded == 1, what="the retry to succeed")
        assert len(queue) == 0 and queue.abandoned == 0
    finally:
        queue.close()


def test_failback_never_queues_application_errors() -> None:
    ps = urls(1)
    queue = FailbackQueue(period=0.02)
    ctx = context(Providers(**{ps[0].host: "invalid"}), ps, failback=queue)
    with pytest.raises(FakeRpcError):
        failback(ctx, call())
    assert len(queue) == 0
    queue.close()


def test_failback_queue_is_bounded_and_gives_up() -> None:
    ps = urls(1)
    fake = Providers(**{ps[0].host: "down"})
    queue = FailbackQueue(period=0.05, max_attempts=2, capacity=3)
    ctx = context(fake, ps, failback=queue)
    for _ in range(5):
        with pytest.raises(ClusterError):
            failback(ctx, call())
    assert len(queue) <= 3
    wait_until(lambda: queue.abandoned == 5, what="every call abandoned")
    # 5 immediate attempts + at most 3 queued calls x 2 background attempts.
    assert len(fake.calls) <= 5 + 3 * 2
    queue.close()


def test_failback_background_retries_draw_from_the_budget() -> None:
    ps = urls(1)
    fake = Providers(**{ps[0].host: "down"})
    queue = FailbackQueue(period=0.01, max_attempts=3)
    budget = RetryBudget(ratio=0, min_retries_per_second=0, ttl=10)
    ctx = context(fake, ps, budget=budget, failback=queue)
    with pytest.raises(ClusterError):
        failback(ctx, call())
    wait_until(lambda: queue.abandoned == 1, what="the retry abandoned")
    assert len(fake.calls) == 1
    queue.close()


def test_forking_returns_the_first_success() -> None:
    ps = urls(2)
    fake = Providers(**{ps[0].host: "slow:1"})
    reply = forking(context(fake, ps, settings=settings(MethodSettings(forks=2))), call())
    assert reply.provider == ps[1].address
    assert fake.finished == [ps[1].address]  # did not wait for the slow fork
    assert sorted(fake.calls) == sorted(p.address for p in ps)


def test_forking_fails_only_when_every_fork_failed_naming_them() -> None:
    ps = urls(3)
    fake = Providers(**{p.host: "down" for p in ps})
    with pytest.raises(ClusterError) as info:
        forking(context(fake, ps, settings=settings(MethodSettings(forks=3))), call())
    assert set(info.value.tried) == {p.address for p in ps} and len(fake.calls) == 3
    fake.behaviour[ps[1].host] = "ok"
    assert (
        forking(context(fake, ps, settings=settings(MethodSettings(forks=3))), call()).provider
        == ps[1].address
    )


def test_forking_raises_an_application_answer_as_is() -> None:
    ps = urls(2)
    fake = Providers(**{ps[0].host: "invalid", ps[1].host: "down"})
    with pytest.raises(FakeRpcError) as info:
        forking(context(fake, ps), call())
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_forking_deadline() -> None:
    ps = urls(2)
    fake = Providers(**{p.host: "slow:0.5" for p in ps})
    with pytest.raises(ClusterError) as info:
        forking(context(fake, ps, settings=settings(MethodSettings(timeout=0.05))), call())
    assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


def test_broadcast_calls_everyone_and_fails_if_any_failed() -> None:
    ps = urls(3)
    fake = Providers()
    broadcast(context(fake, ps), call())
    assert sorted(fake.calls) == sorted(p.address for p in ps)
    fake.calls.clear()
    fake.behaviour[ps[1].host] = "down"
    with pytest.raises(ClusterError) as info:
        broadcast(context(fake, ps), call())
    assert len(fake.calls) == 3
    assert set(info.value.tried) == {p.address for p in ps}
    assert "1 of 3" in info.value.details() and ps[1].address in info.value.details()


def test_unknown_strategy_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="failback, failfast, failover, failsafe, forking"):
        get_strategy("failfirst")


# ---------------------------------------------------------------------------------- mock


reply_type = greeter_pb2.HelloReply


class GreeterMock:
    """A mock class for ``fail:tests.cluster.test_cluster_strategies:GreeterMock``."""

    def SayHello(self, request: greeter_pb2.HelloRequest) -> greeter_pb2.HelloReply:
        return greeter_pb2.HelloReply(message=f"mocked {request.name}")


def test_force_return_never_calls_a_provider_and_converts_json() -> None:
    fake = Providers()
    mocked = Mock(parse_mock('force:return {"message": "busy"}'), reply_type).wrap(failover)
    reply = mocked(context(fake, urls(2)), call())
    assert reply == greeter_pb2.HelloReply(message="busy") and not fake.calls


def test_fail_return_answers_call_failures_only() -> None:
    ps = urls(2)
    mocked = Mock(parse_mock("fail:return empty"), reply_type).wrap(failover)
    assert mocked(context(Providers(**{p.host: "down" for p in ps}), ps), call()) == (
        greeter_pb2.HelloReply()
    )
    assert mocked(context(Providers(), ()), call()) == greeter_pb2.HelloReply()  # no provider
    with pytest.raises(FakeRpcError):
        mocked(context(Providers(**{p.host: "invalid" for p in ps}), ps), call())
    fake = Providers()
    assert mocked(context(fake, ps), call()).message == "hi" and len(fake.calls) == 1


def test_throw_variants_and_mock_classes() -> None:
    ps = urls(1)
    with pytest.raises(ClusterError, match="closed for maintenance") as info:
        Mock(parse_mock("force:throw closed for maintenance"), reply_type).wrap(failover)(
            context(Providers(), ps), call()
        )
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    down = Providers(**{ps[0].host: "down"})
    with pytest.raises(ClusterError, match="mocked failure"):
        Mock(parse_mock("throw"), reply_type).wrap(failover)(context(down, ps), call())
    spec = parse_mock("fail:tests.cluster.test_cluster_strategies:GreeterMock")
    assert spec == MockSpec("fail", "class", "tests.cluster.test_cluster_strategies:GreeterMock")
    assert Mock(spec, reply_type).wrap(failover)(context(down, ps), call()).message == "mocked x"


@pytest.mark.parametrize(
    "text", ["force:return {not json", "sometimes:return 1", 'return {"nope": 1}']
)
def test_bad_mock_specs_are_clear_errors(text: str) -> None:
    with pytest.raises(MockSpecError, match="mock"):
        spec = parse_mock(text)
        assert spec is not None
        spec.response(call(), greeter_pb2.HelloReply)


# ---------------------------------------------------------------------------------- settings


def test_method_settings_follow_dubbo_precedence() -> None:
    params = base_parameters(
        retries=2,
        timeout=1.0,
        forks=2,
        sticky=False,
        loadbalance="random",
        methods={"SayHello": MethodOptions(retries=0)},
    )
    methods = ("SayHello", "SayHelloStream")
    base = resolve_settings(methods, params)
    assert base["SayHello"] == MethodSettings(retries=0, timeout=1.0)
    assert base["SayHelloStream"] == MethodSettings(retries=2, timeout=1.0)
    # A consumer override of ``timeout`` (ms) reaches every method without its own; a bad value
    # keeps the method's own setting.
    live = resolve_settings(
        methods, {**params, "timeout": "250", "retries": "x", "SayHello.sticky": "true"}, base
    )
    assert live["SayHello"] == MethodSettings(retries=0, timeout=0.25, sticky=True)
    assert live["SayHelloStream"] == MethodSettings(retries=2, timeout=0.25)


def test_method_options_are_checked() -> None:
    with pytest.raises(ValueError, match="no method"):
        check_method_options(("SayHello",), {"SayBye": MethodOptions()}, SERVICE)
    with pytest.raises(ValueError, match=r"methods\.SayHello\.retry: unknown option"):
        MethodOptions.of("SayHello", {"retry": 1})
    with pytest.raises(ValueError, match=r"methods\.SayHello\.retries: must be >= 0"):
        MethodOptions.of("SayHello", {"retries": -1})
    assert MethodOptions.of("SayHello", {"timeout": 1, "sticky": "true"}) == MethodOptions(
        timeout=1.0, sticky=True
    )


def test_consumer_side_overrides_apply_to_matching_consumers_only() -> None:
    from dubbo_py.cluster.configurators import apply, consumer_parameters

    consumer = URL.parse("consumer://10.1.1.1/demo.Greeter?application=shop&side=consumer")
    everyone = URL.parse(
        "override://0.0.0.0/demo.Greeter?category=configurators&side=consumer&timeout=200"
    )
    other_host = URL.parse(
        "override://10.9.9.9/demo.Greeter?category=configurators&side=consumer&retries=7"
    )
    other_app = URL.parse(
        "override://0.0.0.0/demo.Greeter?category=configurators&side=consumer"
        "&application=billing&retries=5"
    )
    doc = (
        "configVersion: v3.0\nscope: service\nkey: demo.Greeter\nconfigs:\n"
        "  - side: consumer\n    applications: [shop]\n"
        "    parameters: {loadbalance: roundrobin, SayHello.retries: 0}\n"
    )
    params = consumer_parameters(
        consumer, [everyone, other_host, other_app], {"demo.Greeter:1.0.0:.configurators": doc}
    )
    assert params == {"timeout": "200", "loadbalance": "roundrobin", "SayHello.retries": "0"}
    provider = URL.parse("tri://10.1.1.1:50051/demo.Greeter?application=shop&timeout=900")
    assert apply([provider], [everyone], {}) == [provider]  # consumer rules leave providers be


class DictMock:
    """A mock class answering with a plain dict."""

    def SayHello(self, request: greeter_pb2.HelloRequest) -> dict[str, Any]:
        return {"message": f"dict {request.name}", "shard": 2}


def test_a_mock_class_may_answer_with_a_dict() -> None:
    spec = parse_mock("force:tests.cluster.test_cluster_strategies:DictMock")
    assert spec is not None
    reply = Mock(spec, reply_type).wrap(failover)(context(Providers(), urls(1)), call())
    assert reply == greeter_pb2.HelloReply(message="dict x", shard=2)


@pytest.mark.parametrize(
    ("mock", "message"),
    [
        ('return {"nope": 1}', "is not a demo.HelloReply"),
        ("fail:tests.cluster.test_cluster_strategies:NoSuchMock", "NoSuchMock"),
        ("fail:tests.cluster.test_cluster_strategies:GreeterMock", "has no method SayHelloStream"),
    ],
)
def test_a_reference_refuses_a_mock_that_cannot_answer(mock: str, message: str) -> None:
    from demo import greeter_pb2_grpc

    import dubbo_py

    app = dubbo_py.Application("shop", registry="tri://127.0.0.1:1")
    with app, pytest.raises(MockSpecError, match=message):
        app.reference(greeter_pb2_grpc.GreeterStub, mock=mock)


def test_the_asyncio_failover_follows_the_same_rules() -> None:
    import asyncio

    from dubbo_py.cluster.strategies.failover import failover_async

    ps = urls(4)
    fake = Providers(**{p.host: "down" for p in ps})

    async def call_async(provider: URL, invocation: Invocation, timeout: float | None) -> Any:
        return fake(provider, invocation, timeout)

    ctx = context(fake, ps)
    ctx.call = call_async
    with pytest.raises(ClusterError) as info:
        asyncio.run(failover_async(ctx, call()))
    assert len(set(fake.calls)) == 3 and info.value.tried == tuple(fake.calls)
    fake.calls.clear()
    with pytest.raises(ClusterError):
        asyncio.run(failover_async(ctx, call(**{RETRIES_ATTACHMENT: "0"})))
    assert len(fake.calls) == 1
    fake.behaviour = {p.host: "invalid" for p in ps}
    with pytest.raises(FakeRpcError):
        asyncio.run(failover_async(ctx, call()))
