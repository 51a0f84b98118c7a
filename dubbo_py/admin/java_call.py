"""One generic call of a Java-interface service's method from JSON (``dubbo-py call`` and the
console's call form for services whose providers are ``dubbo://``).

The method's parameter types come from the service definition the provider stored in the
metadata report (:mod:`dubbo_py.registry.service_definition`): the method is picked by name and
number of arguments, and the JSON arguments are shaped to its parameter types
(:mod:`dubbo_py.admin.java_values`). Where no definition is stored, the provider URL's
``methods`` still names the methods; the call then sends no types (the provider finds the
method by its name, as Dubbo's ``GenericFilter`` does for ``null`` types) unless the caller
names them (``--types``). The call goes through ``app.generic_reference`` of a consumer
application registered for the call, so it takes what generic references apply of the
consumer chain (docs/java-services.md).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dubbo_py.admin.call import CallError, CallRequest
from dubbo_py.admin.java_values import (
    ArgumentError,
    exception_json,
    parse_arguments,
    to_java,
    to_json,
)
from dubbo_py.protocol.serialization.hessian2 import JavaException
from dubbo_py.registry import layout
from dubbo_py.registry.matching import SPOKEN_PROTOCOLS, is_match, is_usable
from dubbo_py.registry.registry import Registry
from dubbo_py.registry.service_definition import (
    MethodChoiceError,
    MethodDefinition,
    ServiceDefinition,
    erase,
    method_names,
    no_such_method,
    read_provider_definition,
)
from dubbo_py.url import URL

__all__ = [
    "JavaCallError",
    "JavaCallResult",
    "JavaMethods",
    "call_java",
    "describe_java",
    "dubbo_providers",
    "grpc_providers",
    "pick_method",
]


class JavaCallError(CallError):
    """A generic call that failed; ``exception`` is the Java exception when the service threw."""

    def __init__(self, message: str, exception: JavaException | None = None) -> None:
        super().__init__(message)
        self.exception = exception

    def to_json(self) -> dict[str, Any]:
        """``{"error", "reason", "exception"?: {"class", "message", "cause"?}}``."""
        out: dict[str, Any] = {
            "error": str(self),
            "reason": "java-exception" if self.exception is not None else "call",
        }
        if self.exception is not None:
            out["exception"] = exception_json(self.exception)
        return out


def _consumer(service: str, version: str, group: str) -> URL:
    return URL(
        "consumer",
        "127.0.0.1",
        0,
        service,
        parameters={"interface": service, "version": version, "group": group, "side": "consumer"},
    )


def _matching(registry: Registry, service: str, version: str, group: str) -> list[URL]:
    consumer = _consumer(service, version, group)
    return [
        url
        for url in registry.lookup(service, layout.PROVIDERS)
        if url.protocol != "empty" and is_match(consumer, url) and is_usable(url)
    ]


def dubbo_providers(registry: Registry, service: str, version: str, group: str) -> list[URL]:
    """The service's usable ``dubbo://`` providers of this version and group (interface level,
    where generic references find them)."""
    return [u for u in _matching(registry, service, version, group) if u.protocol == "dubbo"]


def grpc_providers(registry: Registry, service: str, version: str, group: str) -> list[URL]:
    """The service's usable providers a gRPC stub calls (Triple, gRPC)."""
    return [
        u for u in _matching(registry, service, version, group) if u.protocol in SPOKEN_PROTOCOLS
    ]


