"""A reference's per-method call settings, resolved from its options and consumer overrides.

Options are held as Dubbo holds them on the consumer URL: one flat map of parameters, with
``<method>.<key>`` for a single method (``SayHello.retries=0``) and ``<key>`` for all of them.
A method reads ``<method>.<key>``, else ``<key>``. Consumer-side override rules (``side:
consumer``) are merged over that map, so an override of ``timeout`` changes every method that has
no timeout of its own, and ``SayHello.timeout`` changes that one method -- as in Apache Dubbo,
where override parameters are merged into the consumer URL and read with
``getMethodParameter``. Timeouts in the map are milliseconds, as in Dubbo's URLs.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from typing import Any

from dubbo_py.cluster.method_settings import MethodSettings

__all__ = [
    "METHOD_OPTION_KEYS",
    "MethodSettings",
    "base_parameters",
    "check_method_options",
    "resolve_settings",
]

log = logging.getLogger(__name__)

#: What ``methods={name: {...}}`` accepts per method.
METHOD_OPTION_KEYS = frozenset(
    {"retries", "timeout", "cluster", "mock", "forks", "idempotent", "sticky"}
)


def check_method_options(
    methods: Iterable[str], options: Mapping[str, Mapping[str, Any]], service: str
) -> None:
    """ValueError naming unknown methods or option keys (a typo must not pass silently)."""
    unknown_methods = set(options) - set(methods)
    if unknown_methods:
        raise ValueError(f"{service} has no method(s) {sorted(unknown_methods)}")
    for method, opts in options.items():
        unknown = set(opts) - METHOD_OPTION_KEYS
        if unknown:
            raise ValueError(
                f"methods[{method!r}]: unknown option(s) {sorted(unknown)}; "
                f"valid: {', '.join(sorted(METHOD_OPTION_KEYS))}"
            )


def _timeout_ms(seconds: Any) -> str:
    return "" if seconds is None else repr(float(seconds) * 1000.0)


def base_parameters(
    *,
    retries: int,
    timeout: float | None,
    forks: int,
    sticky: bool,
    loadbalance: str,
    methods: Mapping[str, Mapping[str, Any]],
) -> dict[str, str]:
    """The reference's options as a Dubbo-style parameter map (timeouts in ms; an empty
    timeout means none)."""
    params = {
        "retries": str(int(retries)),
        "timeout": _timeout_ms(timeout),
        "forks": str(int(forks)),
        "sticky": "true" if sticky else "false",
        "loadbalance": loadbalance,
    }
    for method, opts in methods.items():
        for key in ("retries", "forks"):
            if key in opts:
                params[f"{method}.{key}"] = str(int(opts[key]))
        if "timeout" in opts:
            params[f"{method}.timeout"] = _timeout_ms(opts["timeout"])
        if "sticky" in opts:
            params[f"{method}.sticky"] = "true" if opts["sticky"] else "false"
    return params


def _lookup(params: Mapping[str, str], method: str, key: str) -> str | None:
    value = params.get(f"{method}.{key}")
    return params.get(key) if value is None else value


def _int(params: Mapping[str, str], method: str, key: str, fallback: int, minimum: int) -> int:
    text = _lookup(params, method, key)
    if text is None:
        return fallback
    try:
        return max(minimum, int(text))
    except ValueError:
        log.error("ignoring %s=%r for %s: not an integer", key, text, method)
        return fallback


def _timeout(params: Mapping[str, str], method: str, fallback: float | None) -> float | None:
    text = _lookup(params, method, "timeout")
    if text is None:
        return fallback
    if text == "":
        return None
    try:
        ms = float(text)
    except ValueError:
        ms = math.nan
    if not math.isfinite(ms) or ms < 0:
        log.error("ignoring timeout=%r for %s: not a number of milliseconds >= 0", text, method)
        return fallback
    return ms / 1000.0


def resolve_settings(
    methods: Iterable[str],
    params: Mapping[str, str],
    fallback: Mapping[str, MethodSettings] | None = None,
) -> dict[str, MethodSettings]:
    """Settings per method from a parameter map. A value that does not parse is logged and the
    method keeps its ``fallback`` setting (its settings before an override was pushed)."""
    out = {}
    for method in methods:
        old = (fallback or {}).get(method, MethodSettings())
        sticky = _lookup(params, method, "sticky")
        out[method] = MethodSettings(
            retries=_int(params, method, "retries", old.retries, 0),
            timeout=_timeout(params, method, old.timeout),
            forks=_int(params, method, "forks", old.forks, 1),
            sticky=old.sticky if sticky is None else sticky.strip().lower() == "true",
        )
    return out
