"""A service's request and response types, read from a running provider's gRPC server
reflection (providers serve it by default: :mod:`dubbo_py.provider.reflection`).

``dubbo-py call`` and the console's call form use this to turn JSON into the request message
and the reply back into JSON without the service's generated code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor

from dubbo_py.config.tls import ClientTLS, use_tls
from dubbo_py.url import URL

__all__ = [
    "FieldShape",
    "MethodShape",
    "ReflectionError",
    "ServiceShape",
    "describe_service",
]

#: Seconds to wait for a provider's reflection answer.
DEFAULT_TIMEOUT = 5.0

_TYPE_NAMES = {
    FieldDescriptor.TYPE_DOUBLE: "double",
    FieldDescriptor.TYPE_FLOAT: "float",
    FieldDescriptor.TYPE_INT64: "int64",
    FieldDescriptor.TYPE_UINT64: "uint64",
    FieldDescriptor.TYPE_INT32: "int32",
    FieldDescriptor.TYPE_FIXED64: "fixed64",
    FieldDescriptor.TYPE_FIXED32: "fixed32",
    FieldDescriptor.TYPE_BOOL: "bool",
    FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_BYTES: "bytes",
    FieldDescriptor.TYPE_UINT32: "uint32",
    FieldDescriptor.TYPE_SFIXED32: "sfixed32",
    FieldDescriptor.TYPE_SFIXED64: "sfixed64",
    FieldDescriptor.TYPE_SINT32: "sint32",
    FieldDescriptor.TYPE_SINT64: "sint64",
}


class ReflectionError(Exception):
    """The provider could not describe the service (the message says why)."""


@dataclass(frozen=True, slots=True)
class FieldShape:
    """One field of a request message, as a form shows it."""

    name: str
    #: JSON name (what ``json_format`` reads and writes).
    json_name: str
    #: ``string``, ``int32``, ``bool``, ``enum``, a message's full name, ...
    type_name: str
    repeated: bool
    #: True for scalars (text, numbers, booleans, enums) a form can take in one input.
    scalar: bool


@dataclass(frozen=True)
class MethodShape:
    """One method: its gRPC path, cardinality and message classes."""

    service: str
    name: str
    client_streaming: bool
    server_streaming: bool
    request_class: Any
    response_class: Any

    @property
    def path(self) -> str:
        """``/<service>/<method>``."""
        return f"/{self.service}/{self.name}"

    @property
    def unary(self) -> bool:
        """Neither side streams."""
        return not (self.client_streaming or self.server_streaming)

    @property
    def request_type(self) -> str:
        """The request message's full name."""
        return str(self.request_class.DESCRIPTOR.full_name)

    def request_fields(self) -> tuple[FieldShape, ...]:
        """The request message's fields, in declaration order."""
        return fields_of(self.request_class.DESCRIPTOR)


@dataclass(frozen=True)
class ServiceShape:
    """A service as its provider describes it."""

    name: str
    methods: tuple[MethodShape, ...]

    def method(self, name: str) -> MethodShape:
        """The method called ``name``; ReflectionError naming the methods there are."""
        for method in self.methods:
            if method.name == name:
                return method
        known = ", ".join(m.name for m in self.methods) or "none"
        raise ReflectionError(f"{self.name} has no method {name!r} (methods: {known})")


def fields_of(message: Descriptor) -> tuple[FieldShape, ...]:
    """The fields of a message descriptor."""
    out = []
    for field in message.fields:
        if field.type == FieldDescriptor.TYPE_MESSAGE and field.message_type is not None:
            type_name = field.message_type.full_name
        elif field.type == FieldDescriptor.TYPE_ENUM:
            type_name = "enum"
        else:
            type_name = _TYPE_NAMES.get(field.type, "?")
        repeated = bool(field.is_repeated)
        scalar = field.type not in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP)
        out.append(FieldShape(field.name, field.json_name, type_name, repeated, scalar))
    return tuple(out)


def _method(service: str, method: MethodDescriptor) -> MethodShape:
    return MethodShape(
        service,
        method.name,
        bool(method.client_streaming),
        bool(method.server_streaming),
        message_factory.GetMessageClass(method.input_type),
        message_factory.GetMessageClass(method.output_type),
    )


def _channel(provider: URL, tls: ClientTLS | None) -> grpc.Channel:
    if use_tls(provider.parameters, tls):
        tls = tls or ClientTLS()
        return grpc.secure_channel(provider.address, tls.credentials(), tls.channel_options())
    return grpc.insecure_channel(provider.address)


def describe_service(
    providers: Sequence[URL],
    service: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    tls: ClientTLS | None = None,
) -> ServiceShape:
    """Ask the providers, one after another until one answers, for ``service``'s methods.

    ``service`` is the gRPC service name (the proto's full name, which dubbo-py providers
    register as their interface). ReflectionError when none could describe it."""
    # Imported here: only callers that describe services need the reflection client.
    import grpc_reflection.v1alpha.proto_reflection_descriptor_database as reflection_db

    if not providers:
        raise ReflectionError(f"no provider of {service} to ask for its types")
    problems = []
    for provider in providers:
        channel = _channel(provider, tls)
        try:
            grpc.channel_ready_future(channel).result(timeout=timeout)
            database = reflection_db.ProtoReflectionDescriptorDatabase(channel)
            pool = descriptor_pool.DescriptorPool(database)
            try:
                found = pool.FindServiceByName(service)
            except KeyError:
                names = [n for n in database.get_services() if "reflection" not in n]
                problems.append(
                    f"{provider.address} serves no {service} (it reflects: {', '.join(names)})"
                )
                continue
            methods = tuple(_method(found.full_name, m) for m in found.methods)
            return ServiceShape(found.full_name, methods)
        except grpc.FutureTimeoutError:
            problems.append(f"{provider.address} did not answer within {timeout:g}s")
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            if code == grpc.StatusCode.UNIMPLEMENTED:
                problems.append(
                    f"{provider.address} serves no gRPC reflection (turned off with "
                    "reflection=False or DUBBO_PY_REFLECTION=false?)"
                )
            else:
                problems.append(f"{provider.address}: {exc}")
        finally:
            channel.close()
    raise ReflectionError(f"cannot read the types of {service}: " + "; ".join(problems))
