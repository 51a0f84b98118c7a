"""Configuration objects. The programmatic API (keyword arguments) and ``dubbo.yaml`` both
produce these, so what a file says and what code says mean exactly the same thing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any

from dubbo_py.cluster.hedging_policy import HedgingPolicy, hedging_policy
from dubbo_py.cluster.loadbalance import LOADBALANCE_NAMES
from dubbo_py.cluster.strategies import STRATEGY_NAMES
from dubbo_py.config.options import MethodOptions, ServiceOptions
from dubbo_py.config.tls import ClientTLS, ServerTLS
from dubbo_py.errors import ConfigError, OptionError
from dubbo_py.invocation import COMPRESSIONS

__all__ = [
    "DEFAULT_REGISTRY_WEIGHT",
    "ApplicationConfig",
    "MethodOptions",
    "ProtocolConfig",
    "QosConfig",
    "ReferenceConfig",
    "RegistryConfig",
    "ServiceOptions",
    "application_parameters",
    "method_options",
]


#: Consumer URL keys dubbo-py sets itself: an application parameter may not replace them (the
#: URL would then name another application, service or side).
_RESERVED_PARAMETERS = frozenset(
    {
        "application",
        "category",
        "check",
        "dubbo",
        "group",
        "interface",
        "pid",
        "release",
        "side",
        "timestamp",
        "version",
    }
)


def application_parameters(value: object, path: str = "parameters") -> Mapping[str, str]:
    """An application's own URL parameters (``region: x``), checked: a mapping of names to
    strings (numbers and booleans are written as YAML spells them, ``true``/``false``); a
    name empty, with spaces, ``&``/``=``, or one dubbo-py sets itself is a ConfigError naming
    it. Consumer URLs carry them, so condition rules (``$region``) and affinity rules read
    them, as Dubbo's ``ApplicationConfig.parameters``."""
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping):
        raise ConfigError(path, f"expected a mapping of names to values, got {value!r}")
    out: dict[str, str] = {}
    for name, raw in value.items():
        where = f"{path}.{name}"
        if not isinstance(name, str) or not name.strip() or name != name.strip():
            raise ConfigError(path, f"{name!r} is not a parameter name")
        if any(c in name for c in "&=?# "):
            raise ConfigError(where, "a parameter name has no '&', '=', '?', '#' or space")
        if name in _RESERVED_PARAMETERS:
            raise ConfigError(where, "dubbo-py sets this key itself; choose another name")
        if isinstance(raw, bool):
            text = "true" if raw else "false"
        elif isinstance(raw, int | float | str):
            text = str(raw)
        else:
            raise ConfigError(where, f"expected a string, number or boolean, got {raw!r}")
        out[name] = text
    return MappingProxyType(out)


#: A registry's weight when none is given (Dubbo's ``DEFAULT_WEIGHT`` for registries).
DEFAULT_REGISTRY_WEIGHT = 100


