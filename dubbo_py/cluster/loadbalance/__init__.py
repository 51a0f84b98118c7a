"""Load balancers: pick one provider among the candidates the router chain left.

``get_loadbalance(name)`` builds one by its Dubbo name::

    lb = get_loadbalance("roundrobin")
    provider = lb.select(candidates, invocation)

Names (:data:`BALANCERS`, the one place they live): ``random`` (the default), ``roundrobin``,
``leastactive``, ``shortestresponse``, ``consistenthash``, ``p2c``, ``adaptive``. See
``docs/cluster.md`` for the formulas. Every balancer follows the one :class:`LoadBalance`
protocol: ``select``, and a ``picker`` for call plans (none by default).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from random import Random
from types import MappingProxyType

from dubbo_py.cluster.loadbalance.adaptive import AdaptiveLoadBalance
from dubbo_py.cluster.loadbalance.base import (
    DEFAULT_WARMUP,
    DEFAULT_WEIGHT,
    LoadBalance,
    calculate_warmup_weight,
    effective_weight,
    weight_stable_until,
)
from dubbo_py.cluster.loadbalance.consistenthash import ConsistentHashLoadBalance
from dubbo_py.cluster.loadbalance.leastactive import LeastActiveLoadBalance
from dubbo_py.cluster.loadbalance.p2c import P2CLoadBalance
from dubbo_py.cluster.loadbalance.random import RandomLoadBalance
from dubbo_py.cluster.loadbalance.roundrobin import RoundRobinLoadBalance
from dubbo_py.cluster.loadbalance.shortestresponse import ShortestResponseLoadBalance
from dubbo_py.cluster.stats import CallStats

__all__ = [
    "BALANCERS",
    "DEFAULT_LOADBALANCE",
    "DEFAULT_WARMUP",
    "DEFAULT_WEIGHT",
    "LOADBALANCE_NAMES",
    "STATS_LOADBALANCES",
    "AdaptiveLoadBalance",
    "BalancerKind",
    "ConsistentHashLoadBalance",
    "LeastActiveLoadBalance",
    "LoadBalance",
    "P2CLoadBalance",
    "RandomLoadBalance",
    "RoundRobinLoadBalance",
    "ShortestResponseLoadBalance",
    "calculate_warmup_weight",
    "effective_weight",
    "get_loadbalance",
    "weight_stable_until",
]


@dataclass(frozen=True, slots=True)
class BalancerKind:
    """One balancer: its Dubbo ``name``, how to ``make`` one (``make(stats, rng)``: each takes
    what it reads), and whether it ``reads_stats`` (a reference using it records every call)."""

    name: str
    make: Callable[[CallStats | None, Random | None], LoadBalance]
    reads_stats: bool = False


#: Every balancer by its Dubbo name: the one place the names live (configuration validates
#: against :data:`LOADBALANCE_NAMES`; :func:`get_loadbalance` builds from here).
BALANCERS: Mapping[str, BalancerKind] = MappingProxyType(
    {
        kind.name: kind
        for kind in (
            BalancerKind("random", lambda _stats, rng: RandomLoadBalance(rng)),
            BalancerKind("roundrobin", lambda _stats, _rng: RoundRobinLoadBalance()),
            BalancerKind("leastactive", LeastActiveLoadBalance, reads_stats=True),
            BalancerKind("shortestresponse", ShortestResponseLoadBalance, reads_stats=True),
            BalancerKind("consistenthash", lambda _stats, _rng: ConsistentHashLoadBalance()),
            BalancerKind("p2c", P2CLoadBalance, reads_stats=True),
            BalancerKind("adaptive", AdaptiveLoadBalance, reads_stats=True),
        )
    }
)
#: The balancer a reference uses when it names none (Dubbo's default).
DEFAULT_LOADBALANCE = "random"
#: Every name :func:`get_loadbalance` accepts.
LOADBALANCE_NAMES: tuple[str, ...] = tuple(BALANCERS)
#: The balancers that read call statistics: a reference using one records every call.
STATS_LOADBALANCES = frozenset(kind.name for kind in BALANCERS.values() if kind.reads_stats)


def get_loadbalance(
    name: str, *, stats: CallStats | None = None, rng: Random | None = None
) -> LoadBalance:
    """A new balancer called ``name`` (case-insensitive). ``stats`` feeds the balancers that
    read call statistics (``leastactive``, ``shortestresponse``, ``p2c``, ``adaptive``;
    default: the process-wide :func:`default_stats`); ``rng`` drives the random choices (seed
    it for reproducible tests). Raises :class:`ValueError` listing the valid names for an
    unknown one."""
    key = name.strip().lower() if isinstance(name, str) else ""
    kind = BALANCERS.get(key)
    if kind is None:
        raise ValueError(
            f"unknown load balancer {name!r}; valid names: {', '.join(LOADBALANCE_NAMES)}"
        )
    return kind.make(stats, rng)
