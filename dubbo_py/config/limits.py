"""A service's overload-limit settings, parsed from its provider URL parameters.

The parameters are Dubbo's (``executes``, ``<method>.executes``, ``tps``, ``tps.interval``) and
dubbo-py's ``flowcontrol`` family; :func:`parse_limits` checks them and returns a frozen value,
so ``dubbo.yaml`` refuses a bad limit when it is read and the provider builds its guards
(``dubbo_py/provider/limits.py``) from the same value. Pure: no runtime state, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = [
    "DEFAULT_TPS_INTERVAL_MS",
    "FLOWCONTROLS",
    "GradientSettings",
    "LimitSettings",
    "MethodLimitSettings",
    "parse_limits",
]

#: Dubbo's default ``tps.interval``: 60 s.
DEFAULT_TPS_INTERVAL_MS = 60_000

#: The ``flowcontrol`` values dubbo-py knows.
FLOWCONTROLS = ("gradient",)


@dataclass(frozen=True, slots=True)
class GradientSettings:
    """``flowcontrol: gradient``'s bounds: the limit starts at ``initial`` and stays within
    ``minimum`` .. ``maximum`` calls at once."""

    initial: int = 20
    minimum: int = 4
    maximum: int = 200


@dataclass(frozen=True, slots=True)
class MethodLimitSettings:
    """The per-method limits of one method: calls at once (None: no limit) and the adaptive
    limit (None: none)."""

    executes: int | None = None
    flowcontrol: GradientSettings | None = None


@dataclass(frozen=True, slots=True)
class LimitSettings:
    """A service's overload limits: ``tps`` calls per ``tps_interval_ms`` shared by all its
    methods (``tps`` None: no rate limit), and each method's own limits, in the order given
    (methods without any limit of their own are still listed)."""

    tps: int | None
    tps_interval_ms: int
    methods: tuple[tuple[str, MethodLimitSettings], ...]


def _int(params: Mapping[str, str], key: str, default: int | None) -> int | None:
    text = params.get(key)
    if text is None or text == "":
        return default
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{key}={text!r}: not an integer") from None


def parse_limits(methods: Iterable[str], params: Mapping[str, str]) -> LimitSettings:
    """The limit settings of a service with ``methods``, from its provider URL parameters.
    ValueError naming the parameter for a bad value."""
    tps = _int(params, "tps", None)
    interval = DEFAULT_TPS_INTERVAL_MS
    if tps is not None and tps >= 0:
        interval = _int(params, "tps.interval", DEFAULT_TPS_INTERVAL_MS) or 0
        if not interval > 0:
            raise ValueError(f"tps.interval must be > 0 ms, got {interval}")
    else:
        tps = None  # a negative tps means no limit, as in Dubbo
    found = []
    for method in methods:
        executes = _int(params, f"{method}.executes", None)
        if executes is None:
            executes = _int(params, "executes", None)
        if executes is not None and executes <= 0:  # 0 means no limit, as in Dubbo
            executes = None
        gradient = None
        flowcontrol = params.get(f"{method}.flowcontrol", params.get("flowcontrol", ""))
        if flowcontrol:
            if flowcontrol not in FLOWCONTROLS:
                raise ValueError(
                    f"flowcontrol={flowcontrol!r}: unknown (known: {', '.join(FLOWCONTROLS)})"
                )
            gradient = GradientSettings(
                initial=_int(params, "flowcontrol.initial", 20) or 20,
                minimum=_int(params, "flowcontrol.min", 4) or 4,
                maximum=_int(params, "flowcontrol.max", 200) or 200,
            )
            if not 1 <= gradient.minimum <= gradient.maximum:
                raise ValueError(
                    "flowcontrol.min must be >= 1 and <= flowcontrol.max, got "
                    f"{gradient.minimum}, {gradient.maximum}"
                )
        found.append((method, MethodLimitSettings(executes, gradient)))
    return LimitSettings(tps, interval, tuple(found))
