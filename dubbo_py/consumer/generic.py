"""Generic calls (Dubbo's ``GenericService.$invoke``) to Java-interface services over ``dubbo://``
and over Triple without IDL (``tri://``).

``app.generic_reference("com.example.UserService", version="1.0.0")`` returns a
:class:`GenericReference`: ``ref.invoke("getUser", ["java.lang.Long"], [7])`` (or
``ref.getUser(7)``, the provider then resolving the method by its name, as Dubbo's
``GenericFilter`` does for ``null`` parameter types) sends ``$invoke(method, types, args)``
with the attachment ``generic=true``; the provider's ``GenericFilter`` turns dicts into the
parameters' beans (``PojoUtils.realize``) and the result back into dicts with a ``class`` key
(``PojoUtils.generalize``). A Java exception is raised as
:class:`~dubbo_py.protocol.serialization.hessian2.JavaException`.

The protocol is the provider URL's: ``dubbo://`` on the shared connection of
:mod:`dubbo_py.protocol.dubbo`, ``tri://`` as gRPC's unary call of ``/<interface>/$invoke``
with the three arguments Hessian2 inside Triple's wrapper message
(:mod:`dubbo_py.protocol.triple_wrapper`), as a Java ``GenericService`` consumer sends it.

What applies of the consumer chain: discovery of the interface's ``dubbo://`` and ``tri://``
providers in the application's registries, through one
:class:`~dubbo_py.registry.directory.RegistryDirectory` per registry -- the directory and router
chain a gRPC-stub reference has, so version/group matching, override rules (``disabled``,
``weight`` ...), condition, tag, script and shard rules and router URLs apply as they do to a
stub; the routers see an :class:`~dubbo_py.invocation.Invocation` of the real method name (not
``$invoke``), the call's attachments (``dubbo.tag``) and its arguments (``arguments[N]``). Then
the load balancers of :mod:`dubbo_py.cluster.loadbalance`, and failover (``retries`` more
attempts on other providers after a failure outside the provider's code; a Java exception is
the provider's answer and is not retried). Direct ``url=`` providers are not routed.
Consumer-side override rules' ``timeout``, ``retries``, ``loadbalance``, ``mock``,
``hedging`` and ``accesslog`` (service-wide or ``<method>.<key>``) beat the reference's
options; the other keys they may set are warned about.

The consumer filters apply as to a stub reference, composed the same way
(:meth:`~dubbo_py.app.referencing.Referencing.generic_filters`: metrics and tracing outermost,
then the application's filters, then the reference's own): the call filters wrap the cluster
step (routing, the signature lookup, failover), the attempt filters each ``$invoke`` on a
provider, inside the access log. Blocking calls run their filters and failover in the caller's
thread (each attempt waits on the runtime's loop); ``invoke_async`` runs them on the caller's
loop. The filters see an :class:`~dubbo_py.invocation.Invocation` of the real method whose
request is a :class:`~dubbo_py.invocation.GenericRequest`; the attachments sent are the
invocation's, so the trace context (and what a filter adds) reaches the provider. A provider
whose connection is refused or lost (``tri://``: UNAVAILABLE) is quarantined until a probe
finds it back (``dubbo://``: a connect and a heartbeat answered; ``tri://``: the gRPC health
check); one whose calls keep failing outside the service's code (timeouts, error statuses) is
ejected into the quarantine by the outlier detector a stub reference has
(:attr:`GenericReference.outliers`, ``outlier_failures``/``outlier_max_share``). A method that
hedges (``hedging``, per method, or an override rule's ``hedging``) runs each attempt in the
hedged race of :mod:`dubbo_py.cluster.hedging`, adapted by
:mod:`dubbo_py.consumer.generic_governance`: a Java exception is an answer and wins the race
like a value. A ``tri://`` provider that says ``serialization=protobuf``, or answers
``$invoke`` with UNIMPLEMENTED, is an IDL service and is not called generically
(:attr:`GenericReference.set_aside`). Mocks: :mod:`dubbo_py.consumer.generic_mock`. The QoS
port's provider, quarantine and hedge metrics count generic references, ``/ls`` lists them
and ``getRouterSnapshot`` gives their chains, and router snapshots record their calls
(:meth:`GenericReference.record_routes`); the route-survivor and rules-in-force gauges do not
cover them yet (docs/java-services.md).

Parameter types left out (``None``, and attribute calls) are read from the service definition
the providers stored in the metadata report (:meth:`ServiceDefinition.pick
<dubbo_py.registry.service_definition.ServiceDefinition.pick>`, shared with ``dubbo-py call``);
:meth:`GenericReference.invoke_result` also says which provider answered.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import grpc

from dubbo_py.cluster.health_probe import grpc_health_probe
from dubbo_py.cluster.hedging import AsyncHedgedCall, HedgeCounts, HedgedCall
from dubbo_py.cluster.loadbalance import STATS_LOADBALANCES, get_loadbalance
from dubbo_py.cluster.mock import MockSpec, parse_mock
from dubbo_py.cluster.outlier import DEFAULT_CONSECUTIVE, DEFAULT_MAX_SHARE, OutlierDetector
from dubbo_py.cluster.quarantine import Quarantine
from dubbo_py.cluster.stats import CallStats, method_key
from dubbo_py.consumer.filters import ConsumerFilters, wrap_attempts, wrap_calls
from dubbo_py.consumer.generic_governance import (
    GenericContext,
    GenericHedging,
    ProviderFailure,
    async_race_attempt,
    race_attempt,
)
from dubbo_py.consumer.generic_mock import mock_answer, mocks_failure
from dubbo_py.consumer.governed_directory import governed_directory
from dubbo_py.consumer.route_snapshots import RouteRecorder, continued
from dubbo_py.errors import MockSpecError, NoProviderError
from dubbo_py.invocation import GenericRequest, Invocation
from dubbo_py.protocol.dubbo.body import ResponseBody
from dubbo_py.protocol.dubbo.connection import (
    DEFAULT_HEARTBEAT,
    DubboCallError,
    DubboConnection,
    DubboConnectionError,
    DubboConnections,
)
from dubbo_py.protocol.serialization.hessian2 import JavaException, TypedList
from dubbo_py.protocol.triple import CALL_SINK, service_headers
from dubbo_py.protocol.triple_wrapper import TripleWrapperChannels, TripleWrapperError
from dubbo_py.protocol.triple_wrapper import invoke as triple_invoke
from dubbo_py.qos.access_log import (
    ACCESSLOG_KEY,
    AsyncConsumerAccessLog,
    ConsumerAccessLog,
    access_log_target,
    switched_on,
)
from dubbo_py.registry.application.wiring import ApplicationLevel
from dubbo_py.registry.directory import RegistryDirectory
from dubbo_py.registry.registry import Registry
from dubbo_py.registry.service_definition import (
    MethodChoiceError,
    ServiceDefinition,
    provider_definition_path,
    read_provider_definition,
)
from dubbo_py.url import URL

__all__ = [
    "DEFAULT_TIMEOUT",
    "GENERIC_EXCEPTIONS",
    "GENERIC_METHOD",
    "DubboRuntime",
    "GenericReference",
    "GenericResult",
    "GenericSignatureError",
    "unwrap_generic_exception",
]

log = logging.getLogger(__name__)

#: The method a generic call invokes on the provider.
GENERIC_METHOD = "$invoke"
#: ``$invoke(String, String[], Object[])``.
GENERIC_PARAMETER_TYPES = ("java.lang.String", "[Ljava.lang.String;", "[Ljava.lang.Object;")
#: Dubbo's default call timeout (``timeout``, 1000 ms), in seconds.
DEFAULT_TIMEOUT = 1.0
#: Dubbo's default retries of a failover call.
DEFAULT_RETRIES = 2
#: The provider protocols generic calls speak (the provider URL's protocol picks one).
PROTOCOLS = ("dubbo", "tri")


#: The exceptions a provider's ``GenericFilter`` wraps a generic call's exception in (Dubbo 3.3
#: with its Dubbo 2 compatibility classes on the class path uses the first).
GENERIC_EXCEPTIONS = frozenset(
    {
        "com.alibaba.dubbo.rpc.service.GenericException",
        "org.apache.dubbo.rpc.service.GenericException",
    }
)
_CAUSED_BY = "Caused by: "
#: Seconds before a metadata report that had no service definition is read again (a provider
#: may publish its definition just after it registered).
MISSING_DEFINITION_RECHECK = 10.0
#: Consumer-side override parameters a generic call acts on (``<method>.<key>`` or ``<key>``).
APPLIED_OVERRIDES = ("timeout", "retries", "loadbalance", "mock", "hedging", ACCESSLOG_KEY)
#: What a failover attempt is tracked in when its balancer reads no call statistics.
_UNTRACKED = contextlib.nullcontext()


class GenericSignatureError(MethodChoiceError):
    """A call without parameter types that the service definition in the metadata report
    does not resolve: no such method, none taking that many arguments, or an overload of that
    many parameters (the message lists the signatures; give ``parameter_types``). Raised
    before anything is sent."""


@dataclass(frozen=True)
class GenericResult:
    """A generic call's value and where it went."""

    value: Any
    #: The provider that answered (None: a consumer filter answered without calling one).
    provider: URL | None
    #: The providers tried, in order (the last one answered; the others failed outside the
    #: service's code and were failed over).
    attempts: tuple[URL, ...]
    #: The parameter types sent (``None``: none were, the provider found the method by name).
    parameter_types: tuple[str, ...] | None
    #: Where the parameter types were read, when the metadata report gave them.
    signature_source: str = ""


