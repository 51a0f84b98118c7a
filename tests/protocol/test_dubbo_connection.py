"""The asyncio ``dubbo://`` client connection against a local asyncio server on 127.0.0.1 that
speaks frames: multiplexing, heartbeats both ways, timeouts, a lost connection, broken framing
(truncated, huge declared length, garbage), reconnecting, and a fuzz test of hostile bytes.

A unit test of one class, so the server is ours; tests/estate/test_java_generic.py is the
same client against Java Dubbo 3.3.6.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dubbo_py import JavaObject
from dubbo_py.consumer.generic import DubboRuntime, GenericReference, unwrap_generic_exception
from dubbo_py.protocol.dubbo.body import (
    decode_response_body,
    encode_request_body,
    encode_response_body,
)
from dubbo_py.protocol.dubbo.connection import (
    DubboCallError,
    DubboConnection,
    DubboConnectionError,
    DubboConnections,
    DubboRemoteError,
    DubboTimeoutError,
)
from dubbo_py.protocol.dubbo.frame import (
    HEADER_LENGTH,
    Frame,
    FrameDecoder,
    Status,
    encode_frame,
    heartbeat_request,
)
from dubbo_py.protocol.serialization.hessian2 import (
    Hessian2Decoder,
    Hessian2Encoder,
    JavaException,
    from_throwable,
)

Handler = Callable[[Frame, asyncio.StreamWriter], Awaitable[None]]


class FrameServer:
    """A TCP server on 127.0.0.1: each request frame it reads goes to ``handler``."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[Frame] = []
        self.events: list[Frame] = []
        self.connections = 0
        self.writers: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None

    async def start(self) -> FrameServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    @property
    def port(self) -> int:
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        decoder = FrameDecoder()
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            while data := await reader.read(65536):
                for frame in decoder.feed(data):
                    (self.events if frame.event else self.requests).append(frame)
                    if not frame.event:
                        await self.handler(frame, writer)
        writer.close()

    def drop_all(self) -> None:
        for writer in self.writers:
            writer.close()

    async def close(self) -> None:
        self.drop_all()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


def respond(frame: Frame, body: bytes, status: int = Status.OK) -> bytes:
    return encode_frame(Frame(request=False, request_id=frame.request_id, body=body, status=status))


def echo_value(frame: Frame) -> Any:
    """The first argument of the request (the fields after version, path, version, method, desc)."""
    decoder = Hessian2Decoder(frame.body)
    head = [decoder.read() for _ in range(5)]
    assert head[0] == "2.0.2"
    return decoder.read()


async def echo(frame: Frame, writer: asyncio.StreamWriter) -> None:
    writer.write(respond(frame, encode_response_body(echo_value(frame))))


@contextlib.asynccontextmanager
async def serving(
    handler: Handler, **options: Any
) -> AsyncIterator[tuple[FrameServer, DubboConnection]]:
    server = await FrameServer(handler).start()
    connection = await DubboConnection.open("127.0.0.1", server.port, **options)
    try:
        yield server, connection
    finally:
        await connection.close()
        await server.close()


async def call(connection: DubboConnection, value: object, timeout: float = 2.0) -> Any:
    response = await connection.invoke(
        "demo.Echo", "echo", ["java.lang.Object"], [value], timeout=timeout
    )
    if response.exception is not None:
        raise response.exception
    return response.value


def test_requests_are_multiplexed_and_matched_by_id() -> None:
    async def main() -> None:
        held: list[Frame] = []

        async def answer_in_reverse(frame: Frame, writer: asyncio.StreamWriter) -> None:
            held.append(frame)
            if len(held) == 10:
                for f in reversed(held):
                    writer.write(respond(f, encode_response_body(echo_value(f))))

        async with serving(answer_in_reverse) as (server, connection):
            results = await asyncio.gather(*(call(connection, f"v{i}") for i in range(10)))
            assert results == [f"v{i}" for i in range(10)]
            assert server.connections == 1
            assert connection.pending == 0

    asyncio.run(main())


