"""The registries of one application: one :class:`RegistryBinding` each.

An application names one registry (``Application("shop", "zookeeper://...")``) or several
(a list in code, ``registries:`` in ``dubbo.yaml``). Each binding opens, on first use, what
the application needs on its registry -- the store lease, the :class:`Registry`, the
application-level discovery, the registry providers register through, the consumer's notify
cache file -- exactly as a single-registry application always did. With several, providers
register through each binding marked ``register`` (:class:`~dubbo_py.registry.fanout.
FanOutRegistry`), and each reference builds one stack per binding it subscribes to, behind a
zone-aware channel (:mod:`dubbo_py.consumer.zone_channel`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field

from dubbo_py.cluster import configurators
from dubbo_py.config.model import RegistryConfig
from dubbo_py.errors import StoreError
from dubbo_py.registry.application.wiring import ApplicationLevel
from dubbo_py.registry.cache import NotifyCache, default_cache_path
from dubbo_py.registry.empty_protection import DEFAULT_ENABLED as DEFAULT_EMPTY_PROTECTION
from dubbo_py.registry.provider_overrides import ProviderRegistry
from dubbo_py.registry.registry import Registry
from dubbo_py.registry.store.address import (
    RegistryAddress,
    display_address,
    parse_registry_address,
)
from dubbo_py.registry.store.base import Store
from dubbo_py.registry.store.shared import process_stores
from dubbo_py.url import URL

__all__ = [
    "RegistryBinding",
    "RegistryChoice",
    "empty_protection_of",
    "open_store",
    "registry_choices",
]

log = logging.getLogger(__name__)

ENV_AUTH = "DUBBO_PY_REGISTRY_AUTH"

#: What ``Application(registry=...)`` takes: one address (or None: the default), a list of
#: addresses or :class:`RegistryConfig`, or a mapping of ids to either.
RegistryArgument = str | None | Sequence[str | RegistryConfig] | Mapping[str, str | RegistryConfig]


def open_store(
    address: RegistryAddress,
    *,
    connect_timeout: float = 5.0,
    auth: tuple[str, str] | None = None,
) -> Store | None:
    """A lease on the coordination store an address names (None for direct addresses), shared
    by the applications of this process on the same address and identity (``auth``, a
    ZooKeeper digest identity or an etcd user): see :mod:`dubbo_py.registry.store.shared`."""
    if address.kind == "direct":
        return None
    # The address's own timeout= (Dubbo's connect timeout, ms) wins over the application's.
    connect_timeout = address.parameters.connect_timeout or connect_timeout
    # The whole address (etcds:// TLS files make another session) and its session timeout.
    key = (address, auth, address.parameters.session_timeout)
    lease = process_stores.lease(key, lambda: _own_store(address, auth))
    try:
        started = lease.start(connect_timeout)
    except BaseException:  # refused (a password, a certificate): not left open behind
        lease.close()
        raise
    if address.networked and not started:
        # Said at DEBUG only: what happens next is said by what uses the store -- a provider
        # exits with one line (it never retries), a consumer warns that it keeps trying.
        log.debug("registry %s does not answer yet; connecting in the background", address)
    return lease


def _own_store(address: RegistryAddress, auth: tuple[str, str] | None) -> Store:
    """A new store (a session of its own) on ``address``."""
    return address.new_store(auth=auth)


def parse_auth(text: str | None) -> tuple[str, str] | None:
    """``user:password`` (else ``$DUBBO_PY_REGISTRY_AUTH``) as a digest identity; None when
    neither is set. ValueError for text without a user and a colon."""
    value = text or os.environ.get(ENV_AUTH, "")
    if not value:
        return None
    user, sep, password = value.partition(":")
    if not sep or not user:
        raise ValueError(f"auth must be user:password ({ENV_AUTH} included)")
    return (user, password)


@dataclass(frozen=True, slots=True)
class RegistryChoice:
    """One registry as the application was given it: its id (the key of ``registries:``, else
    its address as written), its parsed address and its settings."""

    id: str
    address: RegistryAddress
    config: RegistryConfig


def registry_choices(
    registry: RegistryArgument, configured: Mapping[str, RegistryConfig] | None = None
) -> tuple[RegistryChoice, ...]:
    """The registries an application uses: ``registry`` when given (code wins), else the
    configuration file's ``registries:``, else the default address (``$DUBBO_PY_REGISTRY`` or
    the embedded registry). Ids must be unique; a direct ``tri://`` address stands alone."""
    entries: list[tuple[str, RegistryConfig]]
    if registry is None and configured:
        entries = list(configured.items())
    elif registry is None or isinstance(registry, str):
        address = parse_registry_address(registry)
        config = RegistryConfig(registry).with_settings(
            address.settings(), display_address(str(registry))
        )
        return (RegistryChoice("", address, config),)
    elif isinstance(registry, Mapping):
        entries = [(str(k), _config(v)) for k, v in registry.items()]
    else:
        # Named by the address as written, its passwords hidden (ids are printed).
        entries = [(display_address(_config(v).address or ""), _config(v)) for v in registry]
    if not entries:
        raise ValueError("registry: an empty list names no registry")
    choices = []
    for registry_id, config in entries:
        if not config.address:
            raise ValueError(f"registry {registry_id!r}: no address")
        address = parse_registry_address(config.address)
        # Dubbo's registry URL parameters (?zone=a&weight=50) set the registry's fields.
        config = config.with_settings(address.settings(), display_address(config.address))
        choices.append(RegistryChoice(registry_id, address, config))
    ids = [c.id for c in choices]
    if len(set(ids)) != len(ids):
        raise ValueError(f"registry ids must be unique, got {ids}")
    if len(choices) > 1 and any(c.address.kind == "direct" for c in choices):
        raise ValueError("a direct tri:// address cannot be one of several registries")
    return tuple(choices)


