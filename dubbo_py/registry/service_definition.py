"""A Java service's method signatures, read from the metadata report (Dubbo's
``FullServiceDefinition``).

A Dubbo 3 provider exporting a Java interface stores the interface's definition in its
metadata report when it has one (``MetadataUtils.publishServiceDefinition``; on ZooKeeper the
registry is the metadata report unless ``use-as-metadata-center`` is false), at
``/dubbo/metadata/<interface>/<version>/<group>/provider/<application>`` (empty parts left out,
as ``PathUtils.buildPath`` leaves them). The document is JSON: ``canonicalName``, ``methods``
(``name``, ``parameterTypes``, ``returnType``: Java type names with their type arguments, such
as ``java.util.List<java.lang.String>``), ``types`` (per type its ``properties``, ``items`` and
``enums``) and ``parameters`` (the provider URL's).

``dubbo-py call`` reads it to list a service's signatures and to send a generic call's
parameter types; without it only the method names (the provider URL's ``methods``) are known.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from dubbo_py.errors import NoNodeError, StoreError
from dubbo_py.registry import layout
from dubbo_py.registry.store.base import Store
from dubbo_py.url import URL

__all__ = [
    "PRIMITIVES",
    "MethodChoiceError",
    "MethodDefinition",
    "ServiceDefinition",
    "ServiceDefinitionError",
    "TypeDefinition",
    "erase",
    "method_names",
    "no_such_method",
    "provider_definition_path",
    "read_provider_definition",
    "split_type_list",
    "type_arguments",
]

#: Java's primitive type names.
PRIMITIVES = frozenset({"boolean", "byte", "char", "short", "int", "long", "float", "double"})


class ServiceDefinitionError(ValueError):
    """A service definition that cannot be read (the message says where and what)."""


class MethodChoiceError(ValueError):
    """No method, or more than one, of a service definition fits a call (the message names
    the methods or signatures there are)."""


def erase(java_type: str) -> str:
    """The type without its type arguments: ``java.util.Map<java.lang.String,X>`` ->
    ``java.util.Map``, ``java.util.List<X>[]`` -> ``java.util.List[]`` (what ``$invoke``
    names a parameter by: the provider loads the class by this name)."""
    out: list[str] = []
    depth = 0
    for char in java_type:
        if char == "<":
            depth += 1
        elif char == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(char)
    return "".join(out).strip()


def type_arguments(java_type: str) -> tuple[str, ...]:
    """The type arguments of ``java_type`` (``Map<K,V>`` -> ``(K, V)``), none for a raw type."""
    start = java_type.find("<")
    end = java_type.rfind(">")
    if start < 0 or end < start:
        return ()
    return split_type_list(java_type[start + 1 : end])


def split_type_list(text: str) -> tuple[str, ...]:
    """Comma-separated Java type names, commas inside ``<...>`` kept: ``"java.util.Map<K,V>,
    int"`` -> ``("java.util.Map<K,V>", "int")``. Empty text is no types."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    last = "".join(current).strip()
    if last or parts:
        parts.append(last)
    return tuple(parts)


@dataclass(frozen=True, slots=True)
class TypeDefinition:
    """One type the service's signatures use (Dubbo's ``TypeDefinition``)."""

    type: str
    #: A bean's properties: name -> Java type.
    properties: Mapping[str, str] = field(default_factory=dict)
    #: A container's element types (a list's element, a map's key and value).
    items: tuple[str, ...] = ()
    #: An enum's constants.
    enums: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "properties", MappingProxyType(dict(self.properties)))


@dataclass(frozen=True, slots=True)
class MethodDefinition:
    """One method's signature (Dubbo's ``MethodDefinition``)."""

    name: str
    parameter_types: tuple[str, ...]
    return_type: str

    @property
    def signature(self) -> str:
        """``estate.User getUser(java.lang.Long)``, as Java declares it."""
        return f"{self.return_type} {self.name}({', '.join(self.parameter_types)})"

    @property
    def invoke_types(self) -> tuple[str, ...]:
        """The parameter types as ``$invoke`` names them (type arguments erased)."""
        return tuple(erase(t) for t in self.parameter_types)


