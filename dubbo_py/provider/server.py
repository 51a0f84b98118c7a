"""Exporting providers: a gRPC server, the health service, and the provider URLs it registers.

Shutdown is graceful in Dubbo's order: unregister first (consumers' watches drop the provider),
wait long enough for them to notice, mark the health service NOT_SERVING, then stop the server
with a grace period so calls in flight complete.

Both flavours live here: the blocking server first, then the asyncio one.

Exporting asyncio providers: the ``grpc.aio`` flavour of :mod:`dubbo_py.provider.server`.

``await app.start_async(AsyncServicer())`` serves ``async def`` servicer methods on a
``grpc.aio`` server and registers them like the blocking flavour, with the same provider URLs,
overload limits, health service and graceful shutdown order.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from dubbo_py.errors import RegistryUnreachableError, StoreError
from dubbo_py.protocol.introspect import ServiceSpec, service_of_servicer
from dubbo_py.protocol.payload import with_payload_limits
from dubbo_py.provider.dispatch import HandlerWrap, add_servicers
from dubbo_py.provider.health import HealthService
from dubbo_py.provider.limits import MethodGuard, interceptor, interceptor_async, servicer_guards
from dubbo_py.provider.reflection import add_reflection, reflection_wanted
from dubbo_py.provider.service import ServiceOptions, options_of
from dubbo_py.registry.application.metadata_server import metadata_handler
from dubbo_py.registry.registry import Registry
from dubbo_py.registry.store.advice import start_advice
from dubbo_py.url import URL
from dubbo_py.version import __version__

__all__ = [
    "DUBBO_PROTOCOL_VERSION",
    "AsyncExportedServer",
    "ExportPlan",
    "ExportedServer",
    "bind_servicers",
    "export",
    "export_async",
    "health_names",
    "mark_services",
    "provider_url",
    "provider_urls",
    "register_all",
    "unregister_all",
]


log = logging.getLogger(__name__)

DUBBO_PROTOCOL_VERSION = "2.0.2"
PROTOCOL = "tri"


def provider_url(
    spec: ServiceSpec,
    servicer: object,
    *,
    application: str,
    host: str,
    port: int,
    timestamp_ms: int | None = None,
    extra: dict[str, str] | None = None,
    options: ServiceOptions | None = None,
    base: Mapping[str, str] | None = None,
) -> URL:
    """The URL a provider registers (docs/design.md §3), as Apache Dubbo writes it for a triple
    provider: methods sorted, side=provider, start timestamp for warmup, pid and release.
    ``options`` (from configuration) replace the servicer's ``@service`` options. ``base``
    (the application's own parameters) goes under everything else, as Dubbo appends
    ``ApplicationConfig.parameters`` before the service's."""
    params = dict(base or {})
    params |= {
        "anyhost": "false",
        "application": application,
        "interface": spec.name,
        "methods": ",".join(sorted(spec.method_names)),
        "side": "provider",
        "timestamp": str(timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)),
        "pid": str(os.getpid()),
        "release": __version__,
        "dubbo": DUBBO_PROTOCOL_VERSION,
    }
    params.update((options or options_of(servicer)).url_parameters())
    params.update(extra or {})
    return URL(PROTOCOL, host, port, spec.name, parameters=params)


@dataclass
class ExportedServer:
    """A running gRPC server with its registered provider URLs."""

    server: grpc.Server
    urls: list[URL]
    registry: Registry | None
    health: HealthService
    port: int
    host: str
    unregister_wait: float = 0.5
    _stopped: threading.Event = field(default_factory=threading.Event)
    #: Taken out of the registry by :meth:`offline` (still serving).
    is_offline: bool = False

    @property
    def address(self) -> str:
        """``host:port`` consumers use."""
        return f"{self.host}:{self.port}"

    def offline(self, urls: Sequence[URL] | None = None) -> list[URL]:
        """Unregister ``urls`` (default: all of this server's) and keep serving, so consumers
        stop sending within their notify latency while calls in flight finish (Dubbo's QoS
        ``offline``); returns the URLs taken out."""
        chosen = list(self.urls if urls is None else urls)
        if not self._stopped.is_set():
            mark_services(self.health, chosen, serving=False)
            unregister_all(self.registry, chosen)
        self.is_offline = True
        return chosen

    def online(self, urls: Sequence[URL] | None = None) -> list[URL]:
        """Register ``urls`` (default: all of this server's) again after :meth:`offline`."""
        chosen = list(self.urls if urls is None else urls)
        if not self._stopped.is_set():
            register_all(self.registry, chosen)
            mark_services(self.health, chosen, serving=True)
        self.is_offline = False
        return chosen

    def stop(self, grace: float = 5.0) -> None:
        """Unregister, wait for consumers to notice, then drain in-flight calls for ``grace`` s."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        if self.registry is not None:
            mark_services(self.health, self.urls, serving=False)
            for url in self.urls:
                try:
                    self.registry.unregister(url)
                except Exception as exc:  # keep shutting down whatever the registry says
                    log.warning("could not unregister %s: %s", url, exc)
            time.sleep(self.unregister_wait)
        self.health.enter_graceful_shutdown()
        self.server.stop(grace).wait()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the server stops."""
        return bool(self.server.wait_for_termination(timeout))


