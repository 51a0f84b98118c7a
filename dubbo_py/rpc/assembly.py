"""ReferenceAssembly: one reference's consumer stack, built once, in named steps.

A consumer is a stack (Finagle's ``Service``/``Filter``, Dubbo's cluster invoker)::

    stub.Method(request)                      generated stub, unchanged
      -> multicallable                        rpc/channel.py | rpc/aio_channel.py
        -> call filters: mock, then the application's and the reference's (rpc/filters.py)
          -> cluster strategy (failover ...)  cluster/strategies/ (both forms, one module each)
             routes with the directory's bound router chain   registry/directory.py
             balances with the reference's balancer           rpc/tuning.py
             -> attempt filters, then call statistics for the balancers that read them
               -> provider call (MethodInvoker) on a pooled gRPC channel   rpc/invoker.py

:class:`ReferenceAssembly` builds the parts both flavours share -- the method policies, the live
settings and balancer (:class:`~dubbo_py.rpc.tuning.ReferenceTuning`), the registry directory,
the quarantine and outlier detector -- and wires each method a stub asks for
(:meth:`ReferenceAssembly.bind`): its provider call, its cluster context, its strategy, its
filters. :class:`BlockingAssembly` and :class:`AsyncAssembly` supply what differs: the channel
pool, the invoker, the strategy and the filters of their flavour. Nothing runs until
:meth:`ReferenceAssembly.start` (watch the registry, start probing quarantined providers).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any, Generic, TypeVar

from dubbo_py.cluster import configurators
from dubbo_py.cluster.budget import RetryBudget
from dubbo_py.cluster.health_probe import grpc_health_probe, service_health
from dubbo_py.cluster.mock import parse_mock
from dubbo_py.cluster.outlier import OutlierDetector
from dubbo_py.cluster.policy import MethodPolicy
from dubbo_py.cluster.quarantine import Quarantine, QuarantineEvent
from dubbo_py.cluster.strategies import async_strategy, get_strategy
from dubbo_py.cluster.strategies.failback import FailbackQueue, failback_async
from dubbo_py.cluster.strategies.failover import failover, failover_async
from dubbo_py.cluster.support.context import ClusterContext
from dubbo_py.config.model import ReferenceConfig
from dubbo_py.config.options import MethodOptions
from dubbo_py.registry.cache import NotifyCache
from dubbo_py.registry.directory import RegistryDirectory, Subscribe
from dubbo_py.registry.registry import Registry
from dubbo_py.router import factory
from dubbo_py.router.chain import BoundChain
from dubbo_py.rpc.aio_channel import AsyncClusterChannel
from dubbo_py.rpc.aio_invoker import AsyncChannelPool, AsyncMethodInvoker
from dubbo_py.rpc.aio_shared_channels import AsyncSharedChannels
from dubbo_py.rpc.channel import ClusterChannel
from dubbo_py.rpc.filters import (
    AsyncCall,
    AsyncMockFilter,
    AsyncRecordStats,
    Call,
    ConsumerFilters,
    MockFilter,
    RecordStats,
    plan_hooks,
    wrap_attempts,
    wrap_calls,
)
from dubbo_py.rpc.in_flight import CallsInFlight
from dubbo_py.rpc.introspect import ServiceSpec
from dubbo_py.rpc.invoker import ChannelPool, MethodInvoker
from dubbo_py.rpc.method import BoundMethod, InvokerBase, StubMethod
from dubbo_py.rpc.settings import base_parameters, check_method_options
from dubbo_py.rpc.shared_channels import SharedChannels
from dubbo_py.rpc.triple import TripleCaller
from dubbo_py.rpc.tuning import ReferenceTuning
from dubbo_py.url import URL

__all__ = ["AsyncAssembly", "BlockingAssembly", "ReferenceAssembly", "method_policies"]

_NO_OPTIONS = MethodOptions()

#: The call a bound method runs: :data:`~dubbo_py.rpc.filters.Call` or ``AsyncCall``.
C = TypeVar("C")


def method_policies(service: ServiceSpec, config: ReferenceConfig) -> dict[str, MethodPolicy]:
    """Each method's cluster strategy and parsed mock: its own ``methods`` entry, else the
    reference's. A mock that does not parse is a :class:`~dubbo_py.cluster.mock.MockSpecError`
    now, before anything starts."""
    policies = {}
    for method in service.method_names:
        own = config.methods.get(method, _NO_OPTIONS)
        policies[method] = MethodPolicy(
            own.cluster or config.cluster,
            parse_mock(own.mock if own.mock is not None else config.mock),
        )
    return policies


class _Wired:
    """One provider call the assembly keeps current: its context, and how to wrap its invoker
    (with or without call statistics, as the balancer needs)."""

    __slots__ = ("context", "invoker", "wrap")

    def __init__(
        self, context: ClusterContext, invoker: InvokerBase, wrap: Callable[[InvokerBase], Any]
    ) -> None:
        self.context = context
        self.invoker = invoker
        self.wrap = wrap


class ReferenceAssembly(Generic[C]):
    """The parts of one reference both flavours share, and the wiring of its methods.

    ``consumer`` is the consumer URL the directory subscribes with; ``registry`` None means
    direct providers (``static_providers``); ``budget`` is the retry budget of the service
    (shared by every reference to it in the application); ``failback`` the queue of
    ``failback`` retries; ``filters`` the wrappers around each call (see
    :mod:`dubbo_py.rpc.filters`); ``subscribe`` replaces the registry's subscription (the
    directory then reads providers at the level the migration step says)."""

    def __init__(
        self,
        service: ServiceSpec,
        config: ReferenceConfig,
        consumer: URL,
        *,
        application: str,
        registry: Registry | None,
        cache: NotifyCache | None = None,
        static_providers: tuple[URL, ...] = (),
        budget: RetryBudget | None = None,
        failback: FailbackQueue | None = None,
        filters: ConsumerFilters | None = None,
        channels: SharedChannels | None = None,
        aio_channels: AsyncSharedChannels | None = None,
        interceptors: tuple[Any, ...] = (),
        subscribe: Subscribe | None = None,
        empty_protection: bool = False,
    ) -> None:
        check_method_options(service.method_names, config.methods, service.name)
        #: The application's shared blocking channels (None: this reference opens its own).
        self.shared_channels = channels
        #: The application's shared asyncio channels, per event loop (None: its own).
        self.shared_aio_channels = aio_channels
        #: How the directory subscribes (None: the registry's own; application-level
        #: discovery passes one that also reads ``/services``).
        self._subscribe = subscribe
        #: Keep providers the registry lost at once while they answer (``enable-empty-
        #: protection``; :mod:`dubbo_py.registry.empty_protection`).
        self._empty_protection = empty_protection
        self.service = service
        self.config = config
        self.consumer = consumer
        self.policies = method_policies(service, config)
        self.tuning = self._tuning()
        self.directory = self._directory(registry, cache, static_providers)
        self.budget = budget if budget is not None else RetryBudget()
        self.failback = failback if failback is not None else FailbackQueue()
        self.filters = filters if filters is not None else ConsumerFilters()
        #: gRPC client interceptors of the reference's flavour, around each provider call.
        self.interceptors = interceptors
        self.caller = TripleCaller.for_consumer(application, config.version, config.group)
        self.quarantine = Quarantine(grpc_health_probe, interval=config.quarantine_interval)
        self.outliers = self._outliers()
        #: Each bound method's cluster context, by method name.
        self.contexts: dict[str, ClusterContext] = {}
        #: The stub's calls in flight (closing the application waits for them).
        self.in_flight = CallsInFlight()
        self._wired: list[_Wired] = []
        self._lock = threading.Lock()
        self._idempotent = config.idempotent | frozenset(
            m for m, o in config.methods.items() if o.idempotent
        )

    # ------------------------------------------------------------------ shared parts

    def _tuning(self) -> ReferenceTuning:
        config = self.config
        base = base_parameters(
            retries=config.retries,
            timeout=config.timeout,
            forks=config.forks,
            sticky=config.sticky,
            loadbalance=config.loadbalance,
            methods=config.methods,
        )
        return ReferenceTuning(self.service.method_names, base, config.loadbalance)

    def _directory(
        self, registry: Registry | None, cache: NotifyCache | None, static: tuple[URL, ...]
    ) -> RegistryDirectory:
        return RegistryDirectory(
            self.consumer,
            registry,
            factory.new_rulebook(),
            assemble=factory.chain_routers,
            configure=configurators.apply,
            configure_consumer=configurators.consumer_parameters,
            validate_configurators=configurators.parse_configurators_yaml,
            cache=cache,
            static_providers=list(static),
            subscribe=self._subscribe,
            empty_protection=self._serves_service if self._empty_protection else None,
        )

    def _serves_service(self, provider: URL) -> bool | None:
        """Empty protection's probe: whether ``provider`` still serves this service."""
        # 1 s: a busy provider must not look silent (two silent probes in a row drop it).
        return service_health(provider, provider.path or self.consumer.service_interface, 1.0)

    def _outliers(self) -> OutlierDetector:
        config = self.config
        outliers = OutlierDetector(
            self.quarantine,
            lambda: len(self.directory.chain.snapshot.providers),
            consecutive=config.outlier_failures,
            max_share=config.outlier_max_share,
            service=self.service.name,
        )
        # A provider back from quarantine (or gone from the registry) starts a clean count.
        self.quarantine.on_change(self._forget_outlier)
        return outliers

    def _forget_outlier(self, event: QuarantineEvent) -> None:
        if event.kind != "added":
            self.outliers.forget(event.entry.address)

    def _context(self, call: Any, invoker: InvokerBase) -> ClusterContext:
        return ClusterContext(
            service=self.service.name,
            routes=self.directory,
            balancer=self.tuning.balancer,
            call=call,
            settings=self.tuning.settings,
            idempotent=self._idempotent,
            quarantine=self.quarantine,
            outliers=self.outliers,
            budget=self.budget,
            empty_response=invoker.failsafe_response,
            failback=self.failback,
        )

    def _wire(self, invoker: InvokerBase, wrap: Callable[[InvokerBase], Any]) -> ClusterContext:
        """A context for ``invoker``, kept current from now on: when the balancer changes, its
        provider call is re-wrapped (call statistics on or off) before the new balancer goes
        in, so a call plan compiled for the new balancer sees whether calls are recorded."""
        with self._lock:
            context = self._context(wrap(invoker), invoker)
            self._wired.append(_Wired(context, invoker, wrap))
        return context

    # ------------------------------------------------------------------ binding methods

    def bind(self, method: StubMethod) -> BoundMethod[C]:
        """Wire one stub method: its provider call, cluster context, strategy and filters (a
        bad mock raises :class:`~dubbo_py.cluster.mock.MockSpecError` here, when the stub is
        built, not in the middle of an outage)."""
        invoker = self._invoker(method)
        context = self._wire(invoker, self._attempt_call)
        policy = self.policies.get(method.name, MethodPolicy(self.config.cluster))
        if method.request_streaming:
            # A request stream can be consumed only once, so it is never replayed on another
            # provider: client-streaming calls are fail-fast whatever the reference says.
            policy = MethodPolicy("failfast")
        strategy, plannable = self._strategy(method, policy, context)
        filters = list(self.filters.around_calls(self._asyncio))
        if policy.mock is not None:
            response_type = method.response_type()
            policy.mock.check(method.name, response_type)
            mock = self._mock(policy.mock, response_type, streaming=method.response_streaming)
            filters.insert(0, mock)
        self.contexts[method.name] = context
        call = wrap_calls(filters, strategy)
        # A plan stands for the whole stack: it is kept when every call filter has a plan
        # hook (the consumer's metrics), which it then runs around the call.
        hooks = plan_hooks(filters, method.name)
        if hooks is None:
            return BoundMethod(method, context, call, False, in_flight=self.in_flight)
        return BoundMethod(method, context, call, plannable, hooks, self.in_flight)

    def _attempt_call(self, invoker: InvokerBase) -> Any:
        return self._attempts_around(
            invoker, self.filters.around_attempts(self._asyncio), self._record_stats
        )

    def _attempts_around(
        self, invoker: InvokerBase, filters: tuple[Any, ...], record: Callable[..., Any]
    ) -> Any:
        """``invoker`` inside ``filters``, and inside the call statistics (``record``) when the
        balancer reads them."""
        stats = self.tuning.stats
        if stats is not None:
            filters = (*filters, record(stats, invoker.spec.path))
        return wrap_attempts(filters, invoker)

    # ------------------------------------------------------------------ keeping it current

    def _on_chain(self, bound: BoundChain) -> None:
        providers = bound.snapshot.providers
        self.quarantine.retain(providers)
        self._retain(providers)
        with self._lock:
            stats = self.tuning.stats
            if not self.tuning.update(self.directory.consumer_overrides, providers):
                return
            rewrap = self.tuning.stats is not stats
            for wired in self._wired:
                if rewrap:
                    wired.context.call = wired.wrap(wired.invoker)
                wired.context.balancer = self.tuning.balancer

    def start(self) -> None:
        """Watch the registry (waiting up to ``check`` s for providers and rules), then start
        probing quarantined providers. Blocks; the asyncio flavour runs it in a thread."""
        self.quarantine.before_revive(self._revived)
        self.directory.add_listener(self._on_chain)
        self.directory.start(wait=self.config.check)
        self.quarantine.start()

    def close(self) -> None:
        """Stop watching, probing and retrying in the background (the flavour's channels are
        closed by the reference)."""
        self.directory.close()
        self.quarantine.stop()
        self.failback.close()

    # ------------------------------------------------------------------ what a flavour supplies

    def _invoker(self, method: StubMethod) -> InvokerBase:
        raise NotImplementedError

    def _strategy(
        self, method: StubMethod, policy: MethodPolicy, context: ClusterContext
    ) -> tuple[C, bool]:
        """The method's strategy bound to its context, and whether it is plain failover."""
        raise NotImplementedError

    #: Whether the flavour is asyncio (which of :attr:`filters` apply).
    _asyncio: bool
    #: The flavour's mock filter class (:class:`~dubbo_py.rpc.filters.MockFilter` ...).
    _mock: Callable[..., Any]
    #: The flavour's call statistics filter class.
    _record_stats: Callable[..., Any]

    def _retain(self, providers: tuple[URL, ...]) -> None:
        """Drop the channels to providers that left the registry."""
        raise NotImplementedError

    def _revived(self, provider: URL) -> None:
        """A quarantined provider is about to be revived: give it a fresh channel (its old one
        may be deep in reconnect backoff), before calls can pick it again."""
        raise NotImplementedError