def unwrap_generic_exception(error: JavaException) -> JavaException:
    """The provider's own exception out of the ``GenericException`` its ``GenericFilter`` sent.

    The wrapper carries the original class (``exceptionClass``) and message
    (``exceptionMessage``) as fields and the original stack trace as its text, where each
    ``Caused by: class: message`` line names one cause; those become the returned
    exception's ``cause`` chain (class and message only: Java sent no more). The wrapper itself
    stays reachable as ``raw`` of the returned exception. Anything else comes back as it is."""
    wrapper = error
    if wrapper.java_class not in GENERIC_EXCEPTIONS and error.cause is not None:
        wrapper = error.cause  # RpcException around a GenericException: the inner one
    raw = wrapper.raw
    if wrapper.java_class not in GENERIC_EXCEPTIONS or raw is None:
        return error
    java_class = raw.get("exceptionClass")
    if not isinstance(java_class, str) or not java_class:
        return error
    message = raw.get("exceptionMessage")
    cause: JavaException | None = None
    text = raw.get("detailMessage")
    if isinstance(text, str):
        for line in reversed([ln for ln in text.splitlines() if ln.startswith(_CAUSED_BY)]):
            name, sep, rest = line[len(_CAUSED_BY) :].partition(": ")
            cause = JavaException(name.strip(), rest if sep else None, cause=cause)
    frames = []
    for line in (text or "").splitlines():
        if line.startswith(_CAUSED_BY):
            break  # the causes' frames belong to them, and Java elided most ("... 47 more")
        if line.startswith("\tat "):
            frames.append(line[4:])
    return JavaException(
        java_class,
        message if isinstance(message, str) or message is None else str(message),
        cause=cause,
        stack_trace=frames,
        raw=raw,
    )


class DubboRuntime:
    """An event loop in a daemon thread and the ``dubbo://`` connections and Triple channels
    it holds, shared by an application's generic references (one per provider address)."""

    def __init__(self, *, heartbeat: float = DEFAULT_HEARTBEAT) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="dubbo-py dubbo://", daemon=True
        )
        self._thread.start()
        self.connections = self.run(self._make_pool(heartbeat))
        #: The ``tri://`` providers' channels (made on the loop, on first use).
        self.triple = TripleWrapperChannels()

    @staticmethod
    async def _make_pool(heartbeat: float) -> DubboConnections:
        return DubboConnections(heartbeat=heartbeat)

    @property
    def thread(self) -> threading.Thread:
        """The thread the loop runs in."""
        return self._thread

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop the connections belong to."""
        return self._loop

    def submit(self, coroutine: Any) -> concurrent.futures.Future[Any]:
        """Start a coroutine on the runtime's loop from another thread; its future."""
        try:
            return asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        except RuntimeError:
            # The loop is closed (a quarantine probe racing the application's close): the
            # coroutine never runs, so close it rather than leave it to warn at exit.
            coroutine.close()
            raise

    def run(self, coroutine: Any, timeout: float | None = None) -> Any:
        """Run a coroutine on the runtime's loop from another thread and wait for it."""
        future = self.submit(coroutine)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def close(self) -> None:
        """Close the connections and stop the loop."""
        if self._loop.is_closed():
            return
        try:
            self.run(self.connections.close(), timeout=5)
            self.run(self.triple.close(), timeout=5)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
            self._loop.close()


