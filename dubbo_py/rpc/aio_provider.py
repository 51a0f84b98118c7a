"""Exporting asyncio providers: the ``grpc.aio`` flavour of :mod:`dubbo_py.rpc.provider`.

``await app.start_async(AsyncServicer())`` serves ``async def`` servicer methods on a
``grpc.aio`` server and registers them like the blocking flavour, with the same provider URLs,
overload limits, health service and graceful shutdown order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2

from dubbo_py.registry.registry import Registry
from dubbo_py.rpc.limits import aio_interceptor
from dubbo_py.rpc.provider import ExportPlan, health_names, register_all, unregister_all
from dubbo_py.url import URL

__all__ = ["AsyncExportedServer", "export_async"]

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
    URLs (the asyncio flavour of :func:`~dubbo_py.rpc.provider.export`); ``interceptors`` run
    in order, outermost first, before the overload limits."""
    shedder = aio_interceptor(plan.guards())
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