class BlockingAssembly(ReferenceAssembly[Call]):
    """The blocking flavour: ``grpc`` channels, :class:`~dubbo_py.rpc.channel.ClusterChannel`."""

    def __init__(self, service: ServiceSpec, config: ReferenceConfig, consumer: URL, **parts: Any):
        super().__init__(service, config, consumer, **parts)
        self.pool = ChannelPool(config.client_tls, shared=self.shared_channels)
        self.pool.on_dropped = self._forget
        self._invokers: list[MethodInvoker] = []

    def channel(self) -> ClusterChannel:
        """The channel a stub is built on."""
        return ClusterChannel(self, self.config.attachments, self.pool.close)

    def _invoker(self, method: StubMethod) -> MethodInvoker:
        invoker = MethodInvoker(
            self.pool, method, caller=self.caller, interceptors=self.interceptors
        )
        self._invokers.append(invoker)
        return invoker

    def _strategy(
        self, method: StubMethod, policy: MethodPolicy, context: ClusterContext
    ) -> tuple[Call, bool]:
        strategy = get_strategy(policy.cluster)
        return partial(strategy, context), strategy is failover

    _asyncio = False
    _mock = MockFilter
    _record_stats = RecordStats

    def _forget(self, addresses: list[str]) -> None:
        for invoker in list(self._invokers):
            invoker.forget(addresses)

    def _retain(self, providers: tuple[URL, ...]) -> None:
        gone = self.pool.retain(providers)
        if gone:
            self._forget(gone)

    def _revived(self, provider: URL) -> None:
        if self.pool.reset(provider.address):
            self._forget([provider.address])

    def close(self) -> None:
        """Everything :meth:`ReferenceAssembly.close` does, then close the provider channels."""
        super().close()
        self.pool.close()


