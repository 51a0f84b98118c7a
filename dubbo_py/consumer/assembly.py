"""ReferenceAssembly: one reference's consumer stack, built once, in named steps.

A consumer is a stack (Finagle's ``Service``/``Filter``, Dubbo's cluster invoker)::

    stub.Method(request)                      generated stub, unchanged
      -> multicallable                        consumer/channel.py (both flavours)
        -> call filters: mock, then the application's and the reference's (consumer/filters.py)
          -> cluster strategy (failover ...)  cluster/strategies/ (both forms, one module each)
             routes with the directory's bound router chain   registry/directory.py
             balances with the reference's balancer           consumer/settings.py
             -> attempt filters, then call statistics for the balancers that read them
               -> provider call (MethodInvoker) on a pooled gRPC channel   consumer/invoker.py

:class:`ReferenceAssembly` builds the parts both flavours share -- the methods' strategy
settings, the live settings and balancer (:class:`~dubbo_py.consumer.settings.ReferenceSettings`),
the registry directory, the quarantine and outlier detector -- and wires each method a stub asks for
(:meth:`ReferenceAssembly.bind`): its provider call, its cluster context, its strategy, its
filters. :class:`BlockingAssembly` and :class:`AsyncAssembly` supply what differs: the channel
pool, the invoker, the strategy and the filters of their flavour. Nothing runs until
:meth:`ReferenceAssembly.start` (watch the registry, start probing quarantined providers).

A method that hedges (:mod:`dubbo_py.cluster.hedging`) has hedging between its strategy and its
attempt filters: a wrapper around the provider call, put on or taken off as overrides change it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Generic, TypeVar, cast

from dubbo_py.cluster.budget import RetryBudget
from dubbo_py.cluster.health_probe import grpc_health_probe, service_health
from dubbo_py.cluster.hedging import AsyncHedgedCall, HedgeCounts, HedgedCall, Hedging
from dubbo_py.cluster.hedging_policy import HEDGING_OFF
from dubbo_py.cluster.mock import MockSpec, parse_mock
from dubbo_py.cluster.outlier import OutlierDetector
from dubbo_py.cluster.quarantine import Quarantine, QuarantineEvent
from dubbo_py.cluster.strategies import async_strategy, get_strategy
from dubbo_py.cluster.strategies.failback import FailbackQueue, failback_async
from dubbo_py.cluster.strategies.failover import failover, failover_async
from dubbo_py.cluster.strategy_settings import StrategySettings
from dubbo_py.cluster.support.context import ClusterContext
from dubbo_py.config.model import ReferenceConfig
from dubbo_py.config.options import MethodOptions
from dubbo_py.consumer.actives import ActiveLimit, ActiveLimits, AsyncActiveLimit
from dubbo_py.consumer.channel import AsyncClusterChannel, ClusterChannel
from dubbo_py.consumer.connections import AsyncSharedChannels, SharedChannels
from dubbo_py.consumer.filters import (
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
from dubbo_py.consumer.governed_directory import governed_directory
from dubbo_py.consumer.in_flight import CallsInFlight
from dubbo_py.consumer.invoker import (
    AsyncChannelPool,
    AsyncMethodInvoker,
    ChannelPool,
    MethodInvoker,
)
from dubbo_py.consumer.method import BoundMethod, InvokerBase, StubMethod
from dubbo_py.consumer.route_snapshots import RouteRecorder
from dubbo_py.consumer.settings import (
    CallOverride,
    ReferenceSettings,
    base_parameters,
    check_method_options,
)
from dubbo_py.errors import MockSpecError
from dubbo_py.protocol.introspect import ServiceSpec
from dubbo_py.protocol.triple import TripleCaller
from dubbo_py.qos.access_log import (
    ACCESSLOG_KEY,
    AsyncConsumerAccessLog,
    ConsumerAccessLog,
    access_log_target,
    switched_on,
)
from dubbo_py.registry.cache import NotifyCache
from dubbo_py.registry.directory import RegistryDirectory, Subscribe
from dubbo_py.registry.registry import Registry
from dubbo_py.router.chain import BoundChain
from dubbo_py.url import URL

__all__ = ["AsyncAssembly", "BlockingAssembly", "ReferenceAssembly", "strategy_settings"]

_NO_OPTIONS = MethodOptions()

log = logging.getLogger(__name__)

#: Strategies that never hedge: ``forking`` races already, ``broadcast`` calls every provider.
_NO_HEDGING = frozenset({"forking", "broadcast"})

#: The call a bound method runs: :data:`~dubbo_py.consumer.filters.Call` or ``AsyncCall``.
C = TypeVar("C")
#: A provider call of either flavour (:class:`~dubbo_py.consumer.invoker.MethodInvoker` ...).
V = TypeVar("V", bound=InvokerBase)


def strategy_settings(service: ServiceSpec, config: ReferenceConfig) -> dict[str, StrategySettings]:
    """Each method's cluster strategy and parsed mock: its own ``methods`` entry, else the
    reference's. A mock that does not parse is a :class:`~dubbo_py.cluster.mock.MockSpecError`
    now, before anything starts."""
    policies = {}
    for method in service.method_names:
        own = config.methods.get(method, _NO_OPTIONS)
        policies[method] = StrategySettings(
            own.cluster or config.cluster,
            parse_mock(own.mock if own.mock is not None else config.mock),
        )
    return policies


def _forget(invokers: Sequence[InvokerBase], addresses: list[str]) -> None:
    """Drop what ``invokers`` keep for the channels to ``addresses`` (gone, or replaced)."""
    for invoker in list(invokers):
        invoker.forget(addresses)


class _Wired:
    """One provider call the assembly keeps current: its context, how to wrap its invoker
    (with or without call statistics, as the balancer needs), and, for a method that may hedge
    (``method`` set), its hedging in force (None: off)."""

    __slots__ = ("context", "hedging", "invoker", "method", "wrap")

    def __init__(
        self,
        context: ClusterContext,
        invoker: InvokerBase,
        wrap: Callable[[InvokerBase], Any],
        method: str | None = None,
    ) -> None:
        self.context = context
        self.invoker = invoker
        self.wrap = wrap
        self.method = method
        self.hedging: Hedging | None = None


class _Switch:
    """A bound method's call, switchable: the stack the reference's own options build, or one
    a consumer override of ``cluster``/``mock`` builds in its place (one assignment swaps it;
    a call in flight keeps the stack it started on)."""

    __slots__ = ("base", "current", "override")

    def __init__(self, base: Any) -> None:
        self.base = base
        self.current = base
        #: The override the current stack was built for (None: the base stack).
        self.override: CallOverride | None = None

    def __call__(self, invocation: Any) -> Any:
        return self.current(invocation)


class _Bound:
    """What rebuilding one bound method's stack needs."""

    __slots__ = ("context", "method", "policy", "switch")

    def __init__(
        self, method: StubMethod, policy: StrategySettings, context: ClusterContext, switch: _Switch
    ) -> None:
        self.method = method
        self.policy = policy
        self.context = context
        self.switch = switch