class GenericReference:
    """Generic calls to one Java interface's ``dubbo://`` and ``tri://`` providers (see the
    module text)."""

    def __init__(
        self,
        interface: str,
        runtime: DubboRuntime,
        *,
        registries: Sequence[Registry] = (),
        urls: Sequence[str | URL] = (),
        version: str = "",
        group: str = "",
        loadbalance: str = "random",
        retries: int = DEFAULT_RETRIES,
        timeout: float | None = None,
        attachments: Mapping[str, str] | None = None,
        check: float = 5.0,
        application: str = "",
        consumer_host: str = "",
        protocols: Collection[str] = PROTOCOLS,
        filters: ConsumerFilters | None = None,
        accesslog: str | None = None,
        quarantine_interval: float = 1.0,
        mock: str | None = None,
        levels: Sequence[ApplicationLevel | None] = (),
        outlier_failures: int = DEFAULT_CONSECUTIVE,
        outlier_max_share: float = DEFAULT_MAX_SHARE,
        hedging: Any = None,
        methods: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        if not registries and not urls:
            raise ValueError(f"generic reference to {interface}: no registry and no url given")
        self.interface = interface
        self.version = version
        self.group = group
        self.retries = retries
        self.timeout = timeout
        self._runtime = runtime
        self._attachments = dict(attachments or {})
        self._application = application
        #: The calls in flight and their times per provider and method, recorded while the
        #: balancer in force reads them (leastactive, shortestresponse, p2c, adaptive).
        self.stats = CallStats()
        self._balance = self._new_balancer(loadbalance)
        self._balancers: dict[str, tuple[Any, bool]] = {loadbalance.strip().lower(): self._balance}
        # The consumer filters (metrics, tracing, the application's and the reference's own)
        # around each call and each attempt, per flavour, as a stub reference's.
        around = filters if filters is not None else ConsumerFilters()
        self._blocking_call = wrap_calls(around.calls, self._cluster_blocking)
        self._async_call = wrap_calls(around.async_calls, self._cluster_async)
        self._blocking_attempt = wrap_attempts(around.attempts, self._attempt_blocking)
        self._async_attempt = wrap_attempts(around.async_attempts, self._attempt_async)
        #: The reference's mock (:mod:`dubbo_py.consumer.generic_mock`); a bad spec is a
        #: MockSpecError now, not in the middle of an outage.
        self._mock = parse_mock(mock)
        #: The reference's hedging (``hedging``, and per method ``methods={m: {"hedging":
        #: ...}}``); a bad value is a ValueError now.
        method_hedging: dict[str, Any] = {}
        for name, options in (methods or {}).items():
            refused = sorted(set(options) - {"hedging"})
            if refused:
                raise ValueError(
                    f"generic reference to {interface}: methods[{name!r}] options {refused} "
                    "are not applied to generic calls (only 'hedging' is)"
                )
            if "hedging" in options:
                method_hedging[name] = options["hedging"]
        self._hedging = GenericHedging(interface, hedging, method_hedging)
        #: Mocks of consumer override rules, by their text (None: the text does not parse).
        self._override_mocks: dict[str, MockSpec | None] = {}
        #: Where the access log goes (None: off; "": the ``dubbo.accesslog`` logger; a path).
        self._accesslog = access_log_target(accesslog)
        self._accesslog_on: str | None = None
        #: Records each call's routing and attempts while router snapshots are on for the
        #: service (QoS ``enableRouterSnapshot``); None: off, nothing recorded.
        self._recorder: RouteRecorder | None = None
        unknown = set(protocols) - set(PROTOCOLS)
        if unknown or not protocols:
            raise ValueError(
                f"generic reference to {interface}: protocols {sorted(protocols)}: "
                f"only {', '.join(PROTOCOLS)} are spoken"
            )
        self._protocols = frozenset(protocols)
        self._registries = tuple(registries)
        #: Service definitions read from the metadata report, by the definition paths of the
        #: providers they were read for (None: none stored there).
        self._definitions: dict[tuple[str, ...], tuple[ServiceDefinition | None, float]] = {}
        self._warned_overrides: set[tuple[str, str]] = set()
        #: The methods called so far (router snapshots list them).
        self._called: set[str] = set()
        self._consumer = URL(
            protocol="consumer",
            host=consumer_host,
            path=interface,
            parameters={
                "interface": interface,
                "version": version,
                "group": group,
                "generic": "true",
                "side": "consumer",
                **({"application": application} if application else {}),
            },
        )
        #: ``tri://`` providers that answered ``$invoke`` with UNIMPLEMENTED (gRPC / IDL
        #: servers), by address, with why: generic calls pass them over.
        self.set_aside: dict[str, str] = {}
        self._direct: tuple[URL, ...] = ()
        #: One directory per registry: the same provider filtering, override rules and router
        #: chain (condition, tag, script rules) an ordinary reference of the application has.
        self._directories: list[RegistryDirectory] = []
        if urls:
            direct = [u if isinstance(u, URL) else URL.parse(u) for u in urls]
            for url in direct:
                if url.protocol not in PROTOCOLS:
                    raise ValueError(
                        f"generic reference to {interface}: {url} is neither dubbo:// nor tri://"
                    )
            self._direct = tuple(direct)
        #: Providers that failed as dead (connection refused or lost, UNAVAILABLE): calls pass
        #: them over while others are left; a probe (a connect for ``dubbo://``, the gRPC
        #: health check for ``tri://``) lets each back in once it answers.
        self.quarantine = Quarantine(self._probe, interval=quarantine_interval)
        #: Ejects a provider whose calls keep failing outside the service's code (timeouts,
        #: error statuses: :func:`~dubbo_py.consumer.generic_governance.failure_code`) into
        #: the quarantine, as a stub reference's detector does.
        self.outliers = OutlierDetector(
            self.quarantine,
            lambda: len(self.providers),
            consecutive=outlier_failures,
            max_share=outlier_max_share,
            service=interface,
        )
        # A provider back from quarantine (or gone from the registry) starts a clean count.
        self.quarantine.on_change(
            lambda event: (
                self.outliers.forget(event.entry.address) if event.kind != "added" else None
            )
        )
        for i, registry in enumerate(registries):
            # A registry's application level (``levels[i]``), as a stub reference has it:
            # providers registered only as application instances are found, and the
            # migration step and rules choose the level (registry/application/migration.py).
            level = levels[i] if i < len(levels) else None
            consumer = self._consumer if level is None else level.consumer_url(self._consumer)
            subscribe = None if level is None else level.subscriber(consumer)
            directory = governed_directory(consumer, registry, subscribe=subscribe)
            self._directories.append(directory)
            # A provider that left the registry leaves the quarantine too.
            directory.add_listener(lambda _bound: self._retain())
            directory.start(wait=check if check > 0 else 0.0)
        self.quarantine.start()
        if check > 0 and self._directories and not self.providers:
            log.warning("generic reference to %s: no provider within %.1f s", interface, check)

    @property
    def providers(self) -> tuple[URL, ...]:
        """The usable ``dubbo://`` and ``tri://`` providers (before routing)."""
        if self._direct:
            return self._direct
        merged: dict[str, URL] = {}
        for directory in self._directories:
            for url in directory.providers:
                if self._callable(url):
                    merged.setdefault(url.address, url)
        return tuple(merged.values())

    def _callable(self, url: URL) -> bool:
        """Whether a generic call may go to ``url``: its protocol is one the reference speaks;
        a ``tri://`` one neither says it is an IDL service (``serialization=protobuf``) nor
        has answered ``$invoke`` with UNIMPLEMENTED (a gRPC / IDL server: :attr:`set_aside`)."""
        if url.protocol not in self._protocols:
            return False
        if url.protocol != "tri":
            return True
        if url.get_str("serialization").strip().lower() == "protobuf":
            return False
        return url.address not in self.set_aside

    def _set_aside(self, provider: URL, error: TripleWrapperError) -> TripleWrapperError:
        """``provider`` does not serve ``$invoke``: no generic call of this reference goes
        there again while it is registered (said once); the error the call raises names why."""
        message = (
            f"tri://{provider.address} does not serve $invoke ({error}): an IDL (protobuf) "
            f"service, which generic calls cannot call; call it through its stub "
            f"(app.reference), or give protocol='dubbo'"
        )
        if provider.address not in self.set_aside:
            self.set_aside[provider.address] = message
            log.warning("generic reference to %s: %s", self.interface, message)
        return TripleWrapperError(provider.address, message, code=error.code)

    def route(self, invocation: Invocation) -> tuple[URL, ...]:
        """The providers ``invocation`` may go to: each registry's router chain's survivors,
        merged by address (the direct ``url=`` providers are not routed). Raises
        :class:`~dubbo_py.errors.NoProviderError` naming the router that left none when no
        registry has one."""
        if self._direct:
            return self._direct
        merged: dict[str, URL] = {}
        error: NoProviderError | None = None
        recorder = self._recorder
        for directory in self._directories:
            chain = directory.chain if recorder is None else recorder.routes(directory).chain
            try:
                routed = chain.route(invocation)
            except NoProviderError as exc:
                error = exc
                continue
            for url in routed:
                if self._callable(url):
                    merged.setdefault(url.address, url)
        if not merged and error is not None:
            raise error
        return tuple(merged.values())

    # ---------------------------------------------------------------- calls

    def invoke(
        self,
        method: str,
        parameter_types: Sequence[str] | None,
        arguments: Sequence[object],
        *,
        timeout: float | None = None,
        attachments: Mapping[str, str] | None = None,
        enum_classes: Collection[str] = (),
    ) -> Any:
        """``$invoke(method, parameter_types, arguments)``, blocking; the Java result as Python
        values. ``parameter_types`` ``None``: read from the service definition the providers
        stored in the metadata report, the method picked by name and number of arguments
        (:class:`GenericSignatureError` when that leaves none or several); where none is
        stored, none are sent and the provider finds the method by its name."""
        # Not invoke_result(...).value: nobody reads where the call went, so it is not noted.
        value, _invocation, _mocked = self._call_blocking(
            method, parameter_types, arguments, timeout, attachments, enum_classes, None
        )
        return value

    def invoke_result(
        self,
        method: str,
        parameter_types: Sequence[str] | None,
        arguments: Sequence[object],
        *,
        timeout: float | None = None,
        attachments: Mapping[str, str] | None = None,
        enum_classes: Collection[str] = (),
    ) -> GenericResult:
        """:meth:`invoke`, returning the value with the provider that answered, the providers
        tried and the parameter types sent (:class:`GenericResult`)."""
        outcome: list[GenericResult] = []
        value, invocation, mocked = self._call_blocking(
            method, parameter_types, arguments, timeout, attachments, enum_classes, outcome
        )
        return _result(value, [] if mocked else outcome, invocation)

    def _call_blocking(
        self,
        method: str,
        parameter_types: Sequence[str] | None,
        arguments: Sequence[object],
        timeout: float | None,
        attachments: Mapping[str, str] | None,
        enum_classes: Collection[str],
        outcome: list[GenericResult] | None,
    ) -> tuple[Any, Invocation, bool]:
        """A blocking call through the filters and the cluster: its value, its invocation and
        whether the mock answered; where it went is appended to ``outcome`` (None: not noted)."""
        if threading.current_thread() is self._runtime.thread:
            raise RuntimeError(
                "a blocking generic call on the dubbo:// loop would wait on itself; "
                "await invoke_async instead"
            )
        invocation = self._invocation(
            method, parameter_types, arguments, timeout, attachments, enum_classes
        )
        spec = self._mock_spec(method)
        if spec is not None and spec.mode == "force":
            return mock_answer(spec, invocation), invocation, True
        token = _OUTCOME.set(outcome)
        try:
            value = self._blocking_call(invocation)
        except Exception as error:
            if spec is None or not mocks_failure(error):
                raise
            log.info(
                "generic %s#%s failed (%s): answered by its mock", self.interface, method, error
            )
            return mock_answer(spec, invocation), invocation, True
        finally:
            _OUTCOME.reset(token)
        return value, invocation, False

    async def invoke_async(
        self,
        method: str,
        parameter_types: Sequence[str] | None,
        arguments: Sequence[object],
        *,
        timeout: float | None = None,
        attachments: Mapping[str, str] | None = None,
        enum_classes: Collection[str] = (),
    ) -> Any:
        """The asyncio form of :meth:`invoke`: await it on any loop (the filters run on it;
        each attempt runs on the runtime's loop, where the shared connections live)."""
        result = await self.invoke_result_async(
            method,
            parameter_types,
            arguments,
            timeout=timeout,
            attachments=attachments,
            enum_classes=enum_classes,
        )
        return result.value

    async def invoke_result_async(
        self,
        method: str,
        parameter_types: Sequence[str] | None,
        arguments: Sequence[object],
        *,
        timeout: float | None = None,
        attachments: Mapping[str, str] | None = None,
        enum_classes: Collection[str] = (),
    ) -> GenericResult:
        """The asyncio form of :meth:`invoke_result`."""
        invocation = self._invocation(
            method, parameter_types, arguments, timeout, attachments, enum_classes
        )
        spec = self._mock_spec(method)
        if spec is not None and spec.mode == "force":
            return _result(mock_answer(spec, invocation), [], invocation)
        outcome: list[GenericResult] = []
        token = _OUTCOME.set(outcome)
        try:
            value = await self._async_call(invocation)
        except Exception as error:
            if spec is None or not mocks_failure(error):
                raise
            log.info(
                "generic %s#%s failed (%s): answered by its mock", self.interface, method, error
            )
            return _result(mock_answer(spec, invocation), [], invocation)
        finally:
            _OUTCOME.reset(token)
        return _result(value, outcome, invocation)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)

        def call(*arguments: object, **options: Any) -> Any:
            return self.invoke(name, None, arguments, **options)

        call.__name__ = name
        return call

    def _invocation(
        self,
        method: str,
        parameter_types: Sequence[str] | None,
        arguments: Sequence[object],
        timeout: float | None,
        attachments: Mapping[str, str] | None,
        enum_classes: Collection[str],
    ) -> Invocation:
        """The call as the filters and routers see it: the real method (not ``$invoke``), its
        :class:`~dubbo_py.invocation.GenericRequest`, the attachments (``dubbo.tag``) and the
        arguments (``arguments[N]``), as a Java consumer's RpcInvocation carries them."""
        if parameter_types is not None and len(parameter_types) != len(arguments):
            raise ValueError(
                f"{self.interface}#{method}: {len(parameter_types)} parameter types for "
                f"{len(arguments)} arguments"
            )
        values = tuple(arguments)
        if method not in self._called:
            self._called.add(method)
        request = GenericRequest(
            None if parameter_types is None else tuple(parameter_types),
            values,
            frozenset(enum_classes),
        )
        return Invocation(
            self.interface,
            method,
            request,
            {**self._attachments, **(attachments or {})},
            timeout,
            explicit_arguments=values,
        )

    # ------------------------------------------------------- the cluster (failover)

    def _cluster_blocking(self, invocation: Invocation) -> Any:
        """Route, read the signature, and fail over between providers (the call inside the
        blocking call filters); each attempt goes through the attempt filters."""
        routed = self.route(invocation)
        request = _request_of(invocation)
        if request.parameter_types is None:
            types, source = self._signature_blocking(invocation.method, request, routed)
            invocation = self._typed(invocation, types, source)
        attempt = self._logged(self._blocking_attempt, asyncio=False)
        failover = _Failover(self, invocation, routed)
        hedged = self._race(failover, attempt, asyncio=False)
        while (provider := failover.next()) is not None:
            winner = provider
            try:
                with failover.tracking(provider):
                    if hedged is None:
                        value = attempt(provider, invocation, failover.timeout)
                    else:
                        answer = hedged(provider, invocation, failover.race_timeout)
                        winner = answer.provider
                        value = answer.unwrap()
            except ProviderFailure as failure:
                failover.failed(provider, failure.error)
                continue
            except DubboCallError as error:
                failover.failed(provider, error)
                continue
            except JavaException:
                failover.answered(provider)
                raise
            return failover.done(value, provider, winner)
        raise failover.error()

    async def _cluster_async(self, invocation: Invocation) -> Any:
        """:meth:`_cluster_blocking`, awaited (inside the asyncio call filters)."""
        routed = self.route(invocation)
        request = _request_of(invocation)
        if request.parameter_types is None:
            types, source = await self._signature_async(invocation.method, request, routed)
            invocation = self._typed(invocation, types, source)
        attempt = self._logged(self._async_attempt, asyncio=True)
        failover = _Failover(self, invocation, routed)
        hedged = self._race(failover, attempt, asyncio=True)
        while (provider := failover.next()) is not None:
            winner = provider
            try:
                with failover.tracking(provider):
                    if hedged is None:
                        value = await attempt(provider, invocation, failover.timeout)
                    else:
                        answer = await hedged(provider, invocation, failover.race_timeout)
                        winner = answer.provider
                        value = answer.unwrap()
            except ProviderFailure as failure:
                failover.failed(provider, failure.error)
                continue
            except DubboCallError as error:
                failover.failed(provider, error)
                continue
            except JavaException:
                failover.answered(provider)
                raise
            return failover.done(value, provider, winner)
        raise failover.error()

    def _race(self, failover: _Failover, attempt: Any, *, asyncio: bool) -> Any:
        """The hedged form of ``attempt`` for the call of ``failover`` when its method hedges
        now (:mod:`dubbo_py.cluster.hedging`, adapted by
        :mod:`dubbo_py.consumer.generic_governance`); None when it does not."""
        method = failover.method
        state = self._hedging.state(method, self._override(method, "hedging"))
        if state is None:
            return None
        context = GenericContext(
            self.interface,
            self.route,
            failover.hedge_failed,
            balancer=failover.balancer,
            quarantine=self.quarantine,
            outliers=self.outliers,
        )
        hedged: HedgedCall | AsyncHedgedCall
        if asyncio:
            hedged = AsyncHedgedCall(async_race_attempt(attempt), state)
        else:
            hedged = HedgedCall(race_attempt(attempt), state)
        hedged.ctx = context
        return hedged

    @property
    def hedge_counts(self) -> dict[str, HedgeCounts]:
        """What each method's hedging did (hedges sent, won, refused by the budget)."""
        return dict(self._hedging.counts)

    def _record_failure(self, provider: URL, error: DubboCallError) -> DubboCallError:
        """An attempt on ``provider`` failed outside the service's code: a provider that is
        down goes into quarantine, any other failure counts towards its outlier ejection
        (a ``tri://`` one that does not serve ``$invoke`` is set aside instead). Returns the
        error the call raises if it is the last."""
        if (
            provider.protocol == "tri"
            and isinstance(error, TripleWrapperError)
            and error.code is grpc.StatusCode.UNIMPLEMENTED
        ):
            return self._set_aside(provider, error)
        if _dead(error):
            self.quarantine.add(provider, f"{type(error).__name__}: {error}")
        elif self.outliers.enabled:
            self.outliers.failed(provider, ProviderFailure(error))
        return error

    def _typed(
        self, invocation: Invocation, types: tuple[str, ...] | None, source: str
    ) -> Invocation:
        typed = _with_types(invocation, types, source)
        if self._recorder is not None:
            continued(invocation, typed)
        return typed

    def record_routes(self, recorder: RouteRecorder | None) -> None:
        """Record how each call is routed and attempted (None: stop recording)."""
        self._recorder = recorder

    @property
    def recording_routes(self) -> bool:
        """Whether calls are recorded for router snapshots now."""
        return self._recorder is not None

    @property
    def directories(self) -> tuple[RegistryDirectory, ...]:
        """The directory on each registry (none for direct ``url=`` providers)."""
        return tuple(self._directories)

    @property
    def method_names(self) -> tuple[str, ...]:
        """The methods known of the service: those called so far and those of the service
        definitions read from the metadata report (for router snapshots)."""
        names = set(self._called)
        for definition, _recheck in list(self._definitions.values()):
            if definition is not None:
                names.update(m.name for m in definition.methods)
        return tuple(sorted(names))

    @property
    def access_log(self) -> str | None:
        """Where the access log goes now (None: off; "": the ``dubbo.accesslog`` logger; a
        path), as the QoS ``/ls`` listing shows it."""
        for directory in self._directories:
            overrides = directory.consumer_overrides
            if ACCESSLOG_KEY in overrides:
                return access_log_target(overrides[ACCESSLOG_KEY], from_rule=True)
        return self._accesslog

    @property
    def service_key(self) -> str:
        """``group/interface:version``, as router snapshots and the QoS port name services."""
        return self._consumer.service_key

    def routers_in_force(self) -> list[Any]:
        """The routers in force on the reference's registries (for router snapshots)."""
        return [r for d in self._directories for r in d.routers_in_force()]

    def _attempt_blocking(
        self, provider: URL, invocation: Invocation, timeout: float | None
    ) -> Any:
        """One attempt, from a blocking caller. In a hedged race (a call sink is set) it runs
        on the runtime's loop and can be cancelled: a loser then stops waiting, and the
        caller's thread takes the winner's answer at once. Otherwise, on an open ``dubbo://``
        connection, the request is encoded, handed to the loop to write, and its response
        decoded in the caller's thread (:meth:`DubboConnection.invoke_blocking`: no task on the
        loop per call); else (``tri://``, no connection yet) the attempt runs on the loop."""
        sink = CALL_SINK.get()
        if sink is not None:
            future = self._runtime.submit(self._once(provider, invocation, timeout))
            sink.append(future)  # the race calls future.cancel() on a loser
            return future.result()
        if provider.protocol != "tri":
            connection = self._runtime.connections.connection(provider.address)
            if connection is not None and not connection.closed:
                args, seconds, sent, enum_classes = self._prepared(provider, invocation, timeout)
                response = connection.invoke_blocking(
                    provider.path or self.interface,
                    GENERIC_METHOD,
                    GENERIC_PARAMETER_TYPES,
                    args,
                    version=self.version or "0.0.0",
                    attachments=sent,
                    timeout=seconds,
                    enum_classes=enum_classes,
                )
                return _value_of(response)
        return self._runtime.run(self._once(provider, invocation, timeout))

    async def _attempt_async(
        self, provider: URL, invocation: Invocation, timeout: float | None
    ) -> Any:
        """One attempt, awaited from any loop (run on the runtime's loop)."""
        coroutine = self._once(provider, invocation, timeout)
        if asyncio.get_running_loop() is self._runtime.loop:
            return await coroutine
        return await asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(coroutine, self._runtime.loop)
        )

    def _logged(self, attempt: Any, *, asyncio: bool) -> Any:
        """``attempt`` inside the access log while one is switched on (the reference's
        ``accesslog``, or a consumer override rule's, which may not name a file), inside the
        router snapshot recorder while that is on."""
        target = self._accesslog
        for directory in self._directories:
            overrides = directory.consumer_overrides
            if ACCESSLOG_KEY in overrides:
                target = access_log_target(overrides[ACCESSLOG_KEY], from_rule=True)
                break
        recorder = self._recorder
        if target is None:
            return attempt if recorder is None else recorder.call(attempt, asyncio)
        if target == "" and target != self._accesslog_on:
            switched_on()
        self._accesslog_on = target
        kind = AsyncConsumerAccessLog if asyncio else ConsumerAccessLog
        logged = kind(
            attempt, target, self._consumer.host, self.interface, self.version, self.group
        )
        return logged if recorder is None else recorder.call(logged, asyncio)

    # ------------------------------------------------------- signatures and overrides

    def _definition_key(self, routed: Sequence[URL]) -> tuple[str, ...]:
        return tuple(
            sorted(
                {
                    provider_definition_path(
                        p.service_interface or p.path or self.interface,
                        p.get_str("version"),
                        p.get_str("group"),
                        p.get_str("application"),
                    )
                    for p in routed
                    if p.get_str("application")
                }
            )
        )

    def _stores(self) -> list[Any]:
        return [r.store for r in self._registries if getattr(r, "store", None) is not None]

    def _cached_definition(self, key: tuple[str, ...]) -> bool:
        """Whether the definition of ``key`` is known and need not be read again."""
        cached = self._definitions.get(key)
        return cached is not None and (cached[0] is not None or cached[1] >= time.monotonic())

    def _keep_definition(self, key: tuple[str, ...], found: ServiceDefinition | None) -> None:
        self._definitions[key] = (found, time.monotonic() + MISSING_DEFINITION_RECHECK)

    def _signature_blocking(
        self, method: str, request: GenericRequest, routed: Sequence[URL]
    ) -> tuple[tuple[str, ...] | None, str]:
        """The parameter types of ``method`` with the request's number of arguments from the
        service definition the providers stored in the metadata report, and where it was
        read; (None, "") when none is stored (or the providers are direct ``url=`` ones, with
        no registry to read)."""
        stores = self._stores()
        if not stores or not routed:
            return None, ""
        key = self._definition_key(routed)
        if not self._cached_definition(key):
            found: ServiceDefinition | None = None
            for store in stores:
                found, _missing = read_provider_definition(store, list(routed))
                if found is not None:
                    break
            self._keep_definition(key, found)
        return self._pick(key, method, len(request.arguments))

    async def _signature_async(
        self, method: str, request: GenericRequest, routed: Sequence[URL]
    ) -> tuple[tuple[str, ...] | None, str]:
        """:meth:`_signature_blocking`, the store reads off the loop."""
        stores = self._stores()
        if not stores or not routed:
            return None, ""
        key = self._definition_key(routed)
        if not self._cached_definition(key):
            found: ServiceDefinition | None = None
            for store in stores:
                # Store reads block (ZooKeeper, etcd, Nacos clients): off the loop.
                found, _missing = await asyncio.to_thread(
                    read_provider_definition, store, list(routed)
                )
                if found is not None:
                    break
            self._keep_definition(key, found)
        return self._pick(key, method, len(request.arguments))

    def _pick(
        self, key: tuple[str, ...], method: str, count: int
    ) -> tuple[tuple[str, ...] | None, str]:
        definition = self._definitions[key][0]
        if definition is None:
            log.debug("generic %s#%s: no service definition stored", self.interface, method)
            return None, ""
        try:
            chosen = definition.pick(method, count, hint="give parameter_types to name one")
        except MethodChoiceError as exc:
            raise GenericSignatureError(f"{exc} (from {definition.source})") from None
        return chosen.invoke_types, definition.source

    def _override(self, method: str, key: str) -> str | None:
        """A consumer-side override rule's ``<method>.<key>``, else ``<key>`` (the first
        registry's directory that has one)."""
        for directory in self._directories:
            overrides = directory.consumer_overrides
            if not overrides:
                continue  # the usual case: no override rule, no names to build
            for name in (f"{method}.{key}", key):
                value = overrides.get(name)
                if value:
                    return value
        return None

    def _warn_unapplied(self) -> None:
        # Consumer-side override keys a stub reference acts on but a generic one does not:
        # said once per value instead of dropped silently.
        for directory in self._directories:
            for name, value in directory.consumer_overrides.items():
                key = name.rsplit(".", 1)[-1]
                if key in APPLIED_OVERRIDES or (name, value) in self._warned_overrides:
                    continue
                self._warned_overrides.add((name, value))
                log.warning(
                    "generic reference to %s: consumer override %s=%s is not applied to "
                    "generic calls (only %s are)",
                    self.interface,
                    name,
                    value,
                    ", ".join(APPLIED_OVERRIDES),
                )

    def _mock_spec(self, method: str) -> MockSpec | None:
        """The mock of ``method``'s calls now: a consumer override rule's ``<method>.mock`` or
        ``mock`` (``false`` switches the reference's off), else the reference's. An override
        that does not parse is logged once and leaves the reference's in force."""
        text = self._override(method, "mock")
        if text is None:
            return self._mock
        if text not in self._override_mocks:
            try:
                self._override_mocks[text] = parse_mock(text)
            except MockSpecError as exc:
                log.error("generic %s: ignoring override mock: %s", self.interface, exc)
                self._override_mocks[text] = self._mock
        return self._override_mocks[text]

    def _retries(self, method: str) -> int:
        text = self._override(method, "retries")
        if text is not None:
            try:
                return max(0, int(text))
            except ValueError:
                log.warning("generic %s: override retries=%r is no number", self.interface, text)
        return max(0, self.retries)

    def _new_balancer(self, name: str) -> tuple[Any, bool]:
        key = name.strip().lower()
        return get_loadbalance(key, stats=self.stats), key in STATS_LOADBALANCES

    def _balancer(self, method: str) -> tuple[Any, bool]:
        """The balancer of ``method``'s calls now, and whether it reads call statistics."""
        name = self._override(method, "loadbalance")
        if name is None:
            return self._balance
        key = name.strip().lower()
        if key not in self._balancers:
            try:
                self._balancers[key] = self._new_balancer(key)
            except ValueError as exc:
                log.warning("generic %s: override loadbalance: %s", self.interface, exc)
                self._balancers[key] = self._balance
        return self._balancers[key]

    def _override_timeout(self, method: str) -> float | None:
        text = self._override(method, "timeout")
        if text is None:
            return None
        try:
            return int(text) / 1000
        except ValueError:
            log.warning("generic %s: override timeout=%r is no number", self.interface, text)
            return None

    async def _once(self, provider: URL, invocation: Invocation, timeout: float | None) -> Any:
        """One ``$invoke`` on ``provider``, on the runtime's loop: the invocation's attachments
        (trace context included) go with it."""
        args, seconds, sent, enum_classes = self._prepared(provider, invocation, timeout)
        if provider.protocol == "tri":
            return await self._once_triple(provider, args, seconds, sent, enum_classes)
        connection = await self._runtime.connections.get(provider.host, provider.port)
        response = await connection.invoke(
            provider.path or self.interface,
            GENERIC_METHOD,
            GENERIC_PARAMETER_TYPES,
            args,
            version=self.version or "0.0.0",
            attachments=sent,
            timeout=seconds,
            enum_classes=enum_classes,
        )
        return _value_of(response)

    def _prepared(
        self, provider: URL, invocation: Invocation, timeout: float | None
    ) -> tuple[list[object], float, dict[str, object], Collection[str]]:
        """What one ``$invoke`` on ``provider`` sends: its three arguments, its timeout in
        seconds, its attachments; and the enum classes its answer may name."""
        request = _request_of(invocation)
        types, enum_classes = request.parameter_types, request.enum_classes
        args: list[object] = [
            invocation.method,
            None if types is None else TypedList("[string", types),
            TypedList("[object", request.arguments),
        ]
        seconds = timeout if timeout is not None else self.timeout
        if seconds is None:
            registered = provider.get_str("timeout")
            seconds = int(registered) / 1000 if registered.isdigit() else DEFAULT_TIMEOUT
        sent: dict[str, object] = {
            **invocation.attachments,
            "path": provider.path or self.interface,
            "interface": self.interface,
            "generic": "true",
            "timeout": str(int(seconds * 1000)),
        }
        if self.version:
            sent["version"] = self.version
        if self.group:
            sent["group"] = self.group
        return args, seconds, sent, enum_classes

    async def _once_triple(
        self,
        provider: URL,
        args: list[object],
        seconds: float,
        sent: Mapping[str, object],
        enum_classes: Collection[str],
    ) -> Any:
        # The attachments travel as Triple headers (a Java consumer sends them all there too).
        result = await triple_invoke(
            self._runtime.triple.get(provider.address),
            provider.address,
            provider.path or self.interface,
            GENERIC_METHOD,
            GENERIC_PARAMETER_TYPES,
            args,
            headers=self._triple_headers(provider),
            attachments={key: str(value) for key, value in sent.items()},
            timeout=seconds,
            enum_classes=enum_classes,
        )
        if result.exception is not None:
            raise unwrap_generic_exception(result.exception)
        return result.value

    def _retain(self) -> None:
        # A provider that left the registry leaves the quarantine and the set-aside list.
        registered = {url.address for directory in self._directories for url in directory.providers}
        for address in [a for a in list(self.set_aside) if a not in registered]:
            self.set_aside.pop(address, None)
        self.quarantine.retain(self.providers)

    def _probe(self, provider: URL) -> bool:
        """Whether a quarantined provider is back (on the quarantine's thread): it accepts a
        connection and answers a heartbeat on it (``dubbo://``; Dubbo counts an invoker
        available while its client is connected and heartbeats are answered), or answers
        the gRPC health check (``tri://``)."""
        if provider.protocol == "tri":
            return grpc_health_probe(provider)
        return bool(self._runtime.run(_accepts(provider.host, provider.port), timeout=5))

    def _triple_headers(self, provider: URL) -> tuple[tuple[str, str | bytes], ...]:
        # A registered provider URL names its version and group; a url= given without them
        # takes the reference's, as a Java consumer's direct URL is merged with its config.
        taken = {
            key: value
            for key, value in (("version", self.version), ("group", self.group))
            if value and value != "*" and not provider.parameters.get(key)
        }
        return service_headers(provider.with_parameter_map(taken), self._application)

    def close(self) -> None:
        """Stop watching the registries (the shared connections stay with the runtime)."""
        directories, self._directories = self._directories, []
        for directory in directories:
            directory.close()
        self.quarantine.stop()


