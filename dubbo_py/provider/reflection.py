"""gRPC server reflection on providers, so ``dubbo-py call``, the console and grpcurl can
learn a service's request and response types from the running provider.

On by default (a provider's types are no secret from its callers, and without reflection an
operator needs the service's generated code to call it); ``Application.start(...,
reflection=False)`` or ``DUBBO_PY_REFLECTION=false`` in the provider's environment turns it
off. The descriptors served are those of the process's default protobuf pool, where every
generated ``_pb2`` module registers its file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

__all__ = ["ENV_REFLECTION", "add_reflection", "reflection_wanted"]

#: Set to ``false`` / ``0`` / ``off`` / ``no`` to serve no reflection service.
ENV_REFLECTION = "DUBBO_PY_REFLECTION"
_OFF = frozenset({"false", "0", "off", "no"})


def reflection_wanted(option: bool | None) -> bool:
    """The option when given, else ``$DUBBO_PY_REFLECTION`` (default: on)."""
    if option is not None:
        return option
    return os.environ.get(ENV_REFLECTION, "").strip().lower() not in _OFF


def add_reflection(server: Any, service_names: Iterable[str], target: Any = None) -> None:
    """Serve the reflection service on a (blocking or asyncio) gRPC server for these services
    (the reflection service itself is listed too, as grpcurl expects). Its handlers go to
    ``target`` (default: ``server``), which may be a facade of ``server`` that adds them as
    generic handlers only (:class:`dubbo_py.provider.server.GenericOnly`)."""
    # Imported here: a provider with reflection turned off never loads it.
    import grpc
    from grpc_reflection.v1alpha import reflection, reflection_pb2_grpc

    names = (*dict.fromkeys(service_names), reflection.SERVICE_NAME)
    # What enable_server_reflection does, with the servicer's flavour told by the server
    # itself rather than by ``target`` (a facade is no grpc.aio.Server).
    servicer = (
        reflection.aio.ReflectionServicer(names)
        if isinstance(server, grpc.aio.Server)
        else reflection.ReflectionServicer(names)
    )
    add = reflection_pb2_grpc.add_ServerReflectionServicer_to_server
    add(servicer, target or server)  # type: ignore[no-untyped-call]
