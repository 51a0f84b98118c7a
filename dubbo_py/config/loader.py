"""``dubbo.yaml``: one application's configuration in a file.

.. code-block:: yaml

    application: shop
    registry: {address: "zookeeper://127.0.0.1:2181", auth: "admin:secret"}
    protocol: {port: 50051, host: 10.0.0.5, tls: {cert_chain: server.pem, private_key: server.key}}
    services:
      demo.Greeter: {version: 1.0.0, weight: 100, tags: {env: gray}}
    qos: {port: 22222, accept_foreign_ip: false}
    references:
      demo.Greeter:
        version: 1.0.0
        loadbalance: roundrobin
        timeout: 1.0
        methods: {SayHello: {retries: 0, mock: "fail:return {}"}}

Read with dubbo-py's one YAML loader (:mod:`dubbo_py.yaml_loader`: safe types only, no anchors
or aliases, every error with its line and column). Environment variables override the file:
``DUBBO_PY_APPLICATION``, ``DUBBO_PY_REGISTRY`` (address), ``DUBBO_PY_REGISTRY_AUTH``,
``DUBBO_PY_PROTOCOL_PORT``, ``DUBBO_IP_TO_REGISTRY`` / ``DUBBO_PY_HOST`` (``protocol.host``),
``DUBBO_IP_TO_BIND`` (``protocol.bind_host``). Relative TLS paths are relative to the file.
Every error names the file, the key path, the problem and, for a value written in the file, its
line and column.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from dubbo_py.config.limits import parse_limits
from dubbo_py.config.model import (
    DEFAULT_REGISTRY_WEIGHT,
    ApplicationConfig,
    ProtocolConfig,
    QosConfig,
    ReferenceConfig,
    RegistryConfig,
    application_parameters,
    method_options,
)
from dubbo_py.config.options import ServiceOptions
from dubbo_py.config.tls import ClientTLS, ServerTLS
from dubbo_py.errors import ConfigError, TLSConfigError
from dubbo_py.yaml_loader import YamlDocument, load_yaml

__all__ = ["load_config", "parse_config"]

T = TypeVar("T")

#: A service's overload limits in dubbo.yaml (see dubbo_py/config/limits.py).
_LIMIT_KEYS = (
    "executes",
    "tps",
    "tps.interval",
    "flowcontrol",
    "flowcontrol.min",
    "flowcontrol.max",
    "flowcontrol.initial",
)


def _syntax_error(
    message: str, *, source: str = "", line: int | None = None, column: int | None = None
) -> ConfigError:
    where = f"line {line}, column {column}: " if line is not None else ""
    return ConfigError("", f"{where}{message}", source)


#: ``enable-empty-protection`` as Dubbo spells it, and as the other keys here are spelled.
_EMPTY_PROTECTION_KEYS = ("enable-empty-protection", "enable_empty_protection")
#: What one entry of ``registries:`` may say.
_REGISTRY_KEYS = (
    "address",
    "auth",
    "zone",
    "weight",
    "preferred",
    "register",
    "subscribe",
    *_EMPTY_PROTECTION_KEYS,
)

#: Key paths an environment variable overrides (see the module doc).
_FROM_ENV = {
    "application": ("DUBBO_PY_APPLICATION",),
    "registry.address": ("DUBBO_PY_REGISTRY",),
    "registry.auth": ("DUBBO_PY_REGISTRY_AUTH",),
    "protocol.port": ("DUBBO_PY_PROTOCOL_PORT",),
}


class _Reader:
    def __init__(self, source: str, base: Path, doc: YamlDocument | None = None) -> None:
        self.source = source
        self.base = base
        #: Where each key path (``references.demo.Greeter.timeout``) is written in the file.
        self.written: dict[str, tuple[int | None, int | None]] = {}
        if doc is not None:
            for parts in doc.nodes:
                self.written.setdefault(".".join(map(str, parts)), doc.position(parts))
        #: Key paths whose value came from the environment, not the file.
        self.from_env: set[str] = set()

    def fail(self, path: str, problem: str) -> ConfigError:
        line, column = self.written.get(path, (None, None))
        if line is not None and path not in self.from_env:
            problem = f"{problem} (line {line}, column {column})"
        return ConfigError(path, problem, self.source)

    def mapping(self, value: Any, path: str, allowed: tuple[str, ...] | None) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(path, f"expected a mapping, got {type(value).__name__}")
        out = {str(k): v for k, v in value.items()}
        if allowed is not None:
            for key in out:
                if key not in allowed:
                    raise self.fail(
                        f"{path}.{key}" if path else key,
                        f"unknown key (expected one of {', '.join(allowed)})",
                    )
        return out

    def typed(self, value: Any, path: str, kind: type[T], convert: Callable[[Any], T]) -> T:
        if isinstance(value, bool) and kind is not bool:
            raise self.fail(path, f"expected {kind.__name__}, got a boolean")
        try:
            return convert(value)
        except (TypeError, ValueError):
            raise self.fail(path, f"expected {kind.__name__}, got {value!r}") from None

    def file(self, value: Any, path: str) -> Path:
        if not isinstance(value, str) or not value:
            raise self.fail(path, "expected a file path")
        p = Path(value)
        return p if p.is_absolute() else self.base / p

    def ids(self, value: Any, path: str) -> tuple[str, ...]:
        """A list of registry ids (a single id is accepted as a list of one)."""
        if value is None:
            return ()
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
            raise self.fail(path, "expected a list of registry ids")
        return tuple(items)

    def registry(self, value: Any, path: str, shared: RegistryConfig) -> RegistryConfig:
        """One entry of ``registries:`` (an address, or a mapping); what it leaves out
        (``auth``, ``register_mode``, ``migration_step``) comes from ``registry:``."""
        if isinstance(value, str):
            value = {"address": value}
        raw = self.mapping(value, path, _REGISTRY_KEYS)
        if not raw.get("address"):
            raise self.fail(f"{path}.address", "required: the registry's address")
        address = str(raw["address"])
        from dubbo_py.errors import RegistryAddressError
        from dubbo_py.registry.store.address import parse_registry_address

        try:
            parsed = parse_registry_address(address)
        except RegistryAddressError as exc:
            raise self.fail(f"{path}.address", str(exc)) from None
        if parsed.kind == "direct":
            raise self.fail(f"{path}.address", "a direct tri:// address is not a registry")
        auth = raw.get("auth", shared.auth)
        if auth is not None and ":" not in str(auth):
            raise self.fail(f"{path}.auth", "expected user:password")
        zone = raw.get("zone")
        if zone is not None and (not isinstance(zone, str) or not zone.strip()):
            raise self.fail(f"{path}.zone", f"expected a zone name, got {zone!r}")
        weight = self.typed(raw.get("weight", DEFAULT_REGISTRY_WEIGHT), f"{path}.weight", int, int)
        if weight < 0:
            raise self.fail(f"{path}.weight", f"must be >= 0, got {weight}")
        config = RegistryConfig(
            address=address,
            auth=None if auth is None else str(auth),
            register_mode=shared.register_mode,
            migration_step=shared.migration_step,
            zone=None if zone is None else zone.strip(),
            weight=weight,
            preferred=self.typed(raw.get("preferred", False), f"{path}.preferred", bool, _boolean),
            register=self.typed(raw.get("register", True), f"{path}.register", bool, _boolean),
            subscribe=self.typed(raw.get("subscribe", True), f"{path}.subscribe", bool, _boolean),
            enable_empty_protection=(
                shared.enable_empty_protection
                if (own := _empty_protection(self, raw, path)) is None
                else own
            ),
        )
        return self.address_settings(config, parsed.settings(), path)

    def address_settings(
        self, config: RegistryConfig, settings: Mapping[str, Any], path: str
    ) -> RegistryConfig:
        """``config`` with what its address's parameters set (``?zone=a``), a conflict with
        the entry's own field reported at the address."""
        try:
            return config.with_settings(settings, "the address")
        except ConfigError as exc:
            raise self.fail(f"{path}.address", exc.problem) from None

    def server_tls(self, value: Any, path: str) -> ServerTLS | None:
        if value is None:
            return None
        raw = self.mapping(value, path, ("cert_chain", "private_key", "client_ca"))
        for required in ("cert_chain", "private_key"):
            if required not in raw:
                raise self.fail(f"{path}.{required}", "required")
        client_ca = raw.get("client_ca")
        return ServerTLS(
            self.file(raw["cert_chain"], f"{path}.cert_chain"),
            self.file(raw["private_key"], f"{path}.private_key"),
            self.file(client_ca, f"{path}.client_ca") if client_ca else None,
        )

    def client_tls(self, value: Any, path: str) -> ClientTLS | None:
        if value is None:
            return None
        raw = self.mapping(
            value, path, ("ca", "cert_chain", "private_key", "server_name", "enabled")
        )
        try:
            return ClientTLS(
                ca=self.file(raw["ca"], f"{path}.ca") if "ca" in raw else None,
                cert_chain=(
                    self.file(raw["cert_chain"], f"{path}.cert_chain")
                    if "cert_chain" in raw
                    else None
                ),
                private_key=(
                    self.file(raw["private_key"], f"{path}.private_key")
                    if "private_key" in raw
                    else None
                ),
                server_name=str(raw["server_name"]) if "server_name" in raw else None,
                enabled=(
                    self.typed(raw["enabled"], f"{path}.enabled", bool, _boolean)
                    if raw.get("enabled") is not None
                    else None
                ),
            )
        except TLSConfigError as exc:
            raise self.fail(path, str(exc)) from None

    def service(self, value: Any, path: str) -> ServiceOptions:
        allowed = (
            "version",
            "group",
            "interface",
            "weight",
            "warmup",
            "tags",
            "shard",
            "shards",
            "parameters",
            "methods",
            "registries",
            *_LIMIT_KEYS,
        )
        raw = self.mapping(value, path, allowed)
        # Overload limits (dubbo_py/config/limits.py) are provider URL parameters, per method under
        # methods.<name>, as Dubbo writes <method>.executes.
        limits = {k: str(raw[k]) for k in _LIMIT_KEYS if k in raw}
        methods = self.mapping(raw.get("methods"), f"{path}.methods", None)
        for method, options in methods.items():
            for key, item in self.mapping(
                options, f"{path}.methods.{method}", ("executes", "flowcontrol")
            ).items():
                limits[f"{method}.{key}"] = str(item)
        try:
            parse_limits(methods, limits)
        except ValueError as exc:
            raise self.fail(path, str(exc)) from None
        try:
            return ServiceOptions(
                version=str(raw.get("version", "")),
                interface=str(raw.get("interface", "")),
                group=str(raw.get("group", "")),
                weight=self.typed(raw.get("weight", 100), f"{path}.weight", int, int),
                warmup=self.typed(raw.get("warmup", 600_000), f"{path}.warmup", int, int),
                tags={
                    str(k): str(v)
                    for k, v in self.mapping(raw.get("tags"), f"{path}.tags", None).items()
                },
                shard=(
                    self.typed(raw["shard"], f"{path}.shard", int, int) if "shard" in raw else None
                ),
                shards=(
                    self.typed(raw["shards"], f"{path}.shards", int, int)
                    if "shards" in raw
                    else None
                ),
                parameters={
                    **{
                        k: str(v)
                        for k, v in self.mapping(
                            raw.get("parameters"), f"{path}.parameters", None
                        ).items()
                    },
                    **limits,
                },
                registries=self.ids(raw.get("registries"), f"{path}.registries"),
            )
        except ValueError as exc:
            if isinstance(exc, ConfigError):
                raise
            raise self.fail(path, str(exc)) from None

    def reference(self, value: Any, path: str) -> ReferenceConfig:
        allowed = (
            "version",
            "group",
            "interface",
            "loadbalance",
            "cluster",
            "retries",
            "timeout",
            "methods",
            "idempotent",
            "attachments",
            "parameters",
            "check",
            "mock",
            "tls",
            "sticky",
            "forks",
            "actives",
            "quarantine_interval",
            "outlier_failures",
            "outlier_max_share",
            "registries",
            "hedging",
            "compression",
        )
        raw = self.mapping(value, path, allowed)
        methods = {
            m: self.mapping(o, f"{path}.methods.{m}", None)
            for m, o in self.mapping(raw.get("methods"), f"{path}.methods", None).items()
        }
        idempotent = raw.get("idempotent", [])
        if not isinstance(idempotent, list):
            raise self.fail(f"{path}.idempotent", "expected a list of method names")
        try:
            return ReferenceConfig(
                version=str(raw.get("version", "")),
                interface=str(raw.get("interface", "")),
                group=str(raw.get("group", "")),
                loadbalance=str(raw.get("loadbalance", "random")),
                cluster=str(raw.get("cluster", "failover")),
                retries=(
                    self.typed(raw["retries"], f"{path}.retries", int, int)
                    if raw.get("retries") is not None
                    else None
                ),
                timeout=(
                    self.typed(raw["timeout"], f"{path}.timeout", float, float)
                    if raw.get("timeout") is not None
                    else None
                ),
                methods=method_options(methods),
                idempotent=frozenset(str(m) for m in idempotent),
                attachments={
                    k: str(v)
                    for k, v in self.mapping(
                        raw.get("attachments"), f"{path}.attachments", None
                    ).items()
                },
                parameters={
                    k: str(v)
                    for k, v in self.mapping(
                        raw.get("parameters"), f"{path}.parameters", None
                    ).items()
                },
                check=self.typed(raw.get("check", 3.0), f"{path}.check", float, float),
                mock=str(raw["mock"]) if raw.get("mock") is not None else None,
                tls=self.client_tls(raw.get("tls"), f"{path}.tls"),
                sticky=self.typed(raw.get("sticky", False), f"{path}.sticky", bool, _boolean),
                forks=self.typed(raw.get("forks", 2), f"{path}.forks", int, int),
                actives=self.typed(raw.get("actives", 0), f"{path}.actives", int, int),
                quarantine_interval=self.typed(
                    raw.get("quarantine_interval", 1.0),
                    f"{path}.quarantine_interval",
                    float,
                    float,
                ),
                outlier_failures=self.typed(
                    raw.get("outlier_failures", 3), f"{path}.outlier_failures", int, int
                ),
                outlier_max_share=self.typed(
                    raw.get("outlier_max_share", 0.5), f"{path}.outlier_max_share", float, float
                ),
                registries=self.ids(raw.get("registries"), f"{path}.registries"),
                hedging=raw.get("hedging"),
                compression=(
                    str(raw["compression"]).strip().lower()
                    if raw.get("compression") is not None
                    else None
                ),
            )
        except ConfigError as exc:
            if exc.source:
                raise
            raise self.fail(f"{path}.{exc.path}", exc.problem) from None


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(value)
    return value


