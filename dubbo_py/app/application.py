"""``Application``: the public entry point for providers and consumers (docs/design.md §2).

>>> app = Application("shop", registry="zookeeper://127.0.0.1:2181")   # doctest: +SKIP
>>> greeter = app.reference(GreeterStub, version="1.0.0")               # doctest: +SKIP
>>> greeter.SayHello(HelloRequest(name="ada"))                          # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

import grpc

from dubbo_py.app import startup
from dubbo_py.app.observability import (
    QOS_PORT_KEY,
    ApplicationQos,
    ConsumerSide,
    provider_labels,
    qos_settings,
)
from dubbo_py.app.registries import (
    ENV_AUTH,
    RegistryArgument,
    RegistryBinding,
    open_store,
    parse_auth,
    registry_choices,
)
from dubbo_py.cluster.budget import RetryBudget
from dubbo_py.cluster.strategies.failback import FailbackQueue
from dubbo_py.config.model import ApplicationConfig, ProtocolConfig, ReferenceConfig
from dubbo_py.config.tls import ServerTLS
from dubbo_py.consumer.assembly import AsyncAssembly, BlockingAssembly
from dubbo_py.consumer.connections import AsyncSharedChannels, SharedChannels
from dubbo_py.consumer.filters import ConsumerFilters
from dubbo_py.consumer.reference import Reference
from dubbo_py.consumer.zone_channel import AsyncZoneAwareChannel, RegistryStack, ZoneAwareChannel
from dubbo_py.errors import ConfigError, StoreError
from dubbo_py.protocol.introspect import ServiceSpec, service_of_stub
from dubbo_py.provider.server import ExportedServer, ExportPlan, export
from dubbo_py.qos import tracing
from dubbo_py.qos.metrics import Metrics
from dubbo_py.qos.provider import AsyncProviderObserver, ProviderObserver, handler_wrap
from dubbo_py.registry.application.wiring import ApplicationLevel
from dubbo_py.registry.fanout import FanOutRegistry
from dubbo_py.registry.local_host import ENV_IP_TO_BIND, LOOPBACK, consumer_host, provider_hosts
from dubbo_py.registry.registry import Registry
from dubbo_py.url import URL
from dubbo_py.version import __version__

if TYPE_CHECKING:
    from dubbo_py.provider.server import AsyncExportedServer

__all__ = ["ENV_AUTH", "Application", "Reference", "open_store"]

# The name docs/observability.md promises for start-up and shutdown (the module was
# dubbo_py/app/application.py).
log = logging.getLogger("dubbo_py.rpc.application")

#: Seconds :meth:`Application.close` waits for calls in flight before it closes the provider
#: channels (Dubbo's default shutdown wait, ``dubbo.service.shutdown.wait``, is 10 s too).
CLOSE_WAIT = 10.0

S = TypeVar("S")
A = TypeVar("A", BlockingAssembly, AsyncAssembly)
_O = TypeVar("_O")


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


def _bind_error(exc: OSError, listen: ProtocolConfig) -> OSError:
    """A bind failure that says where the address came from and how to choose another."""
    return OSError(
        f"{exc}; the server listens on {listen.bind_host} (the address it registers unless "
        f"bind_host, ${ENV_IP_TO_BIND} or protocol.bind_host says otherwise; 0.0.0.0 listens "
        "on every interface)"
    )


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
    ) -> None:
        if not name or not name.strip():
            raise ValueError("an application needs a name")
        #: The configuration file's contents, when the application came from one.
        self.config = config
        #: The registry identity: a ZooKeeper digest (what this application registers is then
        #: protected) or an etcd user.
        self.auth: tuple[str, str] | None = parse_auth(auth)
        self.name = name
        #: The zone calls prefer when they carry no ``registry_zone`` attachment (code, else
        #: the file's ``application.zone``); only read with several registries.
        self.zone = zone or (config.zone if config else None)
        self._lock = threading.Lock()
        #: One blocking channel per provider address (and security settings), shared by every
        #: reference of this application (see :mod:`dubbo_py.consumer.connections`).
        self.channels = SharedChannels()
        #: The ``grpc.aio`` channels of :meth:`reference_async` references: one per event
        #: loop, provider address and security settings (see
        #: :mod:`dubbo_py.consumer.connections`).
        self.aio_channels = AsyncSharedChannels()
        self._provider_registry: Registry | None = None
        self._servers: list[ExportedServer] = []
        self._references: list[Reference[Any]] = []
        #: Each registered consumer URL with the registry it is registered in.
        self._consumer_urls: list[tuple[Registry, URL]] = []
        self._budgets: dict[str, RetryBudget] = {}
        self._stop_requested = threading.Event()
        #: Wrappers around every reference's calls, outside each reference's own (see
        #: :mod:`dubbo_py.consumer.filters`); set it before building references.
        self.filters = filters or ConsumerFilters()
        self._async_servers: list[AsyncExportedServer] = []
        qos = qos_settings(qos_port, qos_accept_foreign_ip, config.qos if config else None)
        #: Call metrics (Dubbo's names; see docs/observability.md): recorded when the QoS port
        #: is on or ``metrics=True``; None when off, and then calls pay nothing for them.
        self.metrics: Metrics | None = (
            Metrics(name) if (metrics if metrics is not None else qos.port is not None) else None
        )
        #: The QoS port's endpoints (None when the port is off).
        self.qos: ApplicationQos | None = None
        if qos.port is not None:
            self.qos = ApplicationQos(self, self.metrics or Metrics(name), qos)
        self._consumer_side = ConsumerSide(self.metrics)
        # Application-level discovery (registry/application/): what providers register at and
        # which level consumers read; code first, then the file, then the environment.
        configured = config.registry if config else None
        register_mode = register_mode or (configured.register_mode if configured else None)
        migration_step = migration_step or (configured.migration_step if configured else None)
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
                register_mode=register_mode,
                migration_step=migration_step,
            )
            for index, choice in enumerate(choices)
        )
        #: The first registry's address (the only one of most applications).
        self.address = self.bindings[0].address

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

    # ----------------------------------------------------------------- registry

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
        with self._lock:
            if self._provider_registry is not None:
                return self._provider_registry
        targets = [b for b in self.bindings if b.config.register]
        if len(self.bindings) == 1:
            registry = self.bindings[0].provider_registry
        elif not targets:
            registry = None
        else:
            members = []
            for binding in targets:
                member = binding.provider_registry
                assert member is not None
                members.append((binding.id, member))
            registry = FanOutRegistry(members, self._service_registries)
        with self._lock:
            if self._provider_registry is None:
                self._provider_registry = registry
            return self._provider_registry

    def _service_registries(self, url: URL) -> tuple[str, ...] | None:
        """The registry ids a provider URL's service names in the configuration file (None:
        every registry marked ``register``)."""
        if self.config is None:
            return None
        options = self.config.services.get(url.path) or self.config.services.get(
            url.service_interface
        )
        return options.registries if options is not None and options.registries else None

    # ----------------------------------------------------------------- provider side

    def start(
        self,
        *servicers: object,
        port: int | None = None,
        host: str | None = None,
        bind_host: str | None = None,
        max_workers: int = 32,
        credentials: grpc.ServerCredentials | None = None,
        unregister_wait: float = 0.5,
        tls: ServerTLS | None = None,
        reflection: bool | None = None,
        interceptors: Sequence[grpc.ServerInterceptor] = (),
    ) -> ExportedServer:
        """Serve ``servicers`` on a new gRPC server and register them; returns at once.

        ``port`` 0 binds any free port; ``host`` is the address registered for consumers
        (default ``$DUBBO_IP_TO_REGISTRY`` or ``$DUBBO_PY_HOST``, else ``protocol.host``, else
        for a ZooKeeper registry this machine's address on the route to ZooKeeper, else
        127.0.0.1); ``bind_host`` is the interface to listen on (default ``$DUBBO_IP_TO_BIND``,
        else ``protocol.bind_host``, else the registered address); ``tls`` serves over TLS
        (mutual TLS when it names a client CA) and says so in the provider URL. Whatever is not
        given comes from the application's configuration file (``protocol``, and
        ``services.<name>`` for each service's options). ``reflection`` serves gRPC server
        reflection (default: on unless ``$DUBBO_PY_REFLECTION`` is ``false``), which
        ``dubbo-py call`` and the console read request types from. ``interceptors`` are gRPC server
        interceptors, run in order around every call (inside dubbo-py's metrics and tracing,
        outside its overload limits).
        """
        listen = self._listen(port, host, bind_host, tls)
        plan = self._export_plan(servicers, listen, credentials, reflection)
        plan, observers = self._observe(plan, ProviderObserver, bool(interceptors), aio=False)
        try:
            with self._batch():
                exported = export(
                    plan,
                    self.provider_registry,
                    max_workers=max_workers,
                    interceptors=[*observers, *interceptors],
                )
        except OSError as exc:
            raise _bind_error(exc, listen) from exc
        exported.unregister_wait = unregister_wait
        with self._lock:
            self._servers.append(exported)
        self._provider_ready(exported.address, exported.urls)
        return exported

    def _provider_ready(self, address: str, urls: list[URL]) -> None:
        if self.qos is not None:
            self.qos.mark_started()
        qos = self.qos.server.address if self.qos is not None else None
        startup.provider_ready(self.name, address, urls, self._registry_name(), qos)

    def _qos_parameters(self) -> dict[str, str] | None:
        return None if self.qos is None else {QOS_PORT_KEY: str(self.qos.port)}

    def _observe(
        self,
        plan: ExportPlan,
        kind: Callable[[Metrics, Mapping[str, tuple[str, str] | None]], _O],
        user_interceptors: bool,
        *,
        aio: bool,
    ) -> tuple[ExportPlan, list[_O]]:
        """The provider metrics and tracing (when metrics are on or a tracer is set up): the
        plan's handlers wrapped once when nothing else must run outside them (no user
        interceptor, no overload limit, every service exported once), else the outermost
        interceptor, which also sees the calls those refuse."""
        if self.metrics is None and not tracing.enabled():
            return plan, []
        metrics = self.metrics or Metrics(self.name)
        labels = provider_labels(plan.servicers, plan.service_options)
        if user_interceptors or plan.guards() or None in labels.values():
            return plan, [kind(metrics, labels)]
        return replace(plan, wrap=handler_wrap(metrics, aio=aio)), []

    @property
    def servers(self) -> tuple[ExportedServer | AsyncExportedServer, ...]:
        """Every server this application started (both flavours)."""
        with self._lock:
            return (*self._servers, *self._async_servers)

    @property
    def registry_name(self) -> str:
        """The registry address as configured ("" for direct calls)."""
        return self._registry_name()

    def registry_connected(self) -> bool | None:
        """Whether the registry session is connected -- every registry's, with several (None
        before one is opened, or direct)."""
        opened = [b.opened for b in self.bindings if b.opened is not None]
        return None if not opened else all(r.connected for r in opened)

    def _export_plan(
        self,
        servicers: tuple[object, ...],
        listen: ProtocolConfig,
        credentials: grpc.ServerCredentials | None,
        reflection: bool | None = None,
    ) -> ExportPlan:
        """What a start serves: the servicers, the listening options, the TLS credentials
        (the protocol's TLS, else ``credentials``) and the configuration file's options."""
        return ExportPlan(
            servicers,
            self.name,
            host=listen.host or LOOPBACK,
            port=listen.port,
            bind_host=listen.bind_host,
            credentials=listen.tls.credentials() if listen.tls else credentials,
            url_parameters=self._qos_parameters(),
            service_options=self.config.services if self.config else None,
            reflection=reflection,
        )

    def _batch(self) -> contextlib.AbstractContextManager[Any]:
        """Providers registered inside publish the application's instance once (in each
        registry they register in), at the end."""
        _ = self.provider_registry
        stack = contextlib.ExitStack()
        for binding in self.bindings:
            if binding.config.register or len(self.bindings) == 1:
                stack.enter_context(binding.batch())
        return stack

    def _registry_name(self) -> str:
        if self.address.kind == "direct":
            return ""
        return ", ".join(b.label for b in self.bindings)

    def _listen(
        self, port: int | None, host: str | None, bind_host: str | None, tls: ServerTLS | None
    ) -> ProtocolConfig:
        """Listening options: arguments first, then the environment and the configuration file,
        then defaults (see :func:`dubbo_py.registry.local_host.provider_hosts`)."""
        configured = self.config.protocol if self.config else ProtocolConfig()
        hosts = provider_hosts(
            self.address,
            host=host,
            bind_host=bind_host,
            configured_host=configured.host,
            configured_bind=configured.bind_host,
        )
        return ProtocolConfig(
            port=port if port is not None else configured.port,
            host=hosts.register,
            bind_host=hosts.bind,
            tls=tls or configured.tls,
        )

    def serve(
        self, *servicers: object, port: int | None = None, grace: float = 5.0, **options: Any
    ) -> None:
        """Serve and block until SIGINT/SIGTERM, then shut down gracefully (unregister, let
        consumers notice, drain in-flight calls for up to ``grace`` s).

        Start-up and shutdown are logged at INFO, to stderr when the application configured no
        logging (``$DUBBO_PY_LOG_LEVEL`` sets the level). A registry that cannot be reached
        ends the process with one line saying so (exit status 1), not a traceback."""
        startup.ensure_logging()
        try:
            self.start(*servicers, port=port, **options)
        except startup.RegistryUnreachableError as exc:
            self.close()
            raise SystemExit(f"error: {exc}") from None
        self.wait(grace=grace)

    def wait(self, grace: float = 5.0) -> None:
        """Block until SIGINT/SIGTERM (or :meth:`close` from another thread), then stop every
        server this application started, gracefully, and close the application."""
        received: list[str] = []

        def on_signal(number: int, _frame: object) -> None:
            received.append(signal.Signals(number).name)
            self._stop_requested.set()

        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, on_signal)
        try:
            while not self._stop_requested.wait(0.5):
                pass
            if received:
                startup.stopping(self.name, received[0], grace)
        finally:
            with self._lock:
                servers = list(self._servers)
            for server in servers:
                server.stop(grace)
            self.close()

    async def start_async(
        self,
        *servicers: object,
        port: int | None = None,
        host: str | None = None,
        bind_host: str | None = None,
        credentials: grpc.ServerCredentials | None = None,
        unregister_wait: float = 0.5,
        tls: ServerTLS | None = None,
        interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    ) -> AsyncExportedServer:
        """The asyncio flavour of :meth:`start`: serve ``async def`` servicers on a
        ``grpc.aio`` server and register them; ``await server.stop()`` shuts down gracefully."""
        from dubbo_py.provider.server import export_async

        listen = await asyncio.to_thread(self._listen, port, host, bind_host, tls)
        registry = await asyncio.to_thread(lambda: self.provider_registry)
        plan = self._export_plan(servicers, listen, credentials)
        plan, observers = self._observe(plan, AsyncProviderObserver, bool(interceptors), aio=True)
        try:
            with self._batch():
                exported = await export_async(
                    plan, registry, interceptors=[*observers, *interceptors]
                )
        except OSError as exc:
            raise _bind_error(exc, listen) from exc
        exported.unregister_wait = unregister_wait
        with self._lock:
            self._async_servers.append(exported)
        self._provider_ready(exported.address, exported.urls)
        return exported

    async def serve_async(
        self, *servicers: object, port: int | None = None, grace: float = 5.0, **options: Any
    ) -> None:
        """Serve async servicers until the task is cancelled, then shut down gracefully
        (logging as :meth:`serve` does); ``options`` are :meth:`start_async`'s."""
        startup.ensure_logging()
        exported = await self.start_async(*servicers, port=port, **options)
        try:
            await asyncio.Event().wait()
        finally:
            await exported.stop(grace)

    # ----------------------------------------------------------------- consumer side

    async def reference_async(self, stub_class: type[S], **options: Any) -> S:
        """The asyncio flavour of :meth:`reference`: ``stub = await app.reference_async(...)``,
        then ``await stub.Unary(req)`` and ``async for r in stub.Streaming(req)``. Same options;
        await it on the event loop that will make the calls (its gRPC channels belong to that
        loop). Like :meth:`reference` it returns once the providers and rules are read; the
        wait runs in a worker thread, so the event loop keeps running meanwhile."""
        ref = await self.reference_handle_async(stub_class, **options)
        return ref.stub

    async def reference_handle_async(
        self,
        stub_class: type[S],
        *,
        failback: FailbackQueue | None = None,
        filters: ConsumerFilters | None = None,
        interceptors: Sequence[grpc.aio.ClientInterceptor] = (),
        **options: Any,
    ) -> Reference[S]:
        """Like :meth:`reference_async`, but returns the :class:`Reference`; ``interceptors``
        are ``grpc.aio`` client interceptors, on every channel of the reference."""
        stacks = await asyncio.to_thread(
            self._stacks, AsyncAssembly, stub_class, failback, filters, options, interceptors
        )
        channel = (
            stacks[0].channel if len(stacks) == 1 else AsyncZoneAwareChannel(stacks, self.zone)
        )
        stub: S = stub_class(channel)  # type: ignore[call-arg]
        return await asyncio.to_thread(self._started, stacks, channel, stub)

    async def aclose(self, wait: float = CLOSE_WAIT) -> None:
        """Refuse new calls, wait up to ``wait`` s for the calls in flight (this loop's
        keep running meanwhile), close the asyncio references' provider channels, then
        everything :meth:`close` does."""
        deadline = time.monotonic() + max(0.0, wait)
        with self._lock:
            refs = list(self._references)
        for ref in refs:
            ref.refuse_calls()
        for ref in refs:
            await ref.wait_for_calls_async(deadline)
        for ref in refs:
            await ref.close_channels()
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
        Consumer-side override rules in the registry change ``timeout``, ``retries``,
        ``forks``, ``sticky`` and ``loadbalance`` at runtime. An unknown option is a TypeError
        and a bad value a ConfigError naming it.
        """
        stub: S = self.reference_handle(stub_class, **options).stub
        return stub

    def reference_config(self, service: str, **options: Any) -> ReferenceConfig:
        """The configuration a reference to ``service`` uses: the file's section for it (or
        the defaults) with ``options`` on top."""
        configured = self.config.references.get(service) if self.config else None
        return (configured or ReferenceConfig()).merged(**options)

    def reference_handle(
        self,
        stub_class: type[S],
        *,
        failback: FailbackQueue | None = None,
        filters: ConsumerFilters | None = None,
        interceptors: Sequence[Any] = (),
        **options: Any,
    ) -> Reference[S]:
        """Like :meth:`reference`, but returns the :class:`Reference` (stub, directory,
        quarantine) for code that wants to inspect or close it. ``filters`` wrap this
        reference's calls inside the application's :attr:`filters` (see
        :mod:`dubbo_py.consumer.filters`); ``interceptors`` are gRPC client interceptors
        (``grpc.UnaryUnaryClientInterceptor`` and the other three kinds), run around every
        attempt on a provider's channel, inside dubbo-py's routing and retries."""
        stacks = self._stacks(
            BlockingAssembly, stub_class, failback, filters, options, interceptors
        )
        # Built before anything starts: binding the methods checks the mocks against the
        # response types, and a bad one must not leave watches, threads or a registered
        # consumer behind.
        channel = stacks[0].channel if len(stacks) == 1 else ZoneAwareChannel(stacks, self.zone)
        stub: S = stub_class(channel)  # type: ignore[call-arg]
        return self._started(stacks, channel, stub)

    def _subscribed(self, config: ReferenceConfig) -> list[RegistryBinding]:
        """The registries a reference reads: those its ``registries`` name, else every one
        marked ``subscribe`` (the only one, for most applications)."""
        if len(self.bindings) == 1:
            return list(self.bindings)
        if config.registries:
            known = {b.id: b for b in self.bindings}
            unknown = [r for r in config.registries if r not in known]
            if unknown:
                raise ConfigError(
                    "registries",
                    f"unknown registry id(s) {unknown} (registries: {', '.join(known)})",
                )
            return [known[r] for r in config.registries]
        chosen = [b for b in self.bindings if b.config.subscribe]
        if not chosen:
            raise ConfigError("registries", "no registry is marked subscribe")
        return chosen

    def _stacks(
        self,
        kind: type[A],
        stub_class: type[object],
        failback: FailbackQueue | None,
        filters: ConsumerFilters | None,
        options: Mapping[str, Any],
        interceptors: Sequence[Any] = (),
    ) -> list[RegistryStack]:
        """One stack per registry the reference reads (each with its own channel), wired but
        not started; they share the service's retry budget, the application's connections
        and the reference's filters."""
        spec = service_of_stub(stub_class)
        config = self.reference_config(spec.name, **options)
        consumer = self._consumer_url(
            config.interface or spec.name,
            config.version,
            config.group,
            config.parameters,
            config.retries,
            config.timeout,
        )
        budget = self._budget_for(spec.name)
        around = self._observed(consumer, budget) + self.filters + (filters or ConsumerFilters())
        stacks = []
        for binding in self._subscribed(config):
            assembly = self._assembly(
                kind, binding, spec, config, consumer, budget, failback, around, interceptors
            )
            stacks.append(
                RegistryStack(
                    binding.id or str(binding.address),
                    binding.config,
                    binding.opened,
                    assembly,
                    assembly.channel(),
                )
            )
        return stacks

    def _assembly(
        self,
        kind: type[A],
        binding: RegistryBinding,
        spec: ServiceSpec,
        config: ReferenceConfig,
        consumer: URL,
        budget: RetryBudget,
        failback: FailbackQueue | None,
        filters: ConsumerFilters,
        interceptors: Sequence[Any],
    ) -> A:
        """The stack of a reference on one registry, wired but not started."""
        registry = binding.registry
        level = binding.application_level
        if registry is not None and level is not None:
            consumer = level.consumer_url(consumer)
        cache = binding.notify_cache() if registry is not None else None
        static = () if registry is not None else self._direct_providers(consumer, spec.name)
        return kind(
            spec,
            config,
            consumer,
            application=self.name,
            registry=registry,
            cache=cache,
            static_providers=tuple(static),
            budget=budget,
            failback=failback,
            filters=filters,
            interceptors=tuple(interceptors),
            channels=self.channels,
            aio_channels=self.aio_channels,
            subscribe=(
                level.subscriber(consumer) if level is not None and registry is not None else None
            ),
        )

    def _observed(self, consumer: URL, budget: RetryBudget) -> ConsumerFilters:
        """The metrics-and-tracing wrappers of a new reference, outside every other filter
        (none when metrics are off and no tracer is set up: calls then pay nothing)."""
        if self.metrics is None and not tracing.enabled():
            return ConsumerFilters()
        return self._consumer_side.filters(consumer, budget)

    def _started(self, stacks: Sequence[RegistryStack], channel: Any, stub: S) -> Reference[S]:
        """Start the stacks (blocks while the providers and rules are read; several at once),
        register the consumer in each registry, and keep the reference for :meth:`close`."""
        if len(stacks) == 1:
            self._start_stack(stacks[0])
        else:
            for stack in stacks:
                stack.watch()
            threads = [
                threading.Thread(target=self._start_stack, args=(s,), name="dubbo-subscribe")
                for s in stacks
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        first = stacks[0].assembly
        assert isinstance(first, BlockingAssembly | AsyncAssembly)
        ref = Reference(
            stub,
            first.service.name,
            first.consumer,
            first.directory,
            channel,
            first,
            stacks=tuple(stacks) if len(stacks) > 1 else (),
        )
        with self._lock:
            self._references.append(ref)
        if self.qos is not None:
            self.qos.watch_reference(ref)
            self.qos.mark_started()
        return ref

    def _start_stack(self, stack: RegistryStack) -> None:
        """Start one registry's stack and register its consumer URL there."""
        assembly = stack.assembly
        assembly.start()
        directory, service = assembly.directory, assembly.service.name
        startup.consumer_ready(self.name, directory, assembly.config.check)
        registry = stack.registry
        if registry is not None and not registry.connected and not directory.providers:
            log.warning(
                "registry %s unreachable: %s has no provider yet (none cached); calls fail with "
                "'registry unreachable' until it answers",
                stack.name if len(self.bindings) > 1 else self.address,
                service,
            )
        consumer = assembly.consumer
        if registry is not None:
            try:
                registry.register(consumer)
                with self._lock:
                    self._consumer_urls.append((registry, consumer))
            except StoreError as exc:
                if startup.registry_unreachable(directory) is None:  # else said just above
                    log.warning("could not register consumer %s: %s", consumer, exc)

    def _budget_for(self, service: str) -> RetryBudget:
        # One budget per service: every reference to it shares the retries it may make.
        with self._lock:
            budget = self._budgets.get(service)
            if budget is None:
                budget = self._budgets[service] = RetryBudget()
            return budget

    def _consumer_url(
        self,
        service: str,
        version: str,
        group: str,
        parameters: Mapping[str, str] | None,
        retries: int | None,
        timeout: float | None,
    ) -> URL:
        params = {
            "application": self.name,
            "category": "consumers",
            "check": "false",
            "interface": service,
            "side": "consumer",
            "pid": str(os.getpid()),
            "release": __version__,
            "dubbo": "2.0.2",
            "timestamp": str(int(time.time() * 1000)),
        }
        if retries is not None:
            params["retries"] = str(retries)
        params.update(self._qos_parameters() or {})
        if version:
            params["version"] = version
        if group:
            params["group"] = group
        if timeout is not None:
            params["timeout"] = str(int(timeout * 1000))
        params.update(parameters or {})
        return URL("consumer", consumer_host(self.address), 0, service, parameters=params)

    def _direct_providers(self, consumer: URL, path: str) -> list[URL]:
        # A direct address is trusted to serve what the consumer asks for, so it carries the
        # consumer's interface, version and group.
        params = {
            k: v for k, v in consumer.parameters.items() if k in ("interface", "version", "group")
        }
        out = []
        for entry in self.address.hosts:
            host, port = entry.rsplit(":", 1)
            out.append(URL("tri", host, int(port), path, parameters=params))
        return out

    @property
    def references(self) -> tuple[Reference[Any], ...]:
        """Every reference this application built (their directories, quarantines, stubs)."""
        with self._lock:
            return tuple(self._references)

    # ----------------------------------------------------------------- lifecycle

    def close(self, wait: float = CLOSE_WAIT) -> None:
        """Close references and servers this application opened, then the registry.

        Calls are not cut short: the references refuse new calls (UNAVAILABLE, "the
        application is closed"), and their provider channels close once the calls in flight
        have ended, or after ``wait`` seconds (Dubbo's consumer waits for its pending requests
        likewise; see :mod:`dubbo_py.consumer.in_flight`). Calls still running then are
        cancelled."""
        deadline = time.monotonic() + max(0.0, wait)
        self._stop_requested.set()
        with self._lock:
            refs, self._references = self._references, []
            servers, self._servers = self._servers, []
            consumers, self._consumer_urls = self._consumer_urls, []
        for ref in refs:
            ref.refuse_calls()
        unfinished = sum(not ref.wait_for_calls(deadline) for ref in refs)
        if unfinished:
            log.warning(
                "%s: calls still in flight on %d reference(s) after %.1f s are cancelled",
                self.name,
                unfinished,
                wait,
            )
        for ref in refs:
            ref.close()
        self.channels.close()
        for server in servers:
            server.stop(grace=1.0)
        if self.qos is not None:
            self.qos.close()
        for registry, url in consumers:
            with contextlib.suppress(StoreError):
                registry.unregister(url)
        for binding in self.bindings:
            binding.close()
        self._provider_registry = None

    def __enter__(self) -> Application:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