@dataclass(frozen=True)
class JavaMethods:
    """What is known of a Java service's methods: its definition when one is stored, else the
    names its provider URLs list."""

    service: str
    version: str
    group: str
    providers: tuple[URL, ...]
    definition: ServiceDefinition | None
    #: The method names the provider URLs list (``methods``).
    names: tuple[str, ...]
    #: Where a definition was looked for and not found (when ``definition`` is None).
    missing: tuple[str, ...] = ()

    @property
    def why_no_signatures(self) -> str:
        """The sentence saying signatures are not available, and what to do."""
        where = "; ".join(self.missing) or "no provider names its application"
        return (
            f"no service definition of {self.service} in the metadata report ({where}): "
            "parameter types unknown; give them with --types (the provider otherwise picks "
            "the method by its name)"
        )

    def to_json(self) -> dict[str, Any]:
        """``{"service", "protocol", "providers", "source", "methods": [{"name",
        "parameter_types", "return_type", "signature"}], "types": {TYPE: {PROPERTY: TYPE}},
        "enums": {TYPE: [NAME]}, "signatures_missing"?}``."""
        out: dict[str, Any] = {
            "service": self.service,
            "protocol": "dubbo",
            "providers": [p.address for p in self.providers],
        }
        if self.definition is None:
            out["source"] = "provider URLs (methods)"
            out["methods"] = [
                {"name": n, "parameter_types": None, "return_type": None, "signature": None}
                for n in self.names
            ]
            out["signatures_missing"] = self.why_no_signatures
            return out
        definition = self.definition
        out["source"] = definition.source
        out["methods"] = [
            {
                "name": m.name,
                "parameter_types": list(m.parameter_types),
                "return_type": m.return_type,
                "signature": m.signature,
            }
            for m in definition.sorted_methods()
        ]
        out["types"] = {
            t.type: dict(t.properties)
            for t in sorted(definition.types.values(), key=lambda t: t.type)
            if t.properties
        }
        out["enums"] = {
            t.type: list(t.enums)
            for t in sorted(definition.types.values(), key=lambda t: t.type)
            if t.enums
        }
        return out


def describe_java(
    registry: Registry, service: str, version: str = "", group: str = ""
) -> JavaMethods:
    """The methods of ``service``'s ``dubbo://`` providers (CallError when it has none)."""
    providers = dubbo_providers(registry, service, version, group)
    if not providers:
        raise CallError(f"no usable dubbo:// provider of {service} with {_flags(version, group)}")
    definition, missing = read_provider_definition(registry.store, providers)
    return JavaMethods(
        service,
        version,
        group,
        tuple(providers),
        definition,
        method_names(providers),
        tuple(missing),
    )


def _flags(version: str, group: str) -> str:
    return f"version {version or '-'}, group {group or '-'}"


def pick_method(
    methods: JavaMethods, name: str, arguments: int, types: Sequence[str] | None
) -> tuple[tuple[str, ...] | None, MethodDefinition | None]:
    """The parameter types to send for ``name`` with ``arguments`` arguments, and its
    definition when known; CallError naming the methods or signatures there are."""
    definition = methods.definition
    if types is not None:
        if len(types) != arguments:
            raise CallError(
                f"{len(types)} parameter type(s) given ({', '.join(types) or 'none'}) for "
                f"{arguments} argument(s)"
            )
        sent = tuple(erase(t) for t in types)
        known = None
        if definition is not None:
            known = next((m for m in definition.named(name) if m.invoke_types == sent), None)
        return sent, known
    if definition is None:
        if methods.names and name not in methods.names:
            raise CallError(no_such_method(methods.service, name, methods.names))
        return None, None
    try:
        chosen = definition.pick(name, arguments, hint="name one with --types")
    except MethodChoiceError as exc:
        raise CallError(str(exc)) from None
    return chosen.invoke_types, chosen


@dataclass(frozen=True)
class JavaCallResult:
    """A generic call's result as JSON, and what was sent."""

    reply: Any
    method: str
    #: The parameter types sent (None: the provider picked the method by name).
    types: tuple[str, ...] | None
    #: ``estate.User getUser(java.lang.Long)`` when the definition was known.
    signature: str
    #: The ``dubbo://`` providers the call could go to (generic references do not report
    #: which one served a call).
    providers: tuple[str, ...]
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        """``{"reply", "protocol", "method", "types", "signature", "providers", "notes"}``."""
        return {
            "reply": self.reply,
            "protocol": "dubbo",
            "method": self.method,
            "types": list(self.types) if self.types is not None else None,
            "signature": self.signature or None,
            "providers": list(self.providers),
            "notes": list(self.notes),
        }


