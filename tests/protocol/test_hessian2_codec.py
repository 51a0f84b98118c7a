"""The Hessian2 codec on its own: the Hessian 2.0 spec's examples, decode(encode(x)) == x for
generated values, and hostile bytes refused with Hessian2DecodeError in bounded time."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from time import monotonic
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dubbo_py.protocol.serialization.hessian2 import (
    Hessian2DecodeError,
    Hessian2Decoder,
    Hessian2EncodeError,
    Hessian2Encoder,
    JavaBigInteger,
    JavaEnum,
    JavaInstant,
    JavaLocalDateTime,
    JavaLong,
    JavaObject,
    TypedList,
    TypedMap,
    dumps,
    loads,
)


def h(text: str) -> bytes:
    """Bytes written as in the spec: hex pairs and 'quoted' ASCII."""
    out = bytearray()
    for token in text.split():
        if token.startswith("'"):
            out += token.strip("'").encode()
        else:
            out.append(int(token, 16))
    return bytes(out)


# The Hessian 2.0 serialization spec's examples (http://hessian.caucho.com/doc/hessian-serialization.html).
SPEC: list[tuple[str, object]] = [
    ("90", 0),
    ("80", -16),
    ("bf", 47),
    ("c8 00", 0),
    ("c0 00", -2048),
    ("c7 00", -256),
    ("cf ff", 2047),
    ("d4 00 00", 0),
    ("d0 00 00", -262144),
    ("d7 ff ff", 262143),
    ("49 00 00 00 00", 0),
    ("49 00 00 01 2c", 300),
    ("e0", JavaLong(0)),
    ("d8", JavaLong(-8)),
    ("ef", JavaLong(15)),
    ("f8 00", JavaLong(0)),
    ("f0 00", JavaLong(-2048)),
    ("f7 00", JavaLong(-256)),
    ("ff ff", JavaLong(2047)),
    ("3c 00 00", JavaLong(0)),
    ("38 00 00", JavaLong(-262144)),
    ("3f ff ff", JavaLong(262143)),
    ("59 00 00 00 00", JavaLong(0)),
    ("59 00 00 01 2c", JavaLong(300)),
    ("4c 00 00 00 00 00 00 01 2c", JavaLong(300)),
    ("5b", 0.0),
    ("5c", 1.0),
    ("5d 00", 0.0),
    ("5d 80", -128.0),
    ("5d 7f", 127.0),
    ("5e 00 00", 0.0),
    ("5e 80 00", -32768.0),
    ("5e 7f ff", 32767.0),
    ("44 40 28 80 00 00 00 00 00", 12.25),
    ("4a 00 00 00 d0 4b 92 84 b8", datetime(1998, 5, 8, 9, 51, 31, tzinfo=UTC)),
    ("4b 00 e3 83 8f", datetime(1998, 5, 8, 9, 51, tzinfo=UTC)),
    ("4e", None),
    ("54", True),
    ("46", False),
    ("00", ""),
    ("05 'hello'", "hello"),
    ("01 c3 83", "\u00c3"),
    ("53 00 05 'hello'", "hello"),
    ("20", b""),
    ("23 01 02 03", b"\x01\x02\x03"),
    ("56 04 '[int' 92 90 91", TypedList("[int", [0, 1])),
    ("57 90 91 d7 ff ff 5a", [0, 1, 262143]),
    ("72 04 '[int' 90 91", TypedList("[int", [0, 1])),
    ("7a 90 91", [0, 1]),
    ("55 04 '[int' 90 91 5a", TypedList("[int", [0, 1])),
    ("58 92 90 91", [0, 1]),
    ("48 91 03 'fee' a0 03 'fie' c9 00 03 'foe' 5a", {1: "fee", 16: "fie", 256: "foe"}),
    (
        "4d 13 'com.caucho.test.Car' 05 'color' 0a 'aquamarine' 05 'model' 06 'Beetle' 5a",
        TypedMap("com.caucho.test.Car", {"color": "aquamarine", "model": "Beetle"}),
    ),
    (
        "43 0b 'example.Car' 92 05 'color' 05 'model' 60 03 'red' 08 'corvette'",
        JavaObject("example.Car", {"color": "red", "model": "corvette"}),
    ),
]


@pytest.mark.parametrize(("wire", "value"), SPEC, ids=[w for w, _ in SPEC])
def test_spec_examples_decode(wire: str, value: object) -> None:
    got = loads(h(wire))
    assert got == value
    assert type(got) is type(value)


def test_spec_objects_share_the_class_definition_and_refer_back() -> None:
    # Two objects of one definition (the spec's 'O' and 0x60 forms), then a reference.
    data = h(
        "43 0b 'example.Car' 92 05 'color' 05 'model' 4f 90 03 'red' 08 'corvette'"
        " 60 05 'green' 05 'civic' 51 90"
    )
    decoder = Hessian2Decoder(data)
    first, second, again = decoder.read(), decoder.read(), decoder.read()
    assert first == JavaObject("example.Car", {"color": "red", "model": "corvette"})
    assert second.fields == {"color": "green", "model": "civic"}
    assert again is first and decoder.at_end()


def test_spec_circular_list_decodes_to_an_object_referring_to_itself() -> None:
    node = loads(h("43 0a 'LinkedList' 92 04 'head' 04 'tail' 60 91 51 90"))
    assert node["head"] == 1 and node["tail"] is node
    assert node == node and "..." in repr(node)


SHORTEST: list[tuple[object, str]] = [
    (47, "bf"),
    (48, "c8 30"),
    (2**31 - 1, "49 7f ff ff ff"),
    (2**31, "4c 00 00 00 00 80 00 00 00"),
    (JavaLong(5), "e5"),
    (JavaLong(2**31 - 1), "59 7f ff ff ff"),
    (0.0, "5b"),
    (1.0, "5c"),
    (-128.0, "5d 80"),
    (300.0, "5e 01 2c"),
    (12.25, "5f 00 00 2f da"),  # hessian-lite's 0x5f: an int of thousandths, not a float32
    (-0.0, "44 80 00 00 00 00 00 00 00"),  # the sign kept (hessian-lite itself sends 0x5b)
    (datetime(1998, 5, 8, 9, 51, tzinfo=UTC), "4b 00 e3 83 8f"),
    ("\U0001f600", "02 ed a0 bd ed b8 80"),  # two UTF-16 units, each 3 bytes, as Java does
    ([1, 2], "7a 91 92"),
    (Decimal("1.5"), "43 14 'java.math.BigDecimal' 91 05 'value' 60 03 '1.5'"),
    (JavaEnum("a.Color", "RED"), "43 07 'a.Color' 91 04 'name' 60 03 'RED'"),
]


@pytest.mark.parametrize(("value", "wire"), SHORTEST, ids=[w for _, w in SHORTEST])
def test_values_are_encoded_in_the_form_java_writes(value: object, wire: str) -> None:
    assert dumps(value) == h(wire)


def test_types_and_class_definitions_are_written_once_per_stream() -> None:
    data = dumps(
        TypedList("[int", [1]), TypedList("[int", [2]), JavaEnum("C", "A"), JavaEnum("C", "B")
    )
    assert data.count(b"[int") == 1 and data.count(b"name") == 1
    decoder = Hessian2Decoder(data, enum_classes={"C"})
    assert [decoder.read() for _ in range(4)] == [[1], [2], JavaEnum("C", "A"), JavaEnum("C", "B")]


def test_values_without_a_java_form_are_refused() -> None:
    with pytest.raises(Hessian2EncodeError, match="no Hessian2 form for a Python object"):
        dumps(object())
    with pytest.raises(Hessian2EncodeError, match="does not fit a Java int"):
        Hessian2Encoder().write_int(2**31)
    with pytest.raises(Hessian2EncodeError, match=r"no java\.math\.BigDecimal form"):
        dumps(Decimal("NaN"))


# ---- properties -------------------------------------------------------------------------------

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_dates = st.integers(
    min_value=(datetime(1, 1, 1, tzinfo=UTC) - _EPOCH) // timedelta(milliseconds=1),
    max_value=(datetime(9999, 12, 31, tzinfo=UTC) - _EPOCH) // timedelta(milliseconds=1),
).map(lambda ms: _EPOCH + timedelta(milliseconds=ms))
_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers().map(JavaBigInteger)
    | st.dates()
    | st.times().map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000))
    | st.datetimes().map(
        lambda d: JavaLocalDateTime.combine(d.date(), d.time().replace(tzinfo=None))
    )
    | _dates.map(lambda d: JavaInstant.combine(d.date(), d.timetz()))
    | st.timedeltas()
    | st.uuids()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1).map(JavaLong)
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary()
    | _dates
    | st.decimals(allow_nan=False, allow_infinity=False)
)
_keys = st.text(max_size=8) | st.integers(min_value=-(2**31), max_value=2**31 - 1)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return (
        st.lists(children, max_size=10)
        | st.dictionaries(_keys, children, max_size=6)
        | st.frozensets(_keys, max_size=6).map(set)
        | st.lists(children, max_size=10).map(
            lambda items: TypedList("java.util.LinkedList", items)
        )
        | st.dictionaries(_keys, children, max_size=6).map(
            lambda d: TypedMap("java.util.TreeMap", d)
        )
        | st.dictionaries(st.sampled_from(["a", "b", "id", "name"]), children, max_size=4).map(
            lambda fields: JavaObject("com.example.Bean", fields)
        )
    )


_values = st.recursive(_scalars, _containers, max_leaves=30)


# Nested values of up to 30 leaves: a few hundred milliseconds of examples each run, and every
# run draws new ones (failures are kept in .hypothesis/ and replayed first).
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_values)
def test_decode_of_encode_is_the_value(value: object) -> None:
    assert loads(dumps(value)) == value


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0x7FF0, max_value=0x8000), st.text(max_size=40), st.integers(1, 3))
def test_strings_around_the_chunk_size_round_trip(filler: int, tail: str, times: int) -> None:
    value = ("x" * filler + tail) * times  # a pair or a multi-byte character at a chunk's end
    assert loads(dumps(value)) == value


@settings(max_examples=100, deadline=None)
@given(st.lists(_values, max_size=4))
def test_several_values_in_one_stream_share_references(values: list[object]) -> None:
    data = dumps(*values, *values)
    decoder = Hessian2Decoder(data)
    assert [decoder.read() for _ in range(2 * len(values))] == values * 2
    assert decoder.at_end()


# ---- hostile bytes ----------------------------------------------------------------------------


def _refused_quickly(data: bytes) -> Hessian2DecodeError:
    started = monotonic()
    with pytest.raises(Hessian2DecodeError) as caught:
        loads(data)
    assert monotonic() - started < 2.0
    return caught.value


@settings(max_examples=1000, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_decode_or_fail_with_the_codec_error(data: bytes) -> None:
    try:
        loads(data)
    except Hessian2DecodeError as error:
        assert 0 <= error.offset <= len(data)
        assert f"at offset {error.offset}" in str(error)


@settings(max_examples=150, deadline=None)
@given(_values, st.data())
def test_every_truncation_is_refused_with_its_offset(value: object, data: st.DataObject) -> None:
    encoded = dumps(value)
    cut = data.draw(st.integers(min_value=0, max_value=len(encoded) - 1))
    error = _refused_quickly(encoded[:cut])
    assert error.offset <= cut


@settings(max_examples=150, deadline=None)
@given(_values, st.data())
def test_flipped_bytes_decode_or_fail_with_the_codec_error(
    value: object, data: st.DataObject
) -> None:
    encoded = bytearray(dumps(value))
    where = data.draw(st.integers(min_value=0, max_value=len(encoded) - 1))
    encoded[where] = data.draw(st.integers(min_value=0, max_value=255))
    with contextlib.suppress(Hessian2DecodeError):
        loads(bytes(encoded))


HOSTILE: list[tuple[str, bytes, str]] = [
    ("empty", b"", "truncated input"),
    ("huge list length", h("58 49 7f ff ff ff 90"), "list of 2147483647 elements declared"),
    ("negative list length", h("58 49 ff ff ff ff"), "list of -1 elements declared"),
    ("huge typed list", h("56 04 '[int' 49 7f ff ff ff"), "list of 2147483647 elements"),
    ("huge string", h("53 ff ff 'abc'"), "truncated string: 65535 characters declared"),
    ("huge binary", h("42 ff ff 01 02"), "truncated binary: 65535 bytes declared"),
    ("endless chunks", h("52 00 01 'a'") * 3, "truncated input"),
    ("unterminated map", h("48 91 91"), "truncated map"),
    ("unterminated list", h("57 91 91"), "truncated list"),
    ("deep lists", h("79") * 100_000 + h("4e"), "nested deeper than 128"),
    ("deep maps", h("48 91") * 100_000, "nested deeper than 128"),
    ("deep objects", h("43 01 'A' 91 01 'f'") + h("60") * 100_000, "nested deeper than 128"),
    ("many class definitions", h("43 01 'A' 90") * 100_000, "truncated input"),
    ("reference ahead", h("51 90"), "reference 0 to no earlier"),
    ("reference far ahead", h("57 51 49 7f ff ff ff 5a"), "reference 2147483647"),
    ("object of no definition", h("60"), "class definition 0, which was not sent"),
    ("type of no definition", h("72 91 90 90"), "type reference 1 to no earlier type"),
    ("class definition alone", h("43 01 'A' 90 90"), "after a class definition, not an object"),
    ("huge field count", h("43 01 'A' 49 7f ff ff ff"), "declares 2147483647 fields"),
    ("reserved byte", h("40"), "byte 0x40 starts no Hessian2 value"),
    ("end byte alone", h("5a"), "byte 0x5a starts no Hessian2 value"),
    ("bad utf-8", h("02 ff 41"), "byte 0xff starts no UTF-8 character"),
    ("overlong utf-8", h("01 c0 80"), "bad UTF-8"),
    ("date out of range", h("4a 7f ff ff ff ff ff ff ff"), "outside Python's years"),
    ("list as a map key", h("48 78 90 5a"), "map key of type list"),
    (
        "bad local date",
        h(
            "43 30 37 'com.alibaba.com.caucho.hessian.io.java8.LocalDateHandle'"
            " 93 04 'year' 05 'month' 03 'day' 60 cf e8 9d 9e"  # month 13
        ),
        "LocalDateHandle with fields",
    ),
    (
        "bad uuid",
        h("43 0e 'java.util.UUID' 91 05 'value' 60 01 'x'"),
        "a java.util.UUID with fields",
    ),
    (
        "bad big integer",
        h("43 14 'java.math.BigInteger' 92 06 'signum' 03 'mag' 60 92 4e"),
        "a java.math.BigInteger with fields",
    ),
    ("bad decimal", h("43 14 'java.math.BigDecimal' 91 05 'value' 60 03 'abc'"), "is no number"),
    ("trailing bytes", h("90 90"), "1 bytes after the value"),
]


@pytest.mark.parametrize(
    ("data", "message"), [(d, m) for _, d, m in HOSTILE], ids=[n for n, _, _ in HOSTILE]
)
def test_hostile_bytes_are_refused_clearly(data: bytes, message: str) -> None:
    error = _refused_quickly(data)
    assert message in str(error)


def test_a_self_referring_list_decodes_without_looping() -> None:
    looped = loads(h("57 51 90 5a"))
    assert looped[0] is looped


def test_depth_limit_is_settable() -> None:
    nested = dumps([[[[1]]]])
    assert loads(nested, max_depth=4) == [[[[1]]]]
    with pytest.raises(Hessian2DecodeError, match="nested deeper than 3"):
        loads(nested, max_depth=3)


def test_lone_surrogates_and_split_pairs_are_kept_as_java_has_them() -> None:
    assert loads(dumps("a\ud800b")) == "a\ud800b"
    # a pair split over two chunks is one character again
    assert loads(h("52 00 01 ed a0 bd 01 ed b8 80")) == "\U0001f600"
