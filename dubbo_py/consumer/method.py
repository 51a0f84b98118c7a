"""What both consumer flavours know about one stub method, without any I/O.

A generated stub asks its channel for one multicallable per method (``unary_unary(path,
request_serializer, response_deserializer)`` and so on). :class:`StubMethod` is that request as
a frozen value: the path split into service and method, the (de)serializers and the
cardinality. :class:`InvokerBase` is what the blocking
(:class:`~dubbo_py.consumer.invoker.MethodInvoker`) and asyncio
(:class:`~dubbo_py.consumer.invoker.AsyncMethodInvoker`) provider calls share: the spec, who
calls, and the method's empty answers. Only the calls themselves differ between the flavours
(httpx's Client/AsyncClient split: one I/O-free core, two thin I/O shells).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from dubbo_py.consumer.in_flight import CallsInFlight
from dubbo_py.invocation import CallOptions, Invocation
from dubbo_py.protocol.attachments import attachments_from_metadata
from dubbo_py.protocol.triple import CallMetadata, TripleCaller

if TYPE_CHECKING:
    from dubbo_py.cluster.plan import CallHook
    from dubbo_py.cluster.support.context import ClusterContext

__all__ = [
    "BoundMethod",
    "CallSite",
    "InvokerBase",
    "MethodBinder",
    "MethodFactories",
    "StubChannel",
    "StubMethod",
]

#: The call of a bound method: blocking or awaited.
C = TypeVar("C")
#: What a channel hands a stub per method.
M = TypeVar("M")
#: Call metadata as gRPC takes it.


@dataclass(frozen=True, slots=True)
class StubMethod:
    """One method as a generated stub asks its channel for it."""

    #: The gRPC path, ``/<package.Service>/<Method>``.
    path: str
    request_serializer: Callable[[Any], bytes] | None = None
    response_deserializer: Callable[[bytes], Any] | None = None
    request_streaming: bool = False
    response_streaming: bool = False

    @property
    def service(self) -> str:
        """The proto service's full name (``demo.Greeter``)."""
        return self.path.lstrip("/").partition("/")[0]

    @property
    def name(self) -> str:
        """The method's name (``SayHello``)."""
        return self.path.lstrip("/").partition("/")[2]

    @property
    def factory_name(self) -> str:
        """The gRPC channel method that makes its multicallable (``unary_stream`` ...)."""
        return (
            f"{'stream' if self.request_streaming else 'unary'}_"
            f"{'stream' if self.response_streaming else 'unary'}"
        )

    def multicallable(self, channel: Any) -> Any:
        """The method's multicallable on a gRPC ``channel``, blocking or ``grpc.aio``
        (registered with the channel, as generated stubs do)."""
        return getattr(channel, self.factory_name)(
            self.path,
            request_serializer=self.request_serializer,
            response_deserializer=self.response_deserializer,
            _registered_method=True,
        )

    def empty_response(self) -> Any:
        """The method's response message with no fields set (None without a deserializer)."""
        deserialize = self.response_deserializer
        return deserialize(b"") if deserialize is not None else None

    def response_type(self) -> type | None:
        """The response message's class (what a mock answers with), None when unknown."""
        empty = self.empty_response()
        return None if empty is None else type(empty)


class InvokerBase:
    """The part of a provider call both flavours share: which method, who calls (the Triple
    headers), and what a failed call answers under ``failsafe``. Subclasses add the call and
    the cache of gRPC callables it uses (:meth:`forget` drops entries of gone providers)."""

    def __init__(self, spec: StubMethod, caller: TripleCaller | None = None) -> None:
        #: The method this invoker calls.
        self.spec = spec
        self._caller = caller or TripleCaller()

    @property
    def plain(self) -> bool:
        """True when a call is the provider's cached callable alone -- unary request and
        response, one set of headers per provider address -- so a call plan may call the
        invoker's ``multicallables`` directly
        (:class:`~dubbo_py.cluster.support.context.PlainCall`)."""
        spec = self.spec
        return (
            not spec.request_streaming
            and not spec.response_streaming
            and not self._caller.several_targets
        )

    @property
    def response_streaming(self) -> bool:
        """Whether the method answers with a stream of responses."""
        return self.spec.response_streaming

    @property
    def request_streaming(self) -> bool:
        """Whether the method takes a stream of requests."""
        return self.spec.request_streaming

    def empty_response(self) -> Any:
        """The method's response message with no fields set."""
        return self.spec.empty_response()

    def failsafe_response(self) -> Any:
        """What ``failsafe`` answers a failed call with: the empty response message, or no
        responses at all for a server-streaming method (in the flavour's kind of stream)."""
        if self.spec.response_streaming:
            return self.no_responses()
        return self.spec.empty_response()

    def no_responses(self) -> Any:
        """An empty stream of responses, as this flavour's callers iterate over it."""
        raise NotImplementedError

    def forget(self, addresses: Iterable[str]) -> None:
        """Drop whatever is cached for these provider addresses."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class BoundMethod(Generic[C]):
    """One stub method wired into its reference's stack (what a channel's multicallable
    runs): the cluster context the strategy reads, and ``call``, the strategy with the
    method's call filters around it (:mod:`dubbo_py.consumer.filters`), blocking or awaited."""

    spec: StubMethod
    context: ClusterContext
    call: C
    #: True when ``call`` is plain failover, so the blocking flavour may run a compiled call
    #: plan in its place (:mod:`dubbo_py.cluster.plan`).
    plannable: bool = False
    #: The plan hooks of the method's call filters, outermost first, which a plan runs in
    #: their place (every call filter has one when ``plannable``).
    hooks: tuple[CallHook, ...] = ()
    #: The reference's calls in flight, counted so that closing the application lets them
    #: finish (:mod:`dubbo_py.consumer.in_flight`).
    in_flight: CallsInFlight = field(default_factory=CallsInFlight)


