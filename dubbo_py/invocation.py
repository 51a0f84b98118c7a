"""The Invocation: one call as the governance layer sees it."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = [
    "MOCK_ATTACHMENT",
    "RETRIES_ATTACHMENT",
    "TAG_ATTACHMENT",
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
