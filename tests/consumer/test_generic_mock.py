"""The answers of generic calls' mocks and the failure reasons of generic calls' errors (unit
tests of one function each; the live behaviour is in tests/estate/test_java_generic_observed.py)."""

from __future__ import annotations

import pytest

from dubbo_py.cluster.mock import parse_mock
from dubbo_py.consumer.generic_mock import mock_answer, mock_value, mocks_failure
from dubbo_py.errors import ClusterError, NoProviderError
from dubbo_py.invocation import GenericRequest, Invocation
from dubbo_py.protocol.dubbo.connection import (
    DubboConnectionError,
    DubboRemoteError,
    DubboTimeoutError,
)
from dubbo_py.protocol.serialization.hessian2 import JavaException
from dubbo_py.qos.consumer import call_failure_reason


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("", None),
        ("null", None),
        ("empty", None),
        ('{"id": -1, "tags": ["a"]}', {"id": -1, "tags": ["a"]}),
        ("[1, 2]", [1, 2]),
        ("true", True),
        ("7", 7),
        ('"busy"', "busy"),
        ("busy", "busy"),  # no JSON: the bare word, as Dubbo's MockInvoker reads it
    ],
)
def test_return_values(text: str, value: object) -> None:
    assert mock_value(text) == value


def test_throw_raises_a_cluster_error_with_the_message() -> None:
    spec = parse_mock("force:throw overloaded")
    assert spec is not None
    invocation = Invocation("estate.UserService", "getUser", GenericRequest(None, (7,)))
    with pytest.raises(ClusterError, match="overloaded"):
        mock_answer(spec, invocation)


def test_only_failures_outside_the_service_are_mocked() -> None:
    assert mocks_failure(DubboConnectionError("refused"))
    assert mocks_failure(DubboTimeoutError("late"))
    assert mocks_failure(NoProviderError("estate.UserService", "getUser", None))
    assert not mocks_failure(JavaException("java.lang.IllegalArgumentException", "no user 0"))
    assert not mocks_failure(ValueError("bad arguments"))


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (DubboTimeoutError("late"), "timeout"),
        (DubboConnectionError("reset"), "network"),
        (JavaException("java.lang.IllegalArgumentException", "no"), "business"),
        (NoProviderError("estate.UserService", "getUser", None), "service_unavailable"),
        (DubboRemoteError("127.0.0.1:20880", 70, "boom"), "unknown"),
    ],
)
def test_generic_errors_map_to_dubbos_failure_reasons(error: BaseException, reason: str) -> None:
    assert call_failure_reason(error) == reason