def test_the_request_body_is_dubbos_and_values_nulls_and_exceptions_come_back() -> None:
    async def main() -> None:
        async def handler(frame: Frame, writer: asyncio.StreamWriter) -> None:
            value = echo_value(frame)
            if value == "throw":
                error = JavaObject(
                    "java.lang.IllegalStateException",
                    {"detailMessage": "nope", "stackTrace": [], "cause": None},
                )
                writer.write(respond(frame, encode_response_body(exception=error)))
            elif value == "null":
                writer.write(respond(frame, encode_response_body(None)))
            else:
                writer.write(respond(frame, encode_response_body({"got": value})))

        async with serving(handler) as (server, connection):
            assert await call(connection, [1, "x"]) == {"got": [1, "x"]}
            assert await call(connection, "null") is None
            with pytest.raises(JavaException, match="IllegalStateException: nope"):
                await call(connection, "throw")
            decoder = Hessian2Decoder(server.requests[0].body)
            assert [decoder.read() for _ in range(5)] == [
                "2.0.2",
                "demo.Echo",
                "0.0.0",
                "echo",
                "Ljava/lang/Object;",
            ]
            assert decoder.read() == [1, "x"]
            assert decoder.read() == {}
            assert server.requests[0].two_way and server.requests[0].request

    asyncio.run(main())


def test_a_status_other_than_ok_raises_with_the_providers_message() -> None:
    async def main() -> None:
        async def handler(frame: Frame, writer: asyncio.StreamWriter) -> None:
            text = Hessian2Encoder()
            text.write("Service not found: demo.Echo")
            writer.write(respond(frame, text.getvalue(), Status.SERVICE_NOT_FOUND))

        async with serving(handler) as (_server, connection):
            with pytest.raises(
                DubboRemoteError, match=r"SERVICE_NOT_FOUND: Service not found"
            ) as e:
                await call(connection, 1)
            assert e.value.status == Status.SERVICE_NOT_FOUND
            assert not connection.closed

    asyncio.run(main())


def test_a_response_in_another_serialization_is_named_not_misread() -> None:
    async def fastjson2(frame: Frame, writer: asyncio.StreamWriter) -> None:
        body = encode_response_body(echo_value(frame))
        writer.write(
            encode_frame(
                Frame(request=False, request_id=frame.request_id, body=body, serialization=23)
            )
        )

    async def main() -> None:
        async with serving(fastjson2) as (_server, connection):
            with pytest.raises(DubboCallError, match=r"serialization id 23; .* Hessian2 \(2\)"):
                await call(connection, 1)
            assert not connection.closed

    asyncio.run(main())


def test_a_malformed_body_fails_that_call_only() -> None:
    async def main() -> None:
        async def handler(frame: Frame, writer: asyncio.StreamWriter) -> None:
            if echo_value(frame) == "bad":
                writer.write(respond(frame, b"\x91\x53\x00\x10ab"))  # flag 1, a string cut short
            else:
                await echo(frame, writer)

        async with serving(handler) as (_server, connection):
            with pytest.raises(DubboCallError, match=r"malformed response from .*#echo.*offset"):
                await call(connection, "bad")
            assert not connection.closed
            assert await call(connection, "good") == "good"

    asyncio.run(main())


@pytest.mark.parametrize(
    ("garbage", "reason"),
    [
        (b"\xde\xad\xbe\xef" + bytes(12), "bad magic 0xdead"),
        (b"\xda\xbb\x02\x14" + bytes(8) + b"\x7f\xff\xff\xff", "declares a body of 2147483647"),
    ],
    ids=["garbage", "huge-length"],
)
def test_broken_framing_fails_every_pending_call_and_closes(garbage: bytes, reason: str) -> None:
    async def main() -> None:
        seen: list[Frame] = []

        async def handler(frame: Frame, writer: asyncio.StreamWriter) -> None:
            seen.append(frame)
            if len(seen) == 3:
                writer.write(garbage)

        async with serving(handler) as (_server, connection):
            outcomes = await asyncio.gather(
                *(call(connection, i) for i in range(3)), return_exceptions=True
            )
            for outcome in outcomes:
                assert isinstance(outcome, DubboConnectionError), outcome
                assert reason in str(outcome) and "127.0.0.1" in str(outcome)
            assert connection.closed and connection.pending == 0
            with pytest.raises(DubboConnectionError, match=reason):
                await call(connection, "after")

    asyncio.run(main())


