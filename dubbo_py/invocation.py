"""The Invocation: one call as the governance layer sees it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
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


def request_arguments(request: Any) -> tuple[Any, ...]:
    """What ``arguments[N]`` sees for a protobuf request: its top-level fields in declaration
    order. gRPC methods take one message, so its fields play the role of Java's argument list."""
    descriptor = getattr(request, "DESCRIPTOR", None)
    if descriptor is None:
        return () if request is None else (request,)
    return tuple(getattr(request, f.name) for f in descriptor.fields)


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

    @cached_property
    def arguments(self) -> tuple[Any, ...]:
        """The call's arguments as condition and shard rules see them (``arguments[N]``)."""
        if self.explicit_arguments is not None:
            return self.explicit_arguments
        return request_arguments(self.request)

    @property
    def wants_mock(self) -> bool:
        """True when the caller asked for ``mock://`` providers."""
        return self.attachments.get(MOCK_ATTACHMENT, "").lower() == "true"
