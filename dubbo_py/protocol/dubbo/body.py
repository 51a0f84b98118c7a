"""The bodies of ``dubbo://`` requests and responses, in Hessian2, as Dubbo's ``DubboCodec``
writes them.

A request: the Dubbo protocol version, the service's interface, its version, the method, the
parameter types as JVM descriptors (``Ljava/lang/String;J``), each argument, and the
attachments map. A response: a flag (value, null or exception, each with or without
attachments), the value or the exception, then the attachments when the flag says so.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from ..serialization.hessian2 import (
    Hessian2Decoder,
    Hessian2Encoder,
    JavaException,
    JavaObject,
    from_throwable,
    is_throwable,
)
from ..serialization.hessian2.errors import Hessian2DecodeError

#: The protocol version dubbo-py sends (Dubbo 3.3 sends the same; it enables response attachments).
DUBBO_VERSION = "2.0.2"

_PRIMITIVES = {
    "boolean": "Z",
    "byte": "B",
    "char": "C",
    "short": "S",
    "int": "I",
    "long": "J",
    "float": "F",
    "double": "D",
    "void": "V",
}

#: Hessian2's null (``N``): the one byte dubbo-go writes after a response's last value.
_HESSIAN_NULL = 0x4E


class ResponseFlag(IntEnum):
    """The first value of a response body (``DubboCodec.RESPONSE_*``)."""

    WITH_EXCEPTION = 0
    VALUE = 1
    NULL_VALUE = 2
    WITH_EXCEPTION_WITH_ATTACHMENTS = 3
    VALUE_WITH_ATTACHMENTS = 4
    NULL_VALUE_WITH_ATTACHMENTS = 5


class DubboBodyError(ValueError):
    """A request or response body that does not read as Dubbo writes it."""


def descriptor(java_type: str) -> str:
    """The JVM descriptor of a Java type name: ``int`` -> ``I``, ``java.lang.String`` ->
    ``Ljava/lang/String;``, ``long[]`` or ``[J`` -> ``[J``, ``[Ljava.lang.String;`` ->
    ``[Ljava/lang/String;``."""
    name = java_type.strip()
    if not name:
        raise DubboBodyError("an empty parameter type")
    if name.startswith("["):
        return name.replace(".", "/")  # already a binary array name, as Class.getName() gives
    if name.endswith("[]"):
        return "[" + descriptor(name[:-2])
    if name in _PRIMITIVES:
        return _PRIMITIVES[name]
    return "L" + name.replace(".", "/") + ";"


def parameter_types_desc(java_types: Sequence[str]) -> str:
    """The parameter types of a method as Dubbo sends them: descriptors run together."""
    return "".join(descriptor(t) for t in java_types)


@functools.lru_cache(maxsize=1024)
def _request_head(
    dubbo_version: str, service: str, version: str, method: str, parameter_types: tuple[str, ...]
) -> bytes:
    """The first five values of a request body (strings: their bytes depend on the texts
    alone, no encoder state), encoded once per service, version, method and types."""
    out = Hessian2Encoder()
    for text in (dubbo_version, service, version, method, parameter_types_desc(parameter_types)):
        out.write(text)
    return out.getvalue()


def encode_request_body(
    service: str,
    method: str,
    parameter_types: Sequence[str],
    arguments: Sequence[object],
    *,
    version: str = "0.0.0",
    attachments: Mapping[str, object] | None = None,
    dubbo_version: str = DUBBO_VERSION,
) -> bytes:
    """A request's body: one Hessian2 stream, as ``DubboCodec.encodeRequestData`` writes it."""
    if len(parameter_types) != len(arguments):
        raise DubboBodyError(
            f"{method} takes {len(parameter_types)} parameters, {len(arguments)} arguments given"
        )
    out = Hessian2Encoder()
    out.write_encoded(
        _request_head(dubbo_version, service, version, method, tuple(parameter_types))
    )
    for argument in arguments:
        out.write(argument)
    items = tuple(attachments.items()) if attachments else ()
    try:
        encoded = _string_map(items)
    except TypeError:  # a value that cannot be hashed (so not a string): written as it is
        encoded = None
    if encoded is None:
        out.write(dict(items))
    else:
        out.write_encoded(encoded, references=1)
    return out.getvalue()


@functools.lru_cache(maxsize=1024)
def _string_map(items: tuple[tuple[object, object], ...]) -> bytes | None:
    """The Hessian2 bytes of attachments whose keys and values are all strings (a request's
    usually are, the same on every call of a reference), encoded once; None otherwise."""
    for key, value in items:
        if type(key) is not str or type(value) is not str:
            return None
    out = Hessian2Encoder()
    out.write(dict(items))
    return out.getvalue()


@dataclass
class ResponseBody:
    """What a response carried: a value, or the Java exception, and the attachments."""

    value: Any = None
    exception: JavaException | None = None
    attachments: dict[str, Any] = field(default_factory=dict)


def encode_response_body(
    value: object = None,
    *,
    exception: JavaObject | None = None,
    attachments: Mapping[str, object] | None = None,
) -> bytes:
    """A response's body (with attachments, as Dubbo answers a 2.0.2 request)."""
    out = Hessian2Encoder()
    if exception is not None:
        out.write(int(ResponseFlag.WITH_EXCEPTION_WITH_ATTACHMENTS))
        out.write(exception)
    elif value is None:
        out.write(int(ResponseFlag.NULL_VALUE_WITH_ATTACHMENTS))
    else:
        out.write(int(ResponseFlag.VALUE_WITH_ATTACHMENTS))
        out.write(value)
    out.write(dict(attachments or {}))
    return out.getvalue()


_FLAGS = frozenset(int(flag) for flag in ResponseFlag)
_EXCEPTION_FLAGS = (ResponseFlag.WITH_EXCEPTION, ResponseFlag.WITH_EXCEPTION_WITH_ATTACHMENTS)
_VALUE_FLAGS = (ResponseFlag.VALUE, ResponseFlag.VALUE_WITH_ATTACHMENTS)


def decode_response_body(body: bytes, *, enum_classes: Collection[str] = ()) -> ResponseBody:
    """A response's body read; a malformed one raises Hessian2DecodeError or DubboBodyError.

    One Hessian null after the last value (dubbo-go writes it) is accepted and ignored; any other
    trailing bytes are refused, with the offset where they start."""
    decoder = Hessian2Decoder(body, enum_classes=enum_classes)
    flag = decoder.read()
    # Compared as plain ints: building the enum member per response costs more than the rest.
    if type(flag) is not int or flag not in _FLAGS:
        raise DubboBodyError(f"response flag {flag!r} is none of Dubbo's (0-5)")
    result = ResponseBody()
    if flag in _EXCEPTION_FLAGS:
        thrown = decoder.read()
        if not is_throwable(thrown):
            raise DubboBodyError(
                f"the response says exception but carries a {type(thrown).__name__}"
                + (f" ({thrown.java_class})" if isinstance(thrown, JavaObject) else "")
            )
        assert isinstance(thrown, JavaObject)
        result.exception = from_throwable(thrown)
    elif flag in _VALUE_FLAGS:
        result.value = decoder.read()
    if flag >= ResponseFlag.WITH_EXCEPTION_WITH_ATTACHMENTS:
        attachments = decoder.read()
        if not isinstance(attachments, dict):
            raise DubboBodyError(f"response attachments are a {type(attachments).__name__}")
        result.attachments = dict(attachments)
    rest = len(body) - decoder.offset
    # dubbo-go 3.3.2 (hessian2 packResponse) appends one Hessian null after every response
    # body, "if not, java client will throw exception unexpected end of file"; Java Dubbo never
    # reads it (DecodeableRpcResult stops after the attachments). That one byte is accepted,
    # anything else after the last value is refused: it is not Dubbo's body.
    if rest and not (rest == 1 and body[-1] == _HESSIAN_NULL):
        raise Hessian2DecodeError(f"{rest} bytes after the response's last value", decoder.offset)
    return result
