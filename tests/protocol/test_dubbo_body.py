"""dubbo:// bodies against Java: the request body dubbo-py writes is the one hessian-lite writes
for the same invocation, and the response bodies Java writes (a value, null, an exception) read
back as Dubbo means them."""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Iterator

import pytest

from dubbo_py.protocol.dubbo.body import (
    DubboBodyError,
    decode_response_body,
    descriptor,
    encode_request_body,
    encode_response_body,
    parameter_types_desc,
)
from dubbo_py.protocol.serialization.hessian2 import JavaLong, JavaObject, dumps
from dubbo_py.protocol.serialization.hessian2.errors import Hessian2DecodeError
from tests.support.peers import ensure_built
from tests.support.processes import start_ready


@pytest.fixture(scope="module")
def java() -> Iterator[subprocess.Popen[str]]:
    peer = ensure_built("java", "hessian")
    proc, _ = start_ready(
        peer.java_command("hessian.HessianOracle"), 60, "the Hessian2 oracle", stdin=subprocess.PIPE
    )
    try:
        yield proc
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def stream(proc: subprocess.Popen[str], name: str) -> bytes:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(f"stream {name}\n")
    proc.stdin.flush()
    while True:
        line = proc.stdout.readline()
        assert line, "the oracle ended"
        if line.startswith(("OK ", "ERR ")):
            assert line.startswith("OK "), line
            return base64.b64decode(line[3:])


def test_parameter_types_are_jvm_descriptors() -> None:
    assert parameter_types_desc(["long", "java.lang.String", "int[]", "[Ljava.lang.String;"]) == (
        "JLjava/lang/String;[I[Ljava/lang/String;"
    )
    assert descriptor("com.example.User[][]") == "[[Lcom/example/User;"
    with pytest.raises(DubboBodyError, match="an empty parameter type"):
        descriptor(" ")


def test_request_body_is_byte_for_byte_what_java_writes(java: subprocess.Popen[str]) -> None:
    ours = encode_request_body(
        "com.example.UserService",
        "getUser",
        ["long", "java.lang.String"],
        [JavaLong(7), "x"],
        version="1.0",
        attachments={"path": "com.example.UserService", "timeout": "3000"},
    )
    theirs = stream(java, "request")
    # the attachments are a HashMap on the Java side: compare them apart from their order
    assert ours[: ours.index(b"H")] == theirs[: theirs.index(b"H")]
    assert sorted(ours[ours.index(b"H") :]) == sorted(theirs[theirs.index(b"H") :])


def test_java_response_bodies_read_as_dubbo_means_them(java: subprocess.Popen[str]) -> None:
    value = decode_response_body(stream(java, "response-value"), enum_classes={"hessian.Color"})
    assert isinstance(value.value, JavaObject) and value.value["age"] == 42
    assert value.exception is None and value.attachments == {"dubbo": "2.0.2"}
    empty = decode_response_body(stream(java, "response-null"))
    assert empty.value is None and empty.exception is None and empty.attachments == {}
    failed = decode_response_body(stream(java, "response-exception"))
    assert failed.exception is not None
    assert str(failed.exception) == "java.lang.IllegalStateException: no such user"
    assert failed.attachments == {"dubbo": "2.0.2"}


def test_response_bodies_round_trip_and_malformed_ones_are_named() -> None:
    body = encode_response_body([1, 2], attachments={"k": "v"})
    got = decode_response_body(body)
    assert got.value == [1, 2] and got.attachments == {"k": "v"}
    with pytest.raises(DubboBodyError, match="response flag 9 is none of Dubbo's"):
        decode_response_body(dumps(9))
    with pytest.raises(DubboBodyError, match="says exception but carries a str"):
        decode_response_body(dumps(0, "oops"))
    with pytest.raises(DubboBodyError, match="response attachments are a list"):
        decode_response_body(dumps(5, []))
    with pytest.raises(DubboBodyError, match="2 parameters, 1 arguments"):
        encode_request_body("S", "m", ["int", "int"], [1])


THROWABLE = JavaObject("java.lang.Throwable", {"detailMessage": "no", "stackTrace": []})


def test_one_trailing_null_as_dubbo_go_writes_it_is_accepted() -> None:
    # dubbo-go 3.3.2 appends one Hessian null (N) after every response body.
    body = encode_response_body("gu1: zoë", attachments={"dubbo": "2.0.2"})
    got = decode_response_body(body + b"N")
    assert got.value == "gu1: zoë" and got.attachments == {"dubbo": "2.0.2"}
    failed = decode_response_body(encode_response_body(exception=THROWABLE) + b"N")
    assert failed.exception is not None and failed.exception.message == "no"
    # without attachments (a pre-2.0.2 consumer) the null follows the value itself
    assert decode_response_body(dumps(1, 7) + b"N").value == 7
    assert decode_response_body(dumps(2) + b"N").value is None


def test_other_bytes_after_the_last_value_are_refused_with_their_offset() -> None:
    body = encode_response_body([1, 2], attachments={"k": "v"})
    with pytest.raises(Hessian2DecodeError, match=f"2 bytes after .* at offset {len(body)}$"):
        decode_response_body(body + b"NN")
    with pytest.raises(Hessian2DecodeError, match=f"1 bytes after .* at offset {len(body)}$"):
        decode_response_body(body + b"\x90")
    with pytest.raises(Hessian2DecodeError, match=f"2 bytes after .* at offset {len(body)}$"):
        decode_response_body(body + b"\x90N")
