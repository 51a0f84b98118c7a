"""Unit tests of dubbo_py/consumer/generic_governance.py: how a generic attempt's outcomes read
as the status codes the outlier detector and the hedged race use, and which hedging policy a
generic call's method has. The live behaviour is tests/estate/test_java_generic_governed.py."""

from __future__ import annotations

import logging

import grpc
import pytest

from dubbo_py.cluster.hedging_policy import HedgingPolicy
from dubbo_py.cluster.outlier import OutlierDetector
from dubbo_py.consumer.generic_governance import (
    Answer,
    GenericHedging,
    ProviderFailure,
    failure_code,
    race_attempt,
)
from dubbo_py.invocation import Invocation
from dubbo_py.protocol.dubbo.connection import (
    DubboCallError,
    DubboConnectionError,
    DubboRemoteError,
    DubboTimeoutError,
)
from dubbo_py.protocol.serialization.hessian2 import JavaException
from dubbo_py.protocol.triple_wrapper import TripleWrapperError
from dubbo_py.url import URL

PROVIDER = URL.parse("dubbo://127.0.0.1:20880/estate.UserService")


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (DubboTimeoutError("late"), grpc.StatusCode.DEADLINE_EXCEEDED),
        (DubboConnectionError("reset"), grpc.StatusCode.UNAVAILABLE),
        (DubboRemoteError("127.0.0.1:1", 100, "pool exhausted"), grpc.StatusCode.UNAVAILABLE),
        (
            TripleWrapperError("a", "late", code=grpc.StatusCode.DEADLINE_EXCEEDED),
            grpc.StatusCode.DEADLINE_EXCEEDED,
        ),
        (
            TripleWrapperError("a", "bad", code=grpc.StatusCode.INTERNAL),
            grpc.StatusCode.UNAVAILABLE,
        ),
    ],
)
def test_failures_read_as_provider_failures(error: DubboCallError, code: grpc.StatusCode) -> None:
    assert failure_code(error) is code
    adapted = ProviderFailure(error)
    assert adapted.code() is code and adapted.error is error


def test_an_error_status_counts_towards_ejection_and_an_answer_resets_it() -> None:
    class Quarantine:
        def __init__(self) -> None:
            self.addresses: dict[str, object] = {}
            self.added: list[str] = []

        def add(self, url: URL, reason: str) -> object:
            self.added.append(reason)
            return None

    quarantine = Quarantine()
    detector = OutlierDetector(quarantine, lambda: 2, consecutive=2)
    remote = DubboRemoteError(PROVIDER.address, 100, "exhausted")
    assert not detector.failed(PROVIDER, ProviderFailure(remote))
    detector.succeeded(PROVIDER.address)  # an answer (a Java exception too) starts again
    assert not detector.failed(PROVIDER, ProviderFailure(remote))
    assert detector.failed(PROVIDER, ProviderFailure(DubboTimeoutError("late")))
    assert len(quarantine.added) == 1 and "outlier" in quarantine.added[0]


def test_a_race_attempt_returns_answers_and_raises_failures() -> None:
    invocation = Invocation("estate.UserService", "getUser")
    refused = JavaException("java.lang.IllegalArgumentException", "no user 0")

    def answers(provider: URL, invocation: Invocation, timeout: float | None) -> object:
        raise refused

    answer = race_attempt(answers)(PROVIDER, invocation, 1.0)
    assert answer == Answer(PROVIDER, exception=refused)
    with pytest.raises(JavaException):
        answer.unwrap()
    assert race_attempt(lambda p, i, t: 7)(PROVIDER, invocation, 1.0).unwrap() == 7

    def fails(provider: URL, invocation: Invocation, timeout: float | None) -> object:
        raise DubboTimeoutError("late")

    with pytest.raises(ProviderFailure) as raised:
        race_attempt(fails)(PROVIDER, invocation, 1.0)
    assert raised.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED


def test_the_hedging_policy_of_a_method(caplog: pytest.LogCaptureFixture) -> None:
    hedging = GenericHedging(
        "estate.UserService", None, {"getUser": {"delay": 0.2, "max_attempts": 3}}
    )
    assert hedging.state("sleep", None) is None  # off by default
    own = hedging.state("getUser", None)
    assert own is not None and own.policy == HedgingPolicy(delay=0.2, max_attempts=3)
    # An override rule's value beats the method's own; "false" switches it off.
    ruled = hedging.state("getUser", "delay=0.05,max_attempts=2")
    assert ruled is not None and ruled.policy == HedgingPolicy(delay=0.05)
    assert ruled.counts is own.counts  # the counts survive a policy change
    assert hedging.state("getUser", "false") is None
    with caplog.at_level(logging.ERROR):
        kept = hedging.state("getUser", "delay=soon")
    assert kept is not None and kept.policy == HedgingPolicy(delay=0.2, max_attempts=3)
    assert "ignoring override hedging='delay=soon'" in caplog.text
    with pytest.raises(ValueError, match="max_attempts"):
        GenericHedging("estate.UserService", {"max_attempts": 9}, {})
