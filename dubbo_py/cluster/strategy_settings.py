"""A method's strategy settings: which cluster strategy runs its calls, and its mock, if any
(the other half of what a method's calls use is :mod:`dubbo_py.cluster.method_settings`)."""

from __future__ import annotations

from dataclasses import dataclass

from dubbo_py.cluster.mock import MockSpec

__all__ = ["StrategySettings"]


@dataclass(frozen=True, slots=True)
class StrategySettings:
    """How calls of one method are made: the cluster strategy's name (``failover``,
    ``failfast``, ...) and the parsed ``mock`` option (None: no mock). Both flavours of a
    reference build their strategies from it."""

    cluster: str = "failover"
    mock: MockSpec | None = None