#: Where the cluster step of the call in progress leaves what it did (the provider that
#: answered, those tried), for :meth:`GenericReference.invoke_result` outside the filters.
_OUTCOME: ContextVar[list[GenericResult] | None] = ContextVar("dubbo_py_generic", default=None)


def _request_of(invocation: Invocation) -> GenericRequest:
    request = invocation.request
    if not isinstance(request, GenericRequest):
        raise TypeError(
            f"generic {invocation.service}#{invocation.method}: a filter replaced the request "
            f"with {type(request).__name__}; a generic call's request is a GenericRequest"
        )
    return request


def _with_types(invocation: Invocation, types: tuple[str, ...] | None, source: str) -> Invocation:
    """``invocation`` with the parameter types read from the metadata report."""
    request = _request_of(invocation)
    return Invocation(
        invocation.service,
        invocation.method,
        GenericRequest(types, request.arguments, request.enum_classes, source),
        invocation.attachments,
        invocation.timeout,
        invocation.explicit_arguments,
        invocation.options,
    )


def _result(value: Any, outcome: list[GenericResult], invocation: Invocation) -> GenericResult:
    """What :meth:`GenericReference.invoke_result` returns: the filters' value, with where the
    call went (no provider: a filter answered without calling one)."""
    if not outcome:
        request = _request_of(invocation)
        return GenericResult(value, None, (), request.parameter_types)
    last = outcome[-1]
    if last.value is value:
        return last
    return GenericResult(
        value, last.provider, last.attempts, last.parameter_types, last.signature_source
    )


