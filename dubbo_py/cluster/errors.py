"""Errors a caller sees from the cluster layer. They are ``grpc.RpcError``s, so code written for
plain gRPC stubs (``except grpc.RpcError as e: e.code()``) keeps working."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc

__all__ = ["ClusterError", "is_transport_failure"]

#: Codes that mean "the call never reached application code": safe to retry elsewhere.
TRANSPORT_CODES = frozenset({grpc.StatusCode.UNAVAILABLE})


def is_transport_failure(error: BaseException) -> bool:
    """True for failures at the transport level (provider down, connection reset)."""
    code = error.code() if isinstance(error, grpc.RpcError) and hasattr(error, "code") else None
    return code in TRANSPORT_CODES


class ClusterError(grpc.RpcError):
    """A call that failed after the cluster strategy gave up: names the service, method and every
    provider tried, and carries the status code of the last failure."""

    def __init__(
        self,
        service: str,
        method: str,
        tried: Sequence[str],
        reason: str,
        *,
        code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE,
        last: BaseException | None = None,
    ) -> None:
        self.service = service
        self.method = method
        self.tried = tuple(tried)
        self.last = last
        self._code = code
        tried_text = ", ".join(self.tried) if self.tried else "none"
        last_text = ""
        if isinstance(last, grpc.RpcError) and hasattr(last, "details"):
            last_text = f"; last error: {last.details()}"
        elif last is not None:
            last_text = f"; last error: {last}"
        self._details = f"{service}.{method}: {reason} (providers tried: {tried_text}){last_text}"
        super().__init__(self._details)

    def code(self) -> grpc.StatusCode:
        """The status code of the last failure (UNAVAILABLE when no provider was reachable)."""
        return self._code

    def details(self) -> str:
        """What failed, where, and after trying which providers."""
        return self._details

    def trailing_metadata(self) -> tuple[Any, ...]:
        """Trailing metadata of the last failure, when there was one."""
        last = self.last
        if isinstance(last, grpc.Call):
            return tuple(last.trailing_metadata() or ())
        return ()

    def initial_metadata(self) -> tuple[Any, ...]:
        """Initial metadata of the last failure, when there was one."""
        last = self.last
        if isinstance(last, grpc.Call):
            return tuple(last.initial_metadata() or ())
        return ()

    def __str__(self) -> str:
        return f"<ClusterError {self._code.name}: {self._details}>"
