"""Exporting asyncio providers: the ``grpc.aio`` flavour of :mod:`dubbo_py.rpc.provider`.

``await app.start_async(AsyncServicer())`` serves ``async def`` servicer methods on a
``grpc.aio`` server and registers them like the blocking flavour, with the same provider URLs,
overload limits, health service and graceful shutdown order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2

from dubbo_py.registry.registry import Registry
from dubbo_py.rpc.limits import aio_interceptor, servicer_guards
from dubbo_py.rpc.provider import bind_servicers, provider_urls, register_all
from dubbo_py.rpc.service import ServiceOptions
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

    @property
    def address(self) -> str:
        """``host:port`` consumers use."""
        return f"{self.host}:{self.port}"

    async def stop(self, grace: float = 5.0) -> None:
        """Unregister, wait for consumers to notice, then drain in-flight calls."""
        if self.registry is not None:
            for url in self.urls:
                try:
                    await asyncio.to_thread(self.registry.unregister, url)
                except Exception as exc:  # keep shutting down whatever the registry says
                    log.warning("could not unregister %s: %s", url, exc)
            await asyncio.sleep(self.unregister_wait)
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)


async def export_async(
    servicers: Sequence[object],
    *,
    application: str,
    registry: Registry | None,
    host: str = "127.0.0.1",
    port: int = 0,
    bind_host: str | None = None,
    credentials: grpc.ServerCredentials | None = None,
    url_parameters: dict[str, str] | None = None,
    service_options: Mapping[str, ServiceOptions] | None = None,
) -> AsyncExportedServer:
    """Serve async servicers on one ``grpc.aio`` server and register their provider URLs."""
    shedder = aio_interceptor(servicer_guards(servicers, service_options))
    server = grpc.aio.server(interceptors=[shedder] if shedder is not None else None)
    health_servicer = health.aio.HealthServicer()
    bound = bind_servicers(
        server,
        servicers,
        health_servicer,
        bind_host or host,
        port,
        credentials,
        service_options,
    )
    await server.start()
    urls = provider_urls(
        servicers, application, host, bound, credentials, url_parameters, service_options
    )
    for name in ["", *(u.path for u in urls)]:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    try:
        await asyncio.to_thread(register_all, registry, urls)
    except BaseException:
        await server.stop(0)  # a provider nobody can find must not keep a port
        raise
    return AsyncExportedServer(server, urls, registry, health_servicer, bound, host)
