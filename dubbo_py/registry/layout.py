"""Where things live in the registry tree (docs/design.md §4), shared by consumers, providers
and the CLI."""

from __future__ import annotations

from dubbo_py.url import URL

__all__ = [
    "CATEGORIES",
    "CONFIG_ROOT",
    "HISTORY_ROOT",
    "MIGRATION_GROUP",
    "MIGRATION_ROOT",
    "MIGRATION_SUFFIX",
    "RESERVED",
    "ROOT",
    "category_path",
    "config_path",
    "history_path",
    "node_path",
    "rule_key",
]

ROOT = "/dubbo"
CONFIG_ROOT = f"{ROOT}/config/dubbo"
#: Where the admin CLI keeps the bounded history of every rule key (``<key>/<seq>`` below it).
HISTORY_ROOT = f"{ROOT}/config-history"
#: The config-center group Dubbo's MigrationRuleListener reads ``<application>.migration`` from:
#: the one rule kind that is not in the ``dubbo`` group.
MIGRATION_GROUP = "DUBBO_SERVICEDISCOVERY_MIGRATION"
MIGRATION_ROOT = f"{ROOT}/config/{MIGRATION_GROUP}"
MIGRATION_SUFFIX = ".migration"
#: Children of ``/dubbo`` that are not service interfaces (the config center, the CLI's rule
#: history, and application-level discovery's service-name mapping and metadata documents).
RESERVED = frozenset({"config", "config-history", "mapping", "metadata"})
PROVIDERS, CONSUMERS, ROUTERS, CONFIGURATORS = "providers", "consumers", "routers", "configurators"
CATEGORIES = (PROVIDERS, CONSUMERS, ROUTERS, CONFIGURATORS)


def category_path(interface: str, category: str) -> str:
    """``/dubbo/<interface>/<category>``."""
    return f"{ROOT}/{interface}/{category}"


def node_path(url: URL) -> str:
    """The node a URL is registered at: its category folder plus its URL-encoded full string,
    byte-identical with Apache Dubbo's ZookeeperRegistry so Java tooling reads our tree."""
    return f"{category_path(url.service_interface, url.category)}/{url.encode()}"


def rule_key(interface: str, version: str = "", group: str = "") -> str:
    """Dubbo's colon-separated rule key ``interface:version:group`` (blank parts stay empty:
    ``demo.Greeter::``), the prefix of service-scoped config-center keys."""
    return f"{interface}:{version}:{group}"


def config_path(key: str) -> str:
    """The config-center node of a rule key such as ``demo.Greeter::.condition-router``; an
    application's migration rule ``<application>.migration`` lives in its own group, where
    Dubbo reads it (``/dubbo/config/DUBBO_SERVICEDISCOVERY_MIGRATION/shop.migration``)."""
    found = _CONFIG_PATHS.get(key)
    if found is not None:
        return found
    if not key or "/" in key:
        raise ValueError(f"bad config key {key!r}: must be non-empty and contain no '/'")
    root = MIGRATION_ROOT if key.endswith(MIGRATION_SUFFIX) else CONFIG_ROOT
    path = f"{root}/{key}"
    # One string per key, shared by every watch of it: a consumer of 1 000 services watches
    # each provider application's 8 keys once per service (80 000 watches, issue 42).
    if len(_CONFIG_PATHS) >= _CONFIG_PATHS_MAX:
        _CONFIG_PATHS.clear()
    _CONFIG_PATHS[key] = path
    return path


#: Config key -> its node path (see :func:`config_path`), bounded.
_CONFIG_PATHS: dict[str, str] = {}
_CONFIG_PATHS_MAX = 65536


def history_path(key: str) -> str:
    """The history folder of a config key (its data is the next sequence number)."""
    config_path(key)  # same rules for the key
    return f"{HISTORY_ROOT}/{key}"
