"""Hedging and outlier ejection for generic calls (:mod:`dubbo_py.consumer.generic`), on the
machinery stub references use (:mod:`dubbo_py.cluster.hedging`,
:mod:`dubbo_py.cluster.outlier`).

That machinery reads gRPC status codes; a generic attempt ends in a value, a Java exception (the
provider's answer) or a :class:`~dubbo_py.protocol.dubbo.connection.DubboCallError` (a failure
outside the service's code). Here an attempt is adapted to it: a failure is raised as
:class:`ProviderFailure`, a ``grpc.RpcError`` whose code says what kind of failure it was
(:func:`failure_code`: a timeout is ``DEADLINE_EXCEEDED``; a connection lost, an error status
from the provider, a Triple status other than ``DEADLINE_EXCEEDED``, ``UNAVAILABLE``), and an
answer -- a value or a Java exception -- is returned as :class:`Answer`, so the hedged race
takes a Java exception as the answer it is (never hedged past) and the generic cluster knows
which provider gave it.

:class:`GenericHedging` holds a generic reference's hedging: the policy of each method (an
override rule's ``<method>.hedging`` or ``hedging``, else the method's own, else the
reference's), each method's :class:`~dubbo_py.cluster.hedging.Hedging` state and its counts.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import grpc

from dubbo_py.cluster.hedging import HedgeCounts, Hedging
from dubbo_py.cluster.hedging_policy import (
    HEDGING_OFF,
    HedgingPolicy,
    hedging_policy,
    parse_hedging_text,
)
from dubbo_py.cluster.support.context import ClusterContext
from dubbo_py.invocation import Invocation
from dubbo_py.protocol.dubbo.connection import DubboCallError, DubboTimeoutError
from dubbo_py.protocol.serialization.hessian2 import JavaException
from dubbo_py.url import URL

__all__ = [
    "Answer",
    "GenericContext",
    "GenericHedging",
    "ProviderFailure",
    "async_race_attempt",
    "failure_code",
    "race_attempt",
]

log = logging.getLogger(__name__)

#: A generic attempt: ``(provider, invocation, timeout)`` -> the value (or raises).
Attempt = Callable[[URL, Invocation, float | None], Any]
AsyncAttempt = Callable[[URL, Invocation, float | None], Awaitable[Any]]


def failure_code(error: DubboCallError) -> grpc.StatusCode:
    """The gRPC code a generic call's failure stands for in the outlier detector and the hedged
    race: ``DEADLINE_EXCEEDED`` for a timeout, ``UNAVAILABLE`` for the rest (a connection
    refused or lost, a provider answering with an error status such as
    ``SERVER_THREADPOOL_EXHAUSTED`` or ``SERVICE_NOT_FOUND``, a Triple status, a response that
    does not decode): failures of the provider, not answers of the service."""
    if isinstance(error, DubboTimeoutError | TimeoutError):
        return grpc.StatusCode.DEADLINE_EXCEEDED
    code = getattr(error, "code", None)
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return code
    return grpc.StatusCode.UNAVAILABLE


class ProviderFailure(grpc.RpcError):
    """A generic attempt's :class:`~dubbo_py.protocol.dubbo.connection.DubboCallError` as the
    status error the cluster machinery reads (``error`` is the original)."""

    def __init__(self, error: DubboCallError) -> None:
        super().__init__(str(error))
        self.error = error
        self._code = failure_code(error)

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return str(self.error)


@dataclass(frozen=True, slots=True)
class Answer:
    """What a provider answered a generic attempt: a value, or the service's exception."""

    provider: URL
    value: Any = None
    exception: JavaException | None = None

    def unwrap(self) -> Any:
        """The value, or the Java exception raised."""
        if self.exception is not None:
            raise self.exception
        return self.value


