"""The errors of a failed call: ``grpc.RpcError``s, read as :mod:`dubbo_py.errors` names.

Import them from :mod:`dubbo_py.errors` (``from dubbo_py.errors import ClusterError``), where
every error dubbo-py raises is listed. They live in a module of their own because they subclass
``grpc.RpcError``: importing gRPC is the largest part of dubbo-py's start-up, and code that
makes no call (the CLI, rule checks) must not pay for it when it imports the other errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc

__all__ = ["ClusterError", "ProviderUnavailable", "is_closed_channel"]


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


#: What grpcio's ``ValueError`` says for a call on a closed channel: the first when the channel
#: was closed before the call was made, the second when it closed while the call was being set
#: up (a narrower window, but the same situation: nothing was sent).
_CLOSED_CHANNEL = ("Cannot invoke RPC on closed channel", "Cannot invoke RPC: Channel closed")


def is_closed_channel(error: BaseException) -> bool:
    """True when ``error`` is grpcio's ``ValueError`` for a call made on a closed channel (in
    either of its two wordings): nothing reached the provider, so the call may go elsewhere."""
    return isinstance(error, ValueError) and str(error).startswith(_CLOSED_CHANNEL)
