"""Dubbo's own ``dubbo://`` protocol (the exchange layer of dubbo-remoting): framing for now."""

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
    "FLAG_EVENT",
    "FLAG_REQUEST",
    "FLAG_TWOWAY",
    "HEADER_LENGTH",
    "HESSIAN2",
    "MAGIC",
    "MAX_PAYLOAD",
    "DubboFrameError",
    "Frame",
    "FrameDecoder",
    "RequestIds",
    "Status",
    "encode_frame",
    "heartbeat_request",
    "heartbeat_response",
]
