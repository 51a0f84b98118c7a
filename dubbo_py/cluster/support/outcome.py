"""How a failed call is classified: a transport failure, a call a provider shed, a call failure
or the application's answer -- and so whether a strategy may retry it, and what the caller
sees when it gives up."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import grpc

from dubbo_py.errors import ClusterError
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = [
    "NON_APPLICATION_CODES",
    "SHED_KEY",
    "TRANSPORT_CODES",
    "failure",
    "is_call_failure",
    "is_shed",
    "is_transport_failure",
    "retryable",
    "status_code",
]

#: Codes that mean "the call never reached application code": safe to retry elsewhere.
TRANSPORT_CODES = frozenset({grpc.StatusCode.UNAVAILABLE})

#: Codes that are failures of the call rather than answers from the application: the cluster
#: layer wraps them in a :class:`~dubbo_py.errors.ClusterError` naming the providers tried, and
#: ``fail:`` mocks answer them. Any other status (INVALID_ARGUMENT, NOT_FOUND, ...) is the
#: provider's answer and reaches the caller as is.
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
#: on another provider whatever the method (see ``dubbo_py/provider/limits.py``).
SHED_KEY = "dubbo-shed"


def status_code(error: BaseException) -> grpc.StatusCode | None:
    """The gRPC status code of ``error`` (None for anything that is not a status error)."""
    if isinstance(error, grpc.RpcError) and hasattr(error, "code"):
        code = error.code()
        return code if isinstance(code, grpc.StatusCode) else None
    return None


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


def is_transport_failure(error: BaseException) -> bool:
    """True for failures at the transport level (provider down, connection reset)."""
    return status_code(error) in TRANSPORT_CODES


def is_call_failure(error: BaseException) -> bool:
    """True when ``error`` is a failure of the call rather than the application's answer (see
    :data:`NON_APPLICATION_CODES`; "no provider" is a ClusterError with UNAVAILABLE)."""
    return status_code(error) in NON_APPLICATION_CODES


def retryable(error: BaseException, method: str, idempotent: Collection[str]) -> bool:
    """May a call of ``method`` that failed with ``error`` run again elsewhere? Transport
    failures always; a call a provider shed over its limit (RESOURCE_EXHAUSTED with the shed
    marker: it did not run) always; DEADLINE_EXCEEDED only for methods declared ``idempotent``
    (the call may have run); application errors never (they are answers)."""
    code = status_code(error)
    if code in TRANSPORT_CODES:
        return True
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        return is_shed(error)
    return code == grpc.StatusCode.DEADLINE_EXCEEDED and method in idempotent


def failure(
    invocation: Invocation, tried: Sequence[URL], error: BaseException, reason: str
) -> BaseException:
    """What the caller sees for ``error``: a call failure becomes a ClusterError naming the
    service, method and every provider ``tried`` (keeping the status code); an application
    error is the provider's answer and stays as it is."""
    if not is_call_failure(error):
        return error
    return ClusterError(
        invocation.service,
        invocation.method,
        [t.address for t in tried],
        reason,
        code=status_code(error) or grpc.StatusCode.UNAVAILABLE,
        last=error,
    )