def test_a_truncated_frame_then_a_close_fails_the_call_and_the_pool_reconnects() -> None:
    async def main() -> None:
        async def handler(frame: Frame, writer: asyncio.StreamWriter) -> None:
            if echo_value(frame) == "cut":
                whole = respond(frame, encode_response_body("x" * 100))
                writer.write(whole[: HEADER_LENGTH + 10])
                await writer.drain()
                writer.close()
            else:
                await echo(frame, writer)

        server = await FrameServer(handler).start()
        pool = DubboConnections()
        try:
            first = await pool.get("127.0.0.1", server.port)
            with pytest.raises(DubboConnectionError, match="closed by peer"):
                await call(first, "cut")
            assert first.closed
            second = await pool.get("127.0.0.1", server.port)
            assert second is not first and not second.closed
            assert await call(second, "again") == "again"
            assert server.connections == 2
        finally:
            await pool.close()
            await server.close()

    asyncio.run(main())


def test_a_timeout_fails_the_call_and_the_late_response_is_dropped() -> None:
    async def main() -> None:
        async def slow(frame: Frame, writer: asyncio.StreamWriter) -> None:
            value = echo_value(frame)
            if value == "slow":
                await asyncio.sleep(0.3)
            writer.write(respond(frame, encode_response_body(value)))

        async with serving(slow) as (_server, connection):
            with pytest.raises(DubboTimeoutError, match=r"within 0\.1 s"):
                await call(connection, "slow", timeout=0.1)
            assert connection.pending == 0
            await asyncio.sleep(0.3)  # the late answer arrives and matches nothing
            assert await call(connection, "next") == "next"

    asyncio.run(main())


def test_heartbeats_are_sent_when_idle_and_the_servers_are_answered() -> None:
    async def main() -> None:
        async with serving(echo, heartbeat=0.15) as (server, connection):
            await asyncio.sleep(0.45)
            ours = [f for f in server.events if f.request and f.heartbeat]
            assert ours, "no heartbeat sent on an idle connection"
            # The server's heartbeat is answered with an event response of the same id.
            writer = server.writers[0]
            writer.write(encode_frame(heartbeat_request(4242)))
            await writer.drain()
            await asyncio.sleep(0.1)
            assert connection.heartbeats_answered == 1
            assert await call(connection, 1) == 1

    asyncio.run(main())


def test_a_connection_that_reads_nothing_for_three_heartbeats_is_closed() -> None:
    async def main() -> None:
        async def silent(frame: Frame, writer: asyncio.StreamWriter) -> None:
            return None  # never answers, not even heartbeats (the server only reads)

        async with serving(silent, heartbeat=0.1) as (_server, connection):
            with pytest.raises(DubboConnectionError, match=r"read nothing for 0\.3 s"):
                await call(connection, 1, timeout=5)
            assert connection.closed

    asyncio.run(main())


