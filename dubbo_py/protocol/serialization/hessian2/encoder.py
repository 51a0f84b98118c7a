"""Python values to Hessian2 bytes, in the forms Java's hessian-lite writes and reads."""

from __future__ import annotations

import functools
import math
import re
import struct
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from .errors import Hessian2EncodeError
from .types import (
    JavaBigInteger,
    JavaInstant,
    JavaLocalDateTime,
    JavaLong,
    JavaObject,
    TypedList,
    TypedMap,
)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)
_NON_BMP = re.compile("[\U00010000-\U0010ffff]")
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
#: Chunk size of long strings (in UTF-16 units) and binaries (in bytes), as Java writes them.
CHUNK = 0x8000
#: The Java type a Python set is sent as.
SET_TYPE = "java.util.HashSet"
BIG_DECIMAL = "java.math.BigDecimal"
BIG_INTEGER = "java.math.BigInteger"
UUID_CLASS = "java.util.UUID"
#: How hessian-lite sends java.time values: objects of these "handle" classes.
JAVA8 = "com.alibaba.com.caucho.hessian.io.java8."
LOCAL_DATE = JAVA8 + "LocalDateHandle"
LOCAL_TIME = JAVA8 + "LocalTimeHandle"
LOCAL_DATE_TIME = JAVA8 + "LocalDateTimeHandle"
INSTANT = JAVA8 + "InstantHandle"
DURATION = JAVA8 + "DurationHandle"
_SECOND = timedelta(seconds=1)

#: Strings up to this length are encoded once and their bytes reused (:func:`_short_string`).
_CACHED_LENGTH = 128


@functools.lru_cache(maxsize=4096)
def _short_string(value: str) -> bytes:
    """A short string's Hessian2 bytes. A request repeats the same texts on every call (the
    service, method and version, the attachments' keys and most of their values), and a
    Hessian2 string's bytes depend on its text alone (strings have no back references), so
    they are encoded once; the cache is bounded and keeps the texts used most recently."""
    encoder = Hessian2Encoder()
    encoder._string(value)
    return bytes(encoder._out)


_pack_i = struct.Struct(">i").pack
_pack_q = struct.Struct(">q").pack
_pack_d = struct.Struct(">d").pack
_pack_H = struct.Struct(">H").pack
_pack_h = struct.Struct(">h").pack


def _surrogates(match: re.Match[str]) -> str:
    code = ord(match.group()) - 0x10000
    return chr(0xD800 + (code >> 10)) + chr(0xDC00 + (code & 0x3FF))


