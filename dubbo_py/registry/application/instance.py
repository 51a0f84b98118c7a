"""The instance node: Curator's ServiceInstance JSON carrying Dubbo's ZookeeperInstance payload.

Dubbo's ZookeeperServiceDiscovery registers each provider process through Curator's service
discovery, so the node ``/services/<application>/<host:port>`` holds::

    {"name": app, "id": "host:port", "address": host, "port": port, "sslPort": null,
     "payload": {"@class": "org.apache.dubbo.registry.zookeeper.ZookeeperInstance",
                 "id": "host:port", "name": app, "metadata": {...sorted...}},
     "registrationTimeUTC": ms, "serviceType": "DYNAMIC", "uriSpec": null}

The metadata says where the services' details are: ``dubbo.metadata.revision`` (the
MetadataInfo revision), ``dubbo.metadata.storage-type`` (``remote``: in the metadata report;
``local``: ask the instance's MetadataService), ``dubbo.endpoints`` (the port of each protocol).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from dubbo_py.registry.application.documents import json_object

__all__ = [
    "ENDPOINTS",
    "METADATA_SERVICE_URL_PARAMS",
    "METADATA_VERSION",
    "REVISION",
    "STORAGE_TYPE",
    "ZOOKEEPER_INSTANCE_CLASS",
    "InstanceError",
    "ServiceInstance",
    "endpoints_json",
]

ZOOKEEPER_INSTANCE_CLASS = "org.apache.dubbo.registry.zookeeper.ZookeeperInstance"
REVISION = "dubbo.metadata.revision"
STORAGE_TYPE = "dubbo.metadata.storage-type"
ENDPOINTS = "dubbo.endpoints"
METADATA_SERVICE_URL_PARAMS = "dubbo.metadata-service.url-params"
#: ``MetadataServiceDelegationV2.VERSION`` and the instance's ``meta-v`` when it serves V2.
METADATA_SERVICE_V2 = "2.0.0"
#: The MetadataService version an instance serves (``2.0.0``: ``MetadataServiceV2``).
METADATA_VERSION = "meta-v"
#: Java's default storage type when an instance does not say (``metadata-type=local``).
DEFAULT_STORAGE_TYPE = "local"


class InstanceError(ValueError):
    """An instance node that cannot be read (the message says what is wrong)."""


@dataclass(frozen=True, slots=True)
class ServiceInstance:
    """One provider process of an application, as registered under ``/services``."""

    app: str
    host: str
    port: int
    metadata: Mapping[str, str] = field(default_factory=dict)
    registration_time_ms: int = 0
    enabled: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))

    @property
    def id(self) -> str:
        """``host:port`` (Dubbo's ``CuratorFrameworkUtils.generateId``)."""
        return f"{self.host}:{self.port}"

    @property
    def revision(self) -> str:
        """The MetadataInfo revision the instance exports ("" when it says none)."""
        return self.metadata.get(REVISION, "")

    @property
    def storage_type(self) -> str:
        """``remote`` or ``local`` (Java's default when absent)."""
        return self.metadata.get(STORAGE_TYPE) or DEFAULT_STORAGE_TYPE

    def endpoints(self) -> dict[str, int]:
        """Protocol -> port from ``dubbo.endpoints`` (empty when absent or unreadable)."""
        raw = self.metadata.get(ENDPOINTS)
        if not raw:
            return {}
        try:
            items = json.loads(raw)
        except ValueError:
            return {}
        ports: dict[str, int] = {}
        if isinstance(items, list):
            for item in items:
                if isinstance(item, dict) and isinstance(item.get("protocol"), str):
                    try:
                        ports.setdefault(item["protocol"], int(item.get("port")))  # type: ignore[arg-type]
                    except (TypeError, ValueError):
                        continue
        return ports

    def to_json(self, *, stamped: bool = True) -> str:
        """The node's data, field for field as Curator's JSON serializer writes it.

        ``stamped=False`` leaves ``registrationTimeUTC`` null when no time is known (a store
        that keeps none, Nacos, builds the same text for the same instance on every read)."""
        doc: dict[str, Any] = {
            "name": self.app,
            "id": self.id,
            "address": self.host,
            "port": self.port,
            "sslPort": None,
            "payload": {
                "@class": ZOOKEEPER_INSTANCE_CLASS,
                "id": self.id,
                "name": self.app,
                "metadata": {k: self.metadata[k] for k in sorted(self.metadata)},
            },
            "registrationTimeUTC": self.registration_time_ms
            or (int(time.time() * 1000) if stamped else None),
            "serviceType": "DYNAMIC",
            "uriSpec": None,
        }
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def parse(cls, data: bytes | str, where: str = "instance") -> ServiceInstance:
        """Read an instance node written by Curator (Java) or dubbo-py."""
        doc = json_object(data, where, InstanceError)
        name, address, port = doc.get("name"), doc.get("address"), doc.get("port")
        if not isinstance(name, str) or not name:
            raise InstanceError(f"{where}: no name")
        if not isinstance(address, str) or not address:
            raise InstanceError(f"{where}: no address")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise InstanceError(f"{where}: port {port!r} is not a port number")
        payload = doc.get("payload")
        metadata: dict[str, str] = {}
        if isinstance(payload, dict) and isinstance(payload.get("metadata"), dict):
            metadata = {
                str(k): v if isinstance(v, str) else json.dumps(v)
                for k, v in payload["metadata"].items()
                if v is not None
            }
        registered = doc.get("registrationTimeUTC")
        return cls(
            app=name,
            host=address,
            port=port,
            metadata=metadata,
            registration_time_ms=registered if isinstance(registered, int) else 0,
            enabled=doc.get("enabled", True) is not False,
        )


def endpoints_json(ports: Mapping[str, int]) -> str:
    """``dubbo.endpoints``: ``[{"port":50051,"protocol":"tri"}]`` (Java's field order)."""
    return json.dumps(
        [{"port": port, "protocol": protocol} for protocol, port in sorted(ports.items())],
        separators=(",", ":"),
    )