def _config(value: str | RegistryConfig) -> RegistryConfig:
    return RegistryConfig(value) if isinstance(value, str) else value


def empty_protection_of(choice: RegistryChoice, application: bool | None) -> bool:
    """Whether consumers on the registry ``choice`` keep providers it lost at once while they
    answer (``enable-empty-protection``): the address's parameter, else the registry's entry,
    else the ``application``'s setting, else on (docs/registry.md)."""
    return next(
        (
            v
            for v in (
                choice.address.empty_protection,
                choice.config.enable_empty_protection,
                application,
            )
            if v is not None
        ),
        DEFAULT_EMPTY_PROTECTION,
    )


@dataclass(eq=False, repr=False)
class RegistryBinding:
    """One registry of an application and what the application opened on it (on first use):
    the store lease, the :class:`Registry`, application-level discovery, the registry its
    providers register through and the consumers' notify cache file. The settings it opens
    them with are the application's for this registry."""

    choice: RegistryChoice
    _: KW_ONLY
    #: The application's name (application-level discovery, the cache file's default name).
    application: str
    #: The store session's identity (a ZooKeeper digest identity or an etcd user).
    auth: tuple[str, str] | None
    connect_timeout: float
    #: The notify cache file (None: the default for the application and the address).
    cache_path: str | os.PathLike[str] | None
    register_mode: str | None
    migration_step: str | None
    #: Whether consumers on this registry keep providers it lost at once while they answer
    #: (:func:`empty_protection_of`).
    empty_protection: bool = DEFAULT_EMPTY_PROTECTION
    #: Told (URL as exported, URL as registered with its override rules) at each provider
    #: registration (the application's provider access logs follow it).
    on_provider_registered: Callable[[URL, URL], None] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        #: The registry's id (``""`` for an application's only registry given as an address).
        self.id = self.choice.id
        self.address = self.choice.address
        self.config = self.choice.config
        self._lock = threading.Lock()
        self._store: Store | None = None
        self._registry: Registry | None = None
        self._provider_registry: Registry | None = None
        self._app_level: ApplicationLevel | None = None
        self._cache: NotifyCache | None = None

    @property
    def label(self) -> str:
        """How logs and errors name the registry: its id and address (or the address)."""
        written = display_address(self.config.address or "")
        if self.id and self.id != str(self.address) and self.id != written:
            return f"{self.id} ({self.address})"
        return str(self.address)

    @property
    def registry(self) -> Registry | None:
        """The registry (opened on first use); None for a direct ``tri://`` address."""
        with self._lock:
            if self._registry is None and self.address.kind != "direct":
                self._store = open_store(
                    self.address, connect_timeout=self.connect_timeout, auth=self.auth
                )
                assert self._store is not None
                self._registry = Registry(self._store, protect=self.auth is not None)
                self._app_level = ApplicationLevel(
                    self._registry,
                    self.application,
                    register_mode=self.register_mode,
                    migration_step=self.migration_step,
                )
            return self._registry

    @property
    def opened(self) -> Registry | None:
        """The registry if it has been opened (never opens it)."""
        return self._registry

    @property
    def application_level(self) -> ApplicationLevel | None:
        """Application-level discovery on this registry; None without one."""
        _ = self.registry
        return self._app_level

    @property
    def provider_registry(self) -> Registry | None:
        """The registry providers register through: their URLs carry the provider-side
        override rules that match them, at the interface level and in the instance's metadata
        (see :mod:`dubbo_py.registry.provider_overrides`)."""
        registry = self.registry
        with self._lock:
            if registry is not None and self._provider_registry is None:
                assert self._app_level is not None
                # The overrides are applied before the register mode splits the URL between
                # the levels: the instance's metadata carries them too (as Dubbo's re-export).
                self._provider_registry = ProviderRegistry(
                    registry,
                    configurators.apply,
                    validate=configurators.validate_document,
                    on_registered=self.on_provider_registered,
                    through=self._app_level.provider_registry(registry),
                )
            return self._provider_registry

    def notify_cache(self) -> NotifyCache:
        """The cache file of what this registry notified, one for all the application's
        references (each writing a copy of its own would overwrite the others' services)."""
        with self._lock:
            if self._cache is None:
                self._cache = NotifyCache(
                    self.cache_path or default_cache_path(self.application, str(self.address))
                )
            return self._cache

    def batch(self) -> contextlib.AbstractContextManager[None]:
        """Providers registered inside publish the application's instance once, at the end."""
        _ = self.provider_registry
        return self._app_level.batch() if self._app_level else contextlib.nullcontext()

    def close(self) -> None:
        """Close application-level discovery, flush the cache file and end the store lease."""
        if self._app_level is not None:
            with contextlib.suppress(StoreError):
                self._app_level.close()
            self._app_level = None
        if self._cache is not None:
            self._cache.flush()  # what the background writer had not written yet
        if self._store is not None:
            self._store.close()
            self._store = None
            self._registry = None
            self._provider_registry = None
