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
    "request_arguments",
]

#: Attachment that marks an invocation as wanting ``mock://`` providers (Dubbo's key).
MOCK_ATTACHMENT = "invocation.need.mock"
#: Attachment carrying the request tag for the tag router (Dubbo's key).
TAG_ATTACHMENT = "dubbo.tag"
#: Attachment overriding the reference's retries for one call (Dubbo reads ``retries`` from the
#: call's attachments the same way). The cluster layer consumes it; it is not sent to providers.
RETRIES_ATTACHMENT = "dubbo.retries"


def _fields_getter(descriptor: Any) -> Callable[[Any], tuple[Any, ...]]:
    names = tuple(f.name for f in descriptor.fields)
    if not names:
        return lambda _request: ()
    if len(names) == 1:
        one = operator.attrgetter(names[0])
        return lambda request: (one(request),)
    getter: Callable[[Any], tuple[Any, ...]] = operator.attrgetter(*names)
    return getter


#: One C-level getter per message type: reading arguments is on the per-call path of any rule
#: that reads ``arguments[N]``.
_GETTERS: dict[Any, Callable[[Any], tuple[Any, ...]]] = {}


def request_arguments(request: Any) -> tuple[Any, ...]:
    """What ``arguments[N]`` sees for a protobuf request: its top-level fields in declaration
    order. gRPC methods take one message, so its fields play the role of Java's argument list."""
    descriptor = getattr(request, "DESCRIPTOR", None)
    if descriptor is None:
        return () if request is None else (request,)
    getter = _GETTERS.get(descriptor)
    if getter is None:
        getter = _GETTERS.setdefault(descriptor, _fields_getter(descriptor))
    return getter(request)


@dataclass(frozen=True, eq=False)
class Invocation:
    """One call: service (protobuf full name), method, request, attachments and timeout.

    ``arguments`` defaults to :func:`request_arguments` of the request and is computed only when
    a router reads it; pass it explicitly (as ``route test`` does) to override.
    """

    service: str
    method: str
    request: Any = None
    attachments: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = None
    explicit_arguments: tuple[Any, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.attachments, MappingProxyType):
            object.__setattr__(self, "attachments", MappingProxyType(dict(self.attachments)))

    @property
    def arguments(self) -> tuple[Any, ...]:
        """The call's arguments as condition and shard rules see them (``arguments[N]``),
        computed on first use and kept."""
        # Kept by hand rather than with functools.cached_property, which takes a lock on every
        # first access before Python 3.12 -- that is once per call here.
        cached: tuple[Any, ...] | None = self.__dict__.get("_arguments")
        if cached is None:
            if self.explicit_arguments is not None:
                cached = self.explicit_arguments
            else:
                cached = request_arguments(self.request)
            object.__setattr__(self, "_arguments", cached)
        return cached

    @property
    def wants_mock(self) -> bool:
        """True when the caller asked for ``mock://`` providers."""
        return self.attachments.get(MOCK_ATTACHMENT, "").lower() == "true"