def parse_config(
    text: str,
    *,
    source: str = "dubbo.yaml",
    base: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> ApplicationConfig:
    """Parse a ``dubbo.yaml`` document (see the module doc); ConfigError on any problem."""
    env = os.environ if environ is None else environ
    loaded = load_yaml(text, source, error=_syntax_error, empty=None, string_keys=False)
    reader = _Reader(source, base or Path.cwd(), loaded)
    for path, names in _FROM_ENV.items():
        if any(env.get(name) for name in names):
            reader.from_env.add(path)
    top = reader.mapping(
        loaded.data,
        "",
        ("application", "registry", "registries", "protocol", "services", "references", "qos"),
    )
    app = top.get("application")
    zone = None
    app_parameters: Mapping[str, str] = {}
    app_empty_protection = None
    if isinstance(app, dict):
        app_raw = reader.mapping(
            app, "application", ("name", "zone", "parameters", *_EMPTY_PROTECTION_KEYS)
        )
        app_empty_protection = _empty_protection(reader, app_raw, "application")
        app = app_raw.get("name")
        zone = app_raw.get("zone")
        if zone is not None and (not isinstance(zone, str) or not zone.strip()):
            raise reader.fail("application.zone", f"expected a zone name, got {zone!r}")
        try:
            app_parameters = application_parameters(
                app_raw.get("parameters"), "application.parameters"
            )
        except ConfigError as exc:
            raise reader.fail(exc.path, exc.problem) from None
    name = env.get("DUBBO_PY_APPLICATION") or (str(app) if app else "")
    if not name:
        raise reader.fail("application", "required: the application's name")

    registry_raw = top.get("registry")
    if isinstance(registry_raw, str):
        registry_raw = {"address": registry_raw}
    reg = reader.mapping(
        registry_raw,
        "registry",
        ("address", "auth", "register_mode", "migration_step", *_EMPTY_PROTECTION_KEYS),
    )
    registry = RegistryConfig(
        address=env.get("DUBBO_PY_REGISTRY") or reg.get("address"),
        auth=env.get("DUBBO_PY_REGISTRY_AUTH") or reg.get("auth"),
        register_mode=_level_option(reader, env, reg, "register_mode"),
        migration_step=_level_option(reader, env, reg, "migration_step"),
        enable_empty_protection=_empty_protection(reader, reg, "registry"),
    )
    if registry.address is not None:
        from dubbo_py.errors import RegistryAddressError
        from dubbo_py.registry.store.address import parse_registry_address

        try:
            settings = parse_registry_address(registry.address).settings()
        except RegistryAddressError as exc:
            raise reader.fail("registry.address", str(exc)) from None
        registry = reader.address_settings(registry, settings, "registry")
    if registry.auth is not None and ":" not in registry.auth:
        raise reader.fail("registry.auth", "expected user:password")

    registries = _registries(reader, env, top.get("registries"), registry)

    proto = reader.mapping(top.get("protocol"), "protocol", ("port", "host", "bind_host", "tls"))
    port_value = env.get("DUBBO_PY_PROTOCOL_PORT", proto.get("port", 0))
    port = reader.typed(port_value, "protocol.port", int, int)
    if not 0 <= port <= 65535:
        raise reader.fail("protocol.port", f"{port} is not a port (0-65535)")
    protocol = ProtocolConfig(
        port=port,
        host=env.get("DUBBO_IP_TO_REGISTRY") or env.get("DUBBO_PY_HOST") or proto.get("host"),
        bind_host=env.get("DUBBO_IP_TO_BIND") or proto.get("bind_host"),
        tls=reader.server_tls(proto.get("tls"), "protocol.tls"),
    )
    services = {
        str(k): reader.service(v, f"services.{k}")
        for k, v in reader.mapping(top.get("services"), "services", None).items()
    }
    references = {
        str(k): reader.reference(v, f"references.{k}")
        for k, v in reader.mapping(top.get("references"), "references", None).items()
    }
    qos_raw = reader.mapping(top.get("qos"), "qos", ("port", "accept_foreign_ip"))
    qos_port = qos_raw.get("port")
    if qos_port is not None and not 0 <= reader.typed(qos_port, "qos.port", int, int) <= 65535:
        raise reader.fail("qos.port", f"{qos_port} is not a port (0-65535)")
    qos = QosConfig(
        port=None if qos_port is None else reader.typed(qos_port, "qos.port", int, int),
        accept_foreign_ip=reader.typed(
            qos_raw.get("accept_foreign_ip", False), "qos.accept_foreign_ip", bool, _boolean
        ),
    )
    # Ids name entries of registries:, unless the environment replaced them with one address.
    replaced = top.get("registries") is not None and not registries
    for kind, section in (("services", services), ("references", references)):
        for key, options in section.items():
            if replaced:
                break
            for registry_id in options.registries:
                if registry_id not in registries:
                    known = ", ".join(registries) or "none: there is no registries section"
                    raise reader.fail(
                        f"{kind}.{key}.registries",
                        f"unknown registry id {registry_id!r} (registries: {known})",
                    )
    return ApplicationConfig(
        name,
        registry,
        protocol,
        services,
        references,
        qos,
        registries=registries,
        zone=None if zone is None else zone.strip(),
        parameters=app_parameters,
        enable_empty_protection=app_empty_protection,
    )


def _empty_protection(reader: _Reader, raw: Mapping[str, Any], path: str) -> bool | None:
    """``enable-empty-protection`` (Dubbo's spelling) or ``enable_empty_protection``."""
    given = [k for k in _EMPTY_PROTECTION_KEYS if k in raw]
    if not given:
        return None
    if len(given) > 1:
        raise reader.fail(f"{path}.{given[1]}", f"given twice (also as {given[0]})")
    return reader.typed(raw[given[0]], f"{path}.{given[0]}", bool, _boolean)


def _registries(
    reader: _Reader, env: Mapping[str, str], value: Any, shared: RegistryConfig
) -> dict[str, RegistryConfig]:
    """The ``registries:`` section: id -> registry. ``DUBBO_PY_REGISTRY`` replaces it (the
    environment wins over the file, as for ``registry.address``); ``registry.address`` beside
    it is refused, since which one applies would be a guess."""
    if value is None or env.get("DUBBO_PY_REGISTRY"):
        return {}
    entries = reader.mapping(value, "registries", None)
    if not entries:
        raise reader.fail("registries", "expected at least one registry")
    if shared.address is not None:
        raise reader.fail(
            "registry.address",
            "give the address in registries: (registry: may still hold auth, register_mode "
            "and migration_step for all of them)",
        )
    out = {str(k): reader.registry(v, f"registries.{k}", shared) for k, v in entries.items()}
    if not any(r.register for r in out.values()) and not any(r.subscribe for r in out.values()):
        raise reader.fail("registries", "every registry says register: false and subscribe: false")
    return out


def load_config(
    path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None
) -> ApplicationConfig:
    """Load ``dubbo.yaml`` from a file (ConfigError naming the file when it can't be read)."""
    file = Path(path)
    try:
        text = file.read_text("utf-8")
    except OSError as exc:
        raise ConfigError("", f"cannot read configuration: {exc.strerror}", str(file)) from None
    return parse_config(text, source=str(file), base=file.parent, environ=environ)


def _level_option(
    reader: Any, env: Mapping[str, str], reg: Mapping[str, Any], key: str
) -> str | None:
    """``registry.register_mode`` / ``registry.migration_step``: the environment's
    (``DUBBO_PY_REGISTER_MODE``, ``DUBBO_PY_MIGRATION_STEP`` and Dubbo's names) over the file's,
    checked here so a typo is reported with its place."""
    from dubbo_py.registry.application.modes import (
        MIGRATION_STEP_ENV,
        REGISTER_MODE_ENV,
        MigrationStep,
        RegisterMode,
    )

    names, parse = (
        (REGISTER_MODE_ENV, RegisterMode.parse)
        if key == "register_mode"
        else (MIGRATION_STEP_ENV, MigrationStep.parse)
    )
    value: object = next((env[n] for n in names if env.get(n, "").strip()), reg.get(key))
    if value is None:
        return None
    try:
        return str(parse(str(value), f"registry.{key}").value)
    except ValueError as exc:
        raise reader.fail(f"registry.{key}", str(exc).split(": ", 1)[-1]) from None
