"""One asyncio ``dubbo://`` client connection to one provider address, shared by every call.

As Dubbo's exchange client (``HeaderExchangeClient``): requests are multiplexed on one TCP
connection and matched to their responses by request id; a heartbeat (an event request with a
null body) goes out when nothing was read or written for ``heartbeat`` seconds (Dubbo's default
60 s), checked every third of that; a connection that read nothing for three heartbeats is
closed as dead (Dubbo's idle timeout, ``3 * heartbeat``); the server's heartbeats are answered.

Failures stay with what they concern. A response body that does not decode fails that one call
(the framing is intact, so the connection carries on). Bytes that break the framing (a bad
magic, a declared length beyond the payload limit) or a lost connection fail every pending call
with :class:`DubboConnectionError` naming the address and the cause, and close the connection:
the table of pending calls is emptied in one place, so no call waits forever and no later
response lands on a wrong call. :class:`DubboConnections` hands out one open connection per
address and opens a new one when the last has closed (Dubbo reconnects the same way, lazily).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Collection, Mapping, Sequence

from ..serialization.hessian2 import Hessian2Decoder, Hessian2Encoder
from ..serialization.hessian2.errors import Hessian2Error
from .body import DubboBodyError, ResponseBody, decode_response_body, encode_request_body
from .frame import (
    HESSIAN2,
    MAX_PAYLOAD,
    NULL_BODY,
    DubboFrameError,
    Frame,
    FrameDecoder,
    RequestIds,
    Status,
    encode_frame,
    heartbeat_request,
    heartbeat_response,
)

__all__ = [
    "DEFAULT_HEARTBEAT",
    "DubboCallError",
    "DubboConnection",
    "DubboConnectionError",
    "DubboConnections",
    "DubboRemoteError",
    "DubboTimeoutError",
]

log = logging.getLogger(__name__)

#: Dubbo's default heartbeat interval (``heartbeat``, 60 000 ms), in seconds.
DEFAULT_HEARTBEAT = 60.0
#: Dubbo's idle timeout is three heartbeats without a byte read.
IDLE_HEARTBEATS = 3
_READ_SIZE = 64 * 1024

#: Seconds an address whose connect failed is passed over while other providers are left
#: (Dubbo's client reconnects every 2 s, its cluster skips an invoker that is not available).
CONNECT_BACKOFF = 2.0

#: Request ids are process-wide, as Dubbo's ``Request`` numbers them.
_IDS = RequestIds()


class DubboCallError(Exception):
    """A ``dubbo://`` call that failed outside the provider's own code (Dubbo's
    ``RpcException``, not a business exception): the caller may retry it elsewhere."""


class DubboConnectionError(DubboCallError):
    """The connection could not be opened, was lost, or received bytes that break the framing."""

    #: The Dubbo failure counter (see JavaException.metrics_failure_reason).
    metrics_failure_reason = "network"


class DubboTimeoutError(DubboCallError, TimeoutError):
    """No response within the call's timeout (the connection stays open)."""


class DubboRemoteError(DubboCallError):
    """The provider answered with a status other than OK (service not found, thread pool
    exhausted, a request it could not decode ...); ``status`` is Dubbo's status byte."""

    def __init__(self, address: str, status: int, message: str) -> None:
        try:
            name = Status(status).name
        except ValueError:
            name = f"status {status}"
        super().__init__(f"{address} answered {name}: {message}")
        self.status = status
        self.remote_message = message


