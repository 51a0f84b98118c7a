"""A method's call policy: which cluster strategy runs its calls, and its mock, if any."""

from __future__ import annotations

from dataclasses import dataclass

from dubbo_py.cluster.mock import MockSpec

__all__ = ["MethodPolicy"]


@dataclass(frozen=True, slots=True)
class MethodPolicy:
    """How calls of one method are made: the cluster strategy's name (``failover``,
    ``failfast``, ...) and the parsed ``mock`` option (None: no mock). Both flavours of a
    reference build their strategies from it."""

    cluster: str = "failover"
    mock: MockSpec | None = None
