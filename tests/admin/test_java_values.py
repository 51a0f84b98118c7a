"""Unit tests of the JSON <-> Java value shaping of ``dubbo-py call`` on Java-interface services
and of reading Dubbo's stored service definition (the live tests are
tests/estate/test_java_call_cli.py)."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from dubbo_py.admin.java_values import ArgumentError, parse_arguments, to_java, to_json
from dubbo_py.protocol.serialization.hessian2 import (
    JavaEnum,
    JavaInstant,
    JavaLocalDateTime,
    JavaObject,
)
from dubbo_py.registry.service_definition import (
    ServiceDefinition,
    ServiceDefinitionError,
    erase,
    provider_definition_path,
    split_type_list,
)

#: A definition as Dubbo 3.3.6 stores it (trimmed from the live provider's).
DEFINITION = json.dumps(
    {
        "canonicalName": "com.example.Shop",
        "methods": [
            {"name": "find", "parameterTypes": ["java.lang.Long"], "returnType": "Order"},
            {"name": "find", "parameterTypes": ["java.lang.String"], "returnType": "Order"},
            {
                "name": "put",
                "parameterTypes": [
                    "com.example.Order",
                    "java.util.Map<java.lang.Long,java.math.BigDecimal>",
                ],
                "returnType": "void",
            },
        ],
        "types": [
            {
                "type": "com.example.Order",
                "properties": {
                    "id": "long",
                    "when": "java.time.LocalDate",
                    "color": "com.example.Color",
                    "lines": "java.util.List<com.example.Line>",
                },
            },
            {"type": "com.example.Line", "properties": {"price": "java.math.BigDecimal"}},
            {"type": "com.example.Color", "enums": ["RED", "GREEN"]},
        ],
    }
)


def definition() -> ServiceDefinition:
    return ServiceDefinition.parse(DEFINITION, "/dubbo/metadata/com.example.Shop/provider/shop")


def test_the_definition_path_leaves_out_empty_parts_as_dubbo_does() -> None:
    assert (
        provider_definition_path("a.B", "1.0", "g", "app")
        == "/dubbo/metadata/a.B/1.0/g/provider/app"
    )
    assert provider_definition_path("a.B", "", "", "app") == "/dubbo/metadata/a.B/provider/app"
    # PathUtils.buildPath collects the parts in a LinkedHashSet: a repeated one appears once.
    assert provider_definition_path("a.B", "x", "x", "app") == "/dubbo/metadata/a.B/x/provider/app"


def test_type_names_are_erased_and_split_outside_type_arguments() -> None:
    assert erase("java.util.Map<java.lang.String,java.util.List<X>>") == "java.util.Map"
    assert erase("java.util.List<X>[]") == "java.util.List[]"
    assert split_type_list("java.util.Map<K,V>, int,estate.User") == (
        "java.util.Map<K,V>",
        "int",
        "estate.User",
    )
    assert split_type_list("") == ()


def test_overloads_are_listed_and_beans_found() -> None:
    found = definition()
    assert [m.signature for m in found.named("find")] == [
        "Order find(java.lang.Long)",
        "Order find(java.lang.String)",
    ]
    assert found.named("put")[0].invoke_types == ("com.example.Order", "java.util.Map")
    bean = found.bean("com.example.Order")
    assert bean is not None and bean.properties["when"] == "java.time.LocalDate"
    assert found.bean("com.example.Color") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "where: not JSON"),
        ("[]", "where: not a JSON object"),
        ('{"methods": []}', "where: no canonicalName"),
        ('{"canonicalName": "X", "methods": [{"parameterTypes": []}]}', "methods[0]: a method"),
        ('{"canonicalName": "X", "types": [{"type": "T", "enums": [1]}]}', "types[0].enums"),
    ],
)
def test_a_bad_definition_is_refused_naming_where(text: str, message: str) -> None:
    with pytest.raises(ServiceDefinitionError, match=message.replace("[", r"\[")):
        ServiceDefinition.parse(text, "where")


def test_arguments_take_the_declared_types_down_to_nested_beans() -> None:
    found = definition()
    order_json = '{"id": 3, "when": "2024-02-29", "color": "RED", "lines": [{"price": 0.10}]}'
    values = parse_arguments(f'[{order_json}, {{"7": "1.50"}}]')
    order = to_java(values[0], "com.example.Order", found, "argument 1")
    assert order == {
        "id": 3,
        "when": date(2024, 2, 29),
        "color": "RED",
        "lines": [{"price": Decimal("0.10")}],  # the digits as written, not through a float
    }
    prices = to_java(values[1], "java.util.Map<java.lang.Long,java.math.BigDecimal>", found, "a")
    assert prices == {7: Decimal("1.50")}  # JSON keys are texts: a Map<Long, _> takes numbers


@pytest.mark.parametrize(
    ("value", "java_type", "message"),
    [
        ('{"color": "BLUE"}', "com.example.Order", "a.color: com.example.Color needs one of RED"),
        ('{"lines": [{"price": "x"}]}', "com.example.Order", "a.lines[0].price: java.math"),
        ('{"id": null}', "com.example.Order", "a.id: long is a primitive and cannot be null"),
        ('{"id": 1.5}', "com.example.Order", "a.id: long needs a whole number, got 1.5"),
        ('{"class": 7}', "com.example.Order", "a.class: must be a Java class name"),
        ('{"x": 1}', "java.util.Map<java.lang.Long,java.lang.Object>", 'a["x"]: java.lang'),
        ('"2024-13-01"', "java.util.Date", "a: java.util.Date needs an ISO 8601 date-time"),
        ('"AAA="', "byte[]", None),
        ('"not base64!"', "byte[]", "a: byte[] needs base64 text"),
        ("true", "int", "a: int needs a whole number, got true"),
        ('"ab"', "char", "a: char needs a string of one character"),
    ],
)
def test_a_value_that_does_not_fit_names_its_path(
    value: str, java_type: str, message: str | None
) -> None:
    parsed = json.loads(value, parse_float=Decimal)
    if message is None:
        assert to_java(parsed, java_type, definition(), "a") == b"\x00\x00"
        return
    with pytest.raises(ArgumentError) as caught:
        to_java(parsed, java_type, definition(), "a")
    assert message in str(caught.value)


def test_dates_and_times_from_iso_texts() -> None:
    assert to_java("2024-02-29T12:30:00+01:00", "java.util.Date", None, "a") == datetime(
        2024, 2, 29, 11, 30, tzinfo=UTC
    )
    assert to_java("2024-02-29T12:30:00", "java.util.Date", None, "a").tzinfo == UTC
    assert to_java(1_000, "java.util.Date", None, "a") == datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)
    local = to_java("2024-02-29T12:30:00", "java.time.LocalDateTime", None, "a")
    assert isinstance(local, JavaLocalDateTime) and local.tzinfo is None
    with pytest.raises(ArgumentError, match="local date-time"):
        to_java("2024-02-29T12:30:00Z", "java.time.LocalDateTime", None, "a")
    assert isinstance(to_java("2024-02-29T12:30:00Z", "java.time.Instant", None, "a"), JavaInstant)


def test_without_a_definition_json_goes_as_it_is_with_fractions_as_doubles() -> None:
    values = parse_arguments('[{"class": "x.Y", "n": 1.5, "m": [2, 2.5]}]')
    assert to_java(values[0], "java.lang.Object", None, "a") == {
        "class": "x.Y",
        "n": 1.5,
        "m": [2, 2.5],
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2", "at line 1, column 6"),
        ("[1,\n 2,]", "at line 2, column 4"),
        ('{"a": 1}', "must be a JSON array, one element per parameter \\(got a JSON object"),
        ('"x"', "got a JSON string"),
    ],
)
def test_malformed_arguments_name_where(text: str, message: str) -> None:
    with pytest.raises(ArgumentError, match=message):
        parse_arguments(text)


def test_results_print_in_the_stated_forms() -> None:
    cyclic: list[object] = []
    cyclic.append(cyclic)
    out = to_json(
        {
            "when": datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC),
            "local": JavaLocalDateTime(2024, 1, 2, 3, 4, 5),
            "amount": Decimal("12.50"),
            "bytes": b"\x00\xff",
            "color": JavaEnum("com.example.Color", "RED"),
            "bean": JavaObject("com.example.Line", {"price": Decimal("1")}),
            "nan": float("nan"),
            "keys": {7: "seven"},
            "loop": cyclic,
        }
    )
    assert out == {
        "when": "2023-11-14T22:13:20.123Z",
        "local": "2024-01-02T03:04:05",
        "amount": "12.50",
        "bytes": "AP8=",
        "color": "RED",
        "bean": {"class": "com.example.Line", "price": "1"},
        "nan": "NaN",
        "keys": {"7": "seven"},
        "loop": ["(a reference to an enclosing value: a cycle)"],
    }
    json.dumps(out)  # every value is JSON
