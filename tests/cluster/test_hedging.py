"""Hedged requests against fake provider calls: the policy as users write it, the latency
window, the budget's cap, and a hedged attempt racing a provider that never answers (blocking
and asyncio). Routing (a real bound router chain), balancing, the quarantine and outlier
ejection are the real ones; only the gRPC call is a fake, one that can be cancelled as a gRPC
call is (through ``CALL_SINK``)."""

from __future__ import annotations

import asyncio
import itertools
import threading
from typing import Any

import grpc
import pytest
from demo import greeter_pb2_grpc

import dubbo_py
from dubbo_py.cluster.hedging import AsyncHedgedCall, HedgedCall, Hedging, LatencyWindow
from dubbo_py.cluster.hedging_policy import (
    HEDGING_OFF,
    HedgingPolicy,
    hedging_policy,
    parse_hedging_text,
)
from dubbo_py.cluster.loadbalance import get_loadbalance
from dubbo_py.cluster.outlier import OutlierDetector
from dubbo_py.cluster.quarantine import Quarantine
from dubbo_py.cluster.strategies.failover import failover, failover_async
from dubbo_py.cluster.support.context import ClusterContext, FixedRoutes
from dubbo_py.config.loader import parse_config
from dubbo_py.config.model import ReferenceConfig
from dubbo_py.consumer.settings import base_parameters, resolve_hedging
from dubbo_py.errors import ConfigError
from dubbo_py.invocation import Invocation
from dubbo_py.protocol.triple import CALL_SINK
from dubbo_py.url import URL
from tests.cluster.test_cluster_strategies import FakeRpcError, chain_of, urls

SERVICE = "demo.Greeter"

# ----------------------------------------------------------------------------- the policy