def test_a_refused_connection_is_named() -> None:
    async def main() -> None:
        server = await FrameServer(echo).start()
        port = server.port
        await server.close()
        with pytest.raises(
            DubboConnectionError, match=f"cannot connect to dubbo://127\\.0\\.0\\.1:{port}"
        ):
            await DubboConnection.open("127.0.0.1", port, connect_timeout=1)

    asyncio.run(main())


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.one_of(
        st.binary(max_size=64),
        # A well-formed header of the right id with a random body and length.
        st.tuples(st.binary(max_size=40), st.integers(-5, 2**31 - 1)).map(
            lambda t: (b"\xda\xbb\x02\x14", t)
        ),
    ),
    st.booleans(),
)
def test_hostile_bytes_fail_the_call_cleanly(reply: Any, then_close: bool) -> None:
    """Whatever a provider sends back, the call ends (value or DubboCallError), in bounded
    time, and the pending table is empty afterwards."""

    async def main() -> None:
        async def hostile(frame: Frame, writer: asyncio.StreamWriter) -> None:
            if isinstance(reply, bytes):
                data = reply
            else:
                head, (body, length) = reply
                data = (
                    head
                    + frame.request_id.to_bytes(8, "big", signed=True)
                    + length.to_bytes(4, "big", signed=True)
                    + body
                )
            writer.write(data)
            await writer.drain()
            if then_close:
                writer.close()

        async with serving(hostile) as (_server, connection):
            with contextlib.suppress(DubboCallError, JavaException):
                # Most replies are incomplete and the provider stays silent: the call ends
                # by its timeout, which is waited out once per example (kept short).
                await call(connection, "x", timeout=0.1)
            assert connection.pending == 0

    asyncio.run(main())