class Hessian2Encoder:
    """Writes values one after another into one Hessian2 stream.

    Class definitions, type names and references are shared by all values written to one
    encoder, as in Java's ``Hessian2Output`` (Dubbo writes a request's version, path, method,
    parameter types and arguments to one stream).
    """

    def __init__(self) -> None:
        self._out = bytearray()
        self._refs: dict[int, int] = {}
        self._ref_count = 0
        # The values referred to are kept alive so that their ids cannot be reused meanwhile.
        self._keep: list[object] = []
        self._classes: dict[tuple[str, tuple[str, ...]], int] = {}
        self._types: dict[str, int] = {}

    def getvalue(self) -> bytes:
        """The bytes written so far."""
        return bytes(self._out)

    def write_encoded(self, data: bytes, *, references: int = 0) -> None:
        """Append values already encoded that define no classes or types and refer to no
        earlier value (strings, numbers, untyped maps of them ...), as :func:`dumps` gives
        them; ``references`` is how many lists, maps or objects they hold, which Java's
        reference numbering counts."""
        self._out += data
        self._ref_count += references

    def write(self, value: object) -> None:
        """Append one value."""
        out = self._out
        kind = type(value)
        if kind is str:  # most values of a request (names, attachments) come first
            self.write_string(value)  # type: ignore[arg-type]
        elif kind is dict or kind is TypedList or kind is list:
            # The containers of a request (its attachments, $invoke's arrays) by their exact
            # type, before the scalar checks below; subclasses take the general path.
            if not self._write_ref(value):
                if kind is dict:
                    self._map(value, None)  # type: ignore[arg-type]
                else:
                    self._list_items(value, getattr(value, "java_type", None))  # type: ignore[arg-type]
        elif value is None:
            out.append(0x4E)
        elif value is True:
            out.append(0x54)
        elif value is False:
            out.append(0x46)
        elif isinstance(value, JavaLong):
            self.write_long(int(value))
        elif isinstance(value, JavaBigInteger):
            self.write_big_integer(int(value))
        elif isinstance(value, int):
            if _INT32[0] <= value <= _INT32[1]:
                self.write_int(value)
            elif _INT64[0] <= value <= _INT64[1]:
                self.write_long(value)
            else:
                self.write_big_integer(value)
        elif isinstance(value, float):
            self.write_double(value)
        elif isinstance(value, str):
            self.write_string(value)
        elif isinstance(value, (bytes, bytearray, memoryview)):
            self.write_binary(bytes(value))
        elif isinstance(value, JavaLocalDateTime):
            self._value_object(LOCAL_DATE_TIME, ("date", "time"))
            self._local_date(value.date())
            self._local_time(value.time())
        elif isinstance(value, JavaInstant):
            moment: datetime = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
            seconds, rest = divmod(moment - EPOCH, _SECOND)
            self._value_object(INSTANT, ("seconds", "nanos"))
            self.write_long(seconds)
            self.write_int(rest.microseconds * 1000)
        elif isinstance(value, datetime):
            self.write_date(value)
        elif isinstance(value, date):
            self._local_date(value)
        elif isinstance(value, time):
            self._local_time(value)
        elif isinstance(value, timedelta):
            seconds, rest = divmod(value, _SECOND)
            self._value_object(DURATION, ("seconds", "nanos"))
            self.write_long(seconds)
            self.write_int(rest.microseconds * 1000)
        elif isinstance(value, Decimal):
            self.write_decimal(value)
        elif isinstance(value, UUID):
            self._value_object(UUID_CLASS, ("value",))
            self.write_string(str(value))
        elif self._write_ref(value):
            return
        elif isinstance(value, TypedList):
            self._list(value, value.java_type)
        elif isinstance(value, (list, tuple)):
            self._list(value, None)
        elif isinstance(value, (set, frozenset)):
            self._list(value, SET_TYPE)
        elif isinstance(value, TypedMap):
            self._map(value, value.java_type)
        elif isinstance(value, dict):
            self._map(value, None)
        elif isinstance(value, JavaObject):
            self.write_object(value.java_class, value.fields)
        else:
            raise Hessian2EncodeError(
                f"no Hessian2 form for a Python {type(value).__name__}: send a dict, a "
                "JavaObject or one of the types in docs/java-services.md"
            )

    def _write_ref(self, value: object) -> bool:
        index = self._refs.get(id(value))
        if index is not None:
            self._out.append(0x51)
            self.write_int(index)
            return True
        self._refs[id(value)] = self._ref_count
        self._ref_count += 1
        self._keep.append(value)
        return False

    def write_int(self, value: int) -> None:
        """A Java ``int`` in its shortest form."""
        out = self._out
        if -16 <= value <= 47:
            out.append(0x90 + value)
        elif -2048 <= value <= 2047:
            out += bytes((0xC8 + (value >> 8), value & 0xFF))
        elif -262144 <= value <= 262143:
            out += bytes((0xD4 + (value >> 16), (value >> 8) & 0xFF, value & 0xFF))
        elif _INT32[0] <= value <= _INT32[1]:
            out.append(0x49)
            out += _pack_i(value)
        else:
            raise Hessian2EncodeError(f"{value} does not fit a Java int")

    def write_long(self, value: int) -> None:
        """A Java ``long`` in its shortest form."""
        out = self._out
        if -8 <= value <= 15:
            out.append(0xE0 + value)
        elif -2048 <= value <= 2047:
            out += bytes((0xF8 + (value >> 8), value & 0xFF))
        elif -262144 <= value <= 262143:
            out += bytes((0x3C + (value >> 16), (value >> 8) & 0xFF, value & 0xFF))
        elif _INT32[0] <= value <= _INT32[1]:
            out.append(0x59)
            out += _pack_i(value)
        elif _INT64[0] <= value <= _INT64[1]:
            out.append(0x4C)
            out += _pack_q(value)
        else:
            raise Hessian2EncodeError(
                f"{value} does not fit a Java long (send a Decimal for a BigDecimal)"
            )

    def write_double(self, value: float) -> None:
        """A Java ``double`` in its shortest exact form (-0.0 keeps its sign: the full form)."""
        out = self._out
        if value.is_integer():
            if value == 0.0:
                if math.copysign(1.0, value) > 0:
                    out.append(0x5B)
                    return
            else:
                as_int = int(value)
                if as_int == 1:
                    out.append(0x5C)
                    return
                if -128 <= as_int <= 127:
                    out += bytes((0x5D, as_int & 0xFF))
                    return
                if -32768 <= as_int <= 32767:
                    out.append(0x5E)
                    out += _pack_h(as_int)
                    return
        if math.isfinite(value) and abs(value) < 2_000_000:
            mills = int(value * 1000)  # truncated toward zero, as Java's (int) cast
            if 0.001 * mills == value and mills != 0:
                out.append(0x5F)
                out += _pack_i(mills)
                return
        out.append(0x44)
        out += _pack_d(value)

    def write_date(self, value: datetime) -> None:
        """A ``java.util.Date``: milliseconds since the epoch (a naive datetime is taken as UTC)."""
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        millis = (value - EPOCH) // _MILLISECOND
        out = self._out
        if millis % 60000 == 0 and _INT32[0] <= millis // 60000 <= _INT32[1]:
            out.append(0x4B)
            out += _pack_i(millis // 60000)
        else:
            out.append(0x4A)
            out += _pack_q(millis)

    def write_string(self, value: str) -> None:
        """A string: UTF-16 units, each in UTF-8, as Java writes them; chunked when long."""
        if len(value) <= _CACHED_LENGTH:
            self._out += _short_string(value)
            return
        self._string(value)

    def _string(self, value: str) -> None:
        if value.isascii():
            units = value
            data = value.encode("ascii")
        else:
            units = _NON_BMP.sub(_surrogates, value)
            data = b""
        length = len(units)
        out = self._out
        offset = 0
        while length - offset > CHUNK:
            end = offset + CHUNK
            if 0xD800 <= ord(units[end - 1]) <= 0xDBFF:
                end -= 1  # a chunk does not end between the halves of a surrogate pair
            out.append(0x52)
            out += _pack_H(end - offset)
            out += units[offset:end].encode("utf-8", "surrogatepass")
            offset = end
        rest = length - offset
        if offset or not data:
            data = units[offset:].encode("utf-8", "surrogatepass")
        if rest <= 31:
            out.append(rest)
        elif rest <= 1023:
            out += bytes((0x30 + (rest >> 8), rest & 0xFF))
        else:
            out.append(0x53)
            out += _pack_H(rest)
        out += data

    def write_binary(self, value: bytes) -> None:
        """A ``byte[]``, chunked when long."""
        out = self._out
        offset = 0
        length = len(value)
        while length - offset > CHUNK:
            out.append(0x41)
            out += _pack_H(CHUNK)
            out += value[offset : offset + CHUNK]
            offset += CHUNK
        rest = length - offset
        if rest <= 15:
            out.append(0x20 + rest)
        elif rest <= 1023:
            out += bytes((0x34 + (rest >> 8), rest & 0xFF))
        else:
            out.append(0x42)
            out += _pack_H(rest)
        out += value[offset:]

    def write_decimal(self, value: Decimal) -> None:
        """A ``java.math.BigDecimal``: an object with one field, ``value``, its string form."""
        if not value.is_finite():
            raise Hessian2EncodeError(f"{value} has no java.math.BigDecimal form")
        self._value_object(BIG_DECIMAL, ("value",))
        self.write_string(str(value))

    def write_big_integer(self, value: int) -> None:
        """A ``java.math.BigInteger``: its ``signum`` and ``mag`` fields (big-endian int words).

        The fields Java caches (bit counts ...) are left out: Java reads them as "not computed".
        """
        magnitude = abs(value)
        words = []
        while magnitude:
            word = magnitude & 0xFFFFFFFF
            words.append(word - (1 << 32) if word >= 1 << 31 else word)
            magnitude >>= 32
        words.reverse()
        self._value_object(BIG_INTEGER, ("signum", "mag"))
        self.write_int((value > 0) - (value < 0))
        self._ref_count += 1  # the int[] is an object of its own in Java's count
        self._list_items(words, "[int")

    def _value_object(self, java_class: str, fields: tuple[str, ...]) -> None:
        # A value Python holds immutably: never shared by reference, but Java counts it.
        self._ref_count += 1
        self._begin_object(java_class, fields)

    def _local_date(self, value: date) -> None:
        self._value_object(LOCAL_DATE, ("year", "month", "day"))
        self.write_int(value.year)
        self.write_int(value.month)
        self.write_int(value.day)

    def _local_time(self, value: time) -> None:
        self._value_object(LOCAL_TIME, ("hour", "minute", "second", "nano"))
        self.write_int(value.hour)
        self.write_int(value.minute)
        self.write_int(value.second)
        self.write_int(value.microsecond * 1000)

    def write_type(self, java_type: str) -> None:
        """A list's or map's type: the name the first time, its index afterwards."""
        index = self._types.get(java_type)
        if index is None:
            self._types[java_type] = len(self._types)
            self.write_string(java_type)
        else:
            self.write_int(index)

    def _list(self, items: Iterable[Any], java_type: str | None) -> None:
        self._list_items(items if isinstance(items, (list, tuple)) else list(items), java_type)

    def _list_items(self, values: list[Any] | tuple[Any, ...], java_type: str | None) -> None:
        length = len(values)
        out = self._out
        if java_type is None:
            if length <= 7:
                out.append(0x78 + length)
            else:
                out.append(0x58)
                self.write_int(length)
        else:
            if length <= 7:
                out.append(0x70 + length)
                self.write_type(java_type)
            else:
                out.append(0x56)
                self.write_type(java_type)
                self.write_int(length)
        for item in values:
            self.write(item)

    def _map(self, items: Mapping[Any, Any], java_type: str | None) -> None:
        out = self._out
        if java_type is None:
            out.append(0x48)
        else:
            out.append(0x4D)
            self.write_type(java_type)
        for key, item in items.items():
            self.write(key)
            self.write(item)
        out.append(0x5A)

    def _begin_object(self, java_class: str, fields: tuple[str, ...]) -> None:
        key = (java_class, fields)
        index = self._classes.get(key)
        out = self._out
        if index is None:
            index = self._classes[key] = len(self._classes)
            out.append(0x43)
            self.write_string(java_class)
            self.write_int(len(fields))
            for name in fields:
                self.write_string(name)
        if index <= 15:
            out.append(0x60 + index)
        else:
            out.append(0x4F)
            self.write_int(index)

    def write_object(self, java_class: str, fields: Mapping[str, Any]) -> None:
        """An object by class definition (the definition written once per stream)."""
        names = tuple(fields)
        for name in names:
            if not isinstance(name, str):
                raise Hessian2EncodeError(
                    f"a field name of {java_class} is a {type(name).__name__}, not a str"
                )
        self._begin_object(java_class, names)
        for name in names:
            self.write(fields[name])


def dumps(*values: object) -> bytes:
    """The Hessian2 bytes of ``values``, written one after another into one stream."""
    encoder = Hessian2Encoder()
    for value in values:
        encoder.write(value)
    return encoder.getvalue()
