"""An application's provider half: the servers it starts, the registry its providers
register through, serving until a signal.

:class:`~dubbo_py.app.application.Application` delegates its provider methods (``start``,
``serve``, ``wait``, ``start_async``, ``serve_async``) here; their documentation is on those
methods.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import grpc

from dubbo_py.app import startup
from dubbo_py.app.context import AppContext
from dubbo_py.app.observability import provider_labels
from dubbo_py.config.model import ProtocolConfig
from dubbo_py.config.tls import ServerTLS
from dubbo_py.provider.server import AsyncExportedServer, ExportedServer, ExportPlan, export
from dubbo_py.qos import tracing
from dubbo_py.qos.access_log import ProviderAccessLogs
from dubbo_py.qos.metrics import Metrics
from dubbo_py.qos.provider import AsyncProviderObserver, ProviderObserver, handler_wrap
from dubbo_py.registry.fanout import FanOutRegistry
from dubbo_py.registry.local_host import ENV_IP_TO_BIND, LOOPBACK, provider_hosts
from dubbo_py.registry.registry import Registry
from dubbo_py.registry.store.kinds import DEFAULT_UNREGISTER_NOTICE, STORES
from dubbo_py.url import URL

__all__ = ["Serving"]

_O = TypeVar("_O")
#: A started server of either flavour.
_S = TypeVar("_S", ExportedServer, AsyncExportedServer)


def _bind_error(exc: OSError, listen: ProtocolConfig) -> OSError:
    """A bind failure that says where the address came from and how to choose another."""
    return OSError(
        f"{exc}; the server listens on {listen.bind_host} (the address it registers unless "
        f"bind_host, ${ENV_IP_TO_BIND} or protocol.bind_host says otherwise; 0.0.0.0 listens "
        "on every interface)"
    )


class Serving:
    """The provider half of an application. ``close`` closes the whole application (what
    ``serve`` does when the registry cannot be reached, and ``wait`` once stopped)."""

    def __init__(self, app: AppContext, close: Callable[[], None]) -> None:
        self._app = app
        self._close = close
        self._lock = threading.Lock()
        self._provider_registry: Registry | None = None
        self._servers: list[ExportedServer] = []
        self._async_servers: list[AsyncExportedServer] = []
        #: Set by a signal or by closing the application: :meth:`wait` returns.
        self.stop_requested = threading.Event()
        #: The access log switches, one per exported service: set by the ``accesslog``
        #: parameter as exported, or as an override rule registers it.
        self.access_logs = ProviderAccessLogs()
        for binding in app.bindings:
            binding.on_provider_registered = self.access_logs.apply

    @property
    def provider_registry(self) -> Registry | None:
        """:attr:`Application.provider_registry <dubbo_py.app.application.Application.
        provider_registry>`, opened on first use."""
        with self._lock:
            if self._provider_registry is not None:
                return self._provider_registry
        targets = [b for b in self._app.bindings if b.config.register]
        if len(self._app.bindings) == 1:
            registry = self._app.bindings[0].provider_registry
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
        if self._app.config is None:
            return None
        options = self._app.config.services.get(url.path) or self._app.config.services.get(
            url.service_interface
        )
        return options.registries if options is not None and options.registries else None

    def start(
        self,
        /,
        *servicers: object,
        port: int | None = None,
        host: str | None = None,
        bind_host: str | None = None,
        max_workers: int = 32,
        credentials: grpc.ServerCredentials | None = None,
        unregister_wait: float | None = None,
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
        plan = replace(plan, wrap=self.access_logs.wrap(plan.wrap, aio=False))
        with self._exporting(listen):
            exported = export(
                plan,
                self.provider_registry,
                max_workers=max_workers,
                interceptors=[*observers, *interceptors],
            )
        return self._started(exported, self._servers, unregister_wait)

    @contextlib.contextmanager
    def _exporting(self, listen: ProtocolConfig) -> Iterator[None]:
        """Around an export on ``listen``: the providers it registers publish the application's
        instance once (:meth:`_batch`), and a failure to bind says where the address came
        from."""
        try:
            with self._batch():
                yield
        except OSError as exc:
            raise _bind_error(exc, listen) from exc

    def _started(self, exported: _S, servers: list[_S], unregister_wait: float | None) -> _S:
        """Keep ``exported`` in ``servers`` (its flavour's) and say the provider is ready."""
        exported.unregister_wait = (
            self._unregister_notice() if unregister_wait is None else unregister_wait
        )
        with self._lock:
            servers.append(exported)
        self._provider_ready(exported.address, exported.urls)
        return exported

    def _unregister_notice(self) -> float:
        """How long a stopping provider waits after unregistering, by default: the longest its
        registries' consumers may take to see it gone (:attr:`StoreKind.unregister_notice
        <dubbo_py.registry.store.kinds.StoreKind.unregister_notice>`)."""
        notices = [
            STORES[b.address.kind].unregister_notice
            for b in self._app.bindings
            if b.config.register and b.address.kind in STORES
        ]
        return max(notices, default=DEFAULT_UNREGISTER_NOTICE)

    def _provider_ready(self, address: str, urls: list[URL]) -> None:
        self.access_logs.served(urls)
        if self._app.qos is not None:
            self._app.qos.mark_started()
        qos = self._app.qos.server.address if self._app.qos is not None else None
        startup.provider_ready(self._app.name, address, urls, self._app.registry_name(), qos)

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
        if self._app.metrics is None and not tracing.enabled():
            return plan, []
        metrics = self._app.metrics or Metrics(self._app.name)
        labels = provider_labels(plan.servicers, plan.service_options)
        if user_interceptors or plan.guards() or None in labels.values():
            return plan, [kind(metrics, labels)]
        return replace(plan, wrap=handler_wrap(metrics, aio=aio)), []

    @property
    def servers(self) -> tuple[ExportedServer | AsyncExportedServer, ...]:
        """Every server this application started (both flavours)."""
        with self._lock:
            return (*self._servers, *self._async_servers)

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
            self._app.name,
            host=listen.host or LOOPBACK,
            port=listen.port,
            bind_host=listen.bind_host,
            credentials=listen.tls.credentials() if listen.tls else credentials,
            url_parameters=self._app.qos_parameters(),
            service_options=self._app.config.services if self._app.config else None,
            application_parameters=self._app.parameters,
            reflection=reflection,
        )

    def _batch(self) -> contextlib.AbstractContextManager[Any]:
        """Providers registered inside publish the application's instance once (in each
        registry they register in), at the end."""
        _ = self.provider_registry
        stack = contextlib.ExitStack()
        for binding in self._app.bindings:
            if binding.config.register or len(self._app.bindings) == 1:
                stack.enter_context(binding.batch())
        return stack

    def _listen(
        self, port: int | None, host: str | None, bind_host: str | None, tls: ServerTLS | None
    ) -> ProtocolConfig:
        """Listening options: arguments first, then the environment and the configuration file,
        then defaults (see :func:`dubbo_py.registry.local_host.provider_hosts`)."""
        configured = self._app.config.protocol if self._app.config else ProtocolConfig()
        hosts = provider_hosts(
            self._app.address,
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
        self, /, *servicers: object, port: int | None = None, grace: float = 5.0, **options: Any
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
            self._close()
            raise SystemExit(f"error: {exc}") from None
        self.wait(grace=grace)

    def wait(self, /, grace: float = 5.0) -> None:
        """Block until SIGINT/SIGTERM (or :meth:`close` from another thread), then stop every
        server this application started, gracefully, and close the application."""
        received: list[str] = []

        def on_signal(number: int, _frame: object) -> None:
            received.append(signal.Signals(number).name)
            self.stop_requested.set()

        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, on_signal)
        try:
            while not self.stop_requested.wait(0.5):
                pass
            if received:
                startup.stopping(self._app.name, received[0], grace)
        finally:
            with self._lock:
                servers = list(self._servers)
            for server in servers:
                server.stop(grace)
            self._close()

    async def start_async(
        self,
        /,
        *servicers: object,
        port: int | None = None,
        host: str | None = None,
        bind_host: str | None = None,
        credentials: grpc.ServerCredentials | None = None,
        unregister_wait: float | None = None,
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
        plan = replace(plan, wrap=self.access_logs.wrap(plan.wrap, aio=True))
        with self._exporting(listen):
            exported = await export_async(plan, registry, interceptors=[*observers, *interceptors])
        return self._started(exported, self._async_servers, unregister_wait)

    async def serve_async(
        self, /, *servicers: object, port: int | None = None, grace: float = 5.0, **options: Any
    ) -> None:
        """Serve async servicers until the task is cancelled, then shut down gracefully
        (logging as :meth:`serve` does); ``options`` are :meth:`start_async`'s."""
        startup.ensure_logging()
        exported = await self.start_async(*servicers, port=port, **options)
        try:
            await asyncio.Event().wait()
        finally:
            await exported.stop(grace)

    def close(self) -> None:
        """Stop every blocking server now (a second of grace) and forget the provider registry
        (its stores are closed with the application's registries)."""
        self.stop_requested.set()
        with self._lock:
            servers, self._servers = self._servers, []
        for server in servers:
            server.stop(grace=1.0)
        self._provider_registry = None