class MethodBinder(Protocol[C]):
    """Wires stub methods into a reference's stack (a
    :class:`~dubbo_py.consumer.assembly.ReferenceAssembly`); what a cluster channel asks when a
    stub asks it for a multicallable."""

    def bind(self, method: StubMethod) -> BoundMethod[C]:
        """The method's context and call."""
        ...


def _factory(request_streaming: bool, response_streaming: bool, doc: str) -> Callable[..., Any]:
    def make(
        self: MethodFactories[Any],
        method: str,
        request_serializer: Callable[[Any], bytes] | None = None,
        response_deserializer: Callable[[bytes], Any] | None = None,
        _registered_method: bool | None = False,
    ) -> Any:
        spec = StubMethod(
            method, request_serializer, response_deserializer, request_streaming, response_streaming
        )
        return self._multicallable(spec)

    make.__doc__ = doc
    return make


class MethodFactories(Generic[M]):
    """The four multicallable factories a generated stub calls (``unary_unary`` ...), each
    making a :class:`StubMethod` for :meth:`_multicallable`: what every channel a stub can be
    built on shares. The extra argument newer grpcio passes (``_registered_method``) is
    accepted and unused."""

    def _multicallable(self, method: StubMethod) -> M:
        raise NotImplementedError

    unary_unary = _factory(False, False, "A multicallable for a unary method.")
    unary_stream = _factory(False, True, "A multicallable for a server-streaming method.")
    stream_unary = _factory(True, False, "A multicallable for a client-streaming method.")
    stream_stream = _factory(True, True, "A multicallable for a bidirectional method.")


class StubChannel(MethodFactories[M], Generic[C, M]):
    """What both flavours' cluster channels share: built from the reference's ``binder``
    (which wires each method a stub asks for), the ``attachments`` every call carries, and
    ``on_close`` (closes the provider channels); the factories are :class:`MethodFactories`'."""

    def __init__(
        self,
        binder: MethodBinder[C],
        attachments: Mapping[str, str] | None = None,
        on_close: Callable[[], Any] | None = None,
    ) -> None:
        self._binder = binder
        #: Attachments every call carries (read-only; call metadata is added per call).
        self.attachments: Mapping[str, str] = MappingProxyType(dict(attachments or {}))
        self._on_close = on_close


class CallSite:
    """What both flavours' multicallables share: which method, the reference's attachments,
    and how a call's arguments become an :class:`~dubbo_py.invocation.Invocation`."""

    def __init__(self, bound: BoundMethod[Any], attachments: Mapping[str, str]) -> None:
        spec = bound.spec
        self._service = spec.service
        self._method = spec.name
        self._streaming = spec.response_streaming
        self._context = bound.context
        #: Attachments every call carries (read-only; call metadata is added per call).
        self._attachments = attachments

    def _invocation(
        self,
        request: Any,
        timeout: float | None,
        metadata: CallMetadata,
        options: CallOptions | None = None,
    ) -> Invocation:
        # Without call metadata the channel's read-only attachments go as they are (no copy);
        # with it, -bin values are decoded so they reach the provider unchanged.
        attachments = self._attachments
        if metadata:
            attachments = {**attachments, **attachments_from_metadata(metadata)}
        return Invocation(self._service, self._method, request, attachments, timeout, None, options)
