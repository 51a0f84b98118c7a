"""Hessian2 bytes to Python values, refusing what is not Hessian2 with the offset it failed at.

Hostile input is bounded: every declared length is checked against the bytes that remain
before anything is allocated (a list element, a string character and a binary byte each take
at least one byte), nesting deeper than ``max_depth`` is refused, and a reference may only
point at a list, map or object already begun, so decoding is linear in the input's size.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Collection
from datetime import date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any
from uuid import UUID

from .encoder import (
    BIG_DECIMAL,
    BIG_INTEGER,
    DURATION,
    EPOCH,
    INSTANT,
    LOCAL_DATE,
    LOCAL_DATE_TIME,
    LOCAL_TIME,
    UUID_CLASS,
)
from .errors import Hessian2DecodeError
from .types import (
    ClassDef,
    JavaBigInteger,
    JavaEnum,
    JavaInstant,
    JavaLocalDateTime,
    JavaLong,
    JavaObject,
    TypedList,
    TypedMap,
)

#: How deeply lists, maps and objects may nest by default.
MAX_DEPTH = 128
#: Java types decoded as a Python ``set`` (when their elements are hashable): the one a Python
#: set is sent as. Other sets (``TreeSet``, ``LinkedHashSet`` ...) stay a :class:`TypedList`,
#: which keeps their order and goes back to Java as the same class.
SET_TYPES = frozenset({"java.util.HashSet"})
_SURROGATE = re.compile("[\ud800-\udfff]")
_unpack_i = struct.Struct(">i").unpack_from
_unpack_q = struct.Struct(">q").unpack_from
_unpack_d = struct.Struct(">d").unpack_from
_unpack_h = struct.Struct(">h").unpack_from
_unpack_H = struct.Struct(">H").unpack_from
_MINUTE = timedelta(minutes=1)
_MILLISECOND = timedelta(milliseconds=1)


class Hessian2Decoder:
    """Reads values one after another from one Hessian2 stream.

    ``enum_classes`` names the Java classes to decode as :class:`JavaEnum` (on the wire an
    enum constant is an object with one ``name`` field; any other object is a
    :class:`JavaObject`).
    """

    def __init__(
        self,
        data: bytes | bytearray | memoryview,
        *,
        max_depth: int = MAX_DEPTH,
        enum_classes: Collection[str] = (),
    ) -> None:
        self._data = bytes(data)
        self._pos = 0
        self._max_depth = max_depth
        self._depth = 0
        self._enums = frozenset(enum_classes)
        self._refs: list[Any] = []
        self._classes: list[ClassDef] = []
        self._types: list[str] = []

    @property
    def offset(self) -> int:
        """How many bytes have been read."""
        return self._pos

    def at_end(self) -> bool:
        """Whether every byte has been read."""
        return self._pos >= len(self._data)

    def _fail(self, message: str, offset: int | None = None) -> Hessian2DecodeError:
        return Hessian2DecodeError(message, self._pos if offset is None else offset)

    def _take(self, count: int, what: str) -> int:
        """The offset of ``count`` bytes, which are then passed over."""
        start = self._pos
        if count > len(self._data) - start:
            raise self._fail(
                f"truncated {what}: {count} bytes declared, {len(self._data) - start} left",
                start,
            )
        self._pos = start + count
        return start

    def _byte(self, what: str) -> int:
        pos = self._pos
        if pos >= len(self._data):
            raise self._fail(f"truncated input: {what} expected")
        self._pos = pos + 1
        return self._data[pos]

    def read(self) -> Any:
        """The next value."""
        start = self._pos
        code = self._byte("a value")
        return self._value(code, start)

    def _value(self, code: int, start: int) -> Any:
        data = self._data
        # Ordered by how often Dubbo sends them: strings and small ints first.
        if code <= 0x1F:
            return self._string_rest(code, start)
        if 0x80 <= code <= 0xBF:
            return code - 0x90
        if 0x30 <= code <= 0x33:
            length = ((code - 0x30) << 8) + self._byte("a string length")
            return self._string_rest(length, start)
        if code == 0x4E:
            return None
        if code == 0x54:
            return True
        if code == 0x46:
            return False
        if 0xC0 <= code <= 0xCF:
            return ((code - 0xC8) << 8) + self._byte("an int's second byte")
        if 0xD0 <= code <= 0xD7:
            pos = self._take(2, "int")
            return ((code - 0xD4) << 16) + (data[pos] << 8) + data[pos + 1]
        if code == 0x49:
            return _unpack_i(data, self._take(4, "int"))[0]
        if 0xD8 <= code <= 0xEF:
            return JavaLong(code - 0xE0)
        if 0xF0 <= code <= 0xFF:
            return JavaLong(((code - 0xF8) << 8) + self._byte("a long's second byte"))
        if 0x38 <= code <= 0x3F:
            pos = self._take(2, "long")
            return JavaLong(((code - 0x3C) << 16) + (data[pos] << 8) + data[pos + 1])
        if code == 0x59:
            return JavaLong(_unpack_i(data, self._take(4, "long"))[0])
        if code == 0x4C:
            return JavaLong(_unpack_q(data, self._take(8, "long"))[0])
        if 0x5B <= code <= 0x5F or code == 0x44:
            return self._double(code)
        if code == 0x53 or code == 0x52:
            return self._string_chunks(code, start)
        if 0x20 <= code <= 0x2F or 0x34 <= code <= 0x37 or code in (0x41, 0x42):
            return self._binary(code, start)
        if code == 0x4A:
            return self._date(_unpack_q(data, self._take(8, "date"))[0], start)
        if code == 0x4B:
            minutes = _unpack_i(data, self._take(4, "date"))[0]
            return self._date(minutes * 60000, start)
        if code == 0x51:
            index = self._int("a reference")
            if not 0 <= index < len(self._refs):
                raise self._fail(
                    f"reference {index} to no earlier list, map or object "
                    f"({len(self._refs)} so far)",
                    start,
                )
            return self._refs[index]
        if 0x55 <= code <= 0x58 or 0x70 <= code <= 0x7F:
            return self._nested(self._list, code, start)
        if code == 0x48 or code == 0x4D:
            return self._nested(self._map, code, start)
        if code == 0x43:
            # Definitions may follow one another; a loop, so that many cannot exhaust the stack.
            while True:
                self._class_def()
                next_start = self._pos
                next_code = self._byte("an object after its class definition")
                if next_code != 0x43:
                    break
            if next_code != 0x4F and not 0x60 <= next_code <= 0x6F:
                raise self._fail(
                    f"byte 0x{next_code:02x} after a class definition, not an object", next_start
                )
            return self._value(next_code, next_start)
        if code == 0x4F or 0x60 <= code <= 0x6F:
            return self._nested(self._object, code, start)
        raise self._fail(f"byte 0x{code:02x} starts no Hessian2 value", start)

    def _int(self, what: str) -> int:
        start = self._pos
        code = self._byte(what)
        if 0x80 <= code <= 0xBF:
            return code - 0x90
        if 0xC0 <= code <= 0xCF or 0xD0 <= code <= 0xD7 or code == 0x49:
            value: int = self._value(code, start)
            return value
        raise self._fail(f"{what} must be an int, not byte 0x{code:02x}", start)

    def _double(self, code: int) -> float:
        data = self._data
        if code == 0x5B:
            return 0.0
        if code == 0x5C:
            return 1.0
        if code == 0x5D:
            pos = self._take(1, "double")
            return float(data[pos] - 256 if data[pos] > 127 else data[pos])
        if code == 0x5E:
            return float(_unpack_h(data, self._take(2, "double"))[0])
        if code == 0x5F:
            mills: int = _unpack_i(data, self._take(4, "double"))[0]
            return 0.001 * mills
        value: float = _unpack_d(data, self._take(8, "double"))[0]
        return value

    def _date(self, millis: int, start: int) -> datetime:
        try:
            return EPOCH + millis * _MILLISECOND
        except OverflowError:
            raise self._fail(
                f"date {millis} ms from the epoch is outside Python's years", start
            ) from None

    def _units(self, count: int, start: int) -> str:
        """``count`` UTF-16 units, each in UTF-8 (4-byte sequences are taken as two units)."""
        data = self._data
        pos = self._pos
        end = pos + count
        if count > len(data) - pos:
            raise self._fail(
                f"truncated string: {count} characters declared, {len(data) - pos} bytes left",
                start,
            )
        if not data[pos:end].isascii():
            end = pos
            seen = 0
            limit = len(data)
            while seen < count:
                if end >= limit:
                    raise self._fail(f"truncated string: {count} characters declared", start)
                lead = data[end]
                if lead < 0x80:
                    end += 1
                    seen += 1
                elif lead & 0xE0 == 0xC0:
                    end += 2
                    seen += 1
                elif lead & 0xF0 == 0xE0:
                    end += 3
                    seen += 1
                elif lead & 0xF8 == 0xF0:
                    end += 4
                    seen += 2
                else:
                    raise self._fail(f"byte 0x{lead:02x} starts no UTF-8 character", end)
            if end > limit:
                raise self._fail(f"truncated string: {count} characters declared", start)
        self._pos = end
        try:
            return data[pos:end].decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as exc:
            raise self._fail(f"bad UTF-8 in a string ({exc.reason})", pos + exc.start) from None

    @staticmethod
    def _pairs(text: str) -> str:
        if text.isascii() or not _SURROGATE.search(text):
            return text
        # Java's surrogate pairs become one character; a lone surrogate stays as it is.
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")

    def _string_rest(self, length: int, start: int) -> str:
        return self._pairs(self._units(length, start))

    def _string_chunks(self, code: int, start: int) -> str:
        parts = []
        while True:
            if code in (0x52, 0x53):
                length = _unpack_H(self._data, self._take(2, "string chunk length"))[0]
            elif code <= 0x1F:
                length = code
            elif 0x30 <= code <= 0x33:
                length = ((code - 0x30) << 8) + self._byte("a string length")
            else:
                raise self._fail(f"byte 0x{code:02x} in a chunked string", self._pos - 1)
            parts.append(self._units(length, start))
            if code != 0x52:
                return self._pairs("".join(parts))
            code = self._byte("the next string chunk")

    def string(self) -> str:
        """The next value, which must be a string."""
        start = self._pos
        code = self._byte("a string")
        if code <= 0x1F or 0x30 <= code <= 0x33 or code in (0x52, 0x53):
            value: str = self._value(code, start)
            return value
        raise self._fail(f"a string expected, not byte 0x{code:02x}", start)

    def _binary(self, code: int, start: int) -> bytes:
        data = self._data
        parts = []
        while True:
            if code in (0x41, 0x42):
                length = _unpack_H(data, self._take(2, "binary chunk length"))[0]
            elif 0x20 <= code <= 0x2F:
                length = code - 0x20
            elif 0x34 <= code <= 0x37:
                length = ((code - 0x34) << 8) + self._byte("a binary length")
            else:
                raise self._fail(f"byte 0x{code:02x} in a chunked binary", self._pos - 1)
            pos = self._take(length, "binary")
            parts.append(data[pos : pos + length])
            if code != 0x41:
                return parts[0] if len(parts) == 1 else b"".join(parts)
            code = self._byte("the next binary chunk")

    def _type(self) -> str:
        start = self._pos
        code = self._byte("a type")
        if code <= 0x1F or 0x30 <= code <= 0x33 or code in (0x52, 0x53):
            name: str = self._value(code, start)
            self._types.append(name)
            return name
        self._pos = start
        index = self._int("a type")
        if not 0 <= index < len(self._types):
            raise self._fail(f"type reference {index} to no earlier type", start)
        return self._types[index]

    def _nested(self, read: Any, code: int, start: int) -> Any:
        if self._depth >= self._max_depth:
            raise self._fail(f"nested deeper than {self._max_depth} lists, maps and objects", start)
        self._depth += 1
        try:
            return read(code, start)
        finally:
            self._depth -= 1

    def _length(self, start: int) -> int:
        length = self._int("a list length")
        if length < 0 or length > len(self._data) - self._pos:
            raise self._fail(
                f"list of {length} elements declared, {len(self._data) - self._pos} bytes left",
                start,
            )
        return length

    def _list(self, code: int, start: int) -> Any:
        java_type = self._type() if code in (0x55, 0x56) or 0x70 <= code <= 0x77 else None
        items: list[Any] = [] if java_type is None else TypedList(java_type)
        index = len(self._refs)
        self._refs.append(items)
        if code in (0x55, 0x57):
            while True:
                if self._pos >= len(self._data):
                    raise self._fail("truncated list: no end byte 'Z'", start)
                if self._data[self._pos] == 0x5A:
                    self._pos += 1
                    break
                items.append(self.read())
        else:
            length = self._length(start) if code in (0x56, 0x58) else (code - 0x70) & 7
            for _ in range(length):
                items.append(self.read())
        if java_type in SET_TYPES:
            try:
                as_set = set(items)
            except TypeError:
                return items  # elements Python cannot hash: the typed list keeps the type
            self._refs[index] = as_set
            return as_set
        return items

    def _map(self, code: int, start: int) -> Any:
        java_type = self._type() if code == 0x4D else ""
        items: dict[Any, Any] = TypedMap(java_type) if java_type else {}
        self._refs.append(items)
        data = self._data
        while True:
            if self._pos >= len(data):
                raise self._fail("truncated map: no end byte 'Z'", start)
            if data[self._pos] == 0x5A:
                self._pos += 1
                return items
            key_start = self._pos
            key = self.read()
            value = self.read()
            try:
                items[key] = value
            except TypeError:
                raise self._fail(
                    f"a map key of type {type(key).__name__} cannot be a Python dict key", key_start
                ) from None

    def _class_def(self) -> None:
        start = self._pos - 1
        name = self.string()
        count = self._int("a field count")
        if count < 0 or count > len(self._data) - self._pos:
            raise self._fail(f"class {name} declares {count} fields", start)
        fields = tuple(self.string() for _ in range(count))
        self._classes.append(ClassDef(name, fields))

    def _object(self, code: int, start: int) -> Any:
        index = code - 0x60 if code >= 0x60 else self._int("a class definition index")
        if not 0 <= index < len(self._classes):
            raise self._fail(f"object of class definition {index}, which was not sent", start)
        definition = self._classes[index]
        ref = len(self._refs)
        if definition.name == BIG_DECIMAL and definition.fields == ("value",):
            self._refs.append(None)
            text = self.read()
            if not isinstance(text, str):
                raise self._fail("a java.math.BigDecimal whose value is not a string", start)
            try:
                number = Decimal(text)
            except InvalidOperation:
                raise self._fail(
                    f"java.math.BigDecimal {text[:40]!r} is no number", start
                ) from None
            self._refs[ref] = number
            return number
        if definition.name in _VALUE_CLASSES:
            self._refs.append(None)
            fields = {name: self.read() for name in definition.fields}
            value = _value_class(definition.name, fields)
            if value is None:
                raise self._fail(f"a {definition.name} with fields {fields!r:.200}", start)
            self._refs[ref] = value
            return value
        obj: JavaObject
        if definition.name in self._enums and definition.fields == ("name",):
            obj = JavaEnum(definition.name, "")
        else:
            obj = JavaObject(definition.name)
        self._refs.append(obj)
        fields = obj.fields
        for field in definition.fields:
            fields[field] = self.read()
        return obj


def _ints(fields: dict[str, Any], *names: str) -> list[int] | None:
    values = [fields.get(name, 0) for name in names]
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return values
    return None


def _local_date(value: Any) -> date | None:
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    return None


def _local_time(value: Any) -> time | None:
    return value if isinstance(value, time) else None


def _value_class(name: str, fields: dict[str, Any]) -> Any:
    """The Python value of an object hessian-lite sends for a Java value type, or None when
    its fields do not make one."""
    try:
        if name == LOCAL_DATE:
            ymd = _ints(fields, "year", "month", "day")
            return date(*ymd) if ymd else None
        if name == LOCAL_TIME:
            hmsn = _ints(fields, "hour", "minute", "second", "nano")
            if hmsn is None or not 0 <= hmsn[3] < 1_000_000_000:
                return None
            return time(hmsn[0], hmsn[1], hmsn[2], hmsn[3] // 1000)
        if name == LOCAL_DATE_TIME:
            day, clock = _local_date(fields.get("date")), _local_time(fields.get("time"))
            if day is None or clock is None:
                return None
            return JavaLocalDateTime.combine(day, clock)
        if name in (INSTANT, DURATION):
            sn = _ints(fields, "seconds", "nanos")
            if sn is None or not 0 <= sn[1] < 1_000_000_000:
                return None
            span = timedelta(seconds=sn[0], microseconds=sn[1] // 1000)
            if name == DURATION:
                return span
            moment = EPOCH + span
            return JavaInstant(
                moment.year,
                moment.month,
                moment.day,
                moment.hour,
                moment.minute,
                moment.second,
                moment.microsecond,
                tzinfo=moment.tzinfo,
            )
        if name == UUID_CLASS:
            text = fields.get("value")
            return UUID(text) if isinstance(text, str) else None
        if name == BIG_INTEGER:
            signum, words = fields.get("signum"), fields.get("mag")
            if signum not in (-1, 0, 1) or not isinstance(words, list):
                return None
            if not all(isinstance(w, int) and not isinstance(w, bool) for w in words):
                return None
            # one conversion, linear in the words (a loop of shifts would be quadratic)
            raw = struct.pack(f">{len(words)}I", *(w & 0xFFFFFFFF for w in words))
            magnitude = int.from_bytes(raw, "big")
            return JavaBigInteger(signum * magnitude)
    except (ValueError, OverflowError):
        return None
    return None


_VALUE_CLASSES = frozenset(
    {LOCAL_DATE, LOCAL_TIME, LOCAL_DATE_TIME, INSTANT, DURATION, UUID_CLASS, BIG_INTEGER}
)


def loads(
    data: bytes | bytearray | memoryview,
    *,
    max_depth: int = MAX_DEPTH,
    enum_classes: Collection[str] = (),
) -> Any:
    """The one value ``data`` holds (trailing bytes are an error)."""
    decoder = Hessian2Decoder(data, max_depth=max_depth, enum_classes=enum_classes)
    value = decoder.read()
    if not decoder.at_end():
        raise Hessian2DecodeError(
            f"{len(decoder._data) - decoder.offset} bytes after the value", decoder.offset
        )
    return value
