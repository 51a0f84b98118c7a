"""Learn a service's name and methods from generated gRPC code, without parsing it.

Generated servicers register themselves through ``add_<Name>Servicer_to_server``, and generated
stubs build their callables from a channel; feeding each a recording double tells us the full
protobuf service name (``demo.Greeter``) and every method with its cardinality.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MethodSpec",
    "ServiceSpec",
    "handlers_of_servicer",
    "service_of_servicer",
    "service_of_stub",
]


@dataclass(frozen=True, slots=True)
class MethodSpec:
    """One RPC method: name and whether requests / responses are streamed."""

    name: str
    request_streaming: bool
    response_streaming: bool


@dataclass(frozen=True, slots=True)
class ServiceSpec:
    """A gRPC service as dubbo-py sees it."""

    name: str
    methods: tuple[MethodSpec, ...]

    @property
    def method_names(self) -> tuple[str, ...]:
        """Method names in declaration order."""
        return tuple(m.name for m in self.methods)


class _RecordingServer:
    def __init__(self) -> None:
        self.services: dict[str, dict[str, Any]] = {}

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        for handler in handlers:
            name = getattr(handler, "service_name", None)
            method_handlers = getattr(handler, "_method_handlers", None)
            if callable(name) and isinstance(method_handlers, dict):
                self.services.setdefault(name(), {}).update(
                    {path.rsplit("/", 1)[-1]: h for path, h in method_handlers.items()}
                )

    def add_registered_method_handlers(self, name: str, handlers: dict[str, Any]) -> None:
        self.services[name] = dict(handlers)


def find_add_function(servicer: object) -> tuple[Callable[[Any, Any], None], str]:
    """The generated ``add_<X>Servicer_to_server`` for this servicer (searched along its MRO)."""
    for cls in type(servicer).__mro__:
        module = sys.modules.get(cls.__module__)
        func = getattr(module, f"add_{cls.__name__}_to_server", None) if module else None
        if callable(func):
            return func, cls.__name__
    raise TypeError(
        f"{type(servicer).__name__} does not derive from a generated gRPC servicer class "
        "(no add_<Name>Servicer_to_server found in its bases' modules)"
    )


def handlers_of_servicer(servicer: object) -> tuple[str, dict[str, Any]]:
    """The full name of the service a servicer instance implements and its gRPC method
    handlers (``grpc.RpcMethodHandler``) by method name, as its generated code makes them."""
    add, cls_name = find_add_function(servicer)
    recorder = _RecordingServer()
    add(servicer, recorder)
    if len(recorder.services) != 1:
        raise TypeError(f"{cls_name}: expected one gRPC service, found {sorted(recorder.services)}")
    name, handlers = next(iter(recorder.services.items()))
    return name, dict(handlers)


def service_of_servicer(servicer: object) -> ServiceSpec:
    """The service a servicer instance implements."""
    name, handlers = handlers_of_servicer(servicer)
    methods = tuple(
        MethodSpec(m, bool(h.request_streaming), bool(h.response_streaming))
        for m, h in handlers.items()
    )
    return ServiceSpec(name, methods)


class _RecordingChannel:
    def __init__(self) -> None:
        self.paths: list[tuple[str, bool, bool]] = []

    def _record(self, req: bool, resp: bool) -> Callable[..., None]:
        def factory(path: str, *args: Any, **kwargs: Any) -> None:
            self.paths.append((path, req, resp))

        return factory

    def __getattr__(self, name: str) -> Callable[..., None]:
        kinds = {
            "unary_unary": (False, False),
            "unary_stream": (False, True),
            "stream_unary": (True, False),
            "stream_stream": (True, True),
        }
        if name in kinds:
            return self._record(*kinds[name])
        raise AttributeError(name)


def service_of_stub(stub_class: Any) -> ServiceSpec:
    """The service a generated stub class calls."""
    if not inspect.isclass(stub_class):
        raise TypeError(f"expected a generated stub class, got {stub_class!r}")
    channel = _RecordingChannel()
    build: Callable[[Any], object] = stub_class
    build(channel)
    services = {path.split("/")[1] for path, _, _ in channel.paths if path.count("/") == 2}
    if len(services) != 1:
        raise TypeError(
            f"{stub_class.__name__} is not a generated gRPC stub for one service "
            f"(saw {sorted(services)})"
        )
    methods = tuple(
        MethodSpec(path.rsplit("/", 1)[1], req, resp) for path, req, resp in channel.paths
    )
    return ServiceSpec(services.pop(), methods)
