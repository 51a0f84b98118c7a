"""Errors a caller sees from the cluster layer. They are ``grpc.RpcError``s, so code written for
plain gRPC stubs (``except grpc.RpcError as e: e.code()``) keeps working."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc

__all__ = [
    "NON_APPLICATION_CODES",
    "SHED_KEY",
    "TRANSPORT_CODES",
    "ClusterError",
    "ProviderUnavailable",
    "is_call_failure",
    "is_shed",
    "is_transport_failure",
    "status_code",
]

#: Codes that mean "the call never reached application code": safe to retry elsewhere.
TRANSPORT_CODES = frozenset({grpc.StatusCode.UNAVAILABLE})

#: Codes that are failures of the call rather than answers from the application: the cluster
#: layer wraps them in a :class:`ClusterError` naming the providers tried, and ``fail:`` mocks
#: answer them. Any other status (INVALID_ARGUMENT, NOT_FOUND, ...) is the provider's answer
#: and reaches the caller as is.
NON_APPLICATION_CODES = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.CANCELLED,
    }
)


#: Trailing metadata a provider sets on a call it shed because it was over a limit (executes,
#: tps, flowcontrol; the value names the limit): the call never ran, so a consumer may retry it
#: on another provider whatever the method (see ``dubbo_py/rpc/limits.py``).
SHED_KEY = "dubbo-shed"


def is_shed(error: BaseException) -> bool:
    """True when ``error`` is RESOURCE_EXHAUSTED from a provider that shed the call unrun (it
    carries :data:`SHED_KEY`); a RESOURCE_EXHAUSTED without the marker may come from code that
    ran, and is not."""
    if status_code(error) is not grpc.StatusCode.RESOURCE_EXHAUSTED:
        return False
    reader = getattr(error, "trailing_metadata", None)
    if reader is None:
        return False
    try:
        metadata = reader() or ()
    except Exception:  # an error type whose metadata cannot be read is not marked
        return False
    return any(key == SHED_KEY for key, _ in metadata)


def status_code(error: BaseException) -> grpc.StatusCode | None:
    """The gRPC status code of ``error`` (None for anything that is not a status error)."""
    if isinstance(error, grpc.RpcError) and hasattr(error, "code"):
        code = error.code()
        return code if isinstance(code, grpc.StatusCode) else None
    return None


def is_transport_failure(error: BaseException) -> bool:
    """True for failures at the transport level (provider down, connection reset)."""
    return status_code(error) in TRANSPORT_CODES


def is_call_failure(error: BaseException) -> bool:
    """True when ``error`` is a failure of the call rather than the application's answer (see
    :data:`NON_APPLICATION_CODES`; "no provider" is a :class:`ClusterError` with UNAVAILABLE)."""
    return status_code(error) in NON_APPLICATION_CODES


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


class ProviderUnavailable(grpc.RpcError):
    """UNAVAILABLE raised on the consumer side, before anything was sent: the provider's channel
    was closed under the call (it left the registry, or was replaced after a revival). A
    transport failure like any other, so strategies retry it elsewhere."""

    def __init__(self, address: str, reason: str) -> None:
        self.address = address
        self._details = f"{address}: {reason}"
        super().__init__(self._details)

    def code(self) -> grpc.StatusCode:
        """Always UNAVAILABLE."""
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        """Which provider, and why."""
        return self._details

    def __str__(self) -> str:
        return f"<ProviderUnavailable: {self._details}>"
