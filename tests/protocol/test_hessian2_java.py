"""Hessian2 against Java: the hessian-lite that Dubbo 3.3.6 uses, live (tests/peers/java/hessian).

Both directions for every type: what Python encodes, Java decodes into the Java type the mapping
promises and encodes again, and Python decodes that to the value it sent; what Java builds
(beans, enums, dates, BigDecimal, arrays, collections, shared and self references, an
exception), Python decodes to the expected Python value.
"""

from __future__ import annotations

import base64
import math
import subprocess
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest

from dubbo_py.protocol.serialization.hessian2 import (
    JavaBigInteger,
    JavaEnum,
    JavaException,
    JavaInstant,
    JavaLocalDateTime,
    JavaLong,
    JavaObject,
    TypedList,
    TypedMap,
    dumps,
    from_throwable,
    loads,
)
from tests.support.peers import ensure_built
from tests.support.processes import start_ready

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Oracle:
    """One JVM answering a command per line."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc

    def ask(self, command: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"the Hessian2 oracle ended on {command[:80]!r}")
            if line.startswith("OK "):
                return line[3:].rstrip("\n")
            if line.startswith("ERR "):
                raise AssertionError(f"hessian-lite refused {command[:80]!r}: {line[4:]}")
            # anything else is Java's logging on stderr, merged into the same pipe

    def roundtrip(self, value: object) -> Any:
        answer = self.ask("roundtrip " + base64.b64encode(dumps(value)).decode())
        return loads(base64.b64decode(answer))

    def describe(self, value: object) -> str:
        return self.ask("describe " + base64.b64encode(dumps(value)).decode())

    def fixture(self, name: str) -> Any:
        return loads(base64.b64decode(self.ask("fixture " + name)), enum_classes={"hessian.Color"})


@pytest.fixture(scope="module")
def oracle() -> Iterator[Oracle]:
    peer = ensure_built("java", "hessian")
    proc, _ = start_ready(
        peer.java_command("hessian.HessianOracle"), 60, "the Hessian2 oracle", stdin=subprocess.PIPE
    )
    try:
        yield Oracle(proc)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def pattern(length: int) -> bytes:
    return bytes(i % 251 for i in range(length))


def millis(value: int) -> datetime:
    return EPOCH + timedelta(milliseconds=value)


def bean(**fields: Any) -> JavaObject:
    base: dict[str, Any] = {
        "name": None,
        "age": 0,
        "id": JavaLong(0),
        "score": 0.0,
        "active": False,
        "born": None,
        "balance": None,
        "avatar": None,
        "tags": None,
        "counts": None,
        "color": None,
        "friend": None,
    }
    base.update(fields)
    return JavaObject("hessian.Bean", base)


FULL_BEAN = bean(
    name="Zoë \U0001f600",
    age=42,
    id=JavaLong(1 << 40),
    score=98.5,
    active=True,
    born=millis(631152000123),
    balance=Decimal("12345678901234567890.123456789"),
    avatar=pattern(20),
    tags=["a", "b"],
    counts={"x": 1, "y": 2},
    color=JavaEnum("hessian.Color", "GREEN"),
)

# What Python sends, and what Java holds once hessian-lite decoded it.
PYTHON_VALUES: list[tuple[str, object, str]] = [
    ("null", None, "null"),
    ("true", True, "java.lang.Boolean(true)"),
    ("false", False, "java.lang.Boolean(false)"),
    ("int", -262145, "java.lang.Integer(-262145)"),
    ("int max", 2**31 - 1, "java.lang.Integer(2147483647)"),
    ("big int", 2**31, "java.lang.Long(2147483648)"),
    ("long", JavaLong(7), "java.lang.Long(7)"),
    ("long min", -(2**63), "java.lang.Long(-9223372036854775808)"),
    ("double", 12.25, "java.lang.Double(12.25)"),
    ("double short", -32768.0, "java.lang.Double(-32768.0)"),
    ("double full", 3.141592653589793, "java.lang.Double(3.141592653589793)"),
    ("string", "h\u00e9llo \U0001f600", "java.lang.String(h\u00e9llo \U0001f600)"),
    ("bytes", pattern(3), "[B[java.lang.Byte(0),java.lang.Byte(1),java.lang.Byte(2)]"),
    ("date", millis(1600000000123), "java.util.Date(1600000000123)"),
    ("date minutes", millis(1600000020000), "java.util.Date(1600000020000)"),
    ("decimal", Decimal("-1.50"), "java.math.BigDecimal(-1.50)"),
    ("list", [1, "a"], "java.util.ArrayList[java.lang.Integer(1),java.lang.String(a)]"),
    ("dict", {"k": 1}, "java.util.HashMap{java.lang.String(k)=java.lang.Integer(1)}"),
    ("set", {"s", "t"}, "java.util.HashSet[java.lang.String(s),java.lang.String(t)]"),
    (
        "int array",
        TypedList("[int", [1, 2]),
        "[I[java.lang.Integer(1),java.lang.Integer(2)]",
    ),
    (
        "linked list",
        TypedList("java.util.LinkedList", ["p"]),
        "java.util.LinkedList[java.lang.String(p)]",
    ),
    (
        "tree map",
        TypedMap("java.util.TreeMap", {"b": 2, "a": 1}),
        "java.util.TreeMap{java.lang.String(a)=java.lang.Integer(1),"
        "java.lang.String(b)=java.lang.Integer(2)}",
    ),
    ("enum", JavaEnum("hessian.Color", "BLUE"), "hessian.Color(BLUE)"),
    ("huge int", 2**100, "java.math.BigInteger(1267650600228229401496703205376)"),
    ("big integer", JavaBigInteger(-5), "java.math.BigInteger(-5)"),
    ("local date", date(2024, 2, 29), "java.time.LocalDate(2024-02-29)"),
    ("local time", time(13, 45, 7, 123456), "java.time.LocalTime(13:45:07.123456)"),
    (
        "local date time",
        JavaLocalDateTime(2024, 2, 29, 13, 45, 7, 1000),
        "java.time.LocalDateTime(2024-02-29T13:45:07.001)",
    ),
    (
        "instant",
        JavaInstant(2020, 9, 13, 12, 26, 40, 123000, tzinfo=UTC),
        "java.time.Instant(2020-09-13T12:26:40.123Z)",
    ),
    ("duration", timedelta(days=1, seconds=1, milliseconds=1), "java.time.Duration(PT24H1.001S)"),
    ("negative duration", timedelta(seconds=-1.5), "java.time.Duration(PT-1.5S)"),
    (
        "uuid",
        UUID("123e4567-e89b-12d3-a456-426614174000"),
        "java.util.UUID(123e4567-e89b-12d3-a456-426614174000)",
    ),
    (
        "bean",
        FULL_BEAN,
        "hessian.Bean(Zoë \U0001f600,42,1099511627776,hessian.Color(GREEN),"
        "java.math.BigDecimal(12345678901234567890.123456789))",
    ),
]


@pytest.mark.parametrize(
    ("value", "java"), [(v, j) for _, v, j in PYTHON_VALUES], ids=[n for n, _, _ in PYTHON_VALUES]
)
def test_python_values_arrive_in_java_as_the_mapped_java_type(
    oracle: Oracle, value: object, java: str
) -> None:
    assert oracle.describe(value) == java


@pytest.mark.parametrize(
    "value", [v for _, v, _ in PYTHON_VALUES], ids=[n for n, _, _ in PYTHON_VALUES]
)
def test_python_values_come_back_from_java_equal(oracle: Oracle, value: object) -> None:
    back = oracle.roundtrip(value)
    assert back == value
    if isinstance(value, int) and not isinstance(value, bool):
        # a Java int stays an int, a long a long, a BigInteger a BigInteger
        if isinstance(value, JavaBigInteger) or not -(2**63) <= value < 2**63:
            assert type(back) is JavaBigInteger
        elif isinstance(value, JavaLong) or not -(2**31) <= value < 2**31:
            assert type(back) is JavaLong
        else:
            assert type(back) is int


def test_long_strings_and_binaries_cross_chunk_boundaries_both_ways(oracle: Oracle) -> None:
    text = "x" * 0x7FFF + "\U0001f600" + "y" * 40000  # the pair straddles the first chunk's end
    assert oracle.roundtrip(text) == text
    data = pattern(70000)
    assert oracle.roundtrip(data) == data


def test_shared_and_self_references_survive_java(oracle: Oracle) -> None:
    one = bean(name="one")
    me = bean(name="me")
    me.fields["friend"] = me
    shared = ["shared"]
    back = oracle.roundtrip([one, one, shared, shared, me])
    assert back[0] is back[1] and back[2] is back[3]
    assert back[4].fields["friend"] is back[4]
    assert back[0] == one


def test_java_ints_longs_and_doubles_in_every_compact_form(oracle: Oracle) -> None:
    assert oracle.fixture("ints") == [
        0,
        -16,
        47,
        48,
        -17,
        -2048,
        2047,
        2048,
        -2049,
        -262144,
        262143,
        262144,
        -262145,
        -(2**31),
        2**31 - 1,
    ]
    longs = oracle.fixture("longs")
    assert longs == [
        0,
        -8,
        15,
        16,
        -9,
        -2048,
        2047,
        2048,
        -262144,
        262143,
        262144,
        -(2**31),
        2**31 - 1,
        2**31,
        -(2**63),
        2**63 - 1,
    ]
    assert all(isinstance(v, JavaLong) for v in longs)
    assert oracle.fixture("doubles") == [
        0.0,
        1.0,
        -1.0,
        127.0,
        -128.0,
        128.0,
        32767.0,
        -32768.0,
        32768.0,
        12.25,
        0.001,
        -2.5,
        3.14159,
        1e300,
        1.7976931348623157e308,
        5e-324,
        math.inf,
        -math.inf,
        0.10000000149011612,
    ]
    assert math.isnan(oracle.fixture("nan"))
    assert oracle.fixture("booleans") == [True, False]
    assert oracle.fixture("null") is None


def test_java_strings_binaries_and_dates(oracle: Oracle) -> None:
    assert oracle.fixture("strings") == [
        "",
        "a",
        "b" * 31,
        "c" * 32,
        "d" * 1023,
        "e" * 1024,
        "h\u00e9llo \u65e5\u672c",
        "\U0001f600 \U0001f389",
        "nul\x00char",
        "x" * 0x7FFF + "\U0001f600" + "y" * 40000,
    ]
    assert oracle.fixture("binaries") == [pattern(n) for n in (0, 15, 16, 1023, 1024, 70000)]
    assert oracle.fixture("dates") == [
        millis(0),
        millis(1600000020000),
        millis(1600000000123),
        millis(-1),
        datetime(1, 1, 1, tzinfo=UTC),
    ]


def test_java_bean_enums_and_decimals(oracle: Oracle) -> None:
    assert oracle.fixture("bean") == FULL_BEAN
    enums = oracle.fixture("enums")
    assert enums == [JavaEnum("hessian.Color", n) for n in ("RED", "GREEN", "RED")]
    assert isinstance(enums[0], JavaEnum) and enums[0].name == "RED"
    assert enums[0] is enums[2]  # hessian-lite sends a constant again as a reference
    decimals = oracle.fixture("decimals")
    assert [str(d) for d in decimals] == [
        "12345678901234567890.123456789",
        "0",
        "-1E+10",
        "0.000001",
    ]


def test_java_collections(oracle: Oracle) -> None:
    got = oracle.fixture("collections")
    assert got == {
        "arrayList": [1, 2],
        "linkedList": ["p", "q"],
        "hashSet": {"s", "t"},
        "treeSet": [1, 2, 3],  # sorted, and a TreeSet again when sent back
        "treeMap": {"k1": 1, "k2": 2},
        "hashMap": {1: "one", 2: "two"},
        "intArray": [1, 2, 3],
        "longArray": [5, 1 << 40],
        "stringArray": ["x", "y"],
        "objectArray": [1, "two", None],
        "emptyList": [],
        "nested": [{"a": [1, 2]}, [[]]],
        "list9": list(range(1, 10)),
    }
    assert isinstance(got, TypedMap) and got.java_type == "java.util.LinkedHashMap"
    assert got["linkedList"].java_type == "java.util.LinkedList"
    assert got["intArray"].java_type == "[int"
    assert got["treeSet"].java_type == "java.util.TreeSet"
    assert got["treeMap"].java_type == "java.util.TreeMap"
    assert type(got["arrayList"]) is list and type(got["hashMap"]) is dict
    # and what Java sent goes back to Java as the same collections
    assert oracle.describe(got) == oracle.ask("describe " + oracle.ask("fixture collections"))


def test_java_value_types_decode_to_python_values(oracle: Oracle) -> None:
    got = oracle.fixture("javatypes")
    assert got == {
        "bigInteger": 123456789012345678901234567890,
        "timestamp": JavaObject("java.sql.Timestamp", {"value": millis(1600000000123)}),
        "sqlDate": JavaObject("java.sql.Date", {"value": millis(1600000000000)}),
        "localDate": date(2024, 2, 29),
        "localDateTime": datetime(2024, 2, 29, 13, 45, 7, 123456),  # nanos cut to micros
        "localTime": time(13, 45, 7, 123000),
        "instant": millis(1600000000123),
        "duration": timedelta(milliseconds=90061001),
        "uuid": UUID("123e4567-e89b-12d3-a456-426614174000"),
        "locale": JavaObject("com.alibaba.com.caucho.hessian.io.LocaleHandle", {"value": "zh_CN"}),
        "character": "c",
        "short": 7,
        "byte": -3,
        "float": 1.5,
        "charArray": "hi",
        "emptyMap": {},
        "unmodifiable": [1],
        "listOf": [1, 2],
        "enumSet": JavaObject(
            "com.alibaba.com.caucho.hessian.io.EnumSetHandler",
            {
                "objects": [JavaEnum("hessian.Color", "RED")],
                "type": JavaObject("java.lang.Class", {"name": "hessian.Color"}),
            },
        ),
        "enumMap": {JavaEnum("hessian.Color", "RED"): 1},
        "concurrent": {"c": 1},
    }
    assert type(got["bigInteger"]) is JavaBigInteger
    assert type(got["localDateTime"]) is JavaLocalDateTime
    assert type(got["instant"]) is JavaInstant
    # and goes back through Java to the same values
    assert oracle.roundtrip(got) == got


def test_java_shared_references_decode_to_one_python_object(oracle: Oracle) -> None:
    got = oracle.fixture("shared")
    assert got[0] is got[1] and got[0] == FULL_BEAN
    assert got[2] is got[3] and got[2] == ["shared"]
    assert got[4].fields["friend"] is got[4]


def test_java_exception_decodes_to_a_python_exception_with_class_message_and_cause(
    oracle: Oracle,
) -> None:
    error = from_throwable(oracle.fixture("throwable"))
    assert isinstance(error, JavaException)
    assert str(error) == "java.lang.IllegalStateException: no such user"
    assert error.java_class == "java.lang.IllegalStateException"
    assert error.message == "no such user"
    assert (
        error.cause is not None and error.cause.java_class == "java.lang.IllegalArgumentException"
    )
    assert error.cause.message == "bad id 7"
    assert error.cause.cause is None  # Java's cause of itself ends the chain
    assert error.__cause__ is error.cause
    assert any(
        frame.startswith("hessian.HessianOracle.fixture(HessianOracle.java:")
        for frame in error.stack_trace
    )
