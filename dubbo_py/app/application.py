"""``Application``: the public entry point for providers and consumers (docs/design.md §2).

It holds what both sides share (name, configuration, registries, observability: an
:class:`~dubbo_py.app.context.AppContext`) and delegates to its provider half
(:class:`~dubbo_py.app.serving.Serving`) and its consumer half
(:class:`~dubbo_py.app.referencing.Referencing`).

>>> app = Application("shop", registry="zookeeper://127.0.0.1:2181")   # doctest: +SKIP
>>> greeter = app.reference(GreeterStub, version="1.0.0")               # doctest: +SKIP
>>> greeter.SayHello(HelloRequest(name="ada"))                          # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from dubbo_py.app.context import AppContext
from dubbo_py.app.delegation import Forwarded, delegated
from dubbo_py.app.observability import (
    ApplicationQos,
    qos_settings,
)
from dubbo_py.app.referencing import Referencing
from dubbo_py.app.registries import (
    ENV_AUTH,
    RegistryArgument,
    RegistryBinding,
    empty_protection_of,
    open_store,
    parse_auth,
    registry_choices,
)
from dubbo_py.app.serving import Serving
from dubbo_py.cluster.outlier import DEFAULT_CONSECUTIVE, DEFAULT_MAX_SHARE
from dubbo_py.config.model import ApplicationConfig, application_parameters
from dubbo_py.consumer.connections import AsyncSharedChannels, SharedChannels
from dubbo_py.consumer.filters import ConsumerFilters
from dubbo_py.consumer.reference import Reference
from dubbo_py.provider.server import ExportedServer
from dubbo_py.qos.access_log import ProviderAccessLogs
from dubbo_py.qos.metrics import Metrics
from dubbo_py.registry.application.wiring import ApplicationLevel
from dubbo_py.registry.registry import Registry

if TYPE_CHECKING:
    from dubbo_py.consumer.generic import DubboRuntime, GenericReference
    from dubbo_py.provider.server import AsyncExportedServer

__all__ = ["ENV_AUTH", "Application", "Reference", "open_store"]

#: Seconds :meth:`Application.close` waits for calls in flight before it closes the provider
#: channels (Dubbo's default shutdown wait, ``dubbo.service.shutdown.wait``, is 10 s too).
CLOSE_WAIT = 10.0

S = TypeVar("S")


def _cache_file(
    path: str | os.PathLike[str] | None, index: int | None
) -> str | os.PathLike[str] | None:
    """The notify cache file of one registry: ``path`` itself for an application's only
    registry, else ``path`` with the registry's position before the suffix (each registry
    caches what it notified; one file for several would mix them)."""
    if path is None or index is None:
        return path
    from pathlib import Path

    given = Path(path)
    return given.with_name(f"{given.stem}-{index}{given.suffix}")


class Application:
    """A named dubbo-py application: serves providers and builds references on one registry.

    ``registry``: ``zookeeper://h:p[,h:p][/chroot]``, ``etcd://h:p[,h:p][/prefix]``,
    ``etcds://h:p[,h:p][/prefix][?ca=&cert=&key=]`` (TLS), ``sqlite:///abs/path.db``, or
    ``tri://host:port`` for direct calls without a registry; ``None`` means
    ``$DUBBO_PY_REGISTRY`` or the embedded registry in the user's data directory. ``auth``
    (``user:password``, or ``$DUBBO_PY_REGISTRY_AUTH``) is the ZooKeeper digest identity the
    application registers its providers and consumers under (protected: only it may change them),
    or on etcd the user (and password) it authenticates as.

    ``qos_port`` (else the file's ``qos.port``, else ``$DUBBO_PY_QOS_PORT``; 0 any free port;
    off when none is set) opens the QoS HTTP port: ``/metrics``, ``/live``, ``/ready``,
    ``/startup``, ``/offline``, ``/online``, ``/ls`` (docs/observability.md), on 127.0.0.1
    unless ``qos_accept_foreign_ip``. Registered URLs then carry ``qos.port``. ``metrics``
    records Dubbo's call metrics (default: when the QoS port is on).

    ``parameters`` (else the file's ``application.parameters``) are the application's own URL
    parameters, ``{"region": "x"}``: its consumer URLs carry them, so condition rules read
    them as ``$region`` and affinity rules compare providers with them (docs/routing.md), and
    so do its provider URLs, under each service's own options, as in Dubbo.
    """

    def __init__(
        self,
        name: str,
        registry: RegistryArgument = None,
        *,
        cache_path: str | os.PathLike[str] | None = None,
        connect_timeout: float = 5.0,
        auth: str | None = None,
        config: ApplicationConfig | None = None,
        filters: ConsumerFilters | None = None,
        qos_port: int | None = None,
        qos_accept_foreign_ip: bool | None = None,
        metrics: bool | None = None,
        register_mode: str | None = None,
        migration_step: str | None = None,
        zone: str | None = None,
        parameters: Mapping[str, object] | None = None,
        enable_empty_protection: bool | None = None,
    ) -> None:
        if not name or not name.strip():
            raise ValueError("an application needs a name")
        #: The application's own URL parameters (code, else the file's
        #: ``application.parameters``): every consumer and provider URL carries them, for
        #: condition rules' ``$name`` and affinity rules (docs/configuration.md).
        self.parameters: Mapping[str, str] = (
            application_parameters(parameters)
            if parameters is not None
            else (config.parameters if config else {})
        )
        #: The configuration file's contents, when the application came from one.
        self.config = config
        #: The registry identity: a ZooKeeper digest (what this application registers is then
        #: protected) or an etcd user.
        self.auth: tuple[str, str] | None = parse_auth(auth)
        self.name = name
        #: The zone calls prefer when they carry no ``registry_zone`` attachment (code, else
        #: the file's ``application.zone``); only read with several registries.
        self.zone = zone or (config.zone if config else None)
        qos = qos_settings(qos_port, qos_accept_foreign_ip, config.qos if config else None)
        #: Call metrics (Dubbo's names; see docs/observability.md): recorded when the QoS port
        #: is on or ``metrics=True``; None when off, and then calls pay nothing for them.
        self.metrics: Metrics | None = (
            Metrics(name) if (metrics if metrics is not None else qos.port is not None) else None
        )
        # Application-level discovery (registry/application/): what providers register at and
        # which level consumers read; code first, then the file, then the environment.
        configured = config.registry if config else None
        register_mode = register_mode or (configured.register_mode if configured else None)
        migration_step = migration_step or (configured.migration_step if configured else None)
        # Empty protection: the registry's own setting (address parameter, then its entry in
        # the file), else the application's (code, then the file's application section).
        # (The file's single registry: section is the registry's; entries of registries:
        # inherit it in the loader.)
        app_protection = next(
            (
                v
                for v in (
                    config.registry.enable_empty_protection
                    if config is not None and not config.registries
                    else None,
                    enable_empty_protection,
                    config.enable_empty_protection if config is not None else None,
                )
                if v is not None
            ),
            None,
        )
        choices = registry_choices(registry, config.registries if config else None)
        several = len(choices) > 1
        #: The application's registries, in the order given (one for most applications).
        self.bindings: tuple[RegistryBinding, ...] = tuple(
            RegistryBinding(
                choice,
                application=name,
                # A registry's own identity, else the application's.
                auth=parse_auth(choice.config.auth) if choice.config.auth else self.auth,
                connect_timeout=connect_timeout,
                cache_path=_cache_file(cache_path, index if several else None),
                # The registry address's register-mode= (Dubbo's parameter) wins for it.
                register_mode=str(choice.address.settings().get("register_mode", ""))
                or register_mode,
                migration_step=migration_step,
                empty_protection=empty_protection_of(choice, app_protection),
            )
            for index, choice in enumerate(choices)
        )
        #: The first registry's address (the only one of most applications).
        self.address = self.bindings[0].address
        self._context = AppContext(
            name,
            config,
            self.bindings,
            self.zone,
            self.metrics,
            filters or ConsumerFilters(),
            self.parameters,
        )
        # The two halves this application delegates to: providers, and references.
        self._serving = Serving(self._context, self.close)
        self._referencing = Referencing(self._context)
        # The dubbo:// event loop and connections of generic references, made on first use.
        self._dubbo_runtime: DubboRuntime | None = None
        self._generic_lock = threading.Lock()
        self._generic_references: list[GenericReference] = []
        #: The QoS port's endpoints (None when the port is off).
        self.qos: ApplicationQos | None = None
        if qos.port is not None:
            self.qos = ApplicationQos(self, self.metrics or Metrics(name), qos)
        self._context.qos = self.qos

    channels: Forwarded[SharedChannels] = Forwarded(
        "_referencing",
        "channels",
        """One blocking channel per provider address (and security settings), shared by every
        reference of this application (see :mod:`dubbo_py.consumer.connections`).""",
    )
    async_channels: Forwarded[AsyncSharedChannels] = Forwarded(
        "_referencing",
        "async_channels",
        """The ``grpc.aio`` channels of :meth:`reference_async` references: one per event loop,
        provider address and security settings (see :mod:`dubbo_py.consumer.connections`).""",
    )
    filters: Forwarded[ConsumerFilters] = Forwarded(
        "_context",
        "filters",
        """Wrappers around every reference's calls, outside each reference's own (see
        :mod:`dubbo_py.consumer.filters`); set it before building references.""",
    )

    @classmethod
    def from_config(
        cls, path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None
    ) -> Application:
        """An application configured by a ``dubbo.yaml`` file (see docs/configuration.md):
        name, registry and auth from the file; ``start``/``serve`` and ``reference`` take
        their defaults from its ``protocol``, ``services`` and ``references`` sections."""
        from dubbo_py.config.loader import load_config

        config = load_config(path, environ=environ)
        return cls(
            config.name,
            config.registry.address,
            auth=config.registry.auth,
            config=config,
        )

    @property
    def aio_channels(self) -> AsyncSharedChannels:
        """Deprecated name of :attr:`async_channels` (the asyncio flavour's names are
        ``Async*`` and ``*_async``); it goes in the next release."""
        warnings.warn(
            "Application.aio_channels is now Application.async_channels",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.async_channels

    @property
    def registry(self) -> Registry | None:
        """The (first) registry, opened on first use; None for a direct ``tri://`` address."""
        return self.bindings[0].registry

    @property
    def application_level(self) -> ApplicationLevel | None:
        """Application-level discovery (instances, mapping, metadata, migration step) on the
        (first) registry; None without a registry."""
        return self.bindings[0].application_level

    @property
    def provider_registry(self) -> Registry | None:
        """The registry providers register through: their URLs carry the provider-side
        override rules that match them, read before the first registration and followed after
        it (see :mod:`dubbo_py.registry.provider_overrides`). With several registries, one
        that registers in each marked ``register`` (:class:`~dubbo_py.registry.fanout.
        FanOutRegistry`), each service in the registries its options name."""
        return self._serving.provider_registry

    # ----------------------------------------------------------------- provider side

    start = delegated("_serving", Serving.start)

    @property
    def access_logs(self) -> ProviderAccessLogs:
        """The provider side's access log switches, one per exported service (the
        ``accesslog`` parameter; see docs/observability.md)."""
        return self._serving.access_logs

    @property
    def servers(self) -> tuple[ExportedServer | AsyncExportedServer, ...]:
        """Every server this application started (both flavours)."""
        return self._serving.servers

    @property
    def registry_name(self) -> str:
        """The registry address as configured ("" for direct calls)."""
        return self._context.registry_name()

    def registry_connected(self) -> bool | None:
        """Whether the registry session is connected -- every registry's, with several (None
        before one is opened, or direct)."""
        opened = [b.opened for b in self.bindings if b.opened is not None]
        return None if not opened else all(r.connected for r in opened)

    serve = delegated("_serving", Serving.serve)

    wait = delegated("_serving", Serving.wait)

    start_async = delegated("_serving", Serving.start_async)

    serve_async = delegated("_serving", Serving.serve_async)

    # ----------------------------------------------------------------- consumer side

    async def reference_async(self, stub_class: type[S], **options: Any) -> S:
        """The asyncio flavour of :meth:`reference`: ``stub = await app.reference_async(...)``,
        then ``await stub.Unary(req)`` and ``async for r in stub.Streaming(req)``. Same options;
        await it on the event loop that will make the calls (its gRPC channels belong to that
        loop). Like :meth:`reference` it returns once the providers and rules are read; the
        wait runs in a worker thread, so the event loop keeps running meanwhile."""
        ref = await self.reference_handle_async(stub_class, **options)
        return ref.stub

    reference_handle_async = delegated("_referencing", Referencing.reference_handle_async)

    async def aclose(self, wait: float = CLOSE_WAIT) -> None:
        """Refuse new calls, wait up to ``wait`` s for the calls in flight (this loop's
        keep running meanwhile), close the asyncio references' provider channels, then
        everything :meth:`close` does."""
        deadline = time.monotonic() + max(0.0, wait)
        await self._referencing.close_async(deadline)
        await asyncio.to_thread(self.close, max(0.0, deadline - time.monotonic()))

    def reference(self, stub_class: type[S], **options: Any) -> S:
        """A generated stub whose calls are routed, balanced and retried by dubbo-py.

        ``options`` are the fields of :class:`~dubbo_py.config.model.ReferenceConfig`, on top
        of the configuration file's ``references.<service>`` section when the application has
        one (code wins):

        ``version``, ``group`` (sent to the provider as ``tri-service-version`` /
        ``tri-service-group``); ``interface`` the registry folder and ``interface`` parameter to
        look providers up by (Java's interface name; default: the proto service's full name,
        which stays the gRPC path); ``loadbalance`` (random, roundrobin, leastactive,
        shortestresponse, consistenthash, p2c, adaptive); ``cluster`` the fault-tolerance
        strategy (``failover``, ``failfast``, ``failsafe``, ``failback``, ``forking``,
        ``broadcast``; see ``docs/cluster.md``); ``retries`` (failover; one call may override it
        with the ``dubbo.retries`` metadata key) and ``timeout`` (seconds) are defaults for
        every method; left unset, the providers' registered ``retries`` and ``timeout`` apply
        (Dubbo's order: see ``docs/configuration.md``), else 2 retries and no deadline.
        ``methods`` overrides options per method, e.g. ``{"SayHello": {"retries": 0,
        "timeout": 0.5}}`` (keys: retries, timeout, cluster, mock, forks, idempotent, sticky);
        ``idempotent`` names methods whose DEADLINE_EXCEEDED may be retried; ``attachments`` go
        with every call (``dubbo.tag`` selects tagged providers); ``check`` waits up to that
        many seconds for the first provider list and every rule the reference watches
        (condition, tag, script and shard documents, router URLs, override rules), so the first
        call already obeys them; what is still unread then is named in a warning; ``mock``
        degrades the service (``"fail:return {\"message\": \"busy\"}"``, ``"force:throw"``; see
        :mod:`dubbo_py.cluster.mock`), also settable per method. ``sticky`` keeps calling the
        same provider while it works; ``forks`` is how many providers ``forking`` calls;
        ``quarantine_interval`` is how often (s) quarantined providers are probed;
        ``outlier_failures`` (default 3; 0: off) consecutive timeouts or UNAVAILABLE from one
        provider eject it into the quarantine, never more than ``outlier_max_share`` (default
        0.5) of the service's providers at once. ``tls`` verifies TLS providers (those whose
        URL says ``tls=true`` or ``ssl-enabled=true``, or every provider with
        ``ClientTLS(enabled=True)``; none with ``enabled=False``) and presents a client
        certificate for mutual TLS; an ``ssl-enabled`` entry in ``parameters`` chooses the
        same, as in Dubbo. ``failback`` (not a configuration field) is the queue of
        ``failback`` retries (default: one per reference, retrying every 5 s, 3 times).
        ``interceptors`` (not a configuration field) are gRPC client interceptors run around
        every attempt on a provider's channel (``grpc.aio`` ones for :meth:`reference_async`).
        ``hedging`` (``True`` or ``{"delay": seconds | "p95" | "p99", "max_attempts": 2,
        "max_extra_load": 0.05}``; also per method) sends a call not answered after the delay
        to a second provider too, for methods safe to run twice (``docs/cluster.md``).
        Consumer-side override rules in the registry change ``timeout``, ``retries``,
        ``forks``, ``sticky``, ``loadbalance`` and ``hedging`` at runtime. An unknown option is
        a TypeError and a bad value a ConfigError naming it.
        """
        stub: S = self.reference_handle(stub_class, **options).stub
        return stub

    reference_config = delegated("_referencing", Referencing.reference_config)

    reference_handle = delegated("_referencing", Referencing.reference_handle)

    @property
    def references(self) -> tuple[Reference[Any], ...]:
        """Every reference this application built (their directories, quarantines, stubs)."""
        return self._referencing.references

    # ----------------------------------------------------------------- lifecycle

    def generic_reference(
        self,
        interface: str,
        *,
        version: str = "",
        group: str = "",
        url: str | None = None,
        loadbalance: str = "random",
        retries: int = 2,
        timeout: float | None = None,
        attachments: Mapping[str, str] | None = None,
        check: float = 5.0,
        protocol: str | None = None,
        filters: ConsumerFilters | None = None,
        accesslog: str | None = None,
        mock: str | None = None,
        quarantine_interval: float = 1.0,
        outlier_failures: int = DEFAULT_CONSECUTIVE,
        outlier_max_share: float = DEFAULT_MAX_SHARE,
        hedging: Any = None,
        methods: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> GenericReference:
        """Generic calls (Dubbo's ``$invoke``) to the Java interface ``interface`` on its
        ``dubbo://`` (Hessian2) and ``tri://`` (Triple without IDL) providers:
        ``ref.invoke("getUser", ["java.lang.Long"], [7])``, ``await ref.invoke_async(...)``,
        or ``ref.getUser(7)`` (the provider finds the method by its name). Java beans are dicts
        (a ``class`` key names the bean's class), lists, dicts, ``datetime`` and ``Decimal``
        travel as docs/java-services.md maps them; a Java exception is raised as
        :class:`~dubbo_py.JavaException`.

        Providers come from the application's registries (``version`` and ``group`` matched as
        Dubbo matches them) or from ``url`` (``dubbo://host:port`` or ``tri://host:port``,
        comma-separated for several); each call goes in its provider URL's protocol
        (``protocol="dubbo"`` or ``"tri"`` takes only that protocol's providers).
        ``parameter_types`` ``None`` (and attribute calls) read the method's types from the
        service definition the providers stored in the metadata report, picking an overload by
        the number of arguments; ``ref.invoke_result(...)`` also says which provider answered.
        ``loadbalance`` names one of :mod:`dubbo_py.cluster.loadbalance`; a call that fails
        outside the provider's code is retried ``retries`` times on other providers
        (failover); ``timeout`` (s) defaults to the provider's registered ``timeout``, else
        Dubbo's 1 s; ``check`` waits that many seconds for the first provider list and rules.
        The application's routers and rules apply as to a stub reference (condition, tag,
        script and shard rules, ``dubbo.tag``, override rules such as ``disabled`` and
        ``weight``), reading the real method name, the attachments and the arguments; with
        ``url`` none does. Consumer-side override rules' ``timeout``, ``retries``,
        ``loadbalance`` and ``hedging`` (service or ``<method>.<key>``) beat the options given
        here, as in Dubbo; their other keys are warned about.

        The calls go through the consumer filters as a stub reference's do (metrics and
        tracing outermost, then the application's ``filters``, then ``filters`` given here;
        blocking calls through the blocking filters, ``invoke_async`` through the asyncio
        ones): the metrics and the CLIENT span are named for the Java method (not
        ``$invoke``), the trace context goes to the provider in the attachments, and the
        filters see an :class:`~dubbo_py.Invocation` whose request is a
        :class:`~dubbo_py.invocation.GenericRequest`. ``accesslog`` (``"true"`` or a path, or
        an override rule's ``accesslog``) logs each attempt as a stub's access log does. A
        provider whose connection is refused or lost (``tri://``: UNAVAILABLE) is quarantined
        until a probe finds it back (``ref.quarantine``). ``mock`` (``"force:return {...}"``,
        ``"return null"``, ``"throw"``; or an override rule's ``mock``) answers as
        :mod:`dubbo_py.consumer.generic_mock` says. ``quarantine_interval``,
        ``outlier_failures`` and ``outlier_max_share`` are a stub reference's: a provider whose
        calls fail ``outlier_failures`` times in a row outside the service's code (timeouts,
        error statuses; a Java exception is an answer) is ejected into the quarantine and
        probed back. ``hedging`` (as a stub reference's; per method ``methods={"getUser":
        {"hedging": ...}}``, or an override rule's ``hedging`` / ``<method>.hedging``) sends a
        call not answered after the delay to a second provider too; the first answer wins, a
        Java exception included (docs/java-services.md)."""
        from dubbo_py.consumer.generic import PROTOCOLS, DubboRuntime, GenericReference
        from dubbo_py.registry.local_host import consumer_host

        with self._generic_lock:
            if self._dubbo_runtime is None:
                self._dubbo_runtime = DubboRuntime()
            runtime = self._dubbo_runtime
        registries, levels = [], []
        if url is None:
            for binding in self.bindings:
                if binding.registry is not None:
                    registries.append(binding.registry)
                    levels.append(binding.application_level)
        ref = GenericReference(
            interface,
            runtime,
            registries=registries,
            urls=[u for u in (url or "").split(",") if u.strip()],
            version=version,
            group=group,
            loadbalance=loadbalance,
            retries=retries,
            timeout=timeout,
            attachments=attachments,
            check=check,
            application=self.name,
            consumer_host=consumer_host(self.address),
            protocols=PROTOCOLS if protocol is None else (protocol,),
            filters=self._referencing.generic_filters(interface, version, group, filters),
            accesslog=accesslog,
            mock=mock,
            quarantine_interval=quarantine_interval,
            outlier_failures=outlier_failures,
            outlier_max_share=outlier_max_share,
            hedging=hedging,
            methods=methods,
            levels=levels,
        )
        with self._generic_lock:
            self._generic_references.append(ref)
        if self.qos is not None:
            self.qos.watch_generic(ref)
        return ref

    @property
    def generic_references(self) -> tuple[GenericReference, ...]:
        """The generic references this application built and has not closed."""
        with self._generic_lock:
            return tuple(self._generic_references)

    def close(self, wait: float = CLOSE_WAIT) -> None:
        """Close references and servers this application opened, then the registry.

        Calls are not cut short: the references refuse new calls (UNAVAILABLE, "the
        application is closed"), and their provider channels close once the calls in flight
        have ended, or after ``wait`` seconds (Dubbo's consumer waits for its pending requests
        likewise; see :mod:`dubbo_py.consumer.in_flight`). Calls still running then are
        cancelled."""
        deadline = time.monotonic() + max(0.0, wait)
        self._serving.stop_requested.set()
        self._referencing.close(wait, deadline)
        with self._generic_lock:
            generic, self._generic_references = self._generic_references, []
            runtime, self._dubbo_runtime = self._dubbo_runtime, None
        for ref in generic:
            ref.close()
        if runtime is not None:
            runtime.close()
        self._serving.close()
        if self.qos is not None:
            self.qos.close()
        for binding in self.bindings:
            binding.close()

    def __enter__(self) -> Application:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
