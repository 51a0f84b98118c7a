"""Dubbo's own ``dubbo://`` protocol (the exchange layer of dubbo-remoting): frames, bodies and
the asyncio client connection (``connection``) generic calls use."""

from .connection import (
    DEFAULT_HEARTBEAT,
    DubboCallError,
    DubboConnection,
    DubboConnectionError,
    DubboConnections,
    DubboRemoteError,
    DubboTimeoutError,
)
from .frame import (
    FLAG_EVENT,
    FLAG_REQUEST,
    FLAG_TWOWAY,
    HEADER_LENGTH,
    HESSIAN2,
    MAGIC,
    MAX_PAYLOAD,
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
    "FLAG_EVENT",
    "FLAG_REQUEST",
    "FLAG_TWOWAY",
    "HEADER_LENGTH",
    "HESSIAN2",
    "MAGIC",
    "MAX_PAYLOAD",
    "DubboCallError",
    "DubboConnection",
    "DubboConnectionError",
    "DubboConnections",
    "DubboFrameError",
    "DubboRemoteError",
    "DubboTimeoutError",
    "Frame",
    "FrameDecoder",
    "RequestIds",
    "Status",
    "encode_frame",
    "heartbeat_request",
    "heartbeat_response",
]
