"""``@dubbo_py.service``: declare a gRPC servicer class as a governed provider."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

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


@dataclass(frozen=True, slots=True)
class ServiceOptions:
    """What a provider advertises in its registry URL besides its address."""

    version: str = ""
    group: str = ""
    #: The registry folder and ``interface`` parameter, e.g. Java's ``com.example.Greeter``
    #: (default: the proto service's full name, which stays the URL path and gRPC path).
    interface: str = ""
    weight: int = 100
    #: Milliseconds over which a new provider's weight ramps up (Dubbo's ``warmup``).
    warmup: int = 600_000
    tags: Mapping[str, str] = field(default_factory=dict)
    #: The data shard this provider owns (0-based), for the shard router; None when unsharded.
    shard: int | None = None
    #: The shard count of the layout ``shard`` belongs to (needed while a split is under way).
    shards: int | None = None
    #: Any further URL parameters (``timeout``, ``retries``, ``<method>.timeout`` ...).
    parameters: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.weight < 0:
            raise ValueError(f"weight must be >= 0, got {self.weight}")
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0 ms, got {self.warmup}")
        if "/" in self.interface or self.interface != self.interface.strip():
            raise ValueError(f"interface must be a name without '/' or spaces: {self.interface!r}")
        if self.shard is not None and self.shard < 0:
            raise ValueError(f"shard must be >= 0, got {self.shard}")
        if self.shards is not None and (self.shards < 1 or (self.shard or 0) >= self.shards):
            raise ValueError(f"shards must be >= 1 and > shard, got {self.shards}")
        object.__setattr__(self, "tags", MappingProxyType(dict(self.tags)))
        object.__setattr__(self, "parameters", MappingProxyType(dict(self.parameters)))

    def url_parameters(self) -> dict[str, str]:
        """These options as provider URL parameters."""
        params = {k: str(v) for k, v in self.parameters.items()}
        if self.version:
            params["version"] = self.version
        if self.group:
            params["group"] = self.group
        if self.interface:
            params["interface"] = self.interface
        params["weight"] = str(self.weight)
        params["warmup"] = str(self.warmup)
        if self.shard is not None:
            params["shard"] = str(self.shard)
        if self.shards is not None:
            params["shards"] = str(self.shards)
        for key, value in self.tags.items():
            # ``tags={"env": "gray"}`` sets Dubbo's request-routing tag ``dubbo.tag=gray`` when
            # the key is the conventional ``env``/``tag``; other keys become plain parameters
            # that tag and condition rules can match on.
            params["dubbo.tag" if key in ("tag", "env", "dubbo.tag") else key] = str(value)
        return params


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
    (``dubbo_py/rpc/limits.py``): ``executes`` (calls of each method at once), ``tps`` and
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