class DubboConnection:
    """One open connection; use :meth:`open`, then :meth:`invoke` or :meth:`request`."""

    def __init__(
        self,
        address: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        heartbeat: float = DEFAULT_HEARTBEAT,
        max_payload: int = MAX_PAYLOAD,
    ) -> None:
        self.address = address
        self._reader = reader
        self._writer = writer
        self._heartbeat = heartbeat
        self._max_payload = max_payload
        self._decoder = FrameDecoder(max_payload=max_payload)
        # Awaited calls wait on asyncio futures, blocking ones (call_blocking) on concurrent
        # futures: both are resolved the same way (done / set_result / set_exception).
        self._pending: dict[int, asyncio.Future[Frame] | concurrent.futures.Future[Frame]] = {}
        self._loop = asyncio.get_running_loop()
        self._closed: DubboConnectionError | None = None
        now = time.monotonic()
        self._last_read = now
        self._last_write = now
        #: Heartbeats sent and server heartbeats answered (for tests and diagnostics).
        self.heartbeats_sent = 0
        self.heartbeats_answered = 0
        self._reader_task = asyncio.create_task(self._read_loop(), name=f"dubbo-read {address}")
        self._heartbeat_task = (
            asyncio.create_task(self._heartbeat_loop(), name=f"dubbo-heartbeat {address}")
            if heartbeat > 0
            else None
        )

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        *,
        connect_timeout: float = 3.0,
        heartbeat: float = DEFAULT_HEARTBEAT,
        max_payload: int = MAX_PAYLOAD,
    ) -> DubboConnection:
        """Connect to ``host:port``; a refusal or a timeout raises DubboConnectionError."""
        address = f"{host}:{port}"
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port), connect_timeout
            )
        except (OSError, TimeoutError) as error:
            raise DubboConnectionError(
                f"cannot connect to dubbo://{address}: {error or type(error).__name__}"
            ) from error
        return cls(address, reader, writer, heartbeat=heartbeat, max_payload=max_payload)

    @property
    def closed(self) -> bool:
        """Whether the connection has closed (it is then never used again)."""
        return self._closed is not None

    @property
    def pending(self) -> int:
        """Calls waiting for their response."""
        return len(self._pending)

    async def request(self, body: bytes, *, timeout: float | None) -> Frame:
        """Send a two-way request with this (serialized) body; its response frame."""
        if self._closed is not None:
            raise self._closed
        request_id = _IDS.next()
        data = encode_frame(
            Frame(request=True, request_id=request_id, body=body), max_payload=self._max_payload
        )
        return await self._exchange(request_id, data, timeout, "response", named=True)

    async def _exchange(
        self, request_id: int, data: bytes, timeout: float | None, what: str, *, named: bool
    ) -> Frame:
        """Write ``data`` (a two-way frame of ``request_id``) and wait for its answer within
        ``timeout`` s, else DubboTimeoutError saying no ``what`` came (naming the request id
        when ``named``)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Frame] = loop.create_future()
        self._pending[request_id] = future
        # A timer on the future rather than asyncio.wait_for: wait_for wraps the wait in
        # futures and callbacks of its own, which cost more loop iterations per call.
        timer = (
            None
            if timeout is None
            else loop.call_later(
                timeout, _expire, future, what, self.address, timeout, request_id if named else None
            )
        )
        try:
            await self._write(data)
            return await future
        except DubboTimeoutError:
            if self._closed is not None:
                raise self._closed from None
            raise
        finally:
            if timer is not None:
                timer.cancel()
            # Whatever happened, the id leaves the table: a late response is then dropped.
            self._pending.pop(request_id, None)
            if not future.done():
                future.cancel()
            elif not future.cancelled():
                future.exception()  # marks it retrieved: the error was raised above

    def call_blocking(self, body: bytes, *, timeout: float | None) -> Frame:
        """:meth:`request` from a thread other than the connection's loop: the frame is
        encoded in the calling thread and handed to the loop to write, and the caller waits
        for the response itself -- no task and no coroutine per call on the loop."""
        if self._closed is not None:
            raise self._closed
        request_id = _IDS.next()
        data = encode_frame(
            Frame(request=True, request_id=request_id, body=body), max_payload=self._max_payload
        )
        future: concurrent.futures.Future[Frame] = concurrent.futures.Future()
        try:
            self._loop.call_soon_threadsafe(self._send_for_thread, request_id, data, future)
        except RuntimeError as error:  # the loop is closed
            raise DubboConnectionError(f"connection to dubbo://{self.address} closed") from error
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            if self._closed is not None:
                raise self._closed from None
            raise DubboTimeoutError(
                f"no response from dubbo://{self.address} within {timeout:g} s"
                f" (request {request_id})"
            ) from None
        finally:
            if not future.done():
                future.cancel()
                # The id leaves the table on the loop: a late response is then dropped.
                with contextlib.suppress(RuntimeError):
                    self._loop.call_soon_threadsafe(self._pending.pop, request_id, None)

    def _send_for_thread(
        self, request_id: int, data: bytes, future: concurrent.futures.Future[Frame]
    ) -> None:
        if future.done():
            return  # the caller gave up before the loop got to it
        if self._closed is not None:
            future.set_exception(self._closed)
            return
        self._pending[request_id] = future
        # No drain: each blocking caller waits for its response before it sends again, so
        # what the transport buffers is bounded by the callers' threads.
        try:
            self._writer.write(data)
            self._last_write = time.monotonic()
        except (OSError, RuntimeError) as error:
            self._fail(DubboConnectionError(f"connection to dubbo://{self.address} lost: {error}"))

    def invoke_blocking(
        self,
        service: str,
        method: str,
        parameter_types: Sequence[str],
        arguments: Sequence[object],
        *,
        version: str = "0.0.0",
        attachments: Mapping[str, object] | None = None,
        timeout: float | None = None,
        enum_classes: Collection[str] = (),
    ) -> ResponseBody:
        """:meth:`invoke` from a thread other than the connection's loop (:meth:`call_blocking`):
        encoding and decoding happen in the calling thread."""
        body = encode_request_body(
            service, method, parameter_types, arguments, version=version, attachments=attachments
        )
        frame = self.call_blocking(body, timeout=timeout)
        return self._response(frame, f"dubbo://{self.address}/{service}#{method}", enum_classes)

    async def ping(self, timeout: float) -> None:
        """Send a heartbeat and wait for the provider's answer to it: a provider whose
        process hangs still has its connections accepted by the kernel, but answers no
        heartbeat (:class:`DubboTimeoutError`)."""
        if self._closed is not None:
            raise self._closed
        request_id = _IDS.next()
        heartbeat = encode_frame(heartbeat_request(request_id))
        await self._exchange(request_id, heartbeat, timeout, "heartbeat answer", named=False)

    async def invoke(
        self,
        service: str,
        method: str,
        parameter_types: Sequence[str],
        arguments: Sequence[object],
        *,
        version: str = "0.0.0",
        attachments: Mapping[str, object] | None = None,
        timeout: float | None = None,
        enum_classes: Collection[str] = (),
    ) -> ResponseBody:
        """One call: the response body read (value or ``JavaException``, attachments).

        A non-OK status raises :class:`DubboRemoteError`; a body that does not decode raises
        :class:`DubboCallError` naming the address, the method and the decoder's offset."""
        body = encode_request_body(
            service, method, parameter_types, arguments, version=version, attachments=attachments
        )
        frame = await self.request(body, timeout=timeout)
        return self._response(frame, f"dubbo://{self.address}/{service}#{method}", enum_classes)

    def _response(self, frame: Frame, where: str, enum_classes: Collection[str]) -> ResponseBody:
        if frame.serialization != HESSIAN2:
            raise DubboCallError(
                f"{where} answered in serialization id {frame.serialization}; dubbo-py reads"
                f" Hessian2 ({HESSIAN2}) only"
            )
        if frame.status != Status.OK:
            raise DubboRemoteError(self.address, frame.status, _error_message(frame.body))
        try:
            return decode_response_body(frame.body, enum_classes=enum_classes)
        except (Hessian2Error, DubboBodyError) as error:
            raise DubboCallError(f"malformed response from {where}: {error}") from error

    async def close(self, reason: str = "closed by this side") -> None:
        """Close the connection; pending calls fail with DubboConnectionError."""
        self._fail(DubboConnectionError(f"connection to dubbo://{self.address} {reason}"))
        tasks = [t for t in (self._reader_task, self._heartbeat_task) if t is not None]
        current = asyncio.current_task()
        for task in tasks:
            if task is not current:
                task.cancel()
        for task in tasks:
            if task is not current:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    # ------------------------------------------------------------------ internals

    async def _write(self, data: bytes) -> None:
        try:
            self._writer.write(data)
            self._last_write = time.monotonic()
            await self._writer.drain()
        except (OSError, RuntimeError) as error:
            self._fail(DubboConnectionError(f"connection to dubbo://{self.address} lost: {error}"))
            assert self._closed is not None
            raise self._closed from error

    def _fail(self, error: DubboConnectionError) -> None:
        """Close once; every pending call fails with ``error``."""
        if self._closed is not None:
            return
        self._closed = error
        pending, self._pending = self._pending, {}
        for future in pending.values():
            _settle(future, error)
        with contextlib.suppress(Exception):
            self._writer.close()

    async def _read_loop(self) -> None:
        try:
            while True:
                data = await self._reader.read(_READ_SIZE)
                if not data:
                    self._fail(
                        DubboConnectionError(f"connection to dubbo://{self.address} closed by peer")
                    )
                    return
                self._last_read = time.monotonic()
                try:
                    frames = self._decoder.feed(data)
                except DubboFrameError as error:
                    self._fail(
                        DubboConnectionError(
                            f"malformed frame from dubbo://{self.address}: {error};"
                            " connection closed"
                        )
                    )
                    return
                for frame in frames:
                    await self._dispatch(frame)
        except asyncio.CancelledError:
            raise
        except (OSError, DubboConnectionError) as error:
            self._fail(DubboConnectionError(f"connection to dubbo://{self.address} lost: {error}"))

    async def _dispatch(self, frame: Frame) -> None:
        if frame.request:
            if frame.event and frame.two_way:
                # A server heartbeat (or another event): answered with the same id.
                await self._write(encode_frame(heartbeat_response(frame)))
                self.heartbeats_answered += 1
            elif frame.two_way:
                # The server calling back (Dubbo's callbacks): not supported; said so, not hung.
                refusal = Frame(
                    request=False,
                    request_id=frame.request_id,
                    body=_hessian_string(
                        "dubbo-py does not serve callbacks on consumer connections"
                    ),
                    status=Status.SERVICE_NOT_FOUND,
                )
                await self._write(encode_frame(refusal))
            return
        future = self._pending.pop(frame.request_id, None)
        if future is None:
            # The answer to a heartbeat, or a response after its call timed out.
            if not frame.event:
                log.debug("dubbo://%s: response %d has no call", self.address, frame.request_id)
            return
        _settle(future, frame)

    async def _heartbeat_loop(self) -> None:
        tick = self._heartbeat / 3
        while self._closed is None:
            await asyncio.sleep(tick)
            now = time.monotonic()
            if now - self._last_read >= IDLE_HEARTBEATS * self._heartbeat:
                self._fail(
                    DubboConnectionError(
                        f"connection to dubbo://{self.address} read nothing for "
                        f"{IDLE_HEARTBEATS * self._heartbeat:g} s; closed as dead"
                    )
                )
                return
            if (
                now - self._last_read >= self._heartbeat
                or now - self._last_write >= self._heartbeat
            ):
                with contextlib.suppress(DubboConnectionError):
                    await self._write(encode_frame(heartbeat_request(_IDS.next())))
                    self.heartbeats_sent += 1


