"""Options values: what a provider advertises (:class:`ServiceOptions`) and what one method of a
reference overrides (:class:`MethodOptions`). Frozen values, so the configuration file, the
decorator and keyword arguments all produce the same thing, and code reads attributes instead of
picking string keys out of nested mappings."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from dubbo_py.cluster.hedging_policy import HedgingPolicy, hedging_policy
from dubbo_py.errors import OptionError

__all__ = ["METHOD_OPTION_KEYS", "MethodOptions", "ServiceOptions"]


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
    #: Ids of the application's registries the service registers in (empty: every one marked
    #: ``register``); not a URL parameter.
    registries: tuple[str, ...] = ()

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
        if isinstance(self.registries, str) or any(not r for r in self.registries):
            raise ValueError(f"registries must be a list of registry ids, got {self.registries!r}")
        object.__setattr__(self, "tags", MappingProxyType(dict(self.tags)))
        object.__setattr__(self, "parameters", MappingProxyType(dict(self.parameters)))
        object.__setattr__(self, "registries", tuple(self.registries))

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


def _count(minimum: int) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        number = int(value)
        if number < minimum:
            raise ValueError(f"must be >= {minimum}, got {number}")
        return number

    return parse


def _seconds(value: Any) -> float:
    number = float(value)
    if not number > 0:
        raise ValueError(f"must be > 0 seconds, got {number}")
    return number


def _flag(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


@dataclass(frozen=True, slots=True)
class MethodOptions:
    """What one method of a reference sets for itself (``methods={"SayHello": {...}}``, or
    ``references.<service>.methods.<method>`` in ``dubbo.yaml``); None: not set, so the
    reference's option applies."""

    #: Failover retries.
    retries: int | None = None
    #: Seconds.
    timeout: float | None = None
    #: The cluster strategy (``failover``, ``failfast`` ...).
    cluster: str | None = None
    #: A mock spec (see :mod:`dubbo_py.cluster.mock`).
    mock: str | None = None
    #: How many providers ``forking`` calls.
    forks: int | None = None
    #: Whether DEADLINE_EXCEEDED may be retried.
    idempotent: bool = False
    #: Keep calling the same provider while it works.
    sticky: bool | None = None
    #: Calls of the method in flight to one provider at most (0: no limit).
    actives: int | None = None
    #: Hedged requests (``True``, ``False`` or a mapping; see ``docs/cluster.md``).
    hedging: HedgingPolicy | None = None
    #: Request compression: ``gzip``, ``deflate`` or ``none`` (gRPC's).
    compression: str | None = None

    @classmethod
    def of(cls, method: str, options: Mapping[str, Any] | MethodOptions) -> MethodOptions:
        """Options from a mapping of option names (unknown names and values that do not parse
        are an :class:`OptionError` naming ``methods.<method>.<key>``)."""
        if isinstance(options, MethodOptions):
            return options
        values: dict[str, Any] = {}
        for key, raw in options.items():
            parse = _PARSERS.get(key)
            if parse is None:
                known = ", ".join(sorted(METHOD_OPTION_KEYS))
                raise OptionError(f"methods.{method}.{key}", f"unknown option (known: {known})")
            if raw is None:
                continue
            try:
                values[key] = parse(raw)
            except (TypeError, ValueError) as exc:
                raise OptionError(f"methods.{method}.{key}", str(exc)) from None
        return cls(**values)


def _compression(value: Any) -> str:
    # The names of dubbo_py.invocation.COMPRESSIONS (gRPC's compressions).
    name = str(value).strip().lower()
    if name not in ("gzip", "deflate", "none"):
        raise ValueError(f"{value!r} is not a compression (gzip, deflate, none)")
    return name


_PARSERS: dict[str, Callable[[Any], Any]] = {
    "retries": _count(0),
    "timeout": _seconds,
    "cluster": str,
    "mock": str,
    "forks": _count(1),
    "idempotent": _flag,
    "sticky": _flag,
    "actives": _count(0),
    "hedging": hedging_policy,
    "compression": _compression,
}

#: What ``methods={name: {...}}`` accepts per method.
METHOD_OPTION_KEYS = frozenset(_PARSERS)
