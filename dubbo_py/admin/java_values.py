"""JSON in and out of generic calls to Java-interface services (``dubbo-py call``, the
console's call form).

Arguments are a JSON array, one element per parameter. With the service definition's types
(:mod:`dubbo_py.registry.service_definition`) each element is turned into what the parameter's
Java type takes: a ``java.util.Date`` from an ISO 8601 text (or epoch milliseconds), a
``BigDecimal`` from a number or a text (exactly: JSON numbers are read as decimals, never
through a float), ``LocalDate``/``LocalDateTime``/``LocalTime``/``Instant`` from ISO texts, a
``byte[]`` from base64, a ``Map<Long, V>``'s keys from the JSON object's texts, a bean from a
JSON object (``class`` optional; a property the bean does not have is refused, where Dubbo's
``PojoUtils`` would drop it) and an enum from one of its constants' names. Every mismatch names
the argument and the path inside it (``argument 1 (estate.User).created``).

Results go back to JSON in a stated form: a date-time as ISO 8601 in UTC with milliseconds
(``2023-11-14T22:13:20.123Z``), a local date-time without a zone, ``BigDecimal`` as a JSON
string (exact), ``byte[]`` as base64, an enum as its name, a bean as an object with its
``class``.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import json
import math
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from dubbo_py.protocol.serialization.hessian2 import (
    JavaEnum,
    JavaException,
    JavaInstant,
    JavaLocalDateTime,
    JavaObject,
)
from dubbo_py.registry.service_definition import ServiceDefinition, erase, type_arguments

__all__ = [
    "ArgumentError",
    "exception_json",
    "parse_arguments",
    "to_java",
    "to_json",
]

_INTEGERS = frozenset(
    {"int", "long", "short", "byte", "java.lang.Integer", "java.lang.Long", "java.lang.Short",
     "java.lang.Byte", "java.math.BigInteger", "java.util.concurrent.atomic.AtomicInteger",
     "java.util.concurrent.atomic.AtomicLong"}
)  # fmt: skip
_FLOATS = frozenset({"float", "double", "java.lang.Float", "java.lang.Double"})
_BOOLEANS = frozenset({"boolean", "java.lang.Boolean"})
_CHARS = frozenset({"char", "java.lang.Character"})
_STRINGS = frozenset({"java.lang.String", "java.lang.CharSequence"})
_DATES = frozenset({"java.util.Date"})
_MAP_SUFFIXES = ("Map",)
_COLLECTION_SUFFIXES = ("List", "Set", "Collection", "Iterable", "Queue", "Deque")


class ArgumentError(ValueError):
    """Arguments that are not JSON, or that do not fit the parameters (the message says where)."""


def parse_arguments(text: str) -> list[Any]:
    """The JSON array of arguments (numbers with a fraction or exponent read as ``Decimal``, so
    a ``BigDecimal`` argument keeps every digit); ArgumentError naming the line and column of
    malformed JSON."""
    try:
        value = json.loads(text or "[]", parse_float=Decimal)
    except json.JSONDecodeError as exc:
        start = max(0, exc.pos - 20)
        near = text[start : exc.pos + 20].replace("\n", " ")
        raise ArgumentError(
            f"the arguments are not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno} "
            f"(near {near!r})"
        ) from None
    if not isinstance(value, list):
        raise ArgumentError(
            f"the arguments must be a JSON array, one element per parameter (got a JSON "
            f"{_json_kind(value)}; wrap a single argument in [ ])"
        )
    return value


def _json_kind(value: object) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, (int, float, Decimal)):
        return "number"
    return type(value).__name__


def to_java(value: Any, java_type: str, definition: ServiceDefinition | None, where: str) -> Any:
    """``value`` (from JSON) as the Python value the codec sends for ``java_type``.

    ``definition`` gives beans' properties and enums' constants; without it beans and
    containers go as they are (numbers with a fraction as ``double``). ``where`` names the
    value in errors."""
    return _Converter(definition).convert(value, java_type, where)


class _Converter:
    def __init__(self, definition: ServiceDefinition | None) -> None:
        self.definition = definition

    def fail(self, where: str, java_type: str, value: Any, wanted: str) -> ArgumentError:
        # A JSON number read as a Decimal is shown as the number it was written as.
        shown = str(value) if isinstance(value, Decimal) else json.dumps(to_json(value))
        if len(shown) > 60:
            shown = shown[:57] + "..."
        return ArgumentError(f"{where}: {java_type} needs {wanted}, got {shown}")

    def convert(self, value: Any, java_type: str, where: str) -> Any:
        raw = erase(java_type)
        if value is None:
            if raw in ("int", "long", "short", "byte", "float", "double", "boolean", "char"):
                raise ArgumentError(f"{where}: {raw} is a primitive and cannot be null")
            return None
        if raw.endswith("[]"):
            return self.array(value, java_type, raw, where)
        if raw in _INTEGERS:
            return self.integer(value, raw, where)
        if raw in _FLOATS:
            if isinstance(value, bool) or not isinstance(value, (int, Decimal, float)):
                raise self.fail(where, raw, value, "a number")
            return float(value)
        if raw in _BOOLEANS:
            if not isinstance(value, bool):
                raise self.fail(where, raw, value, "true or false")
            return value
        if raw in _CHARS:
            if not isinstance(value, str) or len(value) != 1:
                raise self.fail(where, raw, value, "a string of one character")
            return value
        if raw in _STRINGS:
            if not isinstance(value, str):
                raise self.fail(where, raw, value, "a string")
            return value
        if raw == "java.math.BigDecimal":
            return self.decimal(value, raw, where)
        if raw in _DATES:
            return self.date_time(value, raw, where)
        special = self.time_value(value, raw, where)
        if special is not None:
            return special
        if raw == "java.util.UUID":
            if isinstance(value, str):
                try:
                    return uuid.UUID(value)
                except ValueError:
                    pass
            raise self.fail(where, raw, value, "a UUID text")
        enum = self.definition.types.get(java_type) if self.definition else None
        if enum is not None and enum.enums:
            if not isinstance(value, str) or value not in enum.enums:
                raise self.fail(where, raw, value, f"one of {', '.join(enum.enums)}")
            return value  # the provider's PojoUtils.realize turns the name into the constant
        if raw.endswith(_MAP_SUFFIXES):
            return self.map(value, java_type, raw, where)
        if raw.endswith(_COLLECTION_SUFFIXES):
            if not isinstance(value, list):
                raise self.fail(where, raw, value, "a JSON array")
            arguments = type_arguments(java_type)
            element = arguments[0] if arguments else "java.lang.Object"
            return [self.convert(v, element, f"{where}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, dict):
            return self.bean(value, java_type, raw, where)
        # java.lang.Object, a type the definition does not describe, or no definition.
        return self.loose(value, where)

    def integer(self, value: Any, raw: str, where: str) -> int:
        if isinstance(value, bool):
            raise self.fail(where, raw, value, "a whole number")
        if isinstance(value, int):
            return value
        if isinstance(value, Decimal) and value == value.to_integral_value():
            return int(value)
        raise self.fail(where, raw, value, "a whole number")

    def decimal(self, value: Any, raw: str, where: str) -> Decimal:
        if isinstance(value, bool):
            raise self.fail(where, raw, value, "a number or a decimal text")
        if isinstance(value, (int, Decimal)):
            return Decimal(value)
        if isinstance(value, str):
            try:
                found = Decimal(value.strip())
            except InvalidOperation:
                raise self.fail(where, raw, value, "a number or a decimal text") from None
            if found.is_finite():
                return found
        raise self.fail(where, raw, value, "a number or a decimal text")

    def date_time(self, value: Any, raw: str, where: str) -> datetime:
        if isinstance(value, int) and not isinstance(value, bool):
            return datetime.fromtimestamp(value / 1000, UTC)
        if isinstance(value, str):
            try:
                found = datetime.fromisoformat(value.strip())
            except ValueError:
                found = None
            if found is not None:
                return found if found.tzinfo is not None else found.replace(tzinfo=UTC)
        raise self.fail(
            where, raw, value, "an ISO 8601 date-time (2024-02-29T12:30:00Z) or epoch millis"
        )

    def time_value(self, value: Any, raw: str, where: str) -> Any:
        parsers: Mapping[str, tuple[str, Any]] = {
            "java.time.LocalDate": ("an ISO date (2024-02-29)", date.fromisoformat),
            "java.time.LocalTime": ("an ISO time (12:30:00)", time.fromisoformat),
            "java.time.LocalDateTime": ("an ISO local date-time (2024-02-29T12:30:00)", _local),
            "java.time.Instant": ("an ISO 8601 instant (2024-02-29T12:30:00Z)", _instant),
        }
        if raw not in parsers:
            return None
        wanted, parse = parsers[raw]
        if isinstance(value, str):
            try:
                return parse(value.strip())
            except ValueError:
                pass
        raise self.fail(where, raw, value, wanted)

    def array(self, value: Any, java_type: str, raw: str, where: str) -> Any:
        if raw == "byte[]" and isinstance(value, str):
            try:
                return base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raise self.fail(where, raw, value, "base64 text or an array of numbers") from None
        if not isinstance(value, list):
            raise self.fail(where, raw, value, "a JSON array")
        element = java_type.strip()[:-2]
        items = [self.convert(v, element, f"{where}[{i}]") for i, v in enumerate(value)]
        return bytes(v & 0xFF for v in items) if raw == "byte[]" else items

    def map(self, value: Any, java_type: str, raw: str, where: str) -> dict[Any, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, raw, value, "a JSON object")
        arguments = type_arguments(java_type)
        key_type = arguments[0] if len(arguments) == 2 else "java.lang.String"
        value_type = arguments[1] if len(arguments) == 2 else "java.lang.Object"
        out: dict[Any, Any] = {}
        for key, item in value.items():
            inner = f"{where}[{json.dumps(key, ensure_ascii=False)}]"
            # JSON keys are texts: a Map<Long, V> takes their numbers.
            java_key: Any = key
            if erase(key_type) in _INTEGERS:
                try:
                    java_key = int(key)
                except ValueError:
                    raise self.fail(inner, erase(key_type), key, "a whole-number key") from None
            out[java_key] = self.convert(item, value_type, inner)
        return out

    def bean(self, value: dict[str, Any], java_type: str, raw: str, where: str) -> dict[str, Any]:
        named = value.get("class")
        if named is not None and not isinstance(named, str):
            raise ArgumentError(f"{where}.class: must be a Java class name (a string)")
        bean_type = named or java_type
        definition = self.definition.bean(bean_type) if self.definition else None
        if definition is None:
            return {k: self.loose(v, f"{where}.{k}") for k, v in value.items()}
        out: dict[str, Any] = {"class": bean_type} if named else {}
        for key, item in value.items():
            if key == "class":
                continue
            property_type = definition.properties.get(key)
            if property_type is None:
                known = sorted(definition.properties)
                close = difflib.get_close_matches(key, known, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ArgumentError(
                    f"{where}: {bean_type} has no property {key!r} (its properties: "
                    f"{', '.join(known) or 'none'}){hint}"
                )
            out[key] = self.convert(item, property_type, f"{where}.{key}")
        return out

    def loose(self, value: Any, where: str) -> Any:
        """A value with no type to go by: JSON's own kinds (a fraction as a double)."""
        if isinstance(value, Decimal):
            return float(value)
        if isinstance(value, list):
            return [self.loose(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, dict):
            if "class" in value and self.definition is not None:
                named = value["class"]
                if isinstance(named, str) and self.definition.bean(named) is not None:
                    return self.bean(value, named, named, where)
            return {k: self.loose(v, f"{where}.{k}") for k, v in value.items()}
        return value


def _local(text: str) -> JavaLocalDateTime:
    found = datetime.fromisoformat(text)
    if found.tzinfo is not None:
        raise ValueError("a local date-time has no zone")
    return JavaLocalDateTime(
        found.year, found.month, found.day, found.hour, found.minute, found.second,
        found.microsecond,
    )  # fmt: skip


def _instant(text: str) -> JavaInstant:
    found = datetime.fromisoformat(text)
    if found.tzinfo is None:
        found = found.replace(tzinfo=UTC)
    found = found.astimezone(UTC)
    return JavaInstant(
        found.year, found.month, found.day, found.hour, found.minute, found.second,
        found.microsecond, tzinfo=UTC,
    )  # fmt: skip


def to_json(value: Any) -> Any:
    """A call's result as JSON values, in the forms the module text states."""
    return _to_json(value, set())


def _to_json(value: Any, enclosing: set[int]) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime):
        if isinstance(value, JavaLocalDateTime) or value.tzinfo is None:
            return value.isoformat()
        spec = "auto" if isinstance(value, JavaInstant) else "milliseconds"
        return value.astimezone(UTC).isoformat(timespec=spec).replace("+00:00", "Z")
    if isinstance(value, (date, time)):
        return value.isoformat()
    if isinstance(value, timedelta):
        return f"PT{Decimal(value.total_seconds()).normalize():f}S"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, JavaEnum):
        return value.name
    if isinstance(value, JavaException):
        return exception_json(value)
    if id(value) in enclosing:
        return "(a reference to an enclosing value: a cycle)"
    enclosing = enclosing | {id(value)}
    if isinstance(value, JavaObject):
        fields = {k: _to_json(v, enclosing) for k, v in value.fields.items()}
        return {"class": value.java_class, **fields}
    if isinstance(value, Mapping):
        return {_key(k): _to_json(v, enclosing) for k, v in value.items()}
    if isinstance(value, (Sequence, set, frozenset)):
        return [_to_json(v, enclosing) for v in value]
    return str(value)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    converted = to_json(key)
    return converted if isinstance(converted, str) else json.dumps(converted)


def exception_json(error: JavaException) -> dict[str, Any]:
    """``{"class", "message", "cause": {...}?}``: a Java exception as JSON."""
    out: dict[str, Any] = {"class": error.java_class, "message": error.message}
    if error.cause is not None and error.cause is not error:
        out["cause"] = exception_json(error.cause)
    return out
