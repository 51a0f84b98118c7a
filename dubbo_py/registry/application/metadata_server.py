"""The provider side of Dubbo 3.3's ``MetadataServiceV2``: each dubbo-py server answers
``org.apache.dubbo.metadata.MetadataServiceV2/GetMetadataInfo`` for the revisions its
application publishes.

dubbo-py stores every revision's MetadataInfo in the metadata report
(``/dubbo/metadata/<app>/<revision>``), where Dubbo Java reads it. dubbo-go 3.3 reads its own
report layout (``/dubbo/<app>/<revision>``) and, when that fails, calls the instance's
MetadataService, which it finds through the instance's ``dubbo.metadata-service.url-params``
and ``meta-v``. So the instance names this service and every server serves it on its own port:
the Triple (gRPC) port the instance already registers, the protobuf messages of
:mod:`~dubbo_py.registry.application.metadata_service`, group the application and version
``2.0.0`` as Java's ``MetadataServiceDelegationV2`` (the headers are not required: the revision
says which document). A revision no instance of the application publishes any more answers
``NOT_FOUND``, as Java answers nothing for a revision it does not hold.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the publisher imports this module; grpc loads with the server, not before
    import grpc

from dubbo_py.registry.application.instance import METADATA_SERVICE_V2
from dubbo_py.registry.application.metadata import MetadataInfo

__all__ = ["SERVED", "ServedMetadata", "metadata_handler", "url_params_json"]

METHOD_NAME = "GetMetadataInfo"


class ServedMetadata:
    """The MetadataInfo documents this process's instances publish, by (application,
    revision); counted, so a revision shared by several addresses stays until the last one
    stops naming it (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[tuple[str, str], tuple[MetadataInfo, int]] = {}

    def hold(self, info: MetadataInfo) -> None:
        """One more instance publishes ``info``."""
        key = (info.app, info.revision)
        with self._lock:
            held = self._held.get(key)
            self._held[key] = (info, held[1] + 1 if held else 1)

    def release(self, app: str, revision: str) -> None:
        """One instance stopped publishing ``revision`` of ``app``."""
        key = (app, revision)
        with self._lock:
            held = self._held.get(key)
            if held is None:
                return
            if held[1] <= 1:
                del self._held[key]
            else:
                self._held[key] = (held[0], held[1] - 1)

    def get(self, app: str, revision: str) -> MetadataInfo | None:
        """The document of ``revision`` of ``app`` (None when no instance publishes it)."""
        with self._lock:
            held = self._held.get((app, revision))
        return held[0] if held else None


#: What the servers of this process answer (fed by the instance publishers).
SERVED = ServedMetadata()


def url_params_json(port: int) -> str:
    """``dubbo.metadata-service.url-params`` for a MetadataServiceV2 on Triple at ``port``
    (the keys Java's ``getMetadataServiceParameter`` keeps, in its order)."""
    params = {
        "version": METADATA_SERVICE_V2,
        "side": "provider",
        "port": str(port),
        "protocol": "tri",
    }
    return json.dumps(params, separators=(",", ":"))


def _answer(app: str, revision: str, served: ServedMetadata) -> tuple[Any, str]:
    """The reply for ``revision`` of ``app``, or None and why not."""
    info = served.get(app, revision) if revision else None
    if info is None:
        return None, f"{app} publishes no metadata revision {revision!r} here"
    # Imported here, as grpc below: the publisher imports this module and loads no grpc.
    from dubbo_py.registry.application.metadata_service import metadata_info_to_v2

    return metadata_info_to_v2(info), ""


def metadata_handler(
    app: str, *, aio: bool = False, served: ServedMetadata = SERVED
) -> grpc.GenericRpcHandler:
    """A generic handler serving ``app``'s documents as ``MetadataServiceV2`` (a coroutine
    behaviour for a ``grpc.aio`` server, a plain one otherwise)."""
    import grpc

    from dubbo_py.registry.application.metadata_service import (
        SERVICE,
        request_type,
        response_type,
    )

    behaviour: Callable[..., Any]
    if aio:

        async def get_async(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            reply, why = _answer(app, request.revision, served)
            if reply is None:
                await context.abort(grpc.StatusCode.NOT_FOUND, why)
            return reply

        behaviour = get_async
    else:

        def get(request: Any, context: grpc.ServicerContext) -> Any:
            reply, why = _answer(app, request.revision, served)
            if reply is None:
                context.abort(grpc.StatusCode.NOT_FOUND, why)
            return reply

        behaviour = get
    return grpc.method_handlers_generic_handler(
        SERVICE,
        {
            METHOD_NAME: grpc.unary_unary_rpc_method_handler(
                behaviour,
                request_deserializer=request_type().FromString,
                response_serializer=response_type().SerializeToString,
            )
        },
    )
