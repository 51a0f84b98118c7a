"""Outlier ejection: consecutive timeouts put a provider in quarantine, never more than the
configured share of the service; answers reset the count. The strategies (both flavours) feed
the detector; the quarantine is the real one."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import grpc
import pytest

from dubbo_py.cluster.outlier import OutlierDetector, ejection_limit
from dubbo_py.cluster.quarantine import Quarantine
from dubbo_py.cluster.strategies.broadcast import broadcast, broadcast_async
from dubbo_py.cluster.strategies.failfast import failfast, failfast_async
from dubbo_py.cluster.strategies.failover import failover, failover_async
from dubbo_py.cluster.strategies.forking import forking
from dubbo_py.errors import ClusterError
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL
from tests.cluster.test_cluster_strategies import FakeRpcError, Providers, call, context, urls
from tests.support.waiting import wait_until

DEADLINE = FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")


def never(url: URL) -> bool:
    return False


def detector(n: int = 3, **options: Any) -> tuple[OutlierDetector, Quarantine, tuple[URL, ...]]:
    providers = urls(n)
    quarantine = Quarantine(never)
    return OutlierDetector(quarantine, lambda: n, **options), quarantine, providers


@pytest.mark.parametrize(
    ("providers", "share", "limit"),
    [(1, 0.5, 1), (2, 0.5, 1), (3, 0.5, 1), (4, 0.5, 2), (10, 0.5, 5), (10, 0.1, 1), (3, 1.0, 3)],
)
def test_ejection_limit_is_the_share_rounded_down_but_at_least_one(
    providers: int, share: float, limit: int
) -> None:
    assert ejection_limit(providers, share) == limit


def test_three_timeouts_in_a_row_eject_and_an_answer_in_between_resets() -> None:
    outliers, quarantine, (a, b, _) = detector()
    assert not outliers.failed(a, DEADLINE)
    assert not outliers.failed(a, DEADLINE)
    outliers.succeeded(a.address)  # it answered: the run is over
    assert not outliers.failing
    assert not outliers.failed(a, DEADLINE)
    assert not outliers.failed(a, DEADLINE)
    # an application error is an answer too
    assert not outliers.failed(a, FakeRpcError(grpc.StatusCode.INVALID_ARGUMENT))
    assert not outliers.failed(a, DEADLINE)
    assert not outliers.failed(b, DEADLINE)  # another provider's failures count apart
    assert not outliers.failed(a, DEADLINE)
    assert outliers.failed(a, DEADLINE)
    assert quarantine.contains(a) and not quarantine.contains(b)
    assert "3 consecutive failures" in quarantine.entries()[0].reason
    assert a.address not in outliers.failing and outliers.ejections == 1


def test_never_more_than_the_share_of_providers_is_ejected(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outliers, quarantine, (a, b, c, d) = detector(4, max_share=0.5)
    for provider in (a, b, c, d):
        for _ in range(3):
            outliers.failed(provider, DEADLINE)
    assert {e.address for e in quarantine.entries()} == {a.address, b.address}
    assert outliers.refused == 2
    # the refusal is logged once per provider, not on every further failure
    for _ in range(5):
        outliers.failed(c, DEADLINE)
    refusals = [r for r in caplog.records if "not ejecting" in r.getMessage()]
    assert len(refusals) == 2
    # once one is revived there is room again
    quarantine.remove(a)
    assert outliers.failed(c, DEADLINE)


def test_a_provider_quarantined_for_unavailable_counts_against_the_share() -> None:
    outliers, quarantine, (a, b, _) = detector(3)
    quarantine.add(a, "UNAVAILABLE: connection refused")
    for _ in range(3):
        assert not outliers.failed(b, DEADLINE)
    assert not quarantine.contains(b)


def test_zero_consecutive_turns_ejection_off() -> None:
    outliers, quarantine, (a, _, _) = detector(consecutive=0)
    for _ in range(10):
        outliers.failed(a, DEADLINE)
    assert len(quarantine) == 0 and not outliers.failing


@pytest.mark.parametrize("consecutive", [-1])
def test_bad_options_are_refused(consecutive: int) -> None:
    with pytest.raises(ValueError, match="consecutive"):
        detector(consecutive=consecutive)
    with pytest.raises(ValueError, match="share"):
        detector(max_share=1.5)


# ------------------------------------------------------------------ the strategies feed it


def wired(behaviour: dict[str, str], n: int = 3, **options: Any) -> tuple[Any, Providers]:
    providers = Providers(**behaviour)
    candidates = urls(n)
    quarantine = Quarantine(never)
    outliers = OutlierDetector(quarantine, lambda: n)
    ctx = context(providers, candidates, quarantine=quarantine, outliers=outliers, **options)
    return ctx, providers


def test_failover_ejects_a_provider_that_keeps_timing_out_and_stops_calling_it() -> None:
    ctx, providers = wired({"10.0.0.1": "deadline"})
    failures = 0
    for _ in range(30):
        try:
            failover(ctx, call())
        except ClusterError as error:
            assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            failures += 1
    # roundrobin over three: the hung one fails every third call, three times, then is out
    assert failures == 3
    assert ctx.quarantine.contains(urls(3)[0])
    assert providers.calls[-20:].count("10.0.0.1:50051") == 0


def test_successes_reset_the_count_in_every_strategy() -> None:
    ctx, _ = wired({})
    a = urls(3)[0]
    for strategy in (failover, failfast, forking, broadcast):
        ctx.outliers.failing[a.address] = 2
        for _ in range(3):
            strategy(ctx, call())
        assert a.address not in ctx.outliers.failing, strategy.__name__


def test_failfast_and_broadcast_count_timeouts() -> None:
    for strategy in (failfast, broadcast):
        ctx, _ = wired({"10.0.0.1": "deadline"})
        failures = 0
        for _ in range(9):
            try:
                strategy(ctx, call())
            except ClusterError:
                failures += 1
        assert ctx.quarantine.contains(urls(3)[0]), strategy.__name__
        # broadcast calls every routed provider, quarantined or not
        assert failures == (3 if strategy is failfast else 9), strategy.__name__


def test_forking_counts_a_fork_that_ends_after_the_call_returned() -> None:
    # the hung provider never wins a race; its late failures must still count
    providers = Providers(**{"10.0.0.1": "slow:0.05"})
    hung = urls(2)[0]

    def late_timeout(provider: URL, invocation: Invocation, timeout: float | None) -> Any:
        if provider == hung:
            providers(provider, invocation, timeout)
            raise DEADLINE
        return providers(provider, invocation, timeout)

    quarantine = Quarantine(never)
    outliers = OutlierDetector(quarantine, lambda: 2)
    ctx = context(providers, urls(2), quarantine=quarantine, outliers=outliers)
    ctx.call = late_timeout
    for _ in range(3):
        assert forking(ctx, call()).provider == "10.0.0.2:50051"
    wait_until(lambda: quarantine.contains(hung), 5, "the late forks to eject the hung one")


def test_asyncio_strategies_record_outcomes() -> None:
    async def scenario() -> None:
        for strategy in (
            failover_async,
            failfast_async,
            broadcast_async,
        ):
            fake = Providers(**{"10.0.0.1": "deadline"})

            async def awaited(
                provider: URL,
                invocation: Invocation,
                timeout: float | None,
                fake: Providers = fake,
            ) -> Any:
                return fake(provider, invocation, timeout)

            ctx, _ = wired({})
            ctx.call = awaited
            for _ in range(9):
                with contextlib.suppress(ClusterError):
                    await strategy(ctx, call())
            assert ctx.quarantine.contains(urls(3)[0]), strategy.__name__
            ctx.outliers.failing["10.0.0.2:50051"] = 1
            fake.behaviour.clear()
            await strategy(ctx, call())
            await strategy(ctx, call())
            assert "10.0.0.2:50051" not in ctx.outliers.failing, strategy.__name__

    asyncio.run(scenario())


def test_dubbo_yaml_sets_ejection_per_reference_and_names_a_bad_value() -> None:
    from dubbo_py.config.loader import parse_config
    from dubbo_py.errors import ConfigError

    text = """
