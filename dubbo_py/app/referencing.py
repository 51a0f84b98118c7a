"""An application's consumer half: the references it builds, the channels they share, the
consumer URLs it registers, the retry budget of each service.

:class:`~dubbo_py.app.application.Application` delegates its consumer methods
(``reference``, ``reference_handle``, their asyncio forms, ``reference_config``) here; their
documentation is on those methods.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import grpc

from dubbo_py.app import startup
from dubbo_py.app.context import AppContext
from dubbo_py.app.observability import ConsumerSide
from dubbo_py.app.registries import RegistryBinding
from dubbo_py.cluster.budget import RetryBudget
from dubbo_py.cluster.strategies.failback import FailbackQueue
from dubbo_py.config.model import ReferenceConfig
from dubbo_py.consumer.assembly import AsyncAssembly, BlockingAssembly
from dubbo_py.consumer.connections import AsyncSharedChannels, SharedChannels
from dubbo_py.consumer.filters import ConsumerFilters
from dubbo_py.consumer.reference import Reference
from dubbo_py.consumer.zone_channel import AsyncZoneAwareChannel, RegistryStack, ZoneAwareChannel
from dubbo_py.errors import ConfigError, StoreError
from dubbo_py.protocol.introspect import ServiceSpec, service_of_stub
from dubbo_py.qos import tracing
from dubbo_py.registry.local_host import consumer_host
from dubbo_py.registry.registry import Registry
from dubbo_py.url import URL
from dubbo_py.version import __version__

__all__ = ["Referencing"]

# Start-up and shutdown messages, under the logger name the docs promise (app/startup.py).
log = startup.log

S = TypeVar("S")
A = TypeVar("A", BlockingAssembly, AsyncAssembly)


class Referencing:
    """The consumer half of an application."""

    def __init__(self, app: AppContext) -> None:
        self._app = app
        self._lock = threading.Lock()
        #: One blocking channel per provider address (and security settings), shared by every
        #: reference of this application (see :mod:`dubbo_py.consumer.connections`).
        self.channels = SharedChannels()
        #: The ``grpc.aio`` channels of asyncio references: one per event loop, provider
        #: address and security settings (see :mod:`dubbo_py.consumer.connections`).
        self.async_channels = AsyncSharedChannels()
        self._references: list[Reference[Any]] = []
        #: Each registered consumer URL with the registry it is registered in.
        self._consumer_urls: list[tuple[Registry, URL]] = []
        self._budgets: dict[str, RetryBudget] = {}
        self._consumer_side = ConsumerSide(app.metrics)

    def reference_config(self, /, service: str, **options: Any) -> ReferenceConfig:
        """The configuration a reference to ``service`` uses: the file's section for it (or
        the defaults) with ``options`` on top."""
        configured = self._app.config.references.get(service) if self._app.config else None
        return (configured or ReferenceConfig()).merged(**options)

    def reference_handle(
        self,
        /,
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
        channel = (
            stacks[0].channel if len(stacks) == 1 else ZoneAwareChannel(stacks, self._app.zone)
        )
        stub: S = stub_class(channel)  # type: ignore[call-arg]
        return self._started(stacks, channel, stub)

    async def reference_handle_async(
        self,
        /,
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
            stacks[0].channel if len(stacks) == 1 else AsyncZoneAwareChannel(stacks, self._app.zone)
        )
        stub: S = stub_class(channel)  # type: ignore[call-arg]
        return await asyncio.to_thread(self._started, stacks, channel, stub)

    def _subscribed(self, config: ReferenceConfig) -> list[RegistryBinding]:
        """The registries a reference reads: those its ``registries`` name, else every one
        marked ``subscribe`` (the only one, for most applications)."""
        if len(self._app.bindings) == 1:
            return list(self._app.bindings)
        if config.registries:
            known = {b.id: b for b in self._app.bindings}
            unknown = [r for r in config.registries if r not in known]
            if unknown:
                raise ConfigError(
                    "registries",
                    f"unknown registry id(s) {unknown} (registries: {', '.join(known)})",
                )
            return [known[r] for r in config.registries]
        chosen = [b for b in self._app.bindings if b.config.subscribe]
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
        around = (
            self._observed(consumer, budget) + self._app.filters + (filters or ConsumerFilters())
        )
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
            application=self._app.name,
            registry=registry,
            cache=cache,
            static_providers=tuple(static),
            budget=budget,
            failback=failback,
            filters=filters,
            interceptors=tuple(interceptors),
            channels=self.channels,
            async_channels=self.async_channels,
            subscribe=(
                level.subscriber(consumer) if level is not None and registry is not None else None
            ),
            empty_protection=binding.empty_protection,
        )

    def generic_filters(
        self, interface: str, version: str, group: str, filters: ConsumerFilters | None
    ) -> ConsumerFilters:
        """What a generic reference's calls go through: the same composition as a stub
        reference's -- metrics and tracing outermost, then the application's filters, then
        the reference's own."""
        consumer = self._consumer_url(interface, version, group, None, None, None)
        return self._observed(consumer, None) + self._app.filters + (filters or ConsumerFilters())

    def _observed(self, consumer: URL, budget: RetryBudget | None) -> ConsumerFilters:
        """The metrics-and-tracing wrappers of a new reference, outside every other filter
        (none when metrics are off and no tracer is set up: calls then pay nothing)."""
        if self._app.metrics is None and not tracing.enabled():
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
        if self._app.qos is not None:
            self._app.qos.watch_reference(ref)
            self._app.qos.mark_started()
        return ref

    def _start_stack(self, stack: RegistryStack) -> None:
        """Start one registry's stack and register its consumer URL there."""
        assembly = stack.assembly
        started = time.monotonic()
        assembly.start()
        took = time.monotonic() - started
        directory, service = assembly.directory, assembly.service.name
        where = stack.name if len(self._app.bindings) > 1 else str(self._app.address)
        startup.consumer_ready(self._app.name, directory, assembly.config.check, where, took)
        registry = stack.registry
        if registry is not None and not registry.connected and not directory.providers:
            log.warning(
                "registry %s unreachable: %s has no provider yet (none cached); calls fail with "
                "'registry unreachable' until it answers",
                stack.name if len(self._app.bindings) > 1 else self._app.address,
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
            "application": self._app.name,
            "category": "consumers",
            "check": "false",
            "interface": service,
            "side": "consumer",
            "pid": str(os.getpid()),
            "release": __version__,
            "dubbo": "2.0.2",
            "timestamp": str(int(time.time() * 1000)),
        }
        # The application's parameters under the keys dubbo-py sets (they cannot name those),
        # a reference's own parameters over them.
        params.update(self._app.parameters)
        if retries is not None:
            params["retries"] = str(retries)
        params.update(self._app.qos_parameters() or {})
        if version:
            params["version"] = version
        if group:
            params["group"] = group
        if timeout is not None:
            params["timeout"] = str(int(timeout * 1000))
        params.update(parameters or {})
        return URL("consumer", consumer_host(self._app.address), 0, service, parameters=params)

    def _direct_providers(self, consumer: URL, path: str) -> list[URL]:
        # A direct address is trusted to serve what the consumer asks for, so it carries the
        # consumer's interface, version and group.
        params = {
            k: v for k, v in consumer.parameters.items() if k in ("interface", "version", "group")
        }
        out = []
        for entry in self._app.address.hosts:
            host, port = entry.rsplit(":", 1)
            out.append(URL("tri", host, int(port), path, parameters=params))
        return out

    @property
    def references(self) -> tuple[Reference[Any], ...]:
        """Every reference this application built (their directories, quarantines, stubs)."""
        with self._lock:
            return tuple(self._references)

    def close(self, wait: float, deadline: float) -> None:
        """Refuse new calls, let the calls in flight end until ``deadline`` (cancel those still
        running then), close the references and their channels, unregister the consumers."""
        with self._lock:
            refs, self._references = self._references, []
            consumers, self._consumer_urls = self._consumer_urls, []
        for ref in refs:
            ref.refuse_calls()
        unfinished = sum(not ref.wait_for_calls(deadline) for ref in refs)
        if unfinished:
            log.warning(
                "%s: calls still in flight on %d reference(s) after %.1f s are cancelled",
                self._app.name,
                unfinished,
                wait,
            )
        for ref in refs:
            ref.close()
        self.channels.close()
        for registry, url in consumers:
            with contextlib.suppress(StoreError):
                registry.unregister(url)

    async def close_async(self, deadline: float) -> None:
        """The asyncio references' part of closing, on their loop: refuse new calls, await the
        calls in flight until ``deadline``, close their provider channels."""
        with self._lock:
            refs = list(self._references)
        for ref in refs:
            ref.refuse_calls()
        for ref in refs:
            await ref.wait_for_calls_async(deadline)
        for ref in refs:
            await ref.close_channels()
