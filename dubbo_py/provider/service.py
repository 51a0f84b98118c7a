"""``@dubbo_py.service``: declare a gRPC servicer class as a governed provider."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from dubbo_py.config.options import ServiceOptions

__all__ = ["ServiceOptions", "options_of", "service"]

T = TypeVar("T")

ATTRIBUTE = "__dubbo_service__"

#: Keyword spellings of dotted URL parameters (a Python keyword cannot hold a dot).
_DOTTED = {
    "tps_interval": "tps.interval",
    "flowcontrol_min": "flowcontrol.min",
    "flowcontrol_max": "flowcontrol.max",
    "flowcontrol_initial": "flowcontrol.initial",
}


def service(
    *,
    version: str = "",
    group: str = "",
    interface: str = "",
    weight: int = 100,
    warmup: int = 600_000,
    tags: Mapping[str, str] | None = None,
    shard: int | None = None,
    shards: int | None = None,
    methods: Mapping[str, Mapping[str, Any]] | None = None,
    **parameters: Any,
) -> Callable[[T], T]:
    """Class decorator: mark a generated-servicer subclass as a dubbo-py provider.

    ``version`` and ``group`` tell apart several servicers of one service on one server (calls
    reach the one their ``tri-service-version`` / ``tri-service-group`` headers name);
    ``interface`` is the name it registers under (Java's interface name, e.g.
    ``com.example.Greeter``; default: the proto service's full name).

    Further keywords become provider URL parameters, among them the overload limits
    (``dubbo_py/provider/limits.py``): ``executes`` (calls of each method at once), ``tps`` and
    ``tps_interval`` (ms), ``flowcontrol="gradient"`` with ``flowcontrol_min`` /
    ``flowcontrol_max``. ``methods`` sets parameters for one method each, e.g.
    ``methods={"SayHello": {"executes": 2}}`` (``SayHello.executes=2``, as in Dubbo).

    >>> @service(version="1.0.0", tags={"env": "gray"})
    ... class Greeter: ...
    """
    flat = {_DOTTED.get(k, k): str(v) for k, v in parameters.items()}
    for method, per_method in (methods or {}).items():
        for key, value in per_method.items():
            flat[f"{method}.{_DOTTED.get(key, key)}"] = str(value)
    options = ServiceOptions(
        version=version,
        group=group,
        interface=interface,
        weight=weight,
        warmup=warmup,
        tags=dict(tags or {}),
        shard=shard,
        shards=shards,
        parameters=flat,
    )

    def decorate(cls: T) -> T:
        if not isinstance(cls, type):
            raise TypeError("@dubbo_py.service decorates a class")
        setattr(cls, ATTRIBUTE, options)
        return cls

    return decorate


def options_of(servicer: object) -> ServiceOptions:
    """The options a servicer's class was decorated with (defaults when undecorated)."""
    found = getattr(type(servicer), ATTRIBUTE, None)
    return found if isinstance(found, ServiceOptions) else ServiceOptions()