@dataclass(frozen=True, slots=True)
class RegistryConfig:
    """Where a registry is, who we are to it, and -- when the application uses several
    (``registries:`` in ``dubbo.yaml``, a list in code) -- its place among them: its ``zone``,
    its ``weight`` in the pick among zones, whether it is ``preferred``, and whether providers
    ``register`` and consumers ``subscribe`` there (docs/registry.md, *Several registries*)."""

    address: str | None = None
    #: ``user:password``: the ZooKeeper digest identity, or the etcd user and password.
    auth: str | None = None
    #: Levels providers register at: ``all`` (default), ``interface`` or ``instance``.
    register_mode: str | None = None
    #: Consumers' migration step: ``APPLICATION_FIRST`` (default), ``FORCE_INTERFACE``,
    #: ``FORCE_APPLICATION``.
    migration_step: str | None = None
    #: The zone (data centre, region) the registry serves; calls of the same zone prefer it.
    zone: str | None = None
    #: Its share of calls when no registry is preferred and none is in the call's zone.
    weight: int = DEFAULT_REGISTRY_WEIGHT
    #: Every call goes to this registry while it has available providers (Dubbo's
    #: ``preferred``).
    preferred: bool = False
    #: Providers register in this registry.
    register: bool = True
    #: Consumers subscribe to this registry.
    subscribe: bool = True
    #: Keep providers this registry lost at once while they answer (``enable-empty-
    #: protection``; None: the application's setting, else on). docs/registry.md.
    enable_empty_protection: bool | None = None

    def __repr__(self) -> str:
        # The address and auth may hold a password: shown hidden (user:***, password=***).
        from dubbo_py.registry.store.address import display_address

        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.address is not None:
            shown["address"] = display_address(self.address)
        if self.auth is not None:
            shown["auth"] = f"{self.auth.partition(':')[0]}:***"
        return f"RegistryConfig({', '.join(f'{k}={v!r}' for k, v in shown.items())})"

    def __post_init__(self) -> None:
        if self.weight < 0:
            raise ConfigError("weight", f"must be >= 0, got {self.weight}")
        if self.zone is not None and (not self.zone.strip() or self.zone != self.zone.strip()):
            raise ConfigError("zone", f"must be a name without surrounding spaces: {self.zone!r}")

    def with_settings(self, settings: Mapping[str, Any], where: str) -> RegistryConfig:
        """This registry with the fields its address's parameters set (``zookeeper://h?zone=a``:
        :meth:`~dubbo_py.registry.store.address.RegistryAddress.settings`). A field set both
        here (not to its default) and in the address to different values is refused
        (ConfigError naming both), as which one applies would be a guess."""
        changes: dict[str, Any] = {}
        defaults = _REGISTRY_DEFAULTS
        for name, value in settings.items():
            current = getattr(self, name)
            if current != defaults[name] and current != value:
                # An identity is named by its user only: the password is never shown.
                if name == "auth":
                    shown = f"auth {str(value).partition(':')[0]}:***"
                    mine = repr(f"{str(current).partition(':')[0]}:***")
                else:
                    shown, mine = f"{name}={value}", repr(current)
                raise ConfigError(
                    name, f"{where} says {shown}, but the registry's {name} is {mine}"
                )
            changes[name] = value
        return replace(self, **changes) if changes else self


#: RegistryConfig's defaults, by field (what an address parameter may set without conflict).
_REGISTRY_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {f.name: f.default for f in fields(RegistryConfig)}
)


@dataclass(frozen=True, slots=True)
class ProtocolConfig:
    """How providers listen."""

    port: int = 0
    host: str | None = None
    bind_host: str | None = None
    tls: ServerTLS | None = None


@dataclass(frozen=True, slots=True)
class QosConfig:
    """The application's QoS port (``/metrics``, probes, ``offline``/``online``, ``/ls``)."""

    #: None: off; 0: any free port.
    port: int | None = None
    #: Listen on every interface instead of 127.0.0.1 (Dubbo's ``qos.accept.foreign.ip``).
    accept_foreign_ip: bool = False

    def __post_init__(self) -> None:
        if self.port is not None and not 0 <= self.port <= 65535:
            raise ConfigError("qos.port", f"{self.port} is not a port (0-65535)")

    @property
    def host(self) -> str:
        """The interface the QoS port binds."""
        return "0.0.0.0" if self.accept_foreign_ip else "127.0.0.1"


def method_options(
    methods: Mapping[str, MethodOptions | Mapping[str, Any]],
) -> dict[str, MethodOptions]:
    """Per-method options as values (a mapping of option names is converted); ConfigError
    naming ``methods.<method>.<key>`` for an unknown option, a value that does not parse or an
    unknown cluster strategy."""
    out = {}
    for method, options in methods.items():
        try:
            out[method] = MethodOptions.of(method, options)
        except OptionError as exc:
            raise ConfigError(exc.key, exc.problem) from None
        cluster = out[method].cluster
        if cluster is not None and cluster not in STRATEGY_NAMES:
            raise ConfigError(
                f"methods.{method}.cluster", f"{cluster!r} is not one of {STRATEGY_NAMES}"
            )
    return out


