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

Blocking callers (:meth:`DubboConnection.call_blocking`, a generic reference's blocking calls)
do not hop through the loop. The connection's socket is the loop's (``add_reader``; no
transport): a caller writes its request on its own thread, under the connection's send lock,
straight to the socket (what the kernel does not take waits in the connection's own buffer,
which the loop flushes when the socket is writable; later writes queue behind it, so frames
never interleave), and waits on a lock of its own that the loop releases when the response is
read. Per call that spares the loop a wake-up, a callback and a write, and the caller a
``concurrent.futures.Future``.

Reading is done by whoever holds the connection's read token. Usually that is the loop; but a
blocking caller that finds the token free after sending takes it and reads the socket itself
(a leader: it settles every response it reads, its own and others', and answers the server's
heartbeats) until its own response is in, so an uncontended blocking call wakes no second
thread at all. While a caller leads, the loop stops watching the socket (readiness would wake
it for nothing); it watches again when a leader leaves with calls still pending, and half a
second after it stopped in any case, so a peer that closes an idle connection is still noticed
at once by the loop, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import select
import socket
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ..serialization.hessian2 import Hessian2Decoder, Hessian2Encoder
from ..serialization.hessian2.errors import Hessian2Error
from .body import DubboBodyError, ResponseBody, decode_response_body, encode_request_body
from .frame import (
    FLAG_REQUEST,
    FLAG_TWOWAY,
    HEADER_STRUCT,
    HESSIAN2,
    MAGIC,
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
#: Bytes waiting in a connection's send buffer beyond which an awaited write waits for them to
#: drain and the loop stops reading (a peer that does not read its heartbeats' answers is not
#: buffered for without bound), as a transport's high-water mark.
_HIGH_WATER = 64 * 1024
#: Seconds after the loop stopped watching the socket (a caller's thread reading) that it
#: looks again whether it should (the socket idle: a peer's close is then noticed).
_REWATCH = 0.5
#: Milliseconds a leader with no deadline polls before it checks the connection is still open.
_LEAD_POLL_MS = 1000

#: Seconds an address whose connect failed is passed over while other providers are left
#: (Dubbo's client reconnects every 2 s, its cluster skips an invoker that is not available).
CONNECT_BACKOFF = 2.0

#: Request ids are process-wide, as Dubbo's ``Request`` numbers them.
_IDS = RequestIds()
_REQUEST_HEAD = HEADER_STRUCT.pack
_REQUEST_FLAG = FLAG_REQUEST | FLAG_TWOWAY | HESSIAN2


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


class _Waiter:
    """Where a blocking caller waits for its response: a lock it holds until the loop
    releases it (cheaper than a ``concurrent.futures.Future``: no condition, no callbacks).
    Settled once, by whoever took it out of the pending table (the reader or a failure)."""

    __slots__ = ("_lock", "outcome")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self.outcome: Frame | BaseException | None = None

    def done(self) -> bool:
        return self.outcome is not None

    def settle(self, outcome: Frame | BaseException) -> None:
        if self.outcome is None:
            self.outcome = outcome
            self._lock.release()

    def wait(self, timeout: float | None) -> None:
        """Until settled, or ``timeout`` s (None: no limit); :attr:`outcome` says which."""
        self._lock.acquire(timeout=-1 if timeout is None else max(timeout, 0.0))


class DubboConnection:
    """One open connection; use :meth:`open`, then :meth:`invoke` or :meth:`request` (on the
    connection's loop), or :meth:`invoke_blocking` / :meth:`call_blocking` (from any other
    thread)."""

    def __init__(
        self,
        address: str,
        sock: socket.socket,
        *,
        heartbeat: float = DEFAULT_HEARTBEAT,
        max_payload: int = MAX_PAYLOAD,
    ) -> None:
        self.address = address
        sock.setblocking(False)
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            # Requests are small and each waits for its answer: no Nagle delay (as Netty's
            # TCP_NODELAY in Dubbo, and asyncio's transports, have it).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        self._fd = sock.fileno()
        self._heartbeat = heartbeat
        self._max_payload = max_payload
        self._decoder = FrameDecoder(max_payload=max_payload)
        # Awaited calls wait on asyncio futures, blocking ones (call_blocking) on _Waiters.
        self._pending: dict[int, asyncio.Future[Frame] | _Waiter] = {}
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        #: Held while bytes go to the socket or its buffer, and while the connection closes:
        #: writes from the callers' threads and the loop's keep their order and never
        #: interleave, and none lands after the close.
        self._send_lock = threading.Lock()
        #: Bytes the kernel did not take yet (flushed by the loop when the socket is writable).
        self._out = bytearray()
        self._drain_waiters: list[asyncio.Future[None]] = []
        #: Held by whoever reads the socket and feeds the frame decoder: the loop, or a
        #: blocking caller reading for its own response (a leader).
        self._read_token = threading.Lock()
        self._poll = select.poll()
        self._poll.register(self._fd, select.POLLIN)
        #: Whether the loop watches the socket for reading (changed on the loop only).
        self._watching = True
        #: Whether reading is held back because the peer does not take what we send it.
        self._held_back = False
        self._rewatch_timer: asyncio.TimerHandle | None = None
        self._closed: DubboConnectionError | None = None
        now = time.monotonic()
        self._last_read = now
        self._last_write = now
        #: Heartbeats sent and server heartbeats answered (for tests and diagnostics).
        self.heartbeats_sent = 0
        self.heartbeats_answered = 0
        self._loop.add_reader(self._fd, self._on_readable)
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
            sock = await asyncio.wait_for(_connect(host, port), connect_timeout)
        except (OSError, TimeoutError) as error:
            raise DubboConnectionError(
                f"cannot connect to dubbo://{address}: {error or type(error).__name__}"
            ) from error
        return cls(address, sock, heartbeat=heartbeat, max_payload=max_payload)

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
        data = _request_frame(request_id, body, self._max_payload)
        return await self._exchange(request_id, data, timeout, "response", named=True)

    async def _exchange(
        self, request_id: int, data: bytes, timeout: float | None, what: str, *, named: bool
    ) -> Frame:
        """Write ``data`` (a two-way frame of ``request_id``) and wait for its answer within
        ``timeout`` s, else DubboTimeoutError saying no ``what`` came (naming the request id
        when ``named``)."""
        loop = self._loop
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
        encoded and written in the calling thread, and the caller waits for its response
        itself (released by the loop, which reads it) -- nothing runs on the loop for the
        request, no task and no coroutine."""
        request_id = _IDS.next()
        data = _request_frame(request_id, body, self._max_payload)
        waiter = _Waiter()
        pending = self._pending
        with self._send_lock:
            if self._closed is not None:
                raise self._closed
            pending[request_id] = waiter
            lost = self._send_locked(data)
        if lost is not None:
            pending.pop(request_id, None)
            self._fail(lost)
            raise lost
        try:
            if self._read_token.acquire(blocking=False):
                try:
                    self._lead(waiter, timeout)
                finally:
                    self._read_token.release()
                if self._pending:
                    # Calls still wait whose answers nobody reads now: the loop's turn again.
                    self._on_loop(self._watch)
            else:
                waiter.wait(timeout)
        finally:
            if waiter.outcome is None:
                # Timed out (or interrupted): the id leaves the table, so a late response is
                # dropped. One that came between the timeout and now is still taken.
                pending.pop(request_id, None)
        outcome = waiter.outcome
        if type(outcome) is Frame:
            return outcome
        if outcome is None:
            if self._closed is not None:
                raise self._closed
            raise DubboTimeoutError(
                f"no response from dubbo://{self.address} within {timeout:g} s"
                f" (request {request_id})"
            )
        assert isinstance(outcome, BaseException)
        raise outcome

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
        encoding, writing and decoding happen in the calling thread."""
        body = encode_request_body(
            service, method, parameter_types, arguments, version=version, attachments=attachments
        )
        frame = self.call_blocking(body, timeout=timeout)
        return self._response(frame, service, method, enum_classes)

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
        return self._response(frame, service, method, enum_classes)

    def _response(
        self, frame: Frame, service: str, method: str, enum_classes: Collection[str]
    ) -> ResponseBody:
        if frame.serialization != HESSIAN2:
            raise DubboCallError(
                f"dubbo://{self.address}/{service}#{method} answered in serialization id "
                f"{frame.serialization}; dubbo-py reads Hessian2 ({HESSIAN2}) only"
            )
        if frame.status != Status.OK:
            raise DubboRemoteError(self.address, frame.status, _error_message(frame.body))
        try:
            return decode_response_body(frame.body, enum_classes=enum_classes)
        except (Hessian2Error, DubboBodyError) as error:
            raise DubboCallError(
                f"malformed response from dubbo://{self.address}/{service}#{method}: {error}"
            ) from error

    async def close(self, reason: str = "closed by this side") -> None:
        """Close the connection; pending calls fail with DubboConnectionError."""
        self._fail(DubboConnectionError(f"connection to dubbo://{self.address} {reason}"))
        task = self._heartbeat_task
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # ------------------------------------------------------------------ internals

    def _on_loop(self, function: Any, *arguments: Any) -> None:
        """Run ``function`` on the connection's loop: now when called there, else soon."""
        if threading.get_ident() == self._loop_thread:
            function(*arguments)
        else:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to tidy
                self._loop.call_soon_threadsafe(function, *arguments)

    def _lead(self, waiter: _Waiter, timeout: float | None) -> None:
        """Read the socket on this (caller's) thread, the read token held, until ``waiter``
        is settled, the connection closes or ``timeout`` s pass."""
        deadline = None if timeout is None else time.monotonic() + timeout
        poll = self._poll.poll
        while waiter.outcome is None and self._closed is None:
            if deadline is None:
                # Never an unbounded poll: the loop closes the socket after shutting it down,
                # and a poll entered in between could sit on its descriptor number reused by
                # another socket; a bounded one looks at ``_closed`` again.
                ready = poll(_LEAD_POLL_MS)
            else:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                ready = poll(left * 1000 + 1)  # milliseconds, rounded up
            if ready:
                self._read_available()

    def _send_locked(self, data: bytes) -> DubboConnectionError | None:
        """Write ``data`` (the send lock held): to the socket when nothing waits before it,
        else behind what waits; the loop flushes the rest. The error when the connection is
        lost (the caller closes it, outside the lock)."""
        out = self._out
        if out:
            out += data
        else:
            try:
                sent = self._sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as error:
                return DubboConnectionError(f"connection to dubbo://{self.address} lost: {error}")
            if sent < len(data):
                out += memoryview(data)[sent:]
                self._on_loop(self._want_write)
        self._last_write = time.monotonic()
        return None

    def _send(self, data: bytes) -> None:
        """Write ``data`` from any thread; a closed or lost connection raises (and closes)."""
        with self._send_lock:
            if self._closed is not None:
                raise self._closed
            lost = self._send_locked(data)
        if lost is not None:
            self._fail(lost)
            raise lost

    def _want_write(self) -> None:
        if self._closed is None:
            self._loop.add_writer(self._fd, self._on_writable)

    def _on_writable(self) -> None:
        """The loop: the socket takes bytes again; flush the buffer."""
        lost: DubboConnectionError | None = None
        with self._send_lock:
            out = self._out
            if out and self._closed is None:
                try:
                    sent = self._sock.send(out)
                except (BlockingIOError, InterruptedError):
                    sent = 0
                except OSError as error:
                    lost = DubboConnectionError(
                        f"connection to dubbo://{self.address} lost: {error}"
                    )
                    sent = 0
                del out[:sent]
            empty = not out
            if empty:
                self._loop.remove_writer(self._fd)
        if lost is not None:
            self._fail(lost)
            return
        if empty:
            waiters, self._drain_waiters = self._drain_waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
            if self._held_back:
                self._held_back = False
                self._watch()

    async def _write(self, data: bytes) -> None:
        """Write ``data`` on the loop, waiting while the send buffer is beyond its mark."""
        self._send(data)
        if len(self._out) > _HIGH_WATER:
            waiter: asyncio.Future[None] = self._loop.create_future()
            self._drain_waiters.append(waiter)
            await waiter

    def _fail(self, error: DubboConnectionError) -> None:
        """Close once (from any thread); every pending call fails with ``error``."""
        with self._send_lock:
            if self._closed is not None:
                return
            self._closed = error
            pending, self._pending = self._pending, {}
            self._out.clear()
        on_loop = threading.get_ident() == self._loop_thread
        for future in pending.values():
            if on_loop or type(future) is _Waiter:
                _settle(future, error)
            else:
                with contextlib.suppress(RuntimeError):  # the loop is closed
                    self._loop.call_soon_threadsafe(_settle, future, error)
        self._on_loop(self._release)

    def _release(self) -> None:
        """The loop, once closed: awaited writes told, the socket unwatched and closed."""
        assert self._closed is not None
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(self._closed)
                waiter.exception()  # raised where it is awaited, or by nobody
        if self._rewatch_timer is not None:
            self._rewatch_timer.cancel()
        with contextlib.suppress(Exception):
            self._loop.remove_reader(self._fd)
        with contextlib.suppress(Exception):
            self._loop.remove_writer(self._fd)
        # A leader may be polling the socket: a shutdown wakes it (a close alone would not),
        # and it finds its call failed.
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._sock.close()

    def _watch(self) -> None:
        """The loop watches the socket again (unless closed or held back)."""
        if self._closed is None and not self._watching and not self._held_back:
            self._watching = True
            self._loop.add_reader(self._fd, self._on_readable)

    def _unwatch(self) -> None:
        if self._watching:
            self._watching = False
            self._loop.remove_reader(self._fd)

    def _rewatch(self) -> None:
        self._rewatch_timer = None
        if self._closed is not None:
            return
        if self._read_token.locked():
            # A caller's thread still reads: look again later rather than be woken for it.
            self._rewatch_timer = self._loop.call_later(_REWATCH, self._rewatch)
        else:
            self._watch()

    def _on_readable(self) -> None:
        """The loop: bytes arrived; each frame they complete is dispatched."""
        if not self._read_token.acquire(blocking=False):
            # A caller's thread reads the socket now: stop watching it (its readiness would
            # wake the loop over and over) until that thread leaves, or a while has passed.
            self._unwatch()
            if self._rewatch_timer is None:
                self._rewatch_timer = self._loop.call_later(_REWATCH, self._rewatch)
            return
        try:
            self._read_available()
        finally:
            self._read_token.release()
        if len(self._out) > _HIGH_WATER and self._closed is None:
            # The peer does not read what we answer it: read no more until it does.
            self._held_back = True
            self._unwatch()

    def _read_available(self) -> None:
        """Read what the socket has and dispatch the frames it completes (the read token
        held, on the loop or a leader's thread)."""
        try:
            data = self._sock.recv(_READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            self._fail(DubboConnectionError(f"connection to dubbo://{self.address} lost: {error}"))
            return
        if not data:
            self._fail(DubboConnectionError(f"connection to dubbo://{self.address} closed by peer"))
            return
        self._last_read = time.monotonic()
        try:
            frames = self._decoder.feed(data)
        except DubboFrameError as error:
            self._fail(
                DubboConnectionError(
                    f"malformed frame from dubbo://{self.address}: {error}; connection closed"
                )
            )
            return
        try:
            for frame in frames:
                self._dispatch(frame)
        except DubboConnectionError:
            return  # lost while answering the server: closed, every call told

    def _dispatch(self, frame: Frame) -> None:
        if frame.request:
            if frame.event and frame.two_way:
                # A server heartbeat (or another event): answered with the same id.
                self._send(encode_frame(heartbeat_response(frame)))
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
                self._send(encode_frame(refusal))
            return
        future = self._pending.pop(frame.request_id, None)
        if future is None:
            # The answer to a heartbeat, or a response after its call timed out.
            if not frame.event:
                log.debug("dubbo://%s: response %d has no call", self.address, frame.request_id)
            return
        if type(future) is _Waiter or threading.get_ident() == self._loop_thread:
            _settle(future, frame)
        else:  # an awaited call's answer, read by a leader: settled on the loop
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(_settle, future, frame)

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


async def _connect(host: str, port: int) -> socket.socket:
    """A connected non-blocking TCP socket to ``host:port`` (each address the name resolves
    to tried in turn, as asyncio's ``open_connection`` does)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    if not infos:
        raise OSError(f"{host} resolves to no address")
    error: OSError | None = None
    for family, kind, proto, _name, address in infos:
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, address)
        except OSError as exc:
            sock.close()
            error = exc
            continue
        except BaseException:
            sock.close()
            raise
        return sock
    assert error is not None
    raise error


def _request_frame(request_id: int, body: bytes, max_payload: int) -> bytes:
    """A two-way Hessian2 request's frame (:func:`encode_frame`'s bytes, without the
    :class:`Frame` it would build per call)."""
    if len(body) > max_payload:
        raise DubboFrameError(
            f"body of {len(body)} bytes exceeds the payload limit of {max_payload}"
        )
    return _REQUEST_HEAD(MAGIC, _REQUEST_FLAG, 0, request_id, len(body)) + body


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


def _settle(future: asyncio.Future[Frame] | _Waiter, outcome: Frame | BaseException) -> None:
    """Resolve a waiting call (on the loop) with its frame or error, unless it is done already
    (an awaited call's timer may have fired)."""
    if type(future) is _Waiter:
        future.settle(outcome)
        return
    assert isinstance(future, asyncio.Future)
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


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
