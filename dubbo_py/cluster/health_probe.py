"""Probe a provider with the standard gRPC health service (``grpc.health.v1.Health/Check``).

Every dubbo-py provider serves the health service (docs/design.md §2), so the quarantine uses
this to decide when a dead provider is back. The probe opens a fresh channel each time on
purpose: a channel that saw the server die may sit in reconnect backoff, and a probe must see the
server as it is now.
"""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from dubbo_py.url import URL

__all__ = ["grpc_health_probe", "service_health"]


def _ask(url: URL, service: str, timeout: float) -> tuple[bool | None, grpc.StatusCode | None]:
    """Ask the health service at ``url.address`` about ``service``: (whether it said SERVING,
    None) when it answered; (None, the status code) when the call failed (code None: no channel
    could be made, or an error that is not gRPC's). Never raises."""
    try:
        # Its own subchannel: a shared one (gRPC's default pool) may be a consumer channel's,
        # sitting in reconnect backoff although the server is back.
        channel = grpc.insecure_channel(
            url.address, options=[("grpc.use_local_subchannel_pool", 1)]
        )
    except Exception:
        return None, None
    try:
        stub = health_pb2_grpc.HealthStub(channel)
        # types-grpcio-health-checking declares HealthStub without its generated methods.
        check = stub.Check  # type: ignore[attr-defined]
        reply = check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING), None
    except grpc.RpcError as error:
        return None, error.code() if isinstance(error, grpc.Call) else None
    except Exception:
        return None, None
    finally:
        channel.close()


def grpc_health_probe(url: URL, timeout: float = 0.5) -> bool:
    """True when the server at ``url.address`` answers a health check for the whole server
    (service name ``""``) with SERVING within ``timeout`` seconds.

    A server that answers UNIMPLEMENTED has no health service but is evidently up and serving
    gRPC, so it counts as alive (a provider from another stack may not register the health
    service). Any other error, a refused connection or a timeout is False; this never raises.
    """
    serving, code = _ask(url, "", timeout)
    if serving is not None:
        return serving
    return code is grpc.StatusCode.UNIMPLEMENTED


def service_health(url: URL, service: str, timeout: float = 0.5) -> bool | None:
    """Whether the server at ``url.address`` still serves ``service`` (empty protection's
    probe): True when its health service says SERVING for it; False when it says anything
    else (a dubbo-py provider marks a service NOT_SERVING before unregistering it on purpose)
    or refuses the connection (the process is gone), or does not know the service (NOT_FOUND:
    another process took the port); None when no answer came in ``timeout`` seconds. A server
    without the health service (UNIMPLEMENTED) counts as serving: it answers, and there is
    nothing more to ask. Apache Dubbo's triple providers report each exported interface as
    dubbo-py's do (SERVING on export, NOT_SERVING on unexport), so the answer means the same
    for them."""
    serving, code = _ask(url, service, timeout)
    if serving is not None:
        return serving
    if code is grpc.StatusCode.UNIMPLEMENTED:
        return True
    if code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNAVAILABLE):
        # Not this service here, or refused / reset before any answer: gone.
        return False
    return None
