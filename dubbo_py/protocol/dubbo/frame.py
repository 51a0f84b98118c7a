"""The frames of ``dubbo://``: a 16-byte header, then the serialized body.

Header, as Dubbo's ``ExchangeCodec`` writes it: magic ``0xdabb`` (2 bytes); a flag byte
(``0x80`` request, ``0x40`` two-way, ``0x20`` event, low 5 bits the serialization id, 2 for
Hessian2); the status (responses only); the request id (8 bytes, big-endian); the body's length
(4 bytes). A heartbeat is an event whose body is a serialized ``null``; its answer is an event
response with the same id. This module only frames bytes: no I/O, no serialization of bodies.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass
from enum import IntEnum

MAGIC = 0xDABB
HEADER_LENGTH = 16
FLAG_REQUEST = 0x80
FLAG_TWOWAY = 0x40
FLAG_EVENT = 0x20
SERIALIZATION_MASK = 0x1F
#: Dubbo's serialization id of Hessian2.
HESSIAN2 = 2
#: Dubbo's default ``payload`` limit (8 MiB) on a frame's body.
MAX_PAYLOAD = 8 * 1024 * 1024
#: A heartbeat's body: Hessian2's null.
NULL_BODY = b"N"

#: The header's layout: magic, flag, status, request id, body length.
HEADER_STRUCT = struct.Struct(">HBBqi")
_HEADER = HEADER_STRUCT


class Status(IntEnum):
    """A response's status byte (Dubbo's ``Response`` constants)."""

    OK = 20
    CLIENT_TIMEOUT = 30
    SERVER_TIMEOUT = 31
    CHANNEL_INACTIVE = 35
    BAD_REQUEST = 40
    BAD_RESPONSE = 50
    SERVICE_NOT_FOUND = 60
    SERVICE_ERROR = 70
    SERVER_ERROR = 80
    CLIENT_ERROR = 90
    SERVER_THREADPOOL_EXHAUSTED_ERROR = 100


class DubboFrameError(ValueError):
    """Bytes that are not a ``dubbo://`` frame; the connection they came on cannot be trusted."""


@dataclass(frozen=True)
class Frame:
    """One request or response as it travels: the header's fields and the body's bytes."""

    request: bool
    request_id: int
    body: bytes = b""
    two_way: bool = True
    event: bool = False
    serialization: int = HESSIAN2
    status: int = Status.OK

    @property
    def heartbeat(self) -> bool:
        """Whether this is a heartbeat (an event with a null body) or the answer to one."""
        return self.event and self.body in (b"", NULL_BODY)


def encode_frame(frame: Frame, *, max_payload: int = MAX_PAYLOAD) -> bytes:
    """The frame's bytes; a body beyond ``max_payload`` is refused, as Dubbo refuses it."""
    if len(frame.body) > max_payload:
        raise DubboFrameError(
            f"body of {len(frame.body)} bytes exceeds the payload limit of {max_payload}"
        )
    if not 0 <= frame.serialization <= SERIALIZATION_MASK:
        raise DubboFrameError(f"serialization id {frame.serialization} does not fit 5 bits")
    flag = frame.serialization
    if frame.request:
        flag |= FLAG_REQUEST
        if frame.two_way:
            flag |= FLAG_TWOWAY
    if frame.event:
        flag |= FLAG_EVENT
    status = 0 if frame.request else frame.status
    header = _HEADER.pack(MAGIC, flag, status, frame.request_id, len(frame.body))
    return header + frame.body


def heartbeat_request(request_id: int) -> Frame:
    """A heartbeat to send on an idle connection."""
    return Frame(request=True, request_id=request_id, body=NULL_BODY, two_way=True, event=True)


def heartbeat_response(request: Frame) -> Frame:
    """The answer to a heartbeat request."""
    return Frame(request=False, request_id=request.request_id, body=NULL_BODY, event=True)


class FrameDecoder:
    """Cuts a byte stream into frames; bytes may arrive in any pieces.

    A bad magic or a declared body beyond ``max_payload`` raises :class:`DubboFrameError`
    before the body is buffered, and the decoder stays failed: the stream has lost its framing.
    """

    def __init__(self, *, max_payload: int = MAX_PAYLOAD) -> None:
        self._buffer = bytearray()
        self._max_payload = max_payload
        self._failed: DubboFrameError | None = None
        self._offset = 0  # stream offset of the buffer's first byte, for error messages

    def feed(self, data: bytes) -> list[Frame]:
        """The frames completed by ``data``."""
        if self._failed is not None:
            raise self._failed
        buffer = self._buffer
        buffer += data
        frames = []
        start = 0
        try:
            while len(buffer) - start >= HEADER_LENGTH:
                magic, flag, status, request_id, length = _HEADER.unpack_from(buffer, start)
                if magic != MAGIC:
                    raise DubboFrameError(
                        f"bad magic 0x{magic:04x} at stream offset {self._offset + start}"
                    )
                if length < 0 or length > self._max_payload:
                    raise DubboFrameError(
                        f"frame {request_id} declares a body of {length} bytes (limit "
                        f"{self._max_payload}) at stream offset {self._offset + start}"
                    )
                end = start + HEADER_LENGTH + length
                if len(buffer) < end:
                    break
                request = bool(flag & FLAG_REQUEST)
                frames.append(
                    Frame(
                        request=request,
                        request_id=request_id,
                        body=bytes(buffer[start + HEADER_LENGTH : end]),
                        two_way=bool(flag & FLAG_TWOWAY) if request else False,
                        event=bool(flag & FLAG_EVENT),
                        serialization=flag & SERIALIZATION_MASK,
                        status=0 if request else status,
                    )
                )
                start = end
        except DubboFrameError as error:
            self._failed = error
            raise
        finally:
            del buffer[:start]
            self._offset += start
        return frames

    @property
    def pending(self) -> int:
        """Bytes received that do not yet make a whole frame."""
        return len(self._buffer)


class RequestIds:
    """Request ids for one process, as Dubbo's ``Request`` numbers them: 0, 1, 2 ...,
    wrapping within a signed 64-bit long."""

    def __init__(self, start: int = 0) -> None:
        # next() of an itertools.count is one C call under the GIL: no two threads get the
        # same value, without a lock of ours.
        self._counter = itertools.count(start)

    def next(self) -> int:
        """The next id."""
        value = next(self._counter)
        if value < 2**63:
            return value
        return ((value + 2**63) % 2**64) - 2**63