class AsyncAssembly(ReferenceAssembly[AsyncCall]):
    """The asyncio flavour: ``grpc.aio`` channels (they belong to the event loop that made
    them), :class:`~dubbo_py.rpc.aio_channel.AsyncClusterChannel`, awaited strategies.

    ``failback`` retries run on the queue's thread, so they go on whether or not the event loop
    still runs: a ``failback`` method also gets a blocking provider call (on a blocking pool
    opened for the purpose) that its background retries use."""

    def __init__(self, service: ServiceSpec, config: ReferenceConfig, consumer: URL, **parts: Any):
        super().__init__(service, config, consumer, **parts)
        self.pool = AsyncChannelPool(
            config.client_tls, interceptors=self.interceptors, shared=self.shared_aio_channels
        )
        self.pool.on_dropped = self._forget
        self._invokers: list[AsyncMethodInvoker] = []
        #: Blocking channels and invokers for ``failback`` retries (opened on first need).
        self._retry_pool: ChannelPool | None = None
        self._retry_invokers: list[MethodInvoker] = []

    def channel(self) -> AsyncClusterChannel:
        """The channel a stub is built on (await its ``close`` on the same loop)."""
        return AsyncClusterChannel(self, self.config.attachments, self.pool.close)

    def _invoker(self, method: StubMethod) -> AsyncMethodInvoker:
        invoker = AsyncMethodInvoker(self.pool, method, caller=self.caller)
        self._invokers.append(invoker)
        return invoker

    def _strategy(
        self, method: StubMethod, policy: MethodPolicy, context: ClusterContext
    ) -> tuple[AsyncCall, bool]:
        if policy.cluster == "failback":
            return partial(failback_async(self._retry_context(method)), context), False
        strategy = async_strategy(MethodPolicy(policy.cluster), context, None)
        return partial(strategy, context), strategy is failover_async

    def _forget(self, addresses: list[str]) -> None:
        for invoker in list(self._invokers):
            invoker.forget(addresses)

    def _retry_context(self, method: StubMethod) -> ClusterContext:
        """The blocking context ``failback`` retries of ``method`` go through."""
        with self._lock:
            if self._retry_pool is None:
                self._retry_pool = ChannelPool(self.config.client_tls, shared=self.shared_channels)
                self._retry_pool.on_dropped = self._forget_retry
            invoker = MethodInvoker(self._retry_pool, method, caller=self.caller)
            self._retry_invokers.append(invoker)
        return self._wire(invoker, self._retry_attempt_call)

    def _retry_attempt_call(self, invoker: InvokerBase) -> Any:
        return self._attempts_around(invoker, self.filters.attempts, RecordStats)

    _asyncio = True
    _mock = AsyncMockFilter
    _record_stats = AsyncRecordStats

    def _retain(self, providers: tuple[URL, ...]) -> None:
        self.pool.retain(providers)
        if self._retry_pool is not None:
            gone = self._retry_pool.retain(providers)
            for invoker in list(self._retry_invokers):
                invoker.forget(gone)

    def _forget_retry(self, addresses: list[str]) -> None:
        for invoker in list(self._retry_invokers):
            invoker.forget(addresses)

    def _revived(self, provider: URL) -> None:
        # The pool replaces the channel on the loop, soon; a plan must not take the old one
        # meanwhile, so its callables go now (after reset: a call then finds it stale).
        self.pool.reset(provider.address)
        self._forget([provider.address])
        if self._retry_pool is not None and self._retry_pool.reset(provider.address):
            for invoker in list(self._retry_invokers):
                invoker.forget([provider.address])

    def close(self) -> None:
        """Everything :meth:`ReferenceAssembly.close` does, and close the blocking channels of
        ``failback`` retries (the asyncio channels are closed on the loop, by
        :meth:`AsyncClusterChannel.close`)."""
        super().close()
        if self._retry_pool is not None:
            self._retry_pool.close()
