"""The MetadataInfo document: which services an application revision offers, and its revision.

A provider application publishes one document per *revision* — an MD5 over the application name
and the sorted descriptions of its services, computed exactly as Dubbo's
``MetadataInfo.calAndGetRevision`` does — so every instance exporting the same services with the
same parameters shares one document, and a consumer fetches each revision once. Service
parameters are the provider URL's, less those Dubbo's ``DefaultMetadataParamsFilter`` keeps out
(pid, timestamp, ...: they differ per process and would split the revision).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from dubbo_py.registry.application.documents import json_object
from dubbo_py.url import URL

__all__ = [
    "EMPTY_REVISION",
    "INSTANCE_PARAMS",
    "MetadataError",
    "MetadataInfo",
    "ServiceInfo",
    "build_key",
    "compute_revision",
    "java_map_string",
]

#: ``RevisionResolver.EMPTY_REVISION``: an application exporting nothing.
EMPTY_REVISION = "0"

#: Parameters Dubbo's default params filter keeps out of a service's metadata (compared
#: case-insensitively; a key containing ``.<name>`` is kept out too).
EXCLUDED_SERVICE_PARAMS = (
    "monitor",
    "bind.ip",
    "bind.port",
    "qos.enable",
    "qos.host",
    "qos.port",
    "qos.accept.foreign.ip",
    "validation",
    "interfaces",
    "pid",
    "timestamp",
    "heartbeat.timeout",
    "ipv6",
)
#: Provider URL parameters Dubbo copies into the instance's metadata instead (and ``qos.port``,
#: kept out of the service's parameters as Dubbo does, but per process: consumers read it).
INSTANCE_PARAMS = ("heartbeat.timeout", "timestamp", "ipv6", "qos.port")


class MetadataError(ValueError):
    """A metadata document that cannot be read (the message says what is wrong)."""


def build_key(name: str, group: str, version: str) -> str:
    """``group/name:version`` with empty parts left out (Dubbo's ``URL.buildKey``)."""
    key = f"{group}/{name}" if group else name
    return f"{key}:{version}" if version else key


def java_map_string(params: Mapping[str, str]) -> str:
    """What ``new TreeMap<>(params).toString()`` prints in Java: ``{a=1, b=2}``."""
    # Java orders String keys by UTF-16 code units; sorting UTF-16-BE bytes gives that order.
    keys = sorted(params, key=lambda k: k.encode("utf-16-be", "surrogatepass"))
    return "{" + ", ".join(f"{k}={params[k]}" for k in keys) + "}"


def _excluded(key: str) -> bool:
    lowered = key.lower()
    return any(lowered == ex or f".{ex}" in key for ex in EXCLUDED_SERVICE_PARAMS)


@dataclass(frozen=True, slots=True)
class ServiceInfo:
    """One exported service in a metadata document (Dubbo's ``MetadataInfo.ServiceInfo``)."""

    name: str
    group: str = ""
    version: str = ""
    protocol: str = ""
    port: int = -1
    path: str = ""
    params: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    @classmethod
    def from_url(cls, url: URL) -> ServiceInfo:
        """The service a provider URL exports, with Dubbo's default parameter filter applied."""
        return cls(
            name=url.service_interface,
            group=url.get_str("group"),
            version=url.get_str("version"),
            protocol=url.protocol,
            port=url.port,
            path=url.path,
            params={k: v for k, v in url.parameters.items() if not _excluded(k)},
        )

    @property
    def service_key(self) -> str:
        """``group/name:version``."""
        return build_key(self.name, self.group, self.version)

    @property
    def match_key(self) -> str:
        """``group/name:version:protocol``: the service's key in the document."""
        return f"{self.service_key}:{self.protocol}" if self.protocol else self.service_key

    def desc(self) -> str:
        """Dubbo's ``toDescString``: what the revision is computed over."""
        return f"{self.match_key}{self.port}{self.path}{java_map_string(self.params)}"

    def to_json(self) -> dict[str, Any]:
        """The service's JSON object (empty group and version left out, as Java leaves nulls)."""
        doc: dict[str, Any] = {"name": self.name}
        if self.group:
            doc["group"] = self.group
        if self.version:
            doc["version"] = self.version
        doc.update(protocol=self.protocol, port=self.port, path=self.path, params=dict(self.params))
        return doc

    @classmethod
    def from_json(cls, doc: object, where: str) -> ServiceInfo:
        """Read a service object; :class:`MetadataError` naming ``where`` when it is not one."""
        if not isinstance(doc, dict) or not isinstance(doc.get("name"), str) or not doc["name"]:
            raise MetadataError(f"{where}: a service needs a name")
        params = doc.get("params") or {}
        if not isinstance(params, dict):
            raise MetadataError(f"{where}: params must be an object")
        port = doc.get("port", -1)
        try:
            port = int(port) if port is not None else -1
        except (TypeError, ValueError):
            raise MetadataError(f"{where}: port {port!r} is not a number") from None
        return cls(
            name=doc["name"],
            group=_text(doc.get("group")),
            version=_text(doc.get("version")),
            protocol=_text(doc.get("protocol")),
            port=port,
            path=_text(doc.get("path")) or doc["name"],
            params={str(k): _text(v) for k, v in params.items() if v is not None},
        )


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True, slots=True)
class MetadataInfo:
    """An application's metadata document: its services keyed by match key, and the revision."""

    app: str
    services: Mapping[str, ServiceInfo] = field(default_factory=dict)
    #: The revision as stored; :meth:`of` computes it, :meth:`parse` keeps the document's.
    revision: str = EMPTY_REVISION

    def __post_init__(self) -> None:
        object.__setattr__(self, "services", MappingProxyType(dict(self.services)))

    @classmethod
    def of(cls, app: str, urls: Iterable[URL]) -> MetadataInfo:
        """The document for the provider URLs an application exports, revision computed."""
        services = {info.match_key: info for info in map(ServiceInfo.from_url, urls)}
        return cls(app, services, compute_revision(app, services))

    def to_json(self) -> str:
        """The document as stored in the metadata report (compact JSON, as Java writes it)."""
        doc = {
            "app": self.app,
            "revision": self.revision,
            "services": {k: self.services[k].to_json() for k in sorted(self.services)},
        }
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def parse(cls, text: str | bytes, where: str = "metadata") -> MetadataInfo:
        """Read a document written by Java or by dubbo-py; :class:`MetadataError` otherwise."""
        doc = json_object(text, where, MetadataError)
        raw = doc.get("services")
        raw = {} if raw is None else raw
        if not isinstance(raw, dict):
            raise MetadataError(f"{where}: services must be an object")
        services = {
            str(k): ServiceInfo.from_json(v, f"{where}: services[{k!r}]") for k, v in raw.items()
        }
        return cls(_text(doc.get("app")), services, _text(doc.get("revision")))

    def services_of(self, interface: str) -> list[ServiceInfo]:
        """The services of one interface (any group, version or protocol), by match key."""
        return [
            self.services[k] for k in sorted(self.services) if self.services[k].name == interface
        ]

    def instance_params(self, urls: Iterable[URL]) -> dict[str, str]:
        """The provider URLs' parameters Dubbo copies into the instance's metadata."""
        params: dict[str, str] = {}
        for url in urls:
            for key in INSTANCE_PARAMS:
                value = url.get(key)
                if value is not None:
                    params[key] = value
        return params


def compute_revision(app: str, services: Mapping[str, ServiceInfo]) -> str:
    """Dubbo's revision: MD5 (lower-case hex) of the application name followed by each
    service's description in match-key order; ``"0"`` when nothing is exported."""
    if not services:
        return EMPTY_REVISION
    keys = sorted(services, key=lambda k: k.encode("utf-16-be", "surrogatepass"))
    text = app + "".join(services[k].desc() for k in keys)
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()
