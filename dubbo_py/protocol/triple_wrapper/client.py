"""Unary calls of a Java-interface method over Triple without IDL, on ``grpc.aio``.

The call is gRPC's unary call of ``/<interface>/<method>`` whose request and response are the
wrapper messages of :mod:`.wrapper`, each argument and the result Hessian2 (``hessian4`` on the
wire), the service version and group in the ``tri-service-*`` headers and the attachments as
Triple writes them (:func:`dubbo_py.protocol.triple.to_wire`). A Java exception the provider's
method threw arrives with status OK, the header ``tri-exception-code`` (Dubbo's
``BIZ_EXCEPTION``, 3, for an exception of the method's own) and the serialized ``Throwable`` as
the response's data, as Dubbo 3.3's ``ExceptionCustomizerWrapper`` sends it.

One channel per provider address, belonging to the loop that made it (the generic references'
runtime loop).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio

from dubbo_py.protocol.dubbo.connection import DubboCallError
from dubbo_py.protocol.serialization.hessian2 import (
    Hessian2Error,
    JavaException,
    JavaObject,
    dumps,
    from_throwable,
    is_throwable,
    loads,
)
from dubbo_py.protocol.triple import Metadata, from_wire, to_wire

from .wrapper import (
    HESSIAN2,
    HESSIAN4,
    TripleRequestWrapper,
    TripleResponseWrapper,
    WrapperDecodeError,
)

__all__ = [
    "EXCEPTION_CODE",
    "TripleWrapperChannels",
    "TripleWrapperError",
    "TripleWrapperResult",
    "TripleWrapperTimeoutError",
    "invoke",
]

#: The header a provider sets when the response's data is an exception (0: none).
EXCEPTION_CODE = "tri-exception-code"


class TripleWrapperError(DubboCallError):
    """A Triple call that failed outside the provider's code: a gRPC status other than OK
    (``code``, e.g. ``UNIMPLEMENTED`` for a method the interface does not have), or a response
    that is not a well-formed wrapper of Hessian2. The caller may retry it elsewhere."""

    def __init__(self, address: str, message: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(f"{address}: {message}")
        self.address = address
        self.code = code


class TripleWrapperTimeoutError(TripleWrapperError, TimeoutError):
    """No response within the call's deadline (``DEADLINE_EXCEEDED``)."""


@dataclass(frozen=True)
class TripleWrapperResult:
    """What a call returned: the value, or the Java exception, and the provider's trailing
    attachments."""

    value: Any = None
    exception: JavaException | None = None
    attachments: Metadata = field(default_factory=tuple)


def _identity(data: bytes) -> bytes:
    return data


class TripleWrapperChannels:
    """One ``grpc.aio`` channel per provider address, opened on first use; belongs to the
    event loop that calls :meth:`get` (gRPC's asyncio channels do)."""

    def __init__(self) -> None:
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._closed = False

    def get(self, address: str) -> grpc.aio.Channel:
        """The channel to ``host:port`` (made now when there is none). Call it on the loop."""
        if self._closed:
            raise TripleWrapperError(address, "the Triple channel pool is closed")
        channel = self._channels.get(address)
        if channel is None:
            channel = grpc.aio.insecure_channel(address)
            self._channels[address] = channel
        return channel

    async def close(self) -> None:
        """Close every channel (calls in flight are cancelled)."""
        self._closed = True
        channels, self._channels = self._channels, {}
        for channel in channels.values():
            await channel.close()


def _header(metadata: Any, key: str) -> str | None:
    for name, value in metadata or ():
        if name == key:
            return value.decode("ascii", "replace") if isinstance(value, bytes) else str(value)
    return None


async def invoke(
    channel: grpc.aio.Channel,
    address: str,
    service: str,
    method: str,
    parameter_types: Sequence[str],
    arguments: Sequence[object],
    *,
    headers: Metadata = (),
    attachments: Mapping[str, str] | None = None,
    timeout: float | None = None,
    enum_classes: Collection[str] = (),
) -> TripleWrapperResult:
    """Call ``service``'s ``method`` with these arguments of these Java types over
    ``channel`` (to ``address``, named in errors). ``headers`` are the Triple service headers
    (:func:`dubbo_py.protocol.triple.service_headers`), ``attachments`` go as Triple writes
    them. Raises :class:`TripleWrapperError` for what is not the provider's answer."""
    if len(parameter_types) != len(arguments):
        raise ValueError(
            f"{service}#{method}: {len(parameter_types)} parameter types for "
            f"{len(arguments)} arguments"
        )
    request = TripleRequestWrapper.of(
        [dumps(argument) for argument in arguments], parameter_types
    ).encode()
    metadata = (*headers, *to_wire((attachments or {}).items()))
    call = channel.unary_unary(
        f"/{service}/{method}", request_serializer=_identity, response_deserializer=_identity
    )(request, metadata=metadata, timeout=timeout)
    where = f"{service}#{method} on {address}"
    try:
        data = await call
        initial = await call.initial_metadata()
        trailing = await call.trailing_metadata()
    except grpc.aio.AioRpcError as error:
        code = error.code()
        kind = (
            TripleWrapperTimeoutError
            if code is grpc.StatusCode.DEADLINE_EXCEEDED
            else TripleWrapperError
        )
        raise kind(where, f"{code.name}: {error.details()}", code) from None
    try:
        response = TripleResponseWrapper.decode(data)
    except WrapperDecodeError as error:
        raise TripleWrapperError(where, f"malformed response: {error}") from None
    if response.serialize_type not in (HESSIAN4, HESSIAN2):
        raise TripleWrapperError(
            where, f"response serialized as {response.serialize_type!r}, expected hessian2"
        )
    try:
        value = None if response.data is None else loads(response.data, enum_classes=enum_classes)
    except Hessian2Error as error:
        raise TripleWrapperError(where, f"malformed Hessian2 in the response: {error}") from None
    attachments_back = from_wire(trailing)
    code_text = _header(initial, EXCEPTION_CODE)
    if code_text is not None and code_text.strip() not in ("", "0"):
        if not isinstance(value, JavaObject) or not is_throwable(value):
            raise TripleWrapperError(
                where,
                f"{EXCEPTION_CODE} {code_text} with a {response.type or 'value'} that is not "
                "a Java Throwable",
            )
        return TripleWrapperResult(exception=from_throwable(value), attachments=attachments_back)
    return TripleWrapperResult(value=value, attachments=attachments_back)