def _hessian_string(text: str) -> bytes:
    out = Hessian2Encoder()
    out.write(text)
    return out.getvalue()


def _error_message(body: bytes) -> str:
    """The error text of a non-OK response (a Hessian2 string), or what can be said of it."""
    if body in (b"", NULL_BODY):
        return "(no message)"
    try:
        value = Hessian2Decoder(body).read()
    except Hessian2Error as error:
        return f"(unreadable error message: {error})"
    return value if isinstance(value, str) else repr(value)


def _settle(
    future: asyncio.Future[Frame] | concurrent.futures.Future[Frame],
    outcome: Frame | BaseException,
) -> None:
    """Resolve a waiting call with its frame or error, unless it is done already: a blocking
    caller may cancel its concurrent future from its own thread at any moment (a timeout)."""
    if future.done():
        return
    try:
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
    except (asyncio.InvalidStateError, concurrent.futures.InvalidStateError):
        pass  # cancelled by its caller between the check and now


def _expire(
    future: asyncio.Future[Frame], what: str, address: str, timeout: float, request_id: int | None
) -> None:
    """A request's timer: its call fails with DubboTimeoutError unless answered meanwhile (the
    message made here, only when it is needed)."""
    if not future.done():
        named = "" if request_id is None else f" (request {request_id})"
        future.set_exception(
            DubboTimeoutError(f"no {what} from dubbo://{address} within {timeout:g} s{named}")
        )


