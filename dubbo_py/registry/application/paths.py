"""Where application-level discovery keeps its nodes (Dubbo 3.3's ZooKeeper layout)."""

from __future__ import annotations

from dubbo_py.registry import layout

__all__ = [
    "MAPPING_ROOT",
    "METADATA_ROOT",
    "MIGRATION_GROUP",
    "SERVICES_ROOT",
    "application_path",
    "instance_path",
    "mapping_path",
    "metadata_path",
    "migration_path",
]

#: Curator's service-discovery base path, as Dubbo's ZookeeperServiceDiscovery uses it.
SERVICES_ROOT = "/services"
#: ``ServiceNameMapping.DEFAULT_MAPPING_GROUP`` under the metadata report's root.
MAPPING_ROOT = f"{layout.ROOT}/mapping"
#: ``SubscriberMetadataIdentifier`` paths: ``metadata/<application>/<revision>``.
METADATA_ROOT = f"{layout.ROOT}/metadata"
#: The config-center group Dubbo's MigrationRuleListener reads ``<application>.migration`` from.
MIGRATION_GROUP = layout.MIGRATION_GROUP


def _checked(name: str, what: str) -> str:
    if not name or "/" in name:
        raise ValueError(f"bad {what} {name!r}: must be non-empty and contain no '/'")
    return name


def mapping_path(interface: str) -> str:
    """``/dubbo/mapping/<interface>``: the applications providing an interface."""
    return f"{MAPPING_ROOT}/{_checked(interface, 'interface')}"


def application_path(application: str) -> str:
    """``/services/<application>``: the application's instances are its children."""
    return f"{SERVICES_ROOT}/{_checked(application, 'application name')}"


def instance_path(application: str, instance_id: str) -> str:
    """``/services/<application>/<host:port>``."""
    return f"{application_path(application)}/{_checked(instance_id, 'instance id')}"


def metadata_path(application: str, revision: str) -> str:
    """``/dubbo/metadata/<application>/<revision>``: the MetadataInfo document."""
    return (
        f"{METADATA_ROOT}/{_checked(application, 'application name')}/"
        f"{_checked(revision, 'revision')}"
    )


def migration_path(application: str) -> str:
    """``/dubbo/config/DUBBO_SERVICEDISCOVERY_MIGRATION/<application>.migration``."""
    name = _checked(application, "application name")
    return layout.config_path(f"{name}{layout.MIGRATION_SUFFIX}")
