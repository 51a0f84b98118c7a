"""Load balancers: pick one provider among the candidates the router chain left.

``get_loadbalance(name)`` builds one by its Dubbo name::

    lb = get_loadbalance("roundrobin")
    provider = lb.select(candidates, invocation)

Names: ``random`` (the default), ``roundrobin``, ``leastactive``, ``shortestresponse``,
``consistenthash``, ``p2c``, ``adaptive``. See ``docs/cluster.md`` for the formulas.
"""

from __future__ import annotations

import random

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
    "DEFAULT_LOADBALANCE",
    "DEFAULT_WARMUP",
    "DEFAULT_WEIGHT",
    "LOADBALANCE_NAMES",
    "STATS_LOADBALANCES",
    "AdaptiveLoadBalance",
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

#: The balancer a reference uses when it names none (Dubbo's default).
DEFAULT_LOADBALANCE = "random"
#: Every name :func:`get_loadbalance` accepts.
LOADBALANCE_NAMES = (
    "random",
    "roundrobin",
    "leastactive",
    "shortestresponse",
    "consistenthash",
    "p2c",
    "adaptive",
)
#: The balancers that read call statistics: a reference using one records every call.
STATS_LOADBALANCES = frozenset({"leastactive", "shortestresponse", "p2c", "adaptive"})


def get_loadbalance(
    name: str, *, stats: CallStats | None = None, rng: random.Random | None = None
) -> LoadBalance:
    """A new balancer called ``name`` (case-insensitive). ``stats`` feeds ``leastactive``,
    ``shortestresponse``, ``p2c`` and ``adaptive`` (default: the process-wide
    :func:`default_stats`); ``rng`` drives the random choices (seed it for reproducible
    tests). Raises :class:`ValueError` listing the valid names for an unknown one."""
    key = name.strip().lower() if isinstance(name, str) else ""
    if key == "random":
        return RandomLoadBalance(rng)
    if key == "roundrobin":
        return RoundRobinLoadBalance()
    if key == "leastactive":
        return LeastActiveLoadBalance(stats, rng)
    if key == "shortestresponse":
        return ShortestResponseLoadBalance(stats, rng)
    if key == "consistenthash":
        return ConsistentHashLoadBalance()
    if key == "p2c":
        return P2CLoadBalance(stats, rng)
    if key == "adaptive":
        return AdaptiveLoadBalance(stats, rng)
    raise ValueError(f"unknown load balancer {name!r}; valid names: {', '.join(LOADBALANCE_NAMES)}")