class DubboConnections:
    """One shared connection per provider address, opened on first use and again after it
    closed. Belongs to one event loop."""

    def __init__(
        self,
        *,
        connect_timeout: float = 3.0,
        heartbeat: float = DEFAULT_HEARTBEAT,
        max_payload: int = MAX_PAYLOAD,
    ) -> None:
        self._connect_timeout = connect_timeout
        self._heartbeat = heartbeat
        self._max_payload = max_payload
        self._connections: dict[str, DubboConnection] = {}
        self._opening: dict[str, asyncio.Future[DubboConnection]] = {}
        self._failed_at: dict[str, float] = {}
        self._closed = False

    async def get(self, host: str, port: int) -> DubboConnection:
        """The open connection to ``host:port`` (opened now when there is none)."""
        if self._closed:
            raise DubboConnectionError("the connection pool is closed")
        address = f"{host}:{port}"
        connection = self._connections.get(address)
        if connection is not None and not connection.closed:
            return connection
        opening = self._opening.get(address)
        if opening is not None:
            return await asyncio.shield(opening)
        future: asyncio.Future[DubboConnection] = asyncio.get_running_loop().create_future()
        self._opening[address] = future
        try:
            connection = await DubboConnection.open(
                host,
                port,
                connect_timeout=self._connect_timeout,
                heartbeat=self._heartbeat,
                max_payload=self._max_payload,
            )
        except BaseException as error:
            if isinstance(error, DubboConnectionError):
                self._failed_at[address] = time.monotonic()
            future.set_exception(error)
            future.exception()  # retrieved: callers waiting on it see it, nobody else must
            raise
        finally:
            self._opening.pop(address, None)
        self._failed_at.pop(address, None)
        if old := self._connections.get(address):
            await old.close("replaced")
        self._connections[address] = connection
        future.set_result(connection)
        return connection

    def recently_failed(self, address: str) -> bool:
        """Whether a connect to ``address`` failed within the last :data:`CONNECT_BACKOFF` s
        (and none has succeeded since)."""
        failed = self._failed_at.get(address)
        return failed is not None and time.monotonic() - failed < CONNECT_BACKOFF

    def connection(self, address: str) -> DubboConnection | None:
        """The connection to ``address`` if one was opened (open or not)."""
        return self._connections.get(address)

    async def close(self) -> None:
        """Close every connection."""
        self._closed = True
        connections, self._connections = self._connections, {}
        for connection in connections.values():
            await connection.close()