def race_attempt(attempt: Attempt) -> Attempt:
    """``attempt`` as a hedged race runs it: an :class:`Answer` back, failures raised as
    :class:`ProviderFailure`."""

    def run(provider: URL, invocation: Invocation, timeout: float | None) -> Answer:
        try:
            value = attempt(provider, invocation, timeout)
        except JavaException as exc:
            return Answer(provider, exception=exc)
        except DubboCallError as exc:
            raise ProviderFailure(exc) from exc
        return Answer(provider, value)

    return run


def async_race_attempt(attempt: AsyncAttempt) -> AsyncAttempt:
    """:func:`race_attempt` for an awaited attempt."""

    async def run(provider: URL, invocation: Invocation, timeout: float | None) -> Answer:
        try:
            value = await attempt(provider, invocation, timeout)
        except JavaException as exc:
            return Answer(provider, exception=exc)
        except DubboCallError as exc:
            raise ProviderFailure(exc) from exc
        return Answer(provider, value)

    return run


class GenericContext(ClusterContext):
    """The cluster context a generic call's hedged race reads: the candidates are the generic
    reference's routed providers now, and a hedge that failed is recorded as the reference
    records a failed attempt (``failed``: quarantine when the provider is down, else its
    outlier count)."""

    def __init__(
        self,
        service: str,
        route: Callable[[Invocation], tuple[URL, ...]],
        failed: Callable[[URL, DubboCallError], object],
        **fields: Any,
    ) -> None:
        super().__init__(service, routes=_NO_CHAIN, call=_never, **fields)
        self._route = route
        self._failed = failed

    def candidates(self, invocation: Invocation) -> tuple[URL, ...]:
        return self._route(invocation)

    def note_failure(self, provider: URL, error: BaseException) -> None:
        if isinstance(error, ProviderFailure):
            self._failed(provider, error.error)
        elif self.outliers is not None:  # a race's loser that never answered
            self.outliers.failed(provider, error)


class _NoChain:
    """The chain source of a :class:`GenericContext`: never read (it routes by itself)."""

    @property
    def chain(self) -> Any:
        raise AssertionError("a generic call's context routes through the generic reference")


_NO_CHAIN: Any = _NoChain()


def _never(provider: URL, invocation: Invocation, timeout: float | None) -> Any:
    raise AssertionError("a generic call's context makes no provider call of its own")


class GenericHedging:
    """A generic reference's hedging: each method's policy in force, its state and counts."""

    def __init__(self, interface: str, default: Any, methods: Mapping[str, Any]) -> None:
        self.interface = interface
        #: The reference's policy (``hedging=``) and each method's own (``methods=``).
        self.default: HedgingPolicy = hedging_policy(default)
        self.methods: dict[str, HedgingPolicy] = {
            name: hedging_policy(value) for name, value in methods.items()
        }
        #: What each method's hedging did (metrics; kept across policy changes).
        self.counts: dict[str, HedgeCounts] = {}
        self._states: dict[str, Hedging] = {}
        #: Override rules' policies by their text (None: the text does not parse).
        self._parsed: dict[str, HedgingPolicy | None] = {}

    def policy(self, method: str, override: str | None) -> HedgingPolicy:
        """The policy of ``method``'s calls now: ``override`` (an override rule's value) when
        it parses, else the method's own, else the reference's."""
        if override is not None:
            if override not in self._parsed:
                try:
                    self._parsed[override] = parse_hedging_text(override)
                except ValueError as exc:
                    log.error(
                        "generic reference to %s: ignoring override hedging=%r: %s",
                        self.interface,
                        override,
                        exc,
                    )
                    self._parsed[override] = None
            parsed = self._parsed[override]
            if parsed is not None:
                return parsed
        return self.methods.get(method, self.default)

    def state(self, method: str, override: str | None) -> Hedging | None:
        """``method``'s hedging state under its policy now (None: it does not hedge)."""
        policy = self.policy(method, override)
        if not policy.enabled or policy == HEDGING_OFF:
            self._states.pop(method, None)
            return None
        state = self._states.get(method)
        if state is None or state.policy != policy:
            counts = self.counts.setdefault(method, HedgeCounts())
            state = self._states[method] = Hedging(policy, counts)
        return state
