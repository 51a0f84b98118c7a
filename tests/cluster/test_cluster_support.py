"""The cluster layer's shared parts: the deadline value, failure classification, and the one
registry of strategy names and of balancer names that configuration validates against."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from dubbo_py.cluster.loadbalance import BALANCERS, LOADBALANCE_NAMES, get_loadbalance
from dubbo_py.cluster.loadbalance.base import LoadBalance
from dubbo_py.cluster.mock import Mock, parse_mock
from dubbo_py.cluster.strategies import STRATEGIES, STRATEGY_NAMES, async_strategy, get_strategy
from dubbo_py.cluster.strategy_settings import StrategySettings
from dubbo_py.cluster.support.context import ClusterContext, FixedRoutes
from dubbo_py.cluster.support.deadline import Deadline
from dubbo_py.cluster.support.outcome import retryable
from dubbo_py.config.model import ReferenceConfig
from dubbo_py.errors import ClusterError, ConfigError
from dubbo_py.invocation import Invocation
from dubbo_py.router.chain import RouterChain
from dubbo_py.router.snapshot import Snapshot
from dubbo_py.url import URL


class Status(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._code.name


def test_an_unbounded_deadline_never_expires_and_has_no_remaining_time() -> None:
    deadline = Deadline.after(None)
    assert deadline.remaining() is None
    assert not deadline.expired()
    assert deadline == Deadline(None)


def test_a_deadline_counts_down_and_never_goes_negative() -> None:
    deadline = Deadline.after(10.0)
    remaining = deadline.remaining()
    assert remaining is not None and 9.0 < remaining <= 10.0
    assert not deadline.expired()
    passed = Deadline(time.monotonic() - 1.0)
    assert passed.remaining() == 0.0
    assert passed.expired()


def test_a_deadline_cannot_be_changed() -> None:
    deadline = Deadline.after(1.0)
    with pytest.raises(AttributeError):
        deadline._at = None  # type: ignore[misc]


def test_retryable_failures_are_transport_failures_and_idempotent_timeouts() -> None:
    assert retryable(Status(grpc.StatusCode.UNAVAILABLE), "Get", frozenset())
    assert not retryable(Status(grpc.StatusCode.DEADLINE_EXCEEDED), "Put", frozenset({"Get"}))
    assert retryable(Status(grpc.StatusCode.DEADLINE_EXCEEDED), "Get", frozenset({"Get"}))
    assert not retryable(Status(grpc.StatusCode.INVALID_ARGUMENT), "Get", frozenset({"Get"}))
    # RESOURCE_EXHAUSTED is retried only when a provider marked the call as shed (unrun).
    assert not retryable(Status(grpc.StatusCode.RESOURCE_EXHAUSTED), "Get", frozenset())


def test_configuration_accepts_exactly_the_registered_names() -> None:
    for name in STRATEGY_NAMES:
        assert ReferenceConfig(cluster=name).cluster == name
        assert get_strategy(name) is STRATEGIES[name].blocking
    for name in LOADBALANCE_NAMES:
        assert ReferenceConfig(loadbalance=name).loadbalance == name
        assert get_loadbalance(name).name == name
    assert set(BALANCERS) == set(LOADBALANCE_NAMES)
    with pytest.raises(ConfigError, match="failfirst"):
        ReferenceConfig(cluster="failfirst")
    with pytest.raises(ConfigError, match="fastest"):
        ReferenceConfig(loadbalance="fastest")
    with pytest.raises(ValueError, match="choose one of broadcast, failback"):
        get_strategy("failfirst")


def test_every_balancer_declares_a_picker_none_by_default() -> None:
    providers = tuple(URL("tri", f"10.0.0.{i}", 50051, "demo.Greeter") for i in (1, 2))
    for name in LOADBALANCE_NAMES:
        balancer = get_loadbalance(name)
        assert LoadBalance in type(balancer).__mro__
        found = balancer.picker(providers, "SayHello", 0)
        assert (found is not None) == (name in ("random", "roundrobin")), name


def test_both_forms_of_a_mocked_strategy_answer_alike() -> None:
    chain = RouterChain([]).bind(Snapshot(()), URL("consumer", "127.0.0.1", 0, "demo.Greeter"))

    def never(provider: URL, invocation: Invocation, timeout: float | None) -> object:
        raise AssertionError("no provider to call")

    ctx = ClusterContext("demo.Greeter", FixedRoutes(chain), get_loadbalance("random"), never)
    spec = parse_mock("fail:throw closed")
    assert spec is not None
    call = Invocation("demo.Greeter", "SayHello")
    blocking = Mock(spec, None).wrap(get_strategy("failover"))
    awaited = async_strategy(StrategySettings("failover", spec), ctx, None)
    with pytest.raises(ClusterError) as sync_error:
        blocking(ctx, call)
    with pytest.raises(ClusterError) as async_error:
        asyncio.run(awaited(ctx, call))
    assert sync_error.value.details() == async_error.value.details()
    assert "closed" in sync_error.value.details()