application: shop
references:
  demo.Greeter: {outlier_failures: 5, outlier_max_share: 0.3, sticky: true, forks: 3}
"""
    config = parse_config(text, source="dubbo.yaml").references["demo.Greeter"]
    assert (config.outlier_failures, config.outlier_max_share) == (5, 0.3)
    assert config.sticky and config.forks == 3  # accepted in the file as documented
    with pytest.raises(ConfigError, match=r"references\.demo\.Greeter\.outlier_max_share"):
        parse_config(text.replace("0.3", "1.5"), source="dubbo.yaml")
    with pytest.raises(ConfigError, match=r"references\.demo\.Greeter\.outlier_failures"):
        parse_config(text.replace("failures: 5", "failures: -1"), source="dubbo.yaml")


def test_reference_options_reach_its_detector() -> None:
    from demo import greeter_pb2_grpc

    import dubbo_py

    with dubbo_py.Application("shop", "tri://127.0.0.1:1,127.0.0.1:2") as app:
        ref = app.reference_handle(
            greeter_pb2_grpc.GreeterStub, outlier_failures=5, outlier_max_share=0.25
        )
        assert (ref.outliers.consecutive, ref.outliers.max_share) == (5, 0.25)
        ref.stub.SayHello  # noqa: B018  (builds the method's context)
        assert ref.contexts["SayHello"].outliers is ref.outliers