@dataclass(frozen=True, slots=True)
class ExportPlan:
    """What one export serves and registers, the same for the blocking and the asyncio server:
    the servicers, where to listen and what to register (``host`` is the registered address,
    ``bind_host`` the interface listened on, ``host`` when None)."""

    servicers: tuple[object, ...]
    application: str
    host: str = "127.0.0.1"
    port: int = 0
    bind_host: str | None = None
    credentials: grpc.ServerCredentials | None = None
    url_parameters: Mapping[str, str] | None = None
    service_options: Mapping[str, ServiceOptions] | None = None
    #: The application's own parameters, under each service's (``Application(parameters=)``).
    application_parameters: Mapping[str, str] | None = None
    #: Serve gRPC server reflection (None: ``$DUBBO_PY_REFLECTION``, default on).
    reflection: bool | None = None
    #: Wraps each servicer method's handler once when it is added (the provider metrics when
    #: nothing else must run outside them), instead of a server interceptor on every call.
    wrap: HandlerWrap | None = None

    def guards(self) -> dict[str, MethodGuard]:
        """The overload limits (executes, tps, flowcontrol) of the servicers' methods."""
        return servicer_guards(self.servicers, self.service_options)

    def bind(self, server: Any, health_servicer: Any) -> int:
        """Add the servicers, the health service and the application's MetadataServiceV2
        (:mod:`~dubbo_py.registry.application.metadata_server`) to ``server`` and bind it (the
        port)."""
        server.add_generic_rpc_handlers(
            (metadata_handler(self.application, aio=isinstance(server, grpc.aio.Server)),)
        )
        return bind_servicers(
            server,
            self.servicers,
            health_servicer,
            self.bind_host or self.host,
            self.port,
            self.credentials,
            self.service_options,
            reflection=self.reflection,
            wrap=self.wrap,
        )

    def urls(self, port: int) -> list[URL]:
        """The provider URLs to register once the server listens on ``port``."""
        return provider_urls(
            self.servicers,
            self.application,
            self.host,
            port,
            self.credentials,
            dict(self.url_parameters or {}),
            self.service_options,
            self.application_parameters,
        )


def health_names(urls: Sequence[URL]) -> list[str]:
    """The health service names set SERVING once the server is up: the server's ("") and each
    registered service's."""
    return ["", *(u.path for u in urls)]


def export(
    plan: ExportPlan,
    registry: Registry | None,
    *,
    max_workers: int = 32,
    options: Sequence[tuple[str, object]] = (),
    interceptors: Sequence[grpc.ServerInterceptor] = (),
) -> ExportedServer:
    """Serve ``plan``'s servicers on one gRPC server and register one provider URL per
    service (``registry`` None: register nothing); the plan says whether to serve gRPC server
    reflection. ``interceptors`` run in order, outermost first, before the overload limits."""
    # Overload limits are an interceptor, there only when some service has one.
    shedder = interceptor(plan.guards())
    chain = [*interceptors, *([shedder] if shedder is not None else [])]
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="dubbo-provider"),
        options=with_payload_limits(options),
        interceptors=chain or None,
    )
    # Not grpcio-health-checking's HealthServicer: it can deadlock the blocking server
    # (dubbo_py/provider/health.py).
    health_servicer = HealthService()
    bound = plan.bind(server, health_servicer)
    server.start()
    urls = plan.urls(bound)
    for name in health_names(urls):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    exported = ExportedServer(server, urls, registry, health_servicer, bound, plan.host)
    try:
        register_all(registry, urls)
    except BaseException:
        server.stop(0)  # a provider nobody can find must not keep a port
        raise
    return exported


