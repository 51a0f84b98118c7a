"""Triple's wrapper messages (dubbo_py.protocol.triple_wrapper.wrapper) against the protobuf
runtime reading and writing the same messages (Dubbo's triple_wrapper.proto, built here from
its descriptor), and the client against a real grpc.aio server on loopback sending what a
provider must not: malformed wrappers, foreign serializations, broken Hessian2."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import grpc
import grpc.aio
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from hypothesis import given
from hypothesis import strategies as st

from dubbo_py.protocol.serialization.hessian2 import JavaObject, dumps, loads
from dubbo_py.protocol.triple_wrapper import (
    HESSIAN4,
    TripleRequestWrapper,
    TripleResponseWrapper,
    TripleWrapperChannels,
    TripleWrapperError,
    WrapperDecodeError,
    invoke,
)


def _messages() -> tuple[Any, Any]:
    file = descriptor_pb2.FileDescriptorProto(
        name="test_triple_wrapper.proto", package="org.apache.dubbo.triple", syntax="proto3"
    )
    string, data = (
        descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
        (descriptor_pb2.FieldDescriptorProto.TYPE_BYTES),
    )
    one = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    many = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
    request = file.message_type.add(name="TripleRequestWrapper")
    request.field.add(name="serializeType", number=1, type=string, label=one)
    request.field.add(name="args", number=2, type=data, label=many)
    request.field.add(name="argTypes", number=3, type=string, label=many)
    response = file.message_type.add(name="TripleResponseWrapper")
    response.field.add(name="serializeType", number=1, type=string, label=one)
    response.field.add(name="data", number=2, type=data, label=one)
    response.field.add(name="type", number=3, type=string, label=one)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return (
        message_factory.GetMessageClass(
            pool.FindMessageTypeByName("org.apache.dubbo.triple.TripleRequestWrapper")
        ),
        message_factory.GetMessageClass(
            pool.FindMessageTypeByName("org.apache.dubbo.triple.TripleResponseWrapper")
        ),
    )


PbRequest, PbResponse = _messages()
texts = st.text(max_size=40)
blobs = st.binary(max_size=300)


@given(
    serialize=texts.filter(bool),
    args=st.lists(blobs, max_size=5),
    types=st.lists(texts, max_size=5),
)
def test_a_request_is_the_protobuf_message_both_ways(
    serialize: str, args: list[bytes], types: list[str]
) -> None:
    ours = TripleRequestWrapper(serialize, tuple(args), tuple(types))
    theirs = PbRequest.FromString(ours.encode())
    assert (theirs.serializeType, list(theirs.args), list(theirs.argTypes)) == (
        serialize,
        args,
        types,
    )
    again = PbRequest(serializeType=serialize, args=args, argTypes=types).SerializeToString()
    assert TripleRequestWrapper.decode(again) == ours


@given(serialize=texts.filter(bool), data=blobs, java_type=texts.filter(bool))
def test_a_response_is_the_protobuf_message_both_ways(
    serialize: str, data: bytes, java_type: str
) -> None:
    ours = TripleResponseWrapper(serialize, data, java_type)
    theirs = PbResponse.FromString(ours.encode())
    assert (theirs.serializeType, theirs.data, theirs.type) == (serialize, data, java_type)
    again = PbResponse(serializeType=serialize, data=data, type=java_type).SerializeToString()
    decoded = TripleResponseWrapper.decode(again)
    # proto3 leaves an empty field out: no data reads as None, as in Dubbo's parser (null).
    assert decoded == TripleResponseWrapper(serialize, data or None, java_type)


def test_a_response_without_data_leaves_the_field_out() -> None:
    encoded = TripleResponseWrapper(HESSIAN4, None, "java.lang.String").encode()
    assert (
        encoded == PbResponse(serializeType=HESSIAN4, type="java.lang.String").SerializeToString()
    )
    assert TripleResponseWrapper.decode(encoded).data is None


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"\x0a\x05hess", "declares 5 bytes, 4 left"),
        (b"\x0a", "truncated varint"),
        (b"\x08\x01", "wire type 0"),
        (b"\x22\x00", "unknown field 4"),
        (b"\x12\xff\xff\xff\xff\x7f", "declares"),
        (b"\x12\xff\xff\xff\xff\xff\x01", "longer than 32 bits"),
        (b"\x0a\x02\xff\xfe", "not UTF-8"),
    ],
)
def test_malformed_bytes_are_refused_naming_what_and_where(data: bytes, says: str) -> None:
    with pytest.raises(WrapperDecodeError, match=says):
        TripleResponseWrapper.decode(data)


@given(st.binary(max_size=200))
def test_any_bytes_decode_or_are_refused_cleanly(data: bytes) -> None:
    for kind in (TripleRequestWrapper, TripleResponseWrapper):
        # Anything but WrapperDecodeError (IndexError, UnicodeError ...) fails the test.
        with contextlib.suppress(WrapperDecodeError):
            kind.decode(data)


# ------------------------------------------------------------------ the client


Handler = Callable[[bytes, grpc.aio.ServicerContext], Any]


class _Server:
    """A grpc.aio server answering /svc.S/<method> with what the test's handler returns."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.seen: list[tuple[bytes, dict[str, str | bytes]]] = []
        self.server = grpc.aio.server()
        self.port = self.server.add_insecure_port("127.0.0.1:0")

        async def unary(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
            self.seen.append((request, dict(context.invocation_metadata() or ())))
            return bytes(await self.handler(request, context))

        class Generic(grpc.GenericRpcHandler):
            def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
                return grpc.unary_unary_rpc_method_handler(unary)

        self.server.add_generic_rpc_handlers((Generic(),))

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


def run(handler: Handler, body: Callable[[_Server, TripleWrapperChannels], Any]) -> Any:
    async def main() -> Any:
        server = _Server(handler)
        await server.server.start()
        pool = TripleWrapperChannels()
        try:
            return await body(server, pool)
        finally:
            await pool.close()
            await server.server.stop(None)

    return asyncio.run(main())


def call(server: _Server, pool: TripleWrapperChannels, **options: Any) -> Any:
    return invoke(
        pool.get(server.address),
        server.address,
        "svc.S",
        "m",
        ["java.lang.String", "int"],
        ["x", 2],
        timeout=5,
        **options,
    )


def ok(value: object, java_type: str = "java.lang.Object") -> bytes:
    return TripleResponseWrapper(HESSIAN4, dumps(value), java_type).encode()


def test_the_request_carries_each_argument_and_the_headers() -> None:
    async def echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        wrapper = TripleRequestWrapper.decode(request)
        return ok(
            [wrapper.serialize_type, [loads(a) for a in wrapper.args], list(wrapper.arg_types)]
        )

    async def body(server: _Server, pool: TripleWrapperChannels) -> None:
        result = await call(
            server,
            pool,
            headers=(("tri-service-version", "1.0.0"),),
            attachments={"traceId": "t-1"},
        )
        assert result.value == [HESSIAN4, ["x", 2], ["java.lang.String", "int"]]
        headers = server.seen[0][1]
        assert headers["tri-service-version"] == "1.0.0"
        assert headers["traceid"] == "t-1"  # lower-cased, the original named in the convert header
        assert "traceId" in str(headers["tri-header-convert"])

    run(echo, body)


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (b"\x0a\x05hess", "malformed response: TripleResponseWrapper"),
        (TripleResponseWrapper("json", b"{}", "x").encode(), "serialized as 'json'"),
        (TripleResponseWrapper(HESSIAN4, b"\x59", "x").encode(), "malformed Hessian2"),
    ],
)
def test_a_broken_response_fails_that_call_and_the_channel_serves_the_next(
    answer: bytes, says: str
) -> None:
    answers = [answer, ok("fine")]

    async def handler(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return answers.pop(0)

    async def body(server: _Server, pool: TripleWrapperChannels) -> None:
        with pytest.raises(TripleWrapperError, match=says) as caught:
            await call(server, pool)
        assert "svc.S#m on 127.0.0.1:" in str(caught.value)
        assert (await call(server, pool)).value == "fine"

    run(handler, body)


def test_an_exception_code_with_a_value_that_is_no_throwable_is_named() -> None:
    async def handler(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        await context.send_initial_metadata((("tri-exception-code", "3"),))
        return ok("not an exception")

    async def body(server: _Server, pool: TripleWrapperChannels) -> None:
        with pytest.raises(TripleWrapperError, match="not a Java Throwable"):
            await call(server, pool)

    run(handler, body)


def test_an_exception_code_with_a_throwable_is_the_java_exception() -> None:
    thrown = JavaObject(
        "java.lang.IllegalStateException",
        {"detailMessage": "broken", "cause": None, "stackTrace": [], "suppressedExceptions": []},
    )

    async def handler(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        await context.send_initial_metadata((("tri-exception-code", "3"),))
        return ok(thrown, "java.lang.String")

    async def body(server: _Server, pool: TripleWrapperChannels) -> None:
        result = await call(server, pool)
        assert result.value is None and result.exception is not None
        assert (result.exception.java_class, result.exception.message) == (
            "java.lang.IllegalStateException",
            "broken",
        )

    run(handler, body)


def test_a_status_is_an_error_with_its_code() -> None:
    async def handler(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "thread pool is exhausted")
        return b""

    async def body(server: _Server, pool: TripleWrapperChannels) -> None:
        with pytest.raises(TripleWrapperError, match="RESOURCE_EXHAUSTED: thread pool") as caught:
            await call(server, pool)
        assert caught.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED

    run(handler, body)


def test_mismatched_types_and_arguments_are_refused_before_sending() -> None:
    async def body(server: _Server, pool: TripleWrapperChannels) -> None:
        with pytest.raises(ValueError, match="1 parameter types for 2 arguments"):
            await invoke(pool.get(server.address), server.address, "svc.S", "m", ["int"], [1, 2])
        assert server.seen == []

    run(lambda request, context: asyncio.sleep(0, ok(None)), body)