@dataclass(frozen=True)
class ServiceDefinition:
    """A Java interface's methods and the types they use."""

    canonical_name: str
    methods: tuple[MethodDefinition, ...]
    types: Mapping[str, TypeDefinition] = field(default_factory=dict)
    parameters: Mapping[str, str] = field(default_factory=dict)
    #: Where it was read (a registry path), for messages.
    source: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "types", MappingProxyType(dict(self.types)))
        object.__setattr__(self, "parameters", MappingProxyType(dict(self.parameters)))

    def named(self, name: str) -> tuple[MethodDefinition, ...]:
        """The methods called ``name`` (several when it is overloaded), by signature."""
        return tuple(sorted((m for m in self.methods if m.name == name), key=_order))

    def pick(self, name: str, arguments: int, *, hint: str = "") -> MethodDefinition:
        """The one method ``name`` taking ``arguments`` arguments: an overloaded name is told
        apart by its number of parameters only (the values alone do not name a Java type).
        :class:`MethodChoiceError` when there is no such method, none with that many
        parameters, or several (listing them; ``hint`` ends that message, saying how to
        name one)."""
        found = self.named(name)
        if not found:
            raise MethodChoiceError(
                no_such_method(self.canonical_name, name, [m.name for m in self.methods])
            )
        fitting = [m for m in found if len(m.parameter_types) == arguments]
        if not fitting:
            counts = " or ".join(str(c) for c in sorted({len(m.parameter_types) for m in found}))
            listed = "; ".join(m.signature for m in found)
            raise MethodChoiceError(
                f"{self.canonical_name}#{name} takes {counts} argument(s), not {arguments} "
                f"argument(s): {listed}"
            )
        if len(fitting) > 1:
            listed = "; ".join(m.signature for m in fitting)
            raise MethodChoiceError(
                f"{self.canonical_name}#{name} is overloaded with {arguments} parameter(s): "
                f"{listed}" + (f"; {hint}" if hint else "")
            )
        return fitting[0]

    def sorted_methods(self) -> tuple[MethodDefinition, ...]:
        """Every method by name, then by parameter list."""
        return tuple(sorted(self.methods, key=_order))

    def bean(self, java_type: str) -> TypeDefinition | None:
        """The definition of a bean type (one with properties), None for any other type."""
        found = self.types.get(java_type)
        return found if found is not None and found.properties else None

    @classmethod
    def parse(cls, text: str | bytes, where: str = "service definition") -> ServiceDefinition:
        """Read the JSON Dubbo stores; :class:`ServiceDefinitionError` naming ``where``."""
        try:
            doc = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ServiceDefinitionError(f"{where}: not JSON ({exc})") from None
        if not isinstance(doc, dict):
            raise ServiceDefinitionError(f"{where}: not a JSON object")
        name = doc.get("canonicalName")
        if not isinstance(name, str) or not name:
            raise ServiceDefinitionError(f"{where}: no canonicalName")
        raw_methods = doc.get("methods") or []
        if not isinstance(raw_methods, list):
            raise ServiceDefinitionError(f"{where}: methods must be a list")
        methods = tuple(_method(m, f"{where}: methods[{i}]") for i, m in enumerate(raw_methods))
        raw_types = doc.get("types") or []
        if not isinstance(raw_types, list):
            raise ServiceDefinitionError(f"{where}: types must be a list")
        types = {}
        for i, raw in enumerate(raw_types):
            definition = _type(raw, f"{where}: types[{i}]")
            types[definition.type] = definition
        params = doc.get("parameters") or {}
        if not isinstance(params, dict):
            raise ServiceDefinitionError(f"{where}: parameters must be an object")
        return cls(
            name,
            methods,
            types,
            {str(k): str(v) for k, v in params.items() if v is not None},
            source=where,
        )


def _order(method: MethodDefinition) -> tuple[str, int, tuple[str, ...]]:
    return (method.name, len(method.parameter_types), method.parameter_types)


def _strings(value: object, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ServiceDefinitionError(f"{where}: must be a list of strings")
    return tuple(value)


def _method(raw: object, where: str) -> MethodDefinition:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
        raise ServiceDefinitionError(f"{where}: a method needs a name")
    returns = raw.get("returnType")
    return MethodDefinition(
        raw["name"],
        _strings(raw.get("parameterTypes"), f"{where}.parameterTypes"),
        returns if isinstance(returns, str) else "void",
    )


def _type(raw: object, where: str) -> TypeDefinition:
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        raise ServiceDefinitionError(f"{where}: a type needs a name")
    properties = raw.get("properties") or {}
    if not isinstance(properties, dict) or not all(isinstance(v, str) for v in properties.values()):
        raise ServiceDefinitionError(f"{where}.properties: must map names to type names")
    return TypeDefinition(
        raw["type"],
        {str(k): v for k, v in properties.items()},
        _strings(raw.get("items"), f"{where}.items"),
        _strings(raw.get("enums"), f"{where}.enums"),
    )


def provider_definition_path(
    interface: str, version: str, group: str, application: str, root: str = layout.ROOT
) -> str:
    """Where a provider application's definition of ``interface`` is stored (Dubbo's
    ``MetadataIdentifier`` path under the report's root, ``/dubbo`` by default)."""
    # PathUtils.buildPath: a LinkedHashSet of the parts (so a repeated part appears once),
    # empty ones left out.
    parts = list(dict.fromkeys(p for p in ("metadata", interface, version, group, "provider") if p))
    return "/".join([root.rstrip("/"), *parts, application])


def read_provider_definition(
    store: Store, providers: Sequence[URL]
) -> tuple[ServiceDefinition | None, list[str]]:
    """The service definition of the first provider whose application stored one, and the
    paths tried without finding one (for the message saying signatures are not available).
    A stored definition that does not read is a problem named in that list, not an error:
    the call can still go by method name or ``--types``."""
    tried: list[str] = []
    seen: set[str] = set()
    for url in providers:
        application = url.get_str("application")
        if not application:
            tried.append(f"{url.address} names no application")
            continue
        path = provider_definition_path(
            url.service_interface or url.path,
            url.get_str("version"),
            url.get_str("group"),
            application,
        )
        if path in seen:
            continue
        seen.add(path)
        try:
            data, _ = store.get(path)
        except NoNodeError:
            tried.append(f"{path} (none)")
            continue
        except StoreError as exc:
            tried.append(f"{path} ({exc})")
            continue
        try:
            return ServiceDefinition.parse(data, path), tried
        except ServiceDefinitionError as exc:
            tried.append(str(exc))
    return None, tried


def no_such_method(service: str, name: str, names: Sequence[str]) -> str:
    """``S has no method 'x' (methods: a, b); did you mean 'y'?``."""
    unique = sorted(set(names))
    close = difflib.get_close_matches(name, unique, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{service} has no method {name!r} (methods: {', '.join(unique) or 'none'}){hint}"


def method_names(providers: Sequence[URL]) -> tuple[str, ...]:
    """The method names the providers' URLs list (their ``methods`` parameter)."""
    names: dict[str, None] = {}
    for url in providers:
        for name in url.get_str("methods").split(","):
            if name.strip():
                names[name.strip()] = None
    return tuple(sorted(names))
