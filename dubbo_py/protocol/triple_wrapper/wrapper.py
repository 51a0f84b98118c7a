"""Triple's wrapper messages for a Java interface exported without IDL (Dubbo 3.3's
``triple_wrapper.proto``, read and written as ``TripleCustomerProtocolWrapper`` does).

``TripleRequestWrapper { string serializeType = 1; repeated bytes args = 2;
repeated string argTypes = 3; }`` carries each argument serialized on its own;
``TripleResponseWrapper { string serializeType = 1; bytes data = 2; string type = 3; }`` carries
the result (or, with ``tri-exception-code`` set, the exception). Every field is length
delimited, so the protobuf wire format is written here directly: no generated module, and a
decoder that names what is wrong and where instead of trusting declared lengths.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "HESSIAN2",
    "HESSIAN4",
    "TripleRequestWrapper",
    "TripleResponseWrapper",
    "WrapperDecodeError",
]

#: What Dubbo's wrappers call Hessian2 on the wire (``TripleConstants.HESSIAN4``): a Java
#: consumer converts ``hessian2`` to ``hessian4`` when it packs, and back when it unpacks.
HESSIAN4 = "hessian4"
#: Dubbo's SPI name of the same serialization; accepted in a response too.
HESSIAN2 = "hessian2"

_LENGTH_DELIMITED = 2
_MAX_VARINT_BYTES = 5  # every length and tag here is a 32-bit varint in Dubbo's parser


class WrapperDecodeError(ValueError):
    """Bytes that are not a well-formed wrapper message: the message names what and where."""


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, data: bytes) -> bytes:
    return _varint(number << 3 | _LENGTH_DELIMITED) + _varint(len(data)) + data


def _read_varint(data: bytes, offset: int, what: str) -> tuple[int, int]:
    value = 0
    for index in range(_MAX_VARINT_BYTES):
        if offset + index >= len(data):
            raise WrapperDecodeError(f"{what} at byte {offset}: truncated varint")
        byte = data[offset + index]
        value |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            return value, offset + index + 1
    raise WrapperDecodeError(f"{what} at byte {offset}: varint longer than 32 bits")


def _fields(data: bytes, message: str, numbers: range) -> list[tuple[int, bytes]]:
    """The (field number, bytes) pairs of a message whose fields are all length delimited."""
    out: list[tuple[int, bytes]] = []
    offset = 0
    while offset < len(data):
        start = offset
        tag, offset = _read_varint(data, offset, f"{message} tag")
        number, wire_type = tag >> 3, tag & 0x07
        if wire_type != _LENGTH_DELIMITED:
            raise WrapperDecodeError(
                f"{message} field {number} at byte {start}: wire type {wire_type}, "
                "expected 2 (length delimited)"
            )
        if number not in numbers:
            raise WrapperDecodeError(f"{message} at byte {start}: unknown field {number}")
        length, offset = _read_varint(data, offset, f"{message} field {number} length")
        if length > len(data) - offset:
            raise WrapperDecodeError(
                f"{message} field {number} at byte {start}: declares {length} bytes, "
                f"{len(data) - offset} left"
            )
        out.append((number, data[offset : offset + length]))
        offset += length
    return out


def _text(raw: bytes, message: str, field: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise WrapperDecodeError(f"{message}.{field}: not UTF-8 ({error.reason})") from None


@dataclass(frozen=True, slots=True)
class TripleRequestWrapper:
    """A call's arguments, each serialized on its own, with their Java types (the provider
    picks an overloaded method by these)."""

    serialize_type: str
    args: tuple[bytes, ...] = ()
    arg_types: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, args: Sequence[bytes], arg_types: Sequence[str], serialize_type: str = HESSIAN4
    ) -> TripleRequestWrapper:
        """A request of these encoded arguments and their types."""
        return cls(serialize_type, tuple(args), tuple(arg_types))

    def encode(self) -> bytes:
        """The message's bytes, fields in the order Dubbo writes them (1, 2..., 3...)."""
        parts = [_field(1, self.serialize_type.encode("utf-8"))]
        parts.extend(_field(2, arg) for arg in self.args)
        parts.extend(_field(3, name.encode("utf-8")) for name in self.arg_types)
        return b"".join(parts)

    @classmethod
    def decode(cls, data: bytes) -> TripleRequestWrapper:
        """Parse a request; :class:`WrapperDecodeError` when the bytes are not one."""
        serialize_type = ""
        args: list[bytes] = []
        types: list[str] = []
        for number, raw in _fields(data, "TripleRequestWrapper", range(1, 4)):
            if number == 1:
                serialize_type = _text(raw, "TripleRequestWrapper", "serializeType")
            elif number == 2:
                args.append(raw)
            else:
                types.append(_text(raw, "TripleRequestWrapper", "argTypes"))
        return cls(serialize_type, tuple(args), tuple(types))


@dataclass(frozen=True, slots=True)
class TripleResponseWrapper:
    """A call's result (or exception) serialized as ``serialize_type``; ``type`` is the Java
    type the provider declared for it (the method's return type)."""

    serialize_type: str
    data: bytes | None
    type: str

    def encode(self) -> bytes:
        """The message's bytes (field 2 left out when there is no data, as Dubbo does)."""
        parts = [_field(1, self.serialize_type.encode("utf-8"))]
        if self.data is not None:
            parts.append(_field(2, self.data))
        parts.append(_field(3, self.type.encode("utf-8")))
        return b"".join(parts)

    @classmethod
    def decode(cls, data: bytes) -> TripleResponseWrapper:
        """Parse a response; :class:`WrapperDecodeError` when the bytes are not one."""
        serialize_type = ""
        body: bytes | None = None
        java_type = ""
        for number, raw in _fields(data, "TripleResponseWrapper", range(1, 4)):
            if number == 1:
                serialize_type = _text(raw, "TripleResponseWrapper", "serializeType")
            elif number == 2:
                body = raw
            else:
                java_type = _text(raw, "TripleResponseWrapper", "type")
        return cls(serialize_type, body, java_type)