def _arguments(
    text: str, types: Sequence[str] | None, definition: ServiceDefinition | None
) -> list[Any]:
    values = parse_arguments(text)
    if types is None:
        return [to_java(v, "java.lang.Object", definition, f"argument {i + 1}") for i, v in
                enumerate(values)]  # fmt: skip
    return [
        to_java(v, t, definition, f"argument {i + 1} ({erase(t)})")
        for i, (v, t) in enumerate(zip(values, types, strict=True))
    ]


def prepare(
    methods: JavaMethods, request: CallRequest, types: Sequence[str] | None
) -> tuple[tuple[str, ...] | None, MethodDefinition | None, list[Any]]:
    """The types to send, the method's definition and the arguments as the codec takes them;
    CallError (malformed JSON, a wrong count, a mismatch) naming where."""
    try:
        count = len(parse_arguments(request.request_json))
        sent, known = pick_method(methods, request.method, count, types)
        shaping = known.parameter_types if known is not None else sent
        return sent, known, _arguments(request.request_json, shaping, methods.definition)
    except ArgumentError as exc:
        raise CallError(str(exc)) from None


def call_java(
    registry_address: str,
    request: CallRequest,
    *,
    types: Sequence[str] | None = None,
    auth: str | None = None,
    check: float = 15.0,
) -> JavaCallResult:
    """Make one generic call as a consumer application on ``registry_address``.

    ``request.request_json`` is the JSON array of arguments; ``types`` the parameter types when
    the caller names them. JavaCallError with the Java exception when the service threw,
    CallError for everything else."""
    # Imported here: the application layer sits above the admin tools that import this module.
    from dubbo_py.app.application import Application
    from dubbo_py.errors import NoProviderError
    from dubbo_py.protocol.dubbo.connection import DubboCallError, DubboTimeoutError

    with tempfile.TemporaryDirectory(prefix="dubbo-py-call-") as folder:
        app = Application(
            request.application,
            registry_address,
            auth=auth,
            cache_path=Path(folder) / "cache.json",
        )
        try:
            registry = app.registry
            if registry is None:
                raise CallError(f"{registry_address} is not a registry")
            methods = describe_java(registry, request.service, request.version, request.group)
            sent, known, arguments = prepare(methods, request, types)
            notes = []
            if methods.definition is None and types is None:
                notes.append(methods.why_no_signatures)
            ref = app.generic_reference(
                request.service,
                version=request.version,
                group=request.group,
                timeout=request.timeout,
                attachments=dict(request.attachments),
                check=check,
            )
            where = f"{request.service}#{request.method}"
            try:
                value = ref.invoke(request.method, sent, arguments, timeout=request.timeout)
            except JavaException as exc:
                raise JavaCallError(f"{where} threw {_chain(exc)}", exc) from None
            except DubboTimeoutError:
                raise CallError(f"{where}: no answer within {request.timeout:g}s") from None
            except (DubboCallError, NoProviderError) as exc:
                raise CallError(f"{where} failed: {exc}") from None
            providers = tuple(p.address for p in ref.providers)
        finally:
            app.close()
    return JavaCallResult(
        reply=to_json(value),
        method=request.method,
        types=sent,
        signature=known.signature if known is not None else "",
        providers=providers,
        notes=tuple(notes),
    )


def _chain(error: JavaException) -> str:
    """``java.lang.X: message; caused by java.lang.Y: message``."""
    parts = [str(error)]
    cause = error.cause
    seen = {id(error)}
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        parts.append(f"caused by {cause}")
        cause = cause.cause
    return "; ".join(parts)