def test_policy_as_users_write_it() -> None:
    assert hedging_policy(True) == HedgingPolicy("p99", 2, 0.05)
    assert hedging_policy(False) is HEDGING_OFF and not HEDGING_OFF.enabled
    assert hedging_policy({"delay": 0.02, "max_attempts": 3}) == HedgingPolicy(0.02, 3, 0.05)
    assert hedging_policy({"delay": "P99"}).percentile == 99.0
    assert parse_hedging_text("delay=p99.9, max_attempts=2") == HedgingPolicy("p99.9", 2)
    # A mapping in an override rule's YAML arrives as Python's text of it.
    assert parse_hedging_text(str({"delay": "0.05", "max_extra_load": 0.1})) == HedgingPolicy(
        0.05, 2, 0.1
    )
    assert parse_hedging_text("true") == HedgingPolicy()
    assert parse_hedging_text("false") is HEDGING_OFF
    policy = HedgingPolicy(0.25, 3, 0.1)
    assert parse_hedging_text(policy.text()) == policy


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ({"delay": "p100"}, "delay"),
        ({"delay": -1}, "delay"),
        ({"max_attempts": 9}, "max_attempts"),
        ({"max_extra_load": 2}, "max_extra_load"),
        ({"dealy": 0.1}, "dealy"),
        ("delay", "key=value"),
        (3, "true, false or a mapping"),
    ],
)
def test_bad_policies_are_refused_naming_what(value: Any, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        hedging_policy(value)


def test_reference_and_method_options_carry_hedging_into_the_parameters() -> None:
    config = ReferenceConfig(hedging=True, methods={"SayHelloStream": {"hedging": False}})
    params = base_parameters(
        retries=None,
        timeout=None,
        forks=2,
        sticky=False,
        loadbalance="random",
        methods=config.methods,
        hedging=config.hedging,
    )
    resolved = resolve_hedging(("SayHello", "SayHelloStream"), params)
    assert resolved == {"SayHello": HedgingPolicy(), "SayHelloStream": HEDGING_OFF}
    # An override's bad value keeps what was in force, logged.
    bad = resolve_hedging(("SayHello",), {**params, "hedging": "delay=soon"}, resolved)
    assert bad["SayHello"] == HedgingPolicy()
    with pytest.raises(ConfigError, match="hedging"):
        ReferenceConfig(hedging={"max_attempts": 0})
    assert ReferenceConfig(hedging=False).hedging is None


# ----------------------------------------------------------------------------- latencies, budget


def test_latency_window_reads_percentiles_of_the_recent_calls() -> None:
    window = LatencyWindow()
    assert window.percentile(95) is None
    for i in range(1, 101):
        window.record(i / 1000.0)
    # Read from the window as last sorted (at most RESORT records old).
    assert 0.045 <= (window.percentile(50) or 0) <= 0.051
    assert 0.09 <= (window.percentile(95) or 0) <= 0.096
    for _ in range(LatencyWindow.SIZE):  # old samples leave the window
        window.record(0.5)
    assert window.percentile(50) == pytest.approx(0.5)


def test_the_budget_caps_hedges_at_the_extra_load_plus_the_burst() -> None:
    now = [0.0]
    hedging = Hedging(HedgingPolicy(0.01, 2, 0.05), clock=lambda: now[0])
    granted = 0
    for _ in range(1000):
        hedging.budget.deposit()
        granted += hedging.allow()
    # 5% of 1000 calls plus the reserve (1 a second over 10 s), with a frozen clock.
    assert granted == 50 + 10
    assert hedging.counts.refused == 1000 - granted


# ----------------------------------------------------------------------------- racing


class _Pending:
    """A fake gRPC call that never answers until cancelled (a blackholed provider)."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()

    def cancel(self) -> bool:
        self.cancelled.set()
        return True


class Fakes:
    """A provider call: addresses in ``dark`` never answer (until cancelled, then CANCELLED);
    the others answer with their address."""

    def __init__(self, dark: set[str]) -> None:
        self.dark = dark
        self.pending: list[_Pending] = []

    def __call__(self, provider: URL, invocation: Invocation, timeout: float | None) -> str:
        if provider.host in self.dark:
            call = _Pending()
            self.pending.append(call)
            sink = CALL_SINK.get()
            assert sink is not None, "a hedged attempt runs with a call sink"
            sink.append(call)
            call.cancelled.wait(timeout)
            raise FakeRpcError(grpc.StatusCode.CANCELLED)
        return provider.host


def _context(call: Any, providers: tuple[URL, ...]) -> tuple[ClusterContext, Quarantine]:
    quarantine = Quarantine(lambda _url: False, interval=60)
    ctx = ClusterContext(
        SERVICE,
        FixedRoutes(chain_of(providers)),
        get_loadbalance("roundrobin"),
        call,
        quarantine=quarantine,
    )
    ctx.outliers = OutlierDetector(quarantine, lambda: len(providers), max_share=0.5)
    return ctx, quarantine


def test_a_dark_provider_loses_every_race_and_is_ejected_after_three() -> None:
    providers = urls(2)
    fakes = Fakes({"10.0.0.1"})
    # The hedging clock (budget, loss spacing) moves a second per read: every loss counts.
    hedging = Hedging(HedgingPolicy(0.02, 2, 1.0), clock=itertools.count(0.0, 1.0).__next__)
    hedged = HedgedCall(fakes, hedging)
    ctx, quarantine = _context(hedged, providers)
    hedged.ctx = ctx
    answers = [failover(ctx, Invocation(SERVICE, "SayHello", None, timeout=5.0)) for _ in range(8)]
    # Every call was answered, by the provider that answers.
    assert answers == ["10.0.0.2"] * 8
    # The dark provider's attempts were cancelled, not left to run out their deadline.
    assert fakes.pending and all(p.cancelled.is_set() for p in fakes.pending)
    # Three lost races in a row (the strategy's "success" on its behalf did not reset them).
    assert "10.0.0.1:50051" in quarantine.addresses
    assert len(fakes.pending) == 3
    assert hedging.counts.sent == hedging.counts.won == 3


def test_races_lost_together_count_once_against_the_provider() -> None:
    """Calls in flight on a provider that pauses lose their races together: within
    LOSS_SPACING they count once, so the pause does not eject it."""
    providers = urls(2)
    fakes = Fakes({"10.0.0.1"})
    hedging = Hedging(HedgingPolicy(0.02, 2, 1.0), clock=lambda: 100.0)  # frozen
    hedged = HedgedCall(fakes, hedging)
    ctx, quarantine = _context(hedged, providers)
    hedged.ctx = ctx
    for _ in range(8):
        failover(ctx, Invocation(SERVICE, "SayHello", None, timeout=5.0))
    assert len(fakes.pending) == 4  # every other call went to the paused provider first
    assert not quarantine.addresses
    assert ctx.outliers is not None and ctx.outliers.failing == {"10.0.0.1:50051": 1}


def test_a_delay_longer_than_the_deadline_still_hedges_within_it() -> None:
    """A 10 s delay (a p99 grown on a slow machine, say) against a 1 s deadline: the hedge goes
    out at half the deadline, and the call is answered by the other provider."""
    providers = urls(2)
    fakes = Fakes({"10.0.0.1"})
    hedging = Hedging(HedgingPolicy(10.0, 2, 1.0), clock=itertools.count(0.0, 1.0).__next__)
    hedged = HedgedCall(fakes, hedging)
    ctx, _ = _context(hedged, providers)
    hedged.ctx = ctx
    # Round robin: the first call starts on the dark provider.
    answer = failover(ctx, Invocation(SERVICE, "SayHello", None, timeout=1.0))
    assert answer == "10.0.0.2"
    assert hedging.counts.sent == 1 and hedging.counts.won == 1


def test_an_answer_before_the_delay_sends_no_hedge() -> None:
    providers = urls(2)
    hedging = Hedging(HedgingPolicy(5.0, 2, 1.0))
    hedged = HedgedCall(Fakes(set()), hedging)
    ctx, _ = _context(hedged, providers)
    hedged.ctx = ctx
    for _ in range(4):
        failover(ctx, Invocation(SERVICE, "SayHello", None, timeout=5.0))
    assert hedging.counts.sent == 0


def test_a_refused_budget_leaves_the_call_to_its_first_provider() -> None:
    providers = urls(2)
    fakes = Fakes({"10.0.0.1"})
    hedging = Hedging(HedgingPolicy(0.01, 2, 0.0))
    hedging.budget = type(hedging.budget)(0.0, 0.0)  # no hedge at all
    hedged = HedgedCall(fakes, hedging)
    ctx, _ = _context(hedged, providers)
    ctx.outliers = None
    hedged.ctx = ctx
    with pytest.raises(grpc.RpcError):
        failover(ctx, Invocation(SERVICE, "SayHello", None, timeout=0.2))
    assert hedging.counts.refused == 1 and hedging.counts.sent == 0


def test_asyncio_a_dark_provider_loses_to_the_hedge_and_its_task_is_cancelled() -> None:
    providers = urls(2)
    cancelled: list[str] = []

    async def call(provider: URL, invocation: Invocation, timeout: float | None) -> str:
        if provider.host == "10.0.0.1":
            try:
                await asyncio.sleep(timeout or 60)
            except asyncio.CancelledError:
                cancelled.append(provider.host)
                raise
        return provider.host

    hedging = Hedging(HedgingPolicy(0.02, 2, 1.0), clock=itertools.count(0.0, 1.0).__next__)
    hedged = AsyncHedgedCall(call, hedging)
    ctx, quarantine = _context(hedged, providers)
    hedged.ctx = ctx

    async def run() -> list[str]:
        return [
            await failover_async(ctx, Invocation(SERVICE, "SayHello", None, timeout=5.0))
            for _ in range(6)
        ]

    assert asyncio.run(run()) == ["10.0.0.2"] * 6
    assert cancelled == ["10.0.0.1"] * 3
    assert "10.0.0.1:50051" in quarantine.addresses


# ----------------------------------------------------------------------------- configuration


def test_dubbo_yaml_reads_hedging_on_references_and_methods() -> None:
    config = parse_config(
        "application: shop\n"
        "references:\n"
        "  demo.Greeter:\n"
        "    hedging: {delay: p99, max_extra_load: 0.1}\n"
        "    methods:\n"
        "      SayHelloStream: {hedging: false}\n",
        environ={},
    )
    ref = config.references["demo.Greeter"]
    assert ref.hedging == HedgingPolicy("p99", 2, 0.1)
    assert ref.methods["SayHelloStream"].hedging is HEDGING_OFF
    with pytest.raises(ConfigError, match=r"references\.demo\.Greeter\.hedging.*max_attempts"):
        parse_config(
            "application: shop\nreferences:\n  demo.Greeter:\n    hedging: {max_attempts: 7}\n",
            environ={},
        )
    with pytest.raises(ConfigError, match=r"methods\.SayHello\.hedging.*dealy"):
        parse_config(
            "application: shop\nreferences:\n  demo.Greeter:\n"
            "    methods: {SayHello: {hedging: {dealy: 1}}}\n",
            environ={},
        )


def test_a_method_that_cannot_hedge_is_refused_when_its_own_options_ask(tmp_path: Any) -> None:
    with dubbo_py.Application("shop", f"sqlite://{tmp_path}/r.db", cache_path=None) as app:
        with pytest.raises(
            ValueError, match="SayHello cannot hedge: its cluster strategy is forking"
        ):
            app.reference_handle(
                greeter_pb2_grpc.GreeterStub,
                check=0.0,
                methods={"SayHello": {"cluster": "forking", "hedging": True}},
            )
        # Asked by the reference, the forking method is left out and the others hedge.
        ref = app.reference_handle(
            greeter_pb2_grpc.GreeterStub,
            check=0.0,
            hedging=True,
            methods={"SayHello": {"cluster": "forking"}},
        )
        assert set(ref.assembly.hedging) == {"SayHelloStream"}
        assert not isinstance(ref.contexts["SayHello"].call, HedgedCall)