def test_a_generic_reference_fails_over_and_does_not_retry_a_java_exception(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runtime = DubboRuntime()
    try:

        async def handler(frame: Frame, writer: asyncio.StreamWriter) -> None:
            decoder = Hessian2Decoder(frame.body)
            head = [decoder.read() for _ in range(5)]
            method, types, args = decoder.read(), decoder.read(), decoder.read()
            attachments = decoder.read()
            assert head[3:] == [
                "$invoke",
                "Ljava/lang/String;[Ljava/lang/String;[Ljava/lang/Object;",
            ]
            assert attachments["generic"] == "true" and attachments["version"] == "1.0.0"
            if method == "boom":
                error = JavaObject(
                    "java.lang.RuntimeException", {"detailMessage": "boom", "stackTrace": []}
                )
                writer.write(respond(frame, encode_response_body(exception=error)))
            else:
                writer.write(
                    respond(frame, encode_response_body([method, list(types), list(args)]))
                )

        server = runtime.run(FrameServer(handler).start())
        dead = runtime.run(FrameServer(echo).start())
        dead_port = dead.port
        runtime.run(dead.close())
        ref = GenericReference(
            "demo.Users",
            runtime,
            urls=[f"dubbo://127.0.0.1:{dead_port}", f"dubbo://127.0.0.1:{server.port}"],
            version="1.0.0",
            loadbalance="roundrobin",
        )
        opened: list[int] = []
        real_open = DubboConnection.open

        async def counting_open(host: str, port: int, **options: Any) -> DubboConnection:
            opened.append(port)
            return await real_open(host, port, **options)

        monkeypatch.setattr(DubboConnection, "open", counting_open)
        for _ in range(6):  # each call may pick the dead one first: failover to the live one
            assert ref.invoke("getUser", ["java.lang.Long"], [7]) == [
                "getUser",
                ["java.lang.Long"],
                [7],
            ]
        # The dead address was tried once, then passed over (its connect just failed).
        assert opened.count(dead_port) == 1 and opened.count(server.port) == 1
        before = len(server.requests)
        with pytest.raises(JavaException, match="boom"):
            ref.invoke("boom", [], [])
        assert len(server.requests) == before + 1  # the provider's answer: not retried
        only_dead = GenericReference(
            "demo.Users", runtime, urls=[f"dubbo://127.0.0.1:{dead_port}"], retries=0
        )
        with pytest.raises(DubboConnectionError, match="cannot connect"):
            only_dead.invoke("getUser", ["java.lang.Long"], [7])
        runtime.run(server.close())
    finally:
        runtime.close()


def test_a_generic_exception_is_unwrapped_to_the_services_exception() -> None:
    # The shape Dubbo 3.3.6's GenericFilter sent in tests/estate/test_java_generic.py: the
    # wrapper's fields carry the class and message, its text the stack and the causes.
    text = (
        "java.lang.IllegalArgumentException: no user 0\n"
        "java.lang.IllegalArgumentException: no user 0\n"
        "\tat estate.UserServiceImpl.getUser(UserServiceImpl.java:20)\n"
        "\tat org.apache.dubbo.rpc.filter.GenericFilter.invoke(GenericFilter.java:218)\n"
        "Caused by: java.lang.IllegalStateException: ids start at 1\n"
        "\t... 47 more\n"
        "Caused by: java.io.IOException\n"
    )
    wrapper = JavaObject(
        "com.alibaba.dubbo.rpc.service.GenericException",
        {
            "detailMessage": text,
            "stackTrace": [],
            "exceptionClass": "java.lang.IllegalArgumentException",
            "exceptionMessage": "no user 0",
        },
    )
    wrapper.fields["cause"] = wrapper
    error = unwrap_generic_exception(from_throwable(wrapper))
    assert (error.java_class, error.message) == ("java.lang.IllegalArgumentException", "no user 0")
    assert error.stack_trace == [
        "estate.UserServiceImpl.getUser(UserServiceImpl.java:20)",
        "org.apache.dubbo.rpc.filter.GenericFilter.invoke(GenericFilter.java:218)",
    ]
    assert error.cause is not None
    assert (error.cause.java_class, error.cause.message) == (
        "java.lang.IllegalStateException",
        "ids start at 1",
    )
    assert error.cause.cause is not None
    assert (error.cause.cause.java_class, error.cause.cause.message) == (
        "java.io.IOException",
        None,
    )
    assert error.raw is wrapper
    # Any other exception is left as it came.
    plain = from_throwable(JavaObject("java.lang.Error", {"detailMessage": "x", "stackTrace": []}))
    assert unwrap_generic_exception(plain) is plain


def test_work_handed_to_a_closed_runtime_is_refused_and_leaves_no_coroutine_behind() -> None:
    # A quarantine probe can race the application's close; it must fail as "not reachable",
    # not leave an unawaited coroutine that Python warns about at exit.
    runtime = DubboRuntime()
    runtime.close()

    async def probe() -> bool:
        return True

    coroutine = probe()
    with pytest.raises(RuntimeError):
        runtime.run(coroutine)
    assert coroutine.cr_frame is None  # closed, so it cannot warn "never awaited"


def test_blocking_callers_share_the_connection_time_out_and_see_it_lost() -> None:
    # invoke_blocking from threads (a blocking generic call's path): answers matched by id
    # across 8 threads, a call the server never answers times out leaving no pending entry
    # (its late answer is dropped), and a dropped connection fails a waiting call at once.
    runtime = DubboRuntime()
    silent: list[Frame] = []

    async def handler(frame: Frame, writer: asyncio.StreamWriter) -> None:
        value = echo_value(frame)
        if value == "silent":
            silent.append(frame)
        elif value == "drop":
            writer.close()
        else:
            writer.write(respond(frame, encode_response_body(value)))

    server = runtime.run(FrameServer(handler).start())
    try:
        connection = runtime.run(runtime.connections.get("127.0.0.1", server.port))

        def echo_blocking(value: object, timeout: float = 2.0) -> Any:
            return connection.invoke_blocking(
                "demo.Echo", "echo", ["java.lang.Object"], [value], timeout=timeout
            ).value

        answers: dict[int, list[Any]] = {}

        def caller(n: int) -> None:
            answers[n] = [echo_blocking(f"{n}-{i}") for i in range(50)]

        threads = [threading.Thread(target=caller, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert answers == {n: [f"{n}-{i}" for i in range(50)] for n in range(8)}
        with pytest.raises(DubboTimeoutError, match=r"within 0\.2 s"):
            echo_blocking("silent", timeout=0.2)
        runtime.run(asyncio.sleep(0))  # the loop drops the id the caller gave up on
        assert connection.pending == 0
        late = silent[0]
        runtime.run(_write_to(server, respond(late, encode_response_body("late"))))
        assert echo_blocking("after") == "after"  # the late answer went nowhere
        with pytest.raises(DubboConnectionError):
            echo_blocking("drop", timeout=5.0)
        assert connection.closed
    finally:
        runtime.run(server.close())
        runtime.close()


async def _write_to(server: FrameServer, data: bytes) -> None:
    server.writers[-1].write(data)
    await server.writers[-1].drain()


def _body(value: object) -> bytes:
    return encode_request_body("demo.Echo", "echo", ["java.lang.Object"], [value])


def _echoed(connection: DubboConnection, value: object, timeout: float | None = 5.0) -> Any:
    frame = connection.call_blocking(_body(value), timeout=timeout)
    return decode_response_body(frame.body).value


def test_blocking_callers_on_many_threads_and_awaited_calls_share_one_connection() -> None:
    # Blocking callers read the socket themselves when nobody else does (one of them leads,
    # settling the others' answers too) and the loop reads otherwise: whoever reads, every
    # call gets its own answer, awaited calls on the loop included.
    runtime = DubboRuntime()
    try:

        async def jittery(frame: Frame, writer: asyncio.StreamWriter) -> None:
            value = echo_value(frame)
            if isinstance(value, int) and value % 7 == 0:
                await asyncio.sleep(0.002)  # answers out of order
            writer.write(respond(frame, encode_response_body(value)))

        server = runtime.run(FrameServer(jittery).start())
        connection = runtime.run(runtime.connections.get("127.0.0.1", server.port))
        wrong: list[tuple[int, Any]] = []

        def worker(base: int) -> None:
            for i in range(base, base + 150):
                got = _echoed(connection, i)
                if got != i:
                    wrong.append((i, got))

        async def awaited() -> list[Any]:
            return [await call(connection, f"a{i}") for i in range(100)]

        threads = [threading.Thread(target=worker, args=(k * 1000,)) for k in range(6)]
        for thread in threads:
            thread.start()
        assert runtime.run(awaited(), timeout=30) == [f"a{i}" for i in range(100)]
        for thread in threads:
            thread.join(30)
        assert wrong == []
        assert connection.pending == 0 and server.connections == 1
        runtime.run(server.close())
    finally:
        runtime.close()


def test_an_idle_connection_closed_by_the_peer_after_blocking_calls_is_noticed() -> None:
    # After a blocking caller read the socket, the loop watches it again: the peer's close of
    # the idle connection closes ours (the pool then opens a new one for the next call).
    runtime = DubboRuntime()
    try:
        server = runtime.run(FrameServer(echo).start())
        connection = runtime.run(runtime.connections.get("127.0.0.1", server.port))
        for i in range(20):
            assert _echoed(connection, i) == i
        server.drop_all()
        for _ in range(200):  # waits for an event, at most 10 s
            if connection.closed:
                break
            threading.Event().wait(0.05)
        assert connection.closed
        with pytest.raises(DubboConnectionError, match="closed by peer"):
            _echoed(connection, "after")
        again = runtime.run(runtime.connections.get("127.0.0.1", server.port))
        assert again is not connection and _echoed(again, "again") == "again"
        runtime.run(server.close())
    finally:
        runtime.close()


def test_closing_a_connection_fails_a_blocking_call_waiting_without_a_timeout() -> None:
    # A blocking caller reading the socket for its answer (no timeout) is not left waiting
    # forever when the connection is closed under it.
    runtime = DubboRuntime()
    try:

        async def silent(frame: Frame, writer: asyncio.StreamWriter) -> None:
            return None

        server = runtime.run(FrameServer(silent).start())
        connection = runtime.run(runtime.connections.get("127.0.0.1", server.port))
        failures: list[BaseException] = []

        def waiting() -> None:
            try:
                _echoed(connection, "never", timeout=None)
            except BaseException as error:
                failures.append(error)

        caller = threading.Thread(target=waiting)
        caller.start()
        for _ in range(200):
            if server.requests:
                break
            threading.Event().wait(0.05)
        runtime.run(connection.close("closed by the test"))
        caller.join(10)
        assert not caller.is_alive()
        assert len(failures) == 1 and isinstance(failures[0], DubboConnectionError)
        assert "closed by the test" in str(failures[0])
        runtime.run(server.close())
    finally:
        runtime.close()