class ReferenceAssembly(Generic[C]):
    """The parts of one reference both flavours share, and the wiring of its methods.

    ``consumer`` is the consumer URL the directory subscribes with; ``registry`` None means
    direct providers (``static_providers``); ``budget`` is the retry budget of the service
    (shared by every reference to it in the application); ``failback`` the queue of
    ``failback`` retries; ``filters`` the wrappers around each call (see
    :mod:`dubbo_py.consumer.filters`); ``subscribe`` replaces the registry's subscription (the
    directory then reads providers at the level the migration step says); ``empty_protection``
    keeps providers the registry lost at once while they answer (``enable-empty-protection``;
    :mod:`dubbo_py.registry.empty_protection`)."""

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
        async_channels: AsyncSharedChannels | None = None,
        interceptors: tuple[Any, ...] = (),
        subscribe: Subscribe | None = None,
        empty_protection: bool = False,
    ) -> None:
        check_method_options(service.method_names, config.methods, service.name)
        #: The application's shared blocking channels (None: this reference opens its own).
        self.shared_channels = channels
        #: The application's shared asyncio channels, per event loop (None: its own).
        self.shared_async_channels = async_channels
        self.service = service
        self.config = config
        self.consumer = consumer
        self.policies = strategy_settings(service, config)
        #: Each bound method's stack, by name (rebuilt when a cluster/mock override changes).
        self._bound: dict[str, _Bound] = {}
        self.tuning = self._tuning()
        #: Consumer-side ``actives`` slot counts (the limit wraps provider calls only while
        #: some method has one: :attr:`_limited`).
        self.actives = ActiveLimits(self.tuning.settings)
        self._limited = any(s.actives > 0 for s in self.tuning.settings.values())
        #: The consumer overrides every call made from now on runs under (set once the
        #: settings, balancer, strategies, mocks and limits they ask for are in place).
        self.applied_overrides: Mapping[str, str] = {}
        self.directory = self._directory(
            registry, cache, static_providers, subscribe, empty_protection
        )
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
        self._lock = threading.RLock()  # re-entered: rebuilding a stack may wire a context
        self._idempotent = config.idempotent | frozenset(
            m for m, o in config.methods.items() if o.idempotent
        )
        #: Switched on at runtime, around each attempt: the router snapshot recorder
        #: (:mod:`dubbo_py.consumer.route_snapshots`) and the access log's target
        #: (:mod:`dubbo_py.qos.access_log`). Both off by default: the call path is the plain
        #: one, call plans included.
        self._recorder: RouteRecorder | None = None
        self._accesslog: str | None = access_log_target(config.parameters.get(ACCESSLOG_KEY))
        if self._accesslog == "":
            switched_on()
        #: What each method's hedging did, by method name (metrics; kept across changes).
        self.hedge_counts: dict[str, HedgeCounts] = {}
        #: Each hedging method's hedging in force, by method name.
        self.hedging: dict[str, Hedging] = {}

    # ------------------------------------------------------------------ shared parts

    def _tuning(self) -> ReferenceSettings:
        config = self.config
        base = base_parameters(
            retries=config.retries,
            timeout=config.timeout,
            forks=config.forks,
            sticky=config.sticky,
            loadbalance=config.loadbalance,
            methods=config.methods,
            actives=config.actives,
            hedging=config.hedging,
        )
        return ReferenceSettings(
            self.service.method_names, base, config.loadbalance, check_mock=self._check_mock
        )

    def _check_mock(self, method: str, spec: MockSpec) -> None:
        """MockSpecError when an override's mock cannot answer ``method`` (checked against the
        response type once the method is bound; a method bound later is checked then)."""
        bound = self._bound.get(method)
        if bound is not None:
            spec.check(method, bound.method.response_type())

    def _directory(
        self,
        registry: Registry | None,
        cache: NotifyCache | None,
        static: tuple[URL, ...],
        subscribe: Subscribe | None,
        empty_protection: bool,
    ) -> RegistryDirectory:
        return governed_directory(
            self.consumer,
            registry,
            cache=cache,
            static_providers=list(static),
            subscribe=subscribe,
            empty_protection=self._serves_service if empty_protection else None,
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
        recorder = self._recorder
        return ClusterContext(
            service=self.service.name,
            routes=self.directory if recorder is None else recorder.routes(self.directory),
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

    def _wire(
        self, invoker: InvokerBase, wrap: Callable[[InvokerBase], Any], method: str | None = None
    ) -> ClusterContext:
        """A context for ``invoker``, kept current from now on: when the balancer changes, its
        provider call is re-wrapped (call statistics on or off) before the new balancer goes
        in, so a call plan compiled for the new balancer sees whether calls are recorded; when
        ``method`` may hedge and its hedging changes, the hedging wrapper goes on or off."""
        with self._lock:
            wired = _Wired(self._context(wrap(invoker), invoker), invoker, wrap, method)
            wired.context.call = self._provider_call(wired)
            self._wired.append(wired)
        return wired.context

    def _provider_call(self, wired: _Wired) -> Any:
        """The provider call of ``wired``: its invoker in its wrappers, inside hedging when
        its method hedges now (:mod:`dubbo_py.cluster.hedging`; Finagle's
        ``BackupRequestFilter``). A method that does not hedge gets the plain call: hedging off
        costs its calls nothing."""
        call = self._live(wired.wrap(wired.invoker))
        method = wired.method
        policy = None if method is None else self.tuning.hedging.get(method)
        if (
            method is None
            or policy is None
            or not policy.enabled
            or self._cluster_of(method) in _NO_HEDGING
        ):
            if method is not None:
                self.hedging.pop(method, None)
            wired.hedging = None
            return call
        hedging = wired.hedging
        if hedging is None or hedging.policy != policy:
            counts = self.hedge_counts.setdefault(method, HedgeCounts())
            hedging = wired.hedging = Hedging(policy, counts)
        self.hedging[method] = hedging
        hedged = self._hedged(call, hedging)
        hedged.ctx = wired.context
        return hedged

    def _may_hedge(self, method: StubMethod, policy: StrategySettings) -> bool:
        """Whether ``method`` can hedge at all: not a request stream (it can be sent once),
        not ``forking`` (it races already) nor ``broadcast`` (it calls everyone). Hedging
        asked of such a method by its own options is a ValueError now; asked by the reference
        or an override, the method is left out (logged)."""
        own = self.config.methods.get(method.name, _NO_OPTIONS).hedging
        reason = ""
        if method.request_streaming:
            reason = "its requests are a stream, which can be sent only once"
        elif policy.cluster in ("forking", "broadcast"):
            reason = f"its cluster strategy is {policy.cluster}"
        if not reason:
            return True
        if own is not None and own.enabled:
            raise ValueError(f"{self.service.name}.{method.name} cannot hedge: {reason}")
        if self.tuning.hedging.get(method.name, HEDGING_OFF).enabled:
            log.info("%s.%s does not hedge: %s", self.service.name, method.name, reason)
        return False

    def _cluster_of(self, method: str) -> str:
        """The strategy ``method``'s calls run under now: a consumer override's, else the
        reference's own."""
        override = self.tuning.calls.get(method)
        if override is not None and override.cluster:
            return override.cluster
        return self.policies.get(method, StrategySettings(self.config.cluster)).cluster

    # ------------------------------------------------------------------ binding methods

    def bind(self, method: StubMethod) -> BoundMethod[C]:
        """Wire one stub method: its provider call, cluster context, strategy and filters (a
        bad mock raises :class:`~dubbo_py.cluster.mock.MockSpecError` here, when the stub is
        built, not in the middle of an outage)."""
        invoker = self._invoker(method)
        policy = self.policies.get(method.name, StrategySettings(self.config.cluster))
        hedgeable = self._may_hedge(method, policy)
        context = self._wire(invoker, self._attempt_call, method.name if hedgeable else None)
        if policy.mock is not None:
            policy.mock.check(method.name, method.response_type())
        call, plannable, filters = self._stack(method, policy, context)
        self.contexts[method.name] = context
        switch = _Switch(call)
        with self._lock:
            self._bound[method.name] = _Bound(method, policy, context, switch)
            self._switch(method.name)
        # A plan stands for the whole stack: it is kept when every call filter has a plan
        # hook (the consumer's metrics), which it then runs around the call.
        hooks = plan_hooks(filters, method.name)
        # The switch calls what it holds, a call of this flavour: it is one.
        switched = cast(C, switch)
        if hooks is None:
            return BoundMethod(method, context, switched, False, in_flight=self.in_flight)
        return BoundMethod(method, context, switched, plannable, hooks, self.in_flight)

    def _stack(
        self, method: StubMethod, policy: StrategySettings, context: ClusterContext
    ) -> tuple[Any, bool, list[Any]]:
        """The method's call under ``policy``: its strategy inside its call filters (the mock
        outermost); whether it is plain failover; the filters."""
        if method.request_streaming:
            # A request stream can be consumed only once, so it is never replayed on another
            # provider: client-streaming calls are fail-fast whatever the reference says.
            policy = StrategySettings("failfast", policy.mock)
        strategy, plannable = self._strategy(method, policy, context)
        filters = list(self.filters.around_calls(self._asyncio))
        if policy.mock is not None:
            response_type = method.response_type()
            mock = self._mock(policy.mock, response_type, streaming=method.response_streaming)
            filters.insert(0, mock)
        return wrap_calls(filters, strategy), plannable, filters

    def _switch(self, name: str) -> None:
        """Put the stack the method's cluster/mock override asks for in force (the base stack
        when there is none). Called under the lock."""
        bound = self._bound.get(name)
        if bound is None:
            return
        override = self.tuning.calls.get(name)
        if override == bound.switch.override:
            return
        if override is None:
            bound.switch.current, bound.switch.override = bound.switch.base, None
            self._rehedge(bound.context)
            return
        policy = StrategySettings(
            override.cluster or bound.policy.cluster,
            override.mock if override.mock_text is not None else bound.policy.mock,
        )
        try:
            if policy.mock is not None:
                policy.mock.check(name, bound.method.response_type())
            call, _, _ = self._stack(bound.method, policy, bound.context)
        except (MockSpecError, ValueError) as exc:
            # The last good stack stays in force.
            log.error("ignoring cluster/mock override for %s.%s: %s", self.service.name, name, exc)
            return
        bound.switch.current, bound.switch.override = call, override
        self._rehedge(bound.context)

    def _rehedge(self, context: ClusterContext) -> None:
        """Hedging on or off for the method of ``context`` as its strategy now allows (a
        consumer override may have switched it to ``forking`` or ``broadcast``, which never
        hedge). Called under the lock."""
        for wired in self._wired:
            if wired.context is context and wired.method is not None:
                wired.context.call = self._provider_call(wired)

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
        if self._limited:
            limit = AsyncActiveLimit if self._asyncio else ActiveLimit
            filters = (*filters, limit(self.actives))
        if stats is not None:
            filters = (*filters, record(stats, invoker.spec.path))
        return wrap_attempts(filters, invoker)

    def _live(self, call: Any) -> Any:
        """``call`` inside what is switched on at runtime: the access log, then the router
        snapshot recorder outside it. Called under :attr:`_lock`."""
        if self._accesslog is not None:
            kind = AsyncConsumerAccessLog if self._asyncio else ConsumerAccessLog
            consumer = self.consumer
            call = kind(
                call,
                self._accesslog,
                consumer.host,
                consumer.service_interface,
                consumer.get_str("version"),
                consumer.get_str("group"),
            )
        if self._recorder is not None:
            call = self._recorder.call(call, self._asyncio)
        return call

    def _rewire(self) -> None:
        """Put each context's routes and provider call back in line with what is switched on
        (a context's plan then no longer matches it, and is compiled again or not at all).
        Called under :attr:`_lock`."""
        recorder = self._recorder
        routes = self.directory if recorder is None else recorder.routes(self.directory)
        for wired in self._wired:
            wired.context.routes = routes
            wired.context.call = self._live(wired.wrap(wired.invoker))

    def record_routes(self, recorder: RouteRecorder | None) -> None:
        """Record how each call is routed and attempted (None: stop recording)."""
        with self._lock:
            self._recorder = recorder
            self._rewire()

    @property
    def recording_routes(self) -> bool:
        """Whether calls are recorded for router snapshots now."""
        return self._recorder is not None

    @property
    def access_log(self) -> str | None:
        """Where the access log goes now: None (off), ``""`` (the ``dubbo.accesslog`` logger)
        or a file path."""
        return self._accesslog

    # ------------------------------------------------------------------ keeping it current

    def _on_chain(self, bound: BoundChain) -> None:
        providers = bound.snapshot.providers
        self.quarantine.retain(providers)
        self._retain(providers)
        with self._lock:
            overrides = self.directory.consumer_overrides
            if ACCESSLOG_KEY in overrides:
                accesslog = access_log_target(overrides[ACCESSLOG_KEY], from_rule=True)
            else:
                accesslog = access_log_target(self.config.parameters.get(ACCESSLOG_KEY))
            if accesslog != self._accesslog:
                self._accesslog = accesslog
                if accesslog == "":
                    switched_on()
                self._rewire()
            stats, hedging = self.tuning.stats, self.tuning.hedging
            calls = self.tuning.calls
            balancer_changed = self.tuning.update(overrides, providers)
            if self.tuning.calls is not calls:
                for name in self._bound:
                    self._switch(name)
            limited = any(s.actives > 0 for s in self.tuning.settings.values())
            rewrap = self.tuning.stats is not stats or limited != self._limited
            self._limited = limited
            rehedge = self.tuning.hedging != hedging
            if balancer_changed or rewrap or rehedge:
                for wired in self._wired:
                    if rewrap or (rehedge and wired.method is not None):
                        wired.context.call = self._provider_call(wired)
                    wired.context.balancer = self.tuning.balancer
            self.applied_overrides = overrides

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

    def _new_invoker(
        self,
        kind: Callable[..., V],
        pool: ChannelPool | AsyncChannelPool,
        method: StubMethod,
        kept: list[V],
        **options: Any,
    ) -> V:
        """A provider call of ``method`` on ``pool``, with the reference's caller and the
        method's compression, kept in ``kept`` (whose callables of dropped channels are
        forgotten)."""
        invoker = kind(
            pool,
            method,
            caller=self.caller,
            compression=self.config.compression_of(method.name),
            **options,
        )
        kept.append(invoker)
        return invoker

    def _strategy(
        self, method: StubMethod, policy: StrategySettings, context: ClusterContext
    ) -> tuple[C, bool]:
        """The method's strategy bound to its context, and whether it is plain failover."""
        raise NotImplementedError

    #: Whether the flavour is asyncio (which of :attr:`filters` apply).
    _asyncio: bool
    #: The flavour's mock filter class (:class:`~dubbo_py.consumer.filters.MockFilter` ...).
    _mock: Callable[..., Any]
    #: The flavour's call statistics filter class.
    _record_stats: Callable[..., Any]
    #: The flavour's hedging wrapper class.
    _hedged: Callable[..., Any]

    def _retain(self, providers: tuple[URL, ...]) -> None:
        """Drop the channels to providers that left the registry."""
        raise NotImplementedError

    def _revived(self, provider: URL) -> None:
        """A quarantined provider is about to be revived: give it a fresh channel (its old one
        may be deep in reconnect backoff), before calls can pick it again."""
        raise NotImplementedError


class BlockingAssembly(ReferenceAssembly[Call]):
    """The blocking flavour: ``grpc`` channels,
    :class:`~dubbo_py.consumer.channel.ClusterChannel`."""

    def __init__(self, service: ServiceSpec, config: ReferenceConfig, consumer: URL, **parts: Any):
        super().__init__(service, config, consumer, **parts)
        self.pool = ChannelPool(config.client_tls, shared=self.shared_channels)
        self._invokers: list[MethodInvoker] = []
        self.pool.on_dropped = partial(_forget, self._invokers)

    def channel(self) -> ClusterChannel:
        """The channel a stub is built on."""
        return ClusterChannel(self, self.config.attachments, self.pool.close)

    def _invoker(self, method: StubMethod) -> MethodInvoker:
        return self._new_invoker(
            MethodInvoker, self.pool, method, self._invokers, interceptors=self.interceptors
        )

    def _strategy(
        self, method: StubMethod, policy: StrategySettings, context: ClusterContext
    ) -> tuple[Call, bool]:
        strategy = get_strategy(policy.cluster)
        return partial(strategy, context), strategy is failover

    _asyncio = False
    _mock = MockFilter
    _record_stats = RecordStats
    _hedged = HedgedCall

    def _retain(self, providers: tuple[URL, ...]) -> None:
        gone = self.pool.retain(providers)
        if gone:
            _forget(self._invokers, gone)

    def _revived(self, provider: URL) -> None:
        if self.pool.reset(provider.address):
            _forget(self._invokers, [provider.address])

    def close(self) -> None:
        """Everything :meth:`ReferenceAssembly.close` does, then close the provider channels."""
        super().close()
        self.pool.close()


class AsyncAssembly(ReferenceAssembly[AsyncCall]):
    """The asyncio flavour: ``grpc.aio`` channels (they belong to the event loop that made
    them), :class:`~dubbo_py.consumer.channel.AsyncClusterChannel`, awaited strategies.

    ``failback`` retries run on the queue's thread, so they go on whether or not the event loop
    still runs: a ``failback`` method also gets a blocking provider call (on a blocking pool
    opened for the purpose) that its background retries use."""

    def __init__(self, service: ServiceSpec, config: ReferenceConfig, consumer: URL, **parts: Any):
        super().__init__(service, config, consumer, **parts)
        self.pool = AsyncChannelPool(
            config.client_tls, interceptors=self.interceptors, shared=self.shared_async_channels
        )
        self._invokers: list[AsyncMethodInvoker] = []
        self.pool.on_dropped = partial(_forget, self._invokers)
        #: Blocking channels and invokers for ``failback`` retries (opened on first need).
        self._retry_pool: ChannelPool | None = None
        self._retry_invokers: list[MethodInvoker] = []
        #: Each method's retry context, made once (a stack rebuilt for a cluster override of
        #: failback reuses it).
        self._retry_contexts: dict[str, ClusterContext] = {}

    def channel(self) -> AsyncClusterChannel:
        """The channel a stub is built on (await its ``close`` on the same loop)."""
        return AsyncClusterChannel(self, self.config.attachments, self.pool.close)

    def _invoker(self, method: StubMethod) -> AsyncMethodInvoker:
        return self._new_invoker(AsyncMethodInvoker, self.pool, method, self._invokers)

    def _strategy(
        self, method: StubMethod, policy: StrategySettings, context: ClusterContext
    ) -> tuple[AsyncCall, bool]:
        if policy.cluster == "failback":
            return partial(failback_async(self._retry_context(method)), context), False
        strategy = async_strategy(StrategySettings(policy.cluster), context, None)
        return partial(strategy, context), strategy is failover_async

    def _retry_context(self, method: StubMethod) -> ClusterContext:
        """The blocking context ``failback`` retries of ``method`` go through."""
        with self._lock:
            known = self._retry_contexts.get(method.name)
            if known is not None:
                return known
            if self._retry_pool is None:
                self._retry_pool = ChannelPool(self.config.client_tls, shared=self.shared_channels)
                self._retry_pool.on_dropped = partial(_forget, self._retry_invokers)
            invoker = self._new_invoker(
                MethodInvoker, self._retry_pool, method, self._retry_invokers
            )
            context = self._wire(invoker, self._retry_attempt_call)
            self._retry_contexts[method.name] = context
        return context

    def _retry_attempt_call(self, invoker: InvokerBase) -> Any:
        return self._attempts_around(invoker, self.filters.attempts, RecordStats)

    _asyncio = True
    _mock = AsyncMockFilter
    _record_stats = AsyncRecordStats
    _hedged = AsyncHedgedCall

    def _retain(self, providers: tuple[URL, ...]) -> None:
        self.pool.retain(providers)
        if self._retry_pool is not None:
            _forget(self._retry_invokers, self._retry_pool.retain(providers))

    def _revived(self, provider: URL) -> None:
        # The pool replaces the channel on the loop, soon; a plan must not take the old one
        # meanwhile, so its callables go now (after reset: a call then finds it stale).
        self.pool.reset(provider.address)
        _forget(self._invokers, [provider.address])
        if self._retry_pool is not None and self._retry_pool.reset(provider.address):
            _forget(self._retry_invokers, [provider.address])

    def close(self) -> None:
        """Everything :meth:`ReferenceAssembly.close` does, and close the blocking channels of
        ``failback`` retries (the asyncio channels are closed on the loop, by
        :meth:`AsyncClusterChannel.close`)."""
        super().close()
        if self._retry_pool is not None:
            self._retry_pool.close()