@dataclass(frozen=True, slots=True)
class ReferenceConfig:
    """How a consumer calls one service (``Application.reference`` options)."""

    version: str = ""
    group: str = ""
    #: The registry folder and ``interface`` parameter (Java's interface name); default: the
    #: proto service's full name. Calls still use the proto service's gRPC path.
    interface: str = ""
    loadbalance: str = "random"
    cluster: str = "failover"
    #: Failover retries; None: not set here, so the providers' ``retries`` (else 2) apply.
    retries: int | None = None
    #: Seconds; None: not set here, so the providers' ``timeout`` (else no deadline) applies.
    timeout: float | None = None
    #: Per-method options (a mapping of option names is accepted and converted).
    methods: Mapping[str, MethodOptions] = field(default_factory=dict)
    idempotent: frozenset[str] = frozenset()
    attachments: Mapping[str, str] = field(default_factory=dict)
    parameters: Mapping[str, str] = field(default_factory=dict)
    check: float = 3.0
    mock: str | None = None
    tls: ClientTLS | None = None
    #: Keep calling the same provider while it works (failover).
    sticky: bool = False
    #: How many providers ``forking`` calls at once.
    forks: int = 2
    #: Dubbo's consumer-side ``actives``: calls of a method in flight to one provider at most
    #: (0: no limit; a call over it waits for a slot up to its timeout).
    actives: int = 0
    #: How often (s) quarantined providers are probed for revival.
    quarantine_interval: float = 1.0
    #: Consecutive timeouts / UNAVAILABLE after which a provider is ejected into the
    #: quarantine (0: never eject on timeouts).
    outlier_failures: int = 3
    #: The largest share of the service's providers ejected at once (at least one).
    outlier_max_share: float = 0.5
    #: Ids of the application's registries this reference subscribes to (empty: every one
    #: marked ``subscribe``).
    registries: tuple[str, ...] = ()
    #: Hedged requests for every method safe to run twice: ``True`` (the defaults), ``False``
    #: or None (off), or a mapping ``{delay, max_attempts, max_extra_load}``
    #: (:class:`~dubbo_py.cluster.hedging_policy.HedgingPolicy`).
    hedging: HedgingPolicy | None = None
    #: Request compression of every call (``gzip``, ``deflate``, ``none``; a method's own
    #: ``compression`` and a call's ``compression=`` win); None: gRPC's default (none).
    compression: str | None = None

    def __post_init__(self) -> None:
        if self.hedging is not None:
            try:
                policy = hedging_policy(self.hedging)
            except ValueError as exc:
                raise ConfigError("hedging", str(exc)) from None
            object.__setattr__(self, "hedging", policy if policy.enabled else None)
        if self.loadbalance not in LOADBALANCE_NAMES:
            raise ConfigError(
                "loadbalance", f"{self.loadbalance!r} is not one of {LOADBALANCE_NAMES}"
            )
        if self.cluster not in STRATEGY_NAMES:
            raise ConfigError("cluster", f"{self.cluster!r} is not one of {STRATEGY_NAMES}")
        if "/" in self.interface or self.interface != self.interface.strip():
            raise ConfigError(
                "interface", f"must be a name without '/' or spaces: {self.interface!r}"
            )
        if self.retries is not None and self.retries < 0:
            raise ConfigError("retries", f"must be >= 0, got {self.retries}")
        if self.timeout is not None and self.timeout <= 0:
            raise ConfigError("timeout", f"must be > 0 seconds, got {self.timeout}")
        if self.forks < 1:
            raise ConfigError("forks", f"must be >= 1, got {self.forks}")
        if self.actives < 0:
            raise ConfigError("actives", f"must be >= 0, got {self.actives}")
        if self.compression is not None and self.compression not in COMPRESSIONS:
            raise ConfigError(
                "compression", f"{self.compression!r} is not one of {', '.join(COMPRESSIONS)}"
            )
        if self.quarantine_interval <= 0:
            raise ConfigError(
                "quarantine_interval", f"must be > 0 seconds, got {self.quarantine_interval}"
            )
        if self.outlier_failures < 0:
            raise ConfigError(
                "outlier_failures", f"must be >= 0 (0: off), got {self.outlier_failures}"
            )
        if not 0.0 <= self.outlier_max_share <= 1.0:
            raise ConfigError(
                "outlier_max_share", f"must be within [0, 1], got {self.outlier_max_share}"
            )
        if isinstance(self.registries, str) or any(not r for r in self.registries):
            raise ConfigError(
                "registries", f"expected a list of registry ids, got {self.registries!r}"
            )
        methods = method_options(self.methods)
        object.__setattr__(self, "registries", tuple(self.registries))
        object.__setattr__(self, "idempotent", frozenset(self.idempotent))
        object.__setattr__(self, "methods", MappingProxyType(methods))
        object.__setattr__(self, "attachments", MappingProxyType(dict(self.attachments)))
        object.__setattr__(self, "parameters", MappingProxyType(dict(self.parameters)))

    @property
    def client_tls(self) -> ClientTLS | None:
        """The TLS the reference's channels use: ``tls``, with ``tls.enabled`` taken from an
        ``ssl-enabled`` (Dubbo's key) or ``tls`` entry of ``parameters`` when ``tls`` itself does
        not say (a consumer parameter wins over the provider's, as in Dubbo's URL merge)."""
        if self.tls is not None and self.tls.enabled is not None:
            return self.tls
        for key in ("ssl-enabled", "tls"):
            text = self.parameters.get(key)
            if text is not None:
                return replace(self.tls or ClientTLS(), enabled=text.strip().lower() == "true")
        return self.tls

    def compression_of(self, method: str) -> str | None:
        """The compression of ``method``'s calls: its own option, else the reference's."""
        options = self.methods.get(method)
        own = options.compression if options is not None else None
        return own or self.compression

    def merged(self, **overrides: Any) -> ReferenceConfig:
        """This configuration with keyword overrides (code wins over file; an override of
        ``None`` means "not given" and keeps the current value)."""
        known = {f.name for f in fields(self)}
        unknown = set(overrides) - known
        if unknown:
            raise TypeError(f"unknown reference option(s): {sorted(unknown)}")
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return ReferenceConfig(**values)


@dataclass(frozen=True, slots=True)
class ApplicationConfig:
    """Everything one application's ``dubbo.yaml`` says."""

    name: str
    registry: RegistryConfig = RegistryConfig()
    protocol: ProtocolConfig = ProtocolConfig()
    #: Provider options by service name (``demo.Greeter``); they override the decorator's.
    services: Mapping[str, ServiceOptions] = field(default_factory=dict)
    #: Consumer options by service name.
    references: Mapping[str, ReferenceConfig] = field(default_factory=dict)
    #: The QoS port (``qos:`` section).
    qos: QosConfig = QosConfig()
    #: Several registries by id (``registries:``); empty when the application has one,
    #: :attr:`registry`.
    registries: Mapping[str, RegistryConfig] = field(default_factory=dict)
    #: The application's zone (``application.zone``): calls without a ``registry_zone``
    #: attachment prefer the registry of this zone.
    zone: str | None = None
    #: The application's own URL parameters (``application.parameters``): every consumer URL
    #: carries them (see :func:`application_parameters`).
    parameters: Mapping[str, str] = field(default_factory=dict)
    #: ``application.enable-empty-protection``: every registry's default (None: on).
    enable_empty_protection: bool | None = None