class GenericOnly:
    """A ``grpc.aio`` server as the health and reflection services' generated code sees it:
    their handlers are added as generic handlers only, not as registered methods.

    Why: a ``grpc.aio`` server keeps one pending request per registered method, and its
    serving loop waits on all of them (``asyncio.wait``, one done-callback added and removed
    per method) every time a call arrives. Health's three methods and reflection's one
    registered there cost each application call four more of those than a raw server serving
    the application's service alone (cProfile and ``bench/bench_instructions.py``,
    docs/benchmarks.md). Found through the generic handlers instead, health checks and
    reflection answer exactly as before; only their own lookup takes a few more steps."""

    __slots__ = ("_server",)

    def __init__(self, server: Any) -> None:
        self._server = server

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        """Add ``handlers`` to the server."""
        self._server.add_generic_rpc_handlers(handlers)

    def add_registered_method_handlers(self, service: str, handlers: Any) -> None:
        """Not registered: the generic handlers added beside them serve these methods."""


def bind_servicers(
    server: Any,
    servicers: Sequence[object],
    health_servicer: Any,
    listen_host: str,
    port: int,
    credentials: grpc.ServerCredentials | None,
    service_options: Mapping[str, ServiceOptions] | None = None,
    *,
    reflection: bool | None = None,
    wrap: HandlerWrap | None = None,
) -> int:
    """Add the servicers, the health service and (unless turned off) server reflection to a
    (sync or asyncio) gRPC server and bind it; returns the bound port. Several servicers of
    one service (versions, groups) are told apart by the calls' Triple headers
    (:mod:`dubbo_py.provider.dispatch`)."""
    if not servicers:
        raise ValueError("export needs at least one servicer")
    framework: Any = GenericOnly(server) if isinstance(server, grpc.aio.Server) else server
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, framework)
    add_servicers(server, servicers, service_options, wrap)
    if reflection_wanted(reflection):
        names = [service_of_servicer(s).name for s in servicers]
        add_reflection(server, [*names, health.SERVICE_NAME], framework)
    listen = f"{listen_host}:{port}"
    if credentials is None:
        bound = int(server.add_insecure_port(listen))
    else:
        bound = int(server.add_secure_port(listen, credentials))
    if bound == 0:
        raise OSError(f"could not bind gRPC server to {listen}")
    return bound


def provider_urls(
    servicers: Sequence[object],
    application: str,
    host: str,
    port: int,
    credentials: grpc.ServerCredentials | None,
    url_parameters: dict[str, str] | None,
    service_options: Mapping[str, ServiceOptions] | None = None,
    base: Mapping[str, str] | None = None,
) -> list[URL]:
    """One provider URL per servicer (``tls=true`` and ``ssl-enabled=true`` when the server is
    secure); a service named
    in ``service_options`` takes those options instead of its decorator's."""
    extra = dict(url_parameters or {})
    if credentials is not None:
        extra.setdefault("tls", "true")
        # What Apache Dubbo's Triple consumers read to choose TLS.
        extra.setdefault("ssl-enabled", "true")
    urls = []
    for servicer in servicers:
        spec = service_of_servicer(servicer)
        urls.append(
            provider_url(
                spec,
                servicer,
                application=application,
                host=host,
                port=port,
                extra=extra,
                options=(service_options or {}).get(spec.name),
                base=base,
            )
        )
    return urls


def mark_services(health_servicer: Any, urls: Sequence[URL], *, serving: bool) -> None:
    """Set the health status of the services of ``urls`` (the server's own stays as it is).

    A provider unregisters a service on purpose only after marking it NOT_SERVING: consumers'
    empty protection (:mod:`dubbo_py.registry.empty_protection`) tells a provider that left
    the registry on purpose from one whose session expired by asking exactly this."""
    status = (
        health_pb2.HealthCheckResponse.SERVING
        if serving
        else health_pb2.HealthCheckResponse.NOT_SERVING
    )
    for url in urls:
        health_servicer.set(url.path, status)


def unregister_all(registry: Registry | None, urls: Sequence[URL]) -> None:
    """Unregister provider URLs (no-op without a registry)."""
    if registry is not None:
        for url in urls:
            registry.unregister(url)


