"""The cluster strategies, one module each, every module holding the strategy's blocking and
asyncio forms side by side; and the one registry of their names.

=============  ==================================================================
``failover``   retry elsewhere on a transport failure (Dubbo's default)
``failfast``   one attempt; any failure goes straight to the caller
``failsafe``   one attempt; a failure answers with the empty response
``failback``   one attempt; a retryable failure is raised and retried in the background
``forking``    ``forks`` providers at once, the first success wins
``broadcast``  every routed provider, one after another
=============  ==================================================================

:data:`STRATEGIES` is the one place the names live: configuration validates against
:data:`STRATEGY_NAMES`, and both flavours of a reference build their strategies from it
(:func:`get_strategy`, :func:`async_strategy`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from google.protobuf.message import Message

from dubbo_py.cluster.mock import Mock
from dubbo_py.cluster.strategies.broadcast import broadcast, broadcast_async
from dubbo_py.cluster.strategies.failback import failback, failback_async
from dubbo_py.cluster.strategies.failfast import failfast, failfast_async
from dubbo_py.cluster.strategies.failover import failover, failover_async
from dubbo_py.cluster.strategies.failsafe import failsafe, failsafe_async
from dubbo_py.cluster.strategies.forking import forking, forking_async
from dubbo_py.cluster.strategy_settings import StrategySettings
from dubbo_py.cluster.support.context import AsyncStrategy, ClusterContext, Strategy

__all__ = [
    "DEFAULT_STRATEGY",
    "STRATEGIES",
    "STRATEGY_NAMES",
    "StrategyKind",
    "async_strategy",
    "get_strategy",
]


@dataclass(frozen=True, slots=True)
class StrategyKind:
    """One cluster strategy: its name, its blocking form, and how to get its asyncio form for
    a method whose blocking context is given (only ``failback`` needs it: its background
    retries run through the blocking context)."""

    name: str
    blocking: Strategy
    asyncio: Callable[[ClusterContext], AsyncStrategy]


def _same(strategy: AsyncStrategy) -> Callable[[ClusterContext], AsyncStrategy]:
    return lambda _blocking: strategy


#: Every strategy by name.
STRATEGIES: Mapping[str, StrategyKind] = MappingProxyType(
    {
        kind.name: kind
        for kind in (
            StrategyKind("failover", failover, _same(failover_async)),
            StrategyKind("failfast", failfast, _same(failfast_async)),
            StrategyKind("failsafe", failsafe, _same(failsafe_async)),
            StrategyKind("failback", failback, failback_async),
            StrategyKind("forking", forking, _same(forking_async)),
            StrategyKind("broadcast", broadcast, _same(broadcast_async)),
        )
    }
)
#: Every name a reference's ``cluster`` option accepts.
STRATEGY_NAMES: tuple[str, ...] = tuple(STRATEGIES)
#: The strategy of a reference that names none (Dubbo's default).
DEFAULT_STRATEGY = "failover"


def _kind(name: str) -> StrategyKind:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ValueError(
            f"unknown cluster strategy {name!r}; choose one of {', '.join(sorted(STRATEGIES))}"
        ) from None


def get_strategy(name: str) -> Strategy:
    """The blocking strategy called ``name``; ValueError listing the known ones otherwise."""
    return _kind(name).blocking


def async_strategy(
    policy: StrategySettings,
    blocking: ClusterContext,
    response_type: type[Message] | None,
    *,
    streaming: bool = False,
) -> AsyncStrategy:
    """The awaited strategy for a method's policy; ``blocking`` is the reference's blocking
    context for the method (failback retries through it); ``response_type`` is what a mock
    answers with, as a stream when the method is server-streaming (``streaming``). ValueError
    for an unknown strategy name."""
    strategy = _kind(policy.cluster).asyncio(blocking)
    if policy.mock is not None:
        strategy = Mock(policy.mock, response_type, streaming).wrap_async(strategy)
    return strategy
