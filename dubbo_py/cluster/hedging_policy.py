"""What a method's hedging is (:class:`HedgingPolicy`) and how users write it: ``True``, a
mapping, or a URL parameter's text. No I/O and no gRPC: configuration reads it (see
:mod:`dubbo_py.cluster.hedging` for what a hedged call does)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "HEDGING_OFF",
    "MAX_ATTEMPTS",
    "HedgingPolicy",
    "hedging_policy",
    "parse_hedging_text",
]

#: The most attempts one hedged call may run at once (gRPC's hedging policy caps it at 5 too).
MAX_ATTEMPTS = 5

_PERCENTILE = re.compile(r"p(\d{1,2}(?:\.\d+)?)")


@dataclass(frozen=True, slots=True)
class HedgingPolicy:
    """How a method hedges: ``delay`` -- seconds, or a percentile of its recent latencies
    (``"p95"``, ``"p99"``, ``"p99.9"``); ``max_attempts`` -- attempts at once, the first
    included (1: no hedging); ``max_extra_load`` -- the share of calls hedges may add."""

    delay: float | str = "p99"
    max_attempts: int = 2
    max_extra_load: float = 0.05

    def __post_init__(self) -> None:
        delay = self.delay
        if isinstance(delay, str):
            text = delay.strip().lower()
            matched = _PERCENTILE.fullmatch(text)
            if matched is None or not 0 < float(matched.group(1)) < 100:
                try:
                    delay = float(text)
                except ValueError:
                    raise ValueError(
                        f"hedging delay must be seconds > 0 or a percentile such as 'p95', "
                        f"got {self.delay!r}"
                    ) from None
            else:
                delay = text
        if isinstance(delay, bool) or not isinstance(delay, int | float | str):
            raise ValueError(f"hedging delay must be seconds or a percentile, got {delay!r}")
        if not isinstance(delay, str) and not (math.isfinite(delay) and delay > 0):
            raise ValueError(f"hedging delay must be seconds > 0, got {delay!r}")
        object.__setattr__(self, "delay", delay if isinstance(delay, str) else float(delay))
        if (
            isinstance(self.max_attempts, bool)
            or not isinstance(self.max_attempts, int)
            or not 1 <= self.max_attempts <= MAX_ATTEMPTS
        ):
            raise ValueError(
                f"hedging max_attempts must be an integer from 1 to {MAX_ATTEMPTS}, "
                f"got {self.max_attempts!r}"
            )
        load = self.max_extra_load
        if (
            isinstance(load, bool)
            or not isinstance(load, int | float)
            or not (math.isfinite(load) and 0 <= load <= 1)
        ):
            raise ValueError(f"hedging max_extra_load must be within [0, 1], got {load!r}")
        object.__setattr__(self, "max_extra_load", float(load))

    @property
    def enabled(self) -> bool:
        """Whether calls hedge at all (``max_attempts`` above 1)."""
        return self.max_attempts > 1

    @property
    def percentile(self) -> float | None:
        """The latency percentile the delay is (0-100), None for a fixed delay."""
        return float(self.delay[1:]) if isinstance(self.delay, str) else None

    def text(self) -> str:
        """The policy as a URL parameter value (what :func:`parse_hedging_text` reads)."""
        if not self.enabled:
            return "false"
        delay = self.delay if isinstance(self.delay, str) else repr(self.delay)
        return (
            f"delay={delay},max_attempts={self.max_attempts},max_extra_load={self.max_extra_load!r}"
        )


#: ``hedging=False``: a method that does not hedge (overrides a reference's ``hedging``).
HEDGING_OFF = HedgingPolicy(max_attempts=1)

_KEYS = ("delay", "max_attempts", "max_extra_load")


def hedging_policy(value: Any) -> HedgingPolicy:
    """A policy from what a user wrote: True (the defaults), False/None (:data:`HEDGING_OFF`),
    a mapping of ``delay``/``max_attempts``/``max_extra_load``, a policy, or text
    (:func:`parse_hedging_text`). ValueError saying what is wrong."""
    if isinstance(value, HedgingPolicy):
        return value
    if value is True:
        return HedgingPolicy()
    if value is False or value is None:
        return HEDGING_OFF
    if isinstance(value, str):
        return parse_hedging_text(value)
    if isinstance(value, Mapping):
        unknown = sorted(str(k) for k in value if k not in _KEYS)
        if unknown:
            raise ValueError(f"unknown hedging key(s) {unknown} (known: {', '.join(_KEYS)})")
        values = dict(value)
        if "max_attempts" in values and isinstance(values["max_attempts"], str):
            values["max_attempts"] = _integer(values["max_attempts"])
        if "max_extra_load" in values and isinstance(values["max_extra_load"], str):
            values["max_extra_load"] = _number(values["max_extra_load"])
        return HedgingPolicy(**values)
    raise ValueError(f"hedging must be true, false or a mapping, got {value!r}")


def _integer(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"hedging max_attempts must be an integer, got {text!r}") from None


def _number(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise ValueError(f"hedging max_extra_load must be a number, got {text!r}") from None


def parse_hedging_text(text: str) -> HedgingPolicy:
    """A policy from a parameter value: ``true``/``false``, or ``key=value`` pairs separated
    by commas (``delay=p99,max_attempts=2``). A mapping an override rule wrote in YAML
    (``parameters: {hedging: {delay: p99}}``, which arrives as ``{'delay': 'p99'}``) reads too."""
    stripped = text.strip()
    lowered = stripped.lower()
    if lowered in ("true", "on", "yes"):
        return HedgingPolicy()
    if lowered in ("false", "off", "no", ""):
        return HEDGING_OFF
    body = stripped[1:-1] if stripped.startswith("{") and stripped.endswith("}") else stripped
    values: dict[str, Any] = {}
    for part in body.replace(";", ",").split(","):
        if not part.strip():
            continue
        key, sep, raw = part.replace(":", "=", 1).partition("=")
        key = key.strip().strip("'\"")
        if not sep:
            raise ValueError(f"hedging {text!r}: expected key=value, got {part.strip()!r}")
        values[key] = raw.strip().strip("'\"")
    return hedging_policy(values)
