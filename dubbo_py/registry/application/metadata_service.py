"""Fetching a ``local``-storage instance's metadata from the instance: Dubbo 3.3's protobuf
``MetadataServiceV2`` over Triple.

A Java provider with ``metadata-type=local`` (Java's default) keeps its MetadataInfo in memory
and serves it as ``org.apache.dubbo.metadata.MetadataServiceV2/GetMetadataInfo`` (group: the
application, version ``2.0.0``) when its instance says ``meta-v: 2.0.0``; the instance's
``dubbo.metadata-service.url-params`` name the protocol and port. Triple is gRPC-compatible, so
a plain gRPC call reaches it. Older providers (``meta-v: 1.0.0``) serve only the Hessian
``MetadataService``, which dubbo-py cannot call: their instances are skipped with a warning
naming the fix (``metadata-type=remote`` on the provider).

The message types are built at runtime from the service's ``.proto`` definition (no generated
code to ship).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from dubbo_py.registry.application.instance import (
    METADATA_SERVICE_URL_PARAMS,
    METADATA_SERVICE_V2,
    ServiceInstance,
)
from dubbo_py.registry.application.metadata import MetadataInfo, ServiceInfo

__all__ = [
    "METHOD",
    "V2",
    "fetch_metadata_v2",
    "metadata_info_to_v2",
    "request_type",
    "response_type",
]

log = logging.getLogger(__name__)

_warned: set[tuple[str, str, str]] = set()


def _warn_once(kind: str, instance: ServiceInstance, message: str, *args: object) -> None:
    key = (kind, instance.app, instance.revision)
    if key in _warned:
        log.debug(message, *args)
        return
    _warned.add(key)
    log.warning(message, *args)


PACKAGE = "org.apache.dubbo.metadata"
SERVICE = f"{PACKAGE}.MetadataServiceV2"
METHOD = f"/{SERVICE}/GetMetadataInfo"
V2 = METADATA_SERVICE_V2
#: Seconds a metadata call may take (it runs on the registry's watch thread).
TIMEOUT = 3.0


def _build() -> tuple[Any, Any]:
    T = descriptor_pb2.FieldDescriptorProto
    f = descriptor_pb2.FileDescriptorProto(
        name="dubbo_py_metadata_service_v2.proto", package=PACKAGE, syntax="proto3"
    )

    def field(
        msg: Any, name: str, number: int, kind: int, type_name: str = "", repeated: bool = False
    ) -> None:
        added = msg.field.add(
            name=name, number=number, type=kind, label=T.LABEL_REPEATED if repeated else 1
        )
        if type_name:  # set only for message fields (an empty one is still "set")
            added.type_name = type_name

    def map_entry(parent: Any, name: str, value_kind: int, value_type: str = "") -> None:
        entry = parent.nested_type.add(name=name)
        entry.options.map_entry = True
        field(entry, "key", 1, T.TYPE_STRING)
        field(entry, "value", 2, value_kind, value_type)

    request = f.message_type.add(name="MetadataRequest")
    field(request, "revision", 1, T.TYPE_STRING)
    info = f.message_type.add(name="MetadataInfoV2")
    field(info, "app", 1, T.TYPE_STRING)
    field(info, "version", 2, T.TYPE_STRING)
    map_entry(info, "ServicesEntry", T.TYPE_MESSAGE, f".{PACKAGE}.ServiceInfoV2")
    field(info, "services", 3, T.TYPE_MESSAGE, f".{PACKAGE}.MetadataInfoV2.ServicesEntry", True)
    service = f.message_type.add(name="ServiceInfoV2")
    for number, name in enumerate(("name", "group", "version", "protocol"), start=1):
        field(service, name, number, T.TYPE_STRING)
    field(service, "port", 5, T.TYPE_INT32)
    field(service, "path", 6, T.TYPE_STRING)
    map_entry(service, "ParamsEntry", T.TYPE_STRING)
    field(service, "params", 7, T.TYPE_MESSAGE, f".{PACKAGE}.ServiceInfoV2.ParamsEntry", True)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return (
        message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.MetadataRequest")),
        message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.MetadataInfoV2")),
    )


_REQUEST, _RESPONSE = _build()


def request_type() -> Any:
    """The ``MetadataRequest`` message class."""
    return _REQUEST


def response_type() -> Any:
    """The ``MetadataInfoV2`` message class."""
    return _RESPONSE


def metadata_info_to_v2(info: MetadataInfo) -> Any:
    """A ``MetadataInfoV2`` message for a document (what a provider serves)."""
    message = _RESPONSE(app=info.app, version=info.revision)
    for key, s in info.services.items():
        target = message.services[key]
        target.name, target.group, target.version = s.name, s.group, s.version
        target.protocol, target.port, target.path = s.protocol, s.port, s.path
        target.params.update(s.params)
    return message


def _from_v2(message: Any, revision: str) -> MetadataInfo:
    services = {
        key: ServiceInfo(
            name=s.name,
            group=s.group,
            version=s.version,
            protocol=s.protocol,
            port=s.port if s.port else -1,
            path=s.path or s.name,
            params=dict(s.params),
        )
        for key, s in message.services.items()
        if s.name
    }
    return MetadataInfo(message.app, services, message.version or revision)


def endpoint(instance: ServiceInstance) -> tuple[str, int] | None:
    """(protocol, port) of the instance's metadata service, from its url-params."""
    raw = instance.metadata.get(METADATA_SERVICE_URL_PARAMS)
    params: dict[str, Any] = {}
    if raw:
        try:
            loaded = json.loads(raw)
            params = loaded if isinstance(loaded, dict) else {}
        except ValueError:
            params = {}
    try:
        port = int(params.get("port", instance.port))
    except (TypeError, ValueError):
        return None
    return str(params.get("protocol", "tri")), port


def fetch_metadata_v2(instance: ServiceInstance, timeout: float = TIMEOUT) -> MetadataInfo | None:
    """The instance's metadata from its ``MetadataServiceV2``; None (logged) when the instance
    does not serve it over Triple or the call fails."""
    if instance.metadata.get("meta-v") != V2:
        _warn_once(
            "v1",
            instance,
            "skipping instances of %s (revision %s): their metadata is stored on each provider "
            "and served by MetadataService %s, which dubbo-py cannot call (it calls "
            "MetadataServiceV2 over Triple, Dubbo 3.3); set metadata-type=remote on the "
            "provider (dubbo.application.metadata-type=remote)",
            instance.app,
            instance.revision,
            instance.metadata.get("meta-v") or "1.0.0",
        )
        return None
    found = endpoint(instance)
    if found is None or found[0] not in ("tri", "grpc"):
        _warn_once(
            "protocol",
            instance,
            "skipping instances of %s: their MetadataServiceV2 is served over %s, not Triple; "
            "set metadata-type=remote on the provider",
            instance.app,
            found[0] if found else "an unreadable address",
        )
        return None
    target = f"{instance.host}:{found[1]}"
    with grpc.insecure_channel(target) as channel:
        call: Any = channel.unary_unary(
            METHOD,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=_RESPONSE.FromString,
        )
        try:
            reply = call(
                _REQUEST(revision=instance.revision),
                timeout=timeout,
                metadata=(("tri-service-group", instance.app), ("tri-service-version", V2)),
            )
        except grpc.RpcError as exc:
            _warn_once(
                "call",
                instance,
                "could not read the metadata of %s (revision %s) from %s: %s; retrying later",
                instance.app,
                instance.revision,
                target,
                exc.code() if hasattr(exc, "code") else exc,
            )
            return None
    return _from_v2(reply, instance.revision)
