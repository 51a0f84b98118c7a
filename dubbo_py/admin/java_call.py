"""One generic call of a Java-interface service's method from JSON (``dubbo-py call`` and the
console's call form for services whose providers are ``dubbo://``, or ``tri://`` without IDL).

Which path a service takes (:func:`call_path`): a ``tri://`` provider whose URL names a
``serialization`` other than ``protobuf`` (``hessian2``, ``fastjson2`` ...) exports a plain Java
interface over Triple without IDL -- protobuf (IDL) services have no use for one -- and is called
generically, as ``dubbo://`` providers are; other ``tri://`` providers (an IDL service, or a
provider whose URL does not say) are gRPC, typed by reflection, unless the caller says they have
no IDL.

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
    "CallPath",
    "JavaCallError",
    "JavaCallResult",
    "JavaMethods",
    "call_java",
    "call_path",
    "describe_java",
    "dubbo_providers",
    "grpc_providers",
    "java_providers",
    "pick_method",
    "without_idl",
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


def without_idl(url: URL) -> bool:
    """Whether a ``tri://`` provider URL says it exports a plain Java interface (Triple without
    IDL): it names a ``serialization`` other than ``protobuf``. A Java provider registers its
    protocol's ``serialization`` when one is configured; an IDL service's messages are protobuf
    whatever it says, so only ``protobuf`` or no value at all leave the question open."""
    serialization = url.get_str("serialization").strip().lower()
    return url.protocol == "tri" and serialization not in ("", "protobuf")


def dubbo_providers(registry: Registry, service: str, version: str, group: str) -> list[URL]:
    """The service's usable ``dubbo://`` providers of this version and group (interface level,
    where generic references find them)."""
    return [u for u in _matching(registry, service, version, group) if u.protocol == "dubbo"]


def java_providers(
    registry: Registry,
    service: str,
    version: str,
    group: str,
    protocol: str | None = None,
    *,
    no_idl: bool = False,
) -> list[URL]:
    """The providers a generic call goes to: ``dubbo://`` ones and ``tri://`` ones without IDL
    (every ``tri://`` one with ``no_idl``); only ``protocol``'s when it is given."""
    return [
        u
        for u in _matching(registry, service, version, group)
        if (protocol is None or u.protocol == protocol)
        and (u.protocol == "dubbo" or (u.protocol == "tri" and (no_idl or without_idl(u))))
    ]


def grpc_providers(registry: Registry, service: str, version: str, group: str) -> list[URL]:
    """The service's usable providers a gRPC stub calls (Triple, gRPC), less the ``tri://``
    ones that say they have no IDL."""
    return [
        u
        for u in _matching(registry, service, version, group)
        if u.protocol in SPOKEN_PROTOCOLS and not without_idl(u)
    ]


@dataclass(frozen=True)
class CallPath:
    """How ``dubbo-py call`` calls a service: generically (a Java interface) or through gRPC
    reflection, and which protocol's providers (None: every one the path speaks)."""

    generic: bool
    protocol: str | None = None
    #: ``tri://`` providers are taken as having no IDL although their URLs do not say so.
    no_idl: bool = False


def call_path(
    registry: Registry,
    service: str,
    version: str,
    group: str,
    protocol: str | None = None,
    *,
    no_idl: bool = False,
) -> CallPath:
    """The path for ``service``: ``protocol`` ``dubbo`` is generic; ``tri`` is generic when
    ``no_idl`` or when the ``tri://`` providers say they have no IDL (:func:`without_idl`),
    else gRPC; with no protocol, gRPC when the service has gRPC providers, else generic when it
    has ``dubbo://`` or IDL-less ``tri://`` ones (else gRPC, whose lookup explains what the
    registry holds)."""
    if protocol == "dubbo":
        return CallPath(True, "dubbo")
    if protocol == "tri":
        if no_idl or java_providers(registry, service, version, group, "tri"):
            return CallPath(True, "tri", no_idl)
        return CallPath(False, "tri")
    if no_idl:
        return CallPath(True, None, True)
    if grpc_providers(registry, service, version, group):
        return CallPath(False, None)
    if java_providers(registry, service, version, group):
        return CallPath(True, None)
    return CallPath(False, None)


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
    def protocol(self) -> str:
        """The providers' protocols: ``dubbo``, ``tri`` or ``dubbo,tri``."""
        return ",".join(sorted({p.protocol for p in self.providers}))

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
            "protocol": self.protocol,
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
    registry: Registry,
    service: str,
    version: str = "",
    group: str = "",
    protocol: str | None = "dubbo",
    *,
    no_idl: bool = False,
) -> JavaMethods:
    """The methods of ``service``'s providers a generic call goes to (``dubbo://``, or
    ``tri://`` without IDL; ``protocol``'s only when given); CallError when it has none."""
    providers = java_providers(registry, service, version, group, protocol, no_idl=no_idl)
    if not providers:
        kinds = {
            "dubbo": "dubbo://",
            "tri": "tri:// (Triple without IDL)",
            None: "dubbo:// or tri:// (Triple without IDL)",
        }.get(protocol, f"{protocol}://")
        raise CallError(f"no usable {kinds} provider of {service} with {_flags(version, group)}")
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
    #: The providers the call could go to (before routing).
    providers: tuple[str, ...]
    notes: tuple[str, ...] = field(default=())
    #: The provider that answered (``host:port``) and its protocol (``dubbo`` or ``tri``).
    provider: str = ""
    protocol: str = "dubbo"
    #: The providers tried in order, the last the one that answered (failover).
    attempts: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """``{"reply", "protocol", "provider", "attempts", "method", "types", "signature",
        "providers", "notes"}``."""
        return {
            "reply": self.reply,
            "protocol": self.protocol,
            "provider": self.provider,
            "attempts": list(self.attempts),
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
    path: CallPath | None = None,
) -> JavaCallResult:
    """Make one generic call as a consumer application on ``registry_address``.

    ``request.request_json`` is the JSON array of arguments; ``types`` the parameter types when
    the caller names them; ``path`` which providers (default: the ``dubbo://`` ones).
    JavaCallError with the Java exception when the service threw, CallError for everything
    else."""
    chosen = path if path is not None else CallPath(True, "dubbo")
    # Imported here: the application layer sits above the admin tools that import this module.
    from dubbo_py.app.application import Application
    from dubbo_py.consumer.generic import GenericSignatureError
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
            methods = describe_java(
                registry,
                request.service,
                request.version,
                request.group,
                chosen.protocol,
                no_idl=chosen.no_idl,
            )
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
                protocol=chosen.protocol,
            )
            where = f"{request.service}#{request.method}"
            try:
                done = ref.invoke_result(request.method, sent, arguments, timeout=request.timeout)
            except JavaException as exc:
                raise JavaCallError(f"{where} threw {_chain(exc)}", exc) from None
            except DubboTimeoutError:
                raise CallError(f"{where}: no answer within {request.timeout:g}s") from None
            except (DubboCallError, NoProviderError) as exc:
                raise CallError(f"{where} failed: {exc}") from None
            except GenericSignatureError as exc:  # the definition changed since it was read
                raise CallError(str(exc)) from None
            providers = tuple(p.address for p in ref.providers)
        finally:
            app.close()
    return JavaCallResult(
        reply=to_json(done.value),
        method=request.method,
        types=sent,
        signature=known.signature if known is not None else "",
        providers=providers,
        notes=tuple(notes),
        # No provider: one of the application's consumer filters answered the call itself.
        provider=done.provider.address if done.provider is not None else "",
        protocol=done.provider.protocol if done.provider is not None else "",
        attempts=tuple(p.address for p in done.attempts),
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