class _Failover:
    """One call's failover: the routed providers, those tried, the last failure; ``retries``
    more attempts after one that failed outside the provider's code (a Java exception is the
    provider's answer and is not retried)."""

    def __init__(
        self, ref: GenericReference, invocation: Invocation, routed: Sequence[URL]
    ) -> None:
        method = invocation.method
        ref._warn_unapplied()
        self._ref = ref
        self._invocation = invocation
        self._routed = routed
        self.method = method
        self._balancer, records = ref._balancer(method)
        #: Where each attempt is counted (None: the balancer reads no statistics).
        self.stats = ref.stats if records else None
        self.key = method_key(invocation.service, method)
        #: The call's own timeout, else a consumer override's (None: the reference's).
        self.timeout = (
            invocation.timeout if invocation.timeout is not None else ref._override_timeout(method)
        )
        self._left = ref._retries(method) + 1
        self._tried: list[URL] = []
        self._last: DubboCallError | None = None

    @property
    def balancer(self) -> Any:
        """The balancer of this call (a hedge picks its provider with it too)."""
        return self._balancer

    @property
    def race_timeout(self) -> float | None:
        """The deadline of a hedged attempt: the call's, else the reference's (None: each
        provider's registered one)."""
        return self.timeout if self.timeout is not None else self._ref.timeout

    def tracking(self, provider: URL) -> contextlib.AbstractContextManager[Any]:
        """Where an attempt on ``provider`` is counted while it runs (the balancer's call
        statistics; nothing when it reads none)."""
        if self.stats is None:
            return _UNTRACKED
        return self.stats.track(provider.address, self.key)

    def next(self) -> URL | None:
        """The provider of the next attempt (None: no attempt left)."""
        if self._left <= 0:
            return None
        candidates = tuple(p for p in self._routed if p not in self._tried)
        if not candidates:
            return None
        self._left -= 1
        # Providers just refused at connect are passed over while others are left, as
        # Dubbo's cluster skips invokers whose client is not connected.
        pool = self._ref._runtime.connections
        reachable = tuple(p for p in candidates if not pool.recently_failed(p.address))
        candidates = reachable or candidates
        quarantine = self._ref.quarantine
        if quarantine.addresses:
            # The quarantined are tried only when no other is left (as a stub's cluster does).
            healthy, quarantined = quarantine.partition(candidates)
            candidates = healthy or quarantined
        provider: URL = self._balancer.select(candidates, self._invocation)
        self._tried.append(provider)
        return provider

    def failed(self, provider: URL, error: DubboCallError) -> None:
        """An attempt on ``provider`` failed outside the service's code; one that says the
        provider is down puts it in quarantine, another counts towards its outlier ejection
        (:meth:`GenericReference._record_failure`)."""
        self._last = self._ref._record_failure(provider, error)
        log.info(
            "generic %s#%s on %s failed: %s",
            self._ref.interface,
            self._invocation.method,
            provider.address,
            error,
        )

    def hedge_failed(self, provider: URL, error: DubboCallError) -> None:
        """A hedge of this call on ``provider`` failed outside the service's code: recorded
        as a failed attempt is, and ``provider`` is not picked again by this call's failover."""
        if provider not in self._tried:
            self._tried.append(provider)
        self._ref._record_failure(provider, error)

    def answered(self, provider: URL) -> None:
        """The attempt on ``provider`` was answered (a value or the service's exception): its
        outlier count starts again (after a hedge won for it, the hedge's stand-in is used up
        instead, as a stub's strategy does)."""
        outliers = self._ref.outliers
        if outliers.failing:
            outliers.succeeded(provider.address)

    def done(self, value: Any, provider: URL, winner: URL) -> Any:
        """The attempt on ``provider`` answered ``value`` (``winner`` the provider that did:
        another one when a hedge won): noted for ``invoke_result``."""
        self.answered(provider)
        outcome = _OUTCOME.get()
        if outcome is not None:
            request = _request_of(self._invocation)
            tried = tuple(self._tried)
            outcome.append(
                GenericResult(
                    value,
                    winner,
                    tried if winner in tried else (*tried, winner),
                    request.parameter_types,
                    request.signature_source,
                )
            )
        return value

    def error(self) -> Exception:
        """What the call raises when no attempt answered."""
        if self._last is not None:
            return self._last
        ref = self._ref
        return NoProviderError(
            ref.interface,
            self._invocation.method,
            None,
            f"no {' or '.join(sorted(f'{p}://' for p in ref._protocols))} provider of "
            f"version {ref.version or '-'}, group {ref.group or '-'} is registered",
        )


def _value_of(response: ResponseBody) -> Any:
    """A ``$invoke`` response's value; its Java exception raised as the service's."""
    if response.exception is not None:
        raise unwrap_generic_exception(response.exception)
    return response.value


def _dead(error: DubboCallError) -> bool:
    """Whether ``error`` says the provider is down (not merely slow or refusing the call):
    a ``dubbo://`` connection refused or lost, a Triple call UNAVAILABLE."""
    if isinstance(error, DubboConnectionError):
        return True
    if isinstance(error, TripleWrapperError):
        return error.code is grpc.StatusCode.UNAVAILABLE
    return False


async def _accepts(host: str, port: int) -> bool:
    """Whether ``host:port`` accepts a ``dubbo://`` connection now and answers a heartbeat
    on it within a second (a hung provider's connection is still accepted by its kernel;
    closed at once)."""
    try:
        connection = await DubboConnection.open(host, port, connect_timeout=1.0, heartbeat=0)
    except DubboConnectionError:
        return False
    try:
        await connection.ping(1.0)
    except DubboCallError:
        return False
    finally:
        await connection.close("probe done")
    return True