def register_all(registry: Registry | None, urls: Sequence[URL]) -> None:
    """Register provider URLs (no-op without a registry)."""
    if registry is None:
        return
    for url in urls:
        try:
            registry.register(url)
        except StoreError:
            # A store that is not connected fails on the node path; say what is wrong instead.
            if getattr(registry.store, "connected", True) is False:
                where = str(getattr(registry.store, "address", "the registry"))
                raise unreachable(where, url.get_str("application")) from None
            raise
        log.debug("registered provider %s", url)


def unreachable(registry: str, application: str) -> RegistryUnreachableError:
    """The error a provider that cannot register raises (one line, no node paths)."""
    return RegistryUnreachableError(
        f"{application}: cannot register: the registry {registry} is unreachable. "
        + start_advice(registry)
    )


# ----------------------------- the asyncio flavour -----------------------------


log = logging.getLogger(__name__)


@dataclass
class AsyncExportedServer:
    """A running ``grpc.aio`` server with its registered provider URLs."""

    server: grpc.aio.Server
    urls: list[URL]
    registry: Registry | None
    health: Any
    port: int
    host: str
    unregister_wait: float = 0.5
    #: Taken out of the registry by :meth:`offline` (still serving).
    is_offline: bool = False
    #: The event loop the server runs on (its health service is set from there).
    loop: asyncio.AbstractEventLoop | None = None

    @property
    def address(self) -> str:
        """``host:port`` consumers use."""
        return f"{self.host}:{self.port}"

    def offline(self, urls: Sequence[URL] | None = None) -> list[URL]:
        """Unregister ``urls`` (default: all) and keep serving (blocking: call it from a
        thread, as the QoS port does)."""
        chosen = list(self.urls if urls is None else urls)
        self._mark_from_thread(chosen, serving=False)
        unregister_all(self.registry, chosen)
        self.is_offline = True
        return chosen

    def online(self, urls: Sequence[URL] | None = None) -> list[URL]:
        """Register ``urls`` (default: all) again after :meth:`offline` (blocking)."""
        chosen = list(self.urls if urls is None else urls)
        register_all(self.registry, chosen)
        self._mark_from_thread(chosen, serving=True)
        self.is_offline = False
        return chosen

    def _mark_from_thread(self, urls: Sequence[URL], *, serving: bool) -> None:
        # Before unregistering on purpose, the services say NOT_SERVING (empty protection on
        # consumers tells a clean exit from an expired session by it; see mark_services).
        if self.loop is None or self.loop.is_closed():
            return
        try:
            asyncio.run_coroutine_threadsafe(self._mark(urls, serving), self.loop).result(5.0)
        except Exception as exc:
            log.warning("could not set the health status of %s: %s", self.address, exc)

    async def _mark(self, urls: Sequence[URL], serving: bool) -> None:
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for url in urls:
            await self.health.set(url.path, status)

    async def stop(self, grace: float = 5.0) -> None:
        """Unregister, wait for consumers to notice, then drain in-flight calls."""
        if self.registry is not None:
            await self._mark(self.urls, serving=False)
            for url in self.urls:
                try:
                    await asyncio.to_thread(self.registry.unregister, url)
                except Exception as exc:  # keep shutting down whatever the registry says
                    log.warning("could not unregister %s: %s", url, exc)
            await asyncio.sleep(self.unregister_wait)
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)


async def export_async(
    plan: ExportPlan,
    registry: Registry | None,
    *,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
) -> AsyncExportedServer:
    """Serve ``plan``'s async servicers on one ``grpc.aio`` server and register their provider
    URLs (the asyncio flavour of :func:`~dubbo_py.provider.server.export`); ``interceptors`` run
    in order, outermost first, before the overload limits."""
    shedder = interceptor_async(plan.guards())
    chain = [*interceptors, *([shedder] if shedder is not None else [])]
    server = grpc.aio.server(interceptors=chain or None)
    health_servicer = health.aio.HealthServicer()
    bound = plan.bind(server, health_servicer)
    await server.start()
    urls = plan.urls(bound)
    for name in health_names(urls):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    try:
        await asyncio.to_thread(register_all, registry, urls)
    except BaseException:
        await server.stop(0)  # a provider nobody can find must not keep a port
        raise
    return AsyncExportedServer(
        server, urls, registry, health_servicer, bound, plan.host, loop=asyncio.get_running_loop()
    )
