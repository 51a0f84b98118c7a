"""The Invocation: one call as the governance layer sees it."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = [
    "COMPRESSIONS",
    "MOCK_ATTACHMENT",
    "RETRIES_ATTACHMENT",
    "TAG_ATTACHMENT",
    "CallOptions",
    "GenericRequest",
    "Invocation",
    "field_names",
    "request_arguments",
]

#: Attachment that marks an invocation as wanting ``mock://`` providers (Dubbo's key).
MOCK_ATTACHMENT = "invocation.need.mock"
#: Attachment carrying the request tag for the tag router (Dubbo's key).
TAG_ATTACHMENT = "dubbo.tag"
#: Attachment overriding the reference's retries for one call (Dubbo reads ``retries`` from the
#: call's attachments the same way). The cluster layer consumes it; it is not sent to providers.
RETRIES_ATTACHMENT = "dubbo.retries"


def field_names(request: Any) -> tuple[str, ...] | None:
    """The top-level field names of a protobuf request in declaration order (what
    ``arguments[N]`` indexes), or ``None`` for something that is not a message."""
    message_type = type(request)
    names = _FIELD_NAMES.get(message_type)
    if names is None:
        descriptor = getattr(request, "DESCRIPTOR", None)
        if descriptor is None:
            return None
        names = _FIELD_NAMES.setdefault(message_type, tuple(f.name for f in descriptor.fields))
    return names


#: Field names per message type: reading arguments is on the per-call path of any rule that
#: reads ``arguments[N]``.
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _fields_getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    if not names:
        return lambda _request: ()
    if len(names) == 1:
        one = operator.attrgetter(names[0])
        return lambda request: (one(request),)
    getter: Callable[[Any], tuple[Any, ...]] = operator.attrgetter(*names)
    return getter


#: One C-level getter per message type: consistent hashing, shard and script rules read the
#: whole argument tuple on every call.
_GETTERS: dict[type, Callable[[Any], tuple[Any, ...]]] = {}


def request_arguments(request: Any) -> tuple[Any, ...]:
    """What ``arguments[N]`` sees for a protobuf request: its top-level fields in declaration
    order. gRPC methods take one message, so its fields play the role of Java's argument list."""
    getter = _GETTERS.get(type(request))
    if getter is None:
        names = field_names(request)
        if names is None:
            return () if request is None else (request,)
        getter = _GETTERS.setdefault(type(request), _fields_getter(names))
    return getter(request)


_NO_ATTACHMENTS: Mapping[str, str] = MappingProxyType({})

#: The compressions gRPC offers, by the names options and ``dubbo.yaml`` use (grpc.Compression
#: members by value: NoCompression 0, Deflate 1, Gzip 2).
COMPRESSIONS: Mapping[str, int] = MappingProxyType({"none": 0, "deflate": 1, "gzip": 2})


@dataclass(frozen=True, slots=True)
class CallOptions:
    """gRPC's per-call arguments besides ``timeout`` and ``metadata``, as a stub call gave them
    (``stub.Method(req, credentials=..., wait_for_ready=..., compression=...)``); each provider
    call of the invocation passes them on (:attr:`grpc_arguments`). None: not given."""

    #: ``grpc.CallCredentials``: sent with every provider call (TLS channels only).
    credentials: Any = None
    #: gRPC's wait-for-ready: an attempt waits for its provider's connection (within the
    #: call's timeout) instead of failing at once while it is not ready.
    wait_for_ready: bool | None = None
    #: ``grpc.Compression`` of the request messages.
    compression: Any = None

    def __post_init__(self) -> None:
        import grpc

        if self.credentials is not None and not isinstance(self.credentials, grpc.CallCredentials):
            raise TypeError(
                f"credentials must be grpc.CallCredentials, got {type(self.credentials).__name__}"
            )
        if self.wait_for_ready is not None and not isinstance(self.wait_for_ready, bool):
            raise TypeError(
                f"wait_for_ready must be True, False or None, got {self.wait_for_ready!r}"
            )
        if self.compression is not None and not isinstance(self.compression, grpc.Compression):
            raise TypeError(f"compression must be a grpc.Compression, got {self.compression!r}")

    @classmethod
    def of(cls, credentials: Any, wait_for_ready: Any, compression: Any) -> CallOptions | None:
        """The options of a stub call's arguments, None when none is given; TypeError for a
        value gRPC would not take."""
        if credentials is None and wait_for_ready is None and compression is None:
            return None
        return cls(credentials, wait_for_ready, compression)

    @property
    def grpc_arguments(self) -> dict[str, Any]:
        """The keyword arguments of a grpc multicallable call (only those given)."""
        out: dict[str, Any] = {}
        if self.credentials is not None:
            out["credentials"] = self.credentials
        if self.wait_for_ready is not None:
            out["wait_for_ready"] = self.wait_for_ready
        if self.compression is not None:
            out["compression"] = self.compression
        return out


@dataclass(frozen=True, slots=True)
class GenericRequest:
    """The request of a generic call (``$invoke``) as its :class:`Invocation` carries it through
    the consumer filters: the Java parameter types (None: not known yet, or none to send) and
    the arguments as Python values. Call filters see the types the caller gave; attempt filters
    and the access log see those sent (read from the metadata report when left out)."""

    parameter_types: tuple[str, ...] | None
    arguments: tuple[Any, ...]
    #: Classes whose ``{"name": ...}`` dicts are sent as Java enums.
    enum_classes: frozenset[str] = frozenset()
    #: Where the parameter types were read, when the metadata report gave them.
    signature_source: str = ""


@dataclass(frozen=True, eq=False, init=False, slots=True)
class Invocation:
    """One call: service (protobuf full name), method, request, attachments and timeout.

    ``arguments`` defaults to :func:`request_arguments` of the request and is computed only when
    a router reads it; pass ``explicit_arguments`` (as ``route test`` does) to override.
    """

    service: str
    method: str
    request: Any
    attachments: Mapping[str, str]
    timeout: float | None
    explicit_arguments: tuple[Any, ...] | None
    #: gRPC's per-call arguments given to the stub call (None: none given).
    options: CallOptions | None
    _arguments: tuple[Any, ...] | None = field(init=False, repr=False)

    # Written out rather than generated: one Invocation is built per call, and the generated
    # frozen __init__ plus a __post_init__ cost two Python frames where this costs one.
    def __init__(
        self,
        service: str,
        method: str,
        request: Any = None,
        attachments: Mapping[str, str] = _NO_ATTACHMENTS,
        timeout: float | None = None,
        explicit_arguments: tuple[Any, ...] | None = None,
        options: CallOptions | None = None,
    ) -> None:
        setattr_ = object.__setattr__
        setattr_(self, "service", service)
        setattr_(self, "method", method)
        setattr_(self, "request", request)
        if type(attachments) is not MappingProxyType:
            attachments = MappingProxyType(dict(attachments))
        setattr_(self, "attachments", attachments)
        setattr_(self, "timeout", timeout)
        setattr_(self, "explicit_arguments", explicit_arguments)
        setattr_(self, "options", options)
        setattr_(self, "_arguments", explicit_arguments)

    @property
    def arguments(self) -> tuple[Any, ...]:
        """The call's arguments as condition and shard rules see them (``arguments[N]``),
        computed on first use and kept."""
        cached = self._arguments
        if cached is None:
            cached = request_arguments(self.request)
            object.__setattr__(self, "_arguments", cached)
        return cached

    @property
    def wants_mock(self) -> bool:
        """True when the caller asked for ``mock://`` providers."""
        return self.attachments.get(MOCK_ATTACHMENT, "").lower() == "true"
