"""Application-level discovery's nodes in Dubbo 3.3's Nacos layout (used by the ``nacos://``
store, :mod:`.store`).

Dubbo's ZooKeeper layout, which the rest of dubbo-py reads and writes
(:mod:`dubbo_py.registry.application.paths`), maps onto Nacos as Dubbo 3.3 lays it out there:

* ``/services/<app>/<host:port>`` (the instance node, Curator's JSON in ZooKeeper) is an
  instance of the Nacos naming service ``<app>`` (``NacosServiceDiscovery``: the application
  name, no category prefix), ip and port the instance's, its metadata the instance metadata
  (``dubbo.metadata.revision``, ``dubbo.endpoints``, ``dubbo.metadata.storage-type``, ...), as
  ``NacosNamingServiceUtils.toInstance`` registers it. Reading builds the Curator JSON back
  (:func:`instance_document`), without a registration time: Nacos keeps none, and the same
  instance must read as the same text at every poll.
* ``/dubbo/metadata/<app>/<revision>`` (the MetadataInfo document) is config data id
  ``<app>`` in group ``<revision>`` (``NacosMetadataReport.publishAppMetadata``).
* ``/dubbo/mapping/<interface>`` is data id ``<interface>`` in group ``mapping`` (the store's
  config mapping, as before).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from dubbo_py.registry.application.instance import InstanceError, ServiceInstance
from dubbo_py.registry.application.paths import METADATA_ROOT, SERVICES_ROOT
from dubbo_py.registry.store._paths import validate_path

__all__ = [
    "application_of",
    "instance_document",
    "instance_of",
    "instances_read",
    "is_revision_group",
    "metadata_key",
    "registration",
]

_SERVICES = SERVICES_ROOT.strip("/")
_METADATA = METADATA_ROOT.strip("/").split("/")
#: Dubbo's revision: an MD5 in lower-case hex (``RevisionResolver``).
_REVISION = re.compile(r"[0-9a-f]{32}")


def _parts(path: str) -> list[str]:
    return validate_path(path).split("/")[1:]


def application_of(path: str) -> str | None:
    """``<app>`` of ``/services/<app>`` (the folder of its instances); None otherwise."""
    parts = _parts(path)
    if len(parts) == 2 and parts[0] == _SERVICES:
        return parts[1]
    return None


def instance_of(path: str) -> tuple[str, str] | None:
    """``(app, host:port)`` of ``/services/<app>/<host:port>``; None otherwise."""
    parts = _parts(path)
    if len(parts) == 3 and parts[0] == _SERVICES:
        return parts[1], parts[2]
    return None


def metadata_key(path: str) -> tuple[str, str] | None:
    """``(data id, group)`` = ``(app, revision)`` of ``/dubbo/metadata/<app>/<revision>``."""
    parts = _parts(path)
    if len(parts) == 4 and parts[:2] == _METADATA:
        return parts[2], parts[3]
    return None


def is_revision_group(group: str) -> bool:
    """Whether a config group is a revision's (a MetadataInfo document's, not rules')."""
    return _REVISION.fullmatch(group) is not None


def registration(path: str, data: bytes) -> ServiceInstance:
    """The instance an instance node's data describes, checked against its path: its
    application and ``host:port`` must be the path's (they become the Nacos service name, ip
    and port). :class:`InstanceError` naming the path otherwise."""
    where = instance_of(path)
    if where is None:
        raise InstanceError(f"{path}: not an instance node (/services/<app>/<host:port>)")
    instance = ServiceInstance.parse(data, path)
    if (instance.app, instance.id) != where:
        raise InstanceError(
            f"{path}: the document is instance {instance.id} of {instance.app}, "
            "not the one its path names"
        )
    return instance


def instance_document(app: str, ip: str, port: int, metadata: Mapping[str, Any]) -> str:
    """The instance node's data (Curator's JSON) for a Nacos instance of ``app``."""
    meta = {str(k): str(v) for k, v in metadata.items() if v is not None}
    return ServiceInstance(app, ip, port, meta).to_json(stamped=False)


def instances_read(app: str, hosts: list[Any] | None) -> dict[str, str]:
    """``host:port`` -> instance document of the Nacos instances of ``app`` a consumer uses:
    healthy, enabled and of positive weight (what Dubbo's ``selectInstances(app, group,
    true)`` returns)."""
    out: dict[str, str] = {}
    for inst in hosts or []:
        if not (inst.healthy and inst.enabled and inst.weight > 0):
            continue
        port = int(inst.port)
        out[f"{inst.ip}:{port}"] = instance_document(app, inst.ip, port, inst.metadata or {})
    return out
