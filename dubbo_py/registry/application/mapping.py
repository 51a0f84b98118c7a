"""The service-name mapping: ``/dubbo/mapping/<interface>`` holds ``app1,app2``.

Providers add their application with a conditional update, as Dubbo's
``MetadataServiceNameMapping.map``: read the node and its version, return if the application is
listed, else write ``old,app`` only if the version is still the one read (or create the node if
it was absent), and on a lost race read again — so two applications adding themselves at the
same moment both end up listed.
"""

from __future__ import annotations

import logging
import random
import time

from dubbo_py.errors import BadVersionError, NodeExistsError, NoNodeError
from dubbo_py.registry.application.paths import mapping_path
from dubbo_py.registry.store.base import Store

__all__ = ["CAS_RETRIES", "add_application", "parse_applications", "read_applications"]

log = logging.getLogger(__name__)

#: Dubbo's default ``dubbo.metadata.cas-retry-times`` and wait bound (ms).
CAS_RETRIES = 6
CAS_RETRY_WAIT_MS = 500


def parse_applications(content: str | bytes | None) -> frozenset[str]:
    """The application names in a mapping node's data (comma-separated, blanks ignored)."""
    if content is None:
        return frozenset()
    if isinstance(content, bytes):
        content = content.decode("utf-8", errors="replace")
    return frozenset(name.strip() for name in content.split(",") if name.strip())


def read_applications(store: Store, interface: str) -> frozenset[str]:
    """The applications mapped to an interface now (empty when the node is absent)."""
    try:
        data, _ = store.get(mapping_path(interface))
    except NoNodeError:
        return frozenset()
    return parse_applications(data)


def add_application(
    store: Store,
    interface: str,
    application: str,
    *,
    retries: int = CAS_RETRIES,
    wait_ms: int = CAS_RETRY_WAIT_MS,
) -> bool:
    """Add ``application`` to the interface's mapping without losing a concurrent writer's;
    True once it is listed, False when every attempt lost a race (logged)."""
    path = mapping_path(interface)
    for attempt in range(retries + 1):
        try:
            data, version = store.get(path)
        except NoNodeError:
            try:
                store.create(path, application.encode("utf-8"), makepath=True)
                return True
            except NodeExistsError:
                continue  # someone created it meanwhile: merge with theirs
        old = data.decode("utf-8", errors="replace")
        if application in parse_applications(old):
            return True
        new = f"{old},{application}" if old.strip() else application
        try:
            store.set(path, new.encode("utf-8"), version)
            return True
        except (BadVersionError, NoNodeError):
            if attempt < retries:
                time.sleep(random.uniform(0, wait_ms) / 1000)
    log.warning(
        "could not add %s to the mapping of %s after %d attempts (concurrent writers)",
        application,
        interface,
        retries + 1,
    )
    return False
