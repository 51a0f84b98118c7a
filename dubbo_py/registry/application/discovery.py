"""The consumer side: provider URLs of an interface, found at the application level.

:class:`ApplicationDiscovery` (one per store) watches ``/dubbo/mapping/<interface>`` for the
applications providing an interface, ``/services/<application>`` and each instance node for
their instances, and fetches each revision's MetadataInfo once (cached by application and
revision). From instance + metadata it builds the provider URL Dubbo's ``InstanceAddressURL``
stands for: the instance's address, the service's protocol and port (the service's own port,
else the instance's endpoint for that protocol, else the instance's port), path, and the
service's parameters over the instance's. Watches are shared by every subscriber of the same
interface or application and dropped with the last one.

Metadata stored ``local`` (Java's default) is asked of the instance itself when a fetcher for it
is installed; without one such instances are skipped with a warning naming the fix
(``metadata-type=remote`` on the provider).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from dubbo_py.errors import NoNodeError, StoreError
from dubbo_py.registry.application.instance import InstanceError, ServiceInstance
from dubbo_py.registry.application.mapping import parse_applications
from dubbo_py.registry.application.metadata import (
    EMPTY_REVISION,
    MetadataError,
    MetadataInfo,
    ServiceInfo,
)
from dubbo_py.registry.application.paths import application_path, mapping_path, metadata_path
from dubbo_py.registry.store.base import Cancel, Store
from dubbo_py.url import URL

__all__ = ["AppLevelProviders", "ApplicationDiscovery", "LocalMetadata", "provider_url"]

log = logging.getLogger(__name__)

#: Fetches a ``local``-storage instance's metadata from the instance (None: not available).
LocalMetadata = Callable[[ServiceInstance], MetadataInfo | None]

#: Seconds between attempts to fetch metadata that could not be read.
METADATA_RETRY = 5.0

#: Instance metadata keys that describe the instance's registration, not the service.
_REGISTRATION_KEYS = ("dubbo.", "meta-v")


@dataclass(frozen=True, slots=True)
class AppLevelProviders:
    """What the application level offers for one interface now."""

    urls: tuple[URL, ...]
    #: The applications the mapping names.
    applications: frozenset[str]
    #: Whether the mapping and every mapped application's instances have been read once.
    read: bool


def provider_url(instance: ServiceInstance, service: ServiceInfo) -> URL:
    """The provider URL an instance offers for one service of its metadata."""
    protocol = service.protocol or "tri"
    port = service.port if service.port > 0 else instance.endpoints().get(protocol, instance.port)
    params = {k: v for k, v in instance.metadata.items() if not k.startswith(_REGISTRATION_KEYS)}
    params.update(service.params)
    params["interface"] = service.name
    params.setdefault("application", instance.app)
    for key, value in (("group", service.group), ("version", service.version)):
        if value:
            params[key] = value
        else:
            params.pop(key, None)
    return URL(protocol, instance.host, port, service.path or service.name, parameters=params)


class _AppWatch:
    """One application's instances and their metadata, shared by every interface it serves."""

    def __init__(self, owner: ApplicationDiscovery, app: str) -> None:
        self.owner = owner
        self.app = app
        self.read = False
        self.instances: dict[str, ServiceInstance] = {}
        self.users = 0
        self._node_cancels: dict[str, Cancel] = {}
        self._cancel: Cancel | None = None
        self._retry: threading.Timer | None = None
        #: (instance name, interface) -> (instance, metadata, its URLs), reused while both hold.
        self._built: dict[tuple[str, str], tuple[ServiceInstance, MetadataInfo, list[URL]]] = {}

    def start(self) -> None:
        path = application_path(self.app)
        self._cancel = self.owner.store.watch_children(path, self._on_children)

    def close(self) -> None:
        cancels = [self._cancel] if self._cancel else []
        cancels += list(self._node_cancels.values())
        self._cancel, self._node_cancels = None, {}
        if self._retry is not None:
            self._retry.cancel()
        for cancel in cancels:
            cancel()

    def _on_children(self, names: list[str]) -> None:
        path = application_path(self.app)
        with self.owner.lock:
            for gone in set(self._node_cancels) - set(names):
                self._node_cancels.pop(gone)()
                self.instances.pop(gone, None)
                for key in [k for k in self._built if k[0] == gone]:
                    del self._built[key]
            for name in names:
                if name in self._node_cancels:
                    continue
                # Read now, so this notification already holds the new instance; the data
                # watch then follows its updates (a new revision).
                try:
                    data, _ = self.owner.store.get(f"{path}/{name}")
                    self._set(name, data)
                except NoNodeError:
                    continue
                except StoreError as exc:
                    log.warning("could not read instance %s/%s: %s", path, name, exc)
                self._node_cancels[name] = self.owner.store.watch_data(
                    f"{path}/{name}", self._data_listener(name)
                )
            self.read = True
        self.owner.app_changed(self.app)

    def _data_listener(self, name: str) -> Callable[[bytes | None, int], None]:
        def on_data(data: bytes | None, _version: int) -> None:
            with self.owner.lock:
                if name not in self._node_cancels and data is not None:
                    return  # cancelled meanwhile
                if data is None:
                    changed = self.instances.pop(name, None) is not None
                else:
                    changed = self._set(name, data)
            if changed:
                self.owner.app_changed(self.app)

        return on_data

    def _set(self, name: str, data: bytes) -> bool:
        where = f"{application_path(self.app)}/{name}"
        try:
            instance = ServiceInstance.parse(data, where)
        except InstanceError as exc:
            self.owner.warn_once(where + str(exc), "skipping instance node: %s", exc)
            return self.instances.pop(name, None) is not None
        if not instance.enabled:
            return self.instances.pop(name, None) is not None
        if self.instances.get(name) == instance:
            return False
        self.instances[name] = instance
        return True

    def urls(self, interface: str) -> list[URL]:
        """The interface's provider URLs from every instance, in instance-name order. URLs
        are built once per instance and revision: a change of one instance among a thousand
        rebuilds one instance's URLs, not a thousand."""
        out: list[URL] = []
        missing = False
        for name in sorted(self.instances):
            instance = self.instances[name]
            info = self.owner.metadata(instance)
            if info is None:
                retry = instance.storage_type == "remote" or self.owner.local_metadata is not None
                missing = missing or retry
                continue
            built = self._built.get((name, interface))
            if built is None or built[0] is not instance or built[1] is not info:
                built = (
                    instance,
                    info,
                    [provider_url(instance, s) for s in info.services_of(interface)],
                )
                self._built[(name, interface)] = built
            out.extend(built[2])
        if missing:
            self._schedule_retry()
        return out

    def _schedule_retry(self) -> None:
        if self._retry is not None and self._retry.is_alive():
            return
        self._retry = threading.Timer(METADATA_RETRY, self.owner.app_changed, (self.app,))
        self._retry.daemon = True
        self._retry.start()


class _InterfaceWatch:
    """One interface's mapping and the subscribers of its application-level providers."""

    def __init__(self, owner: ApplicationDiscovery, interface: str) -> None:
        self.owner = owner
        self.interface = interface
        self.apps: frozenset[str] = frozenset()
        self.mapping_read = False
        self.listeners: list[Callable[[AppLevelProviders], None]] = []
        self.last: AppLevelProviders | None = None
        self._cancel: Cancel | None = None

    def start(self) -> None:
        self._cancel = self.owner.store.watch_data(mapping_path(self.interface), self._on_mapping)

    def close(self) -> None:
        if self._cancel is not None:
            self._cancel()
        with self.owner.lock:
            closing = [self.owner.release_app(app) for app in self.apps]
            self.apps = frozenset()
        for watch in closing:
            if watch is not None:
                watch.close()

    def _on_mapping(self, data: bytes | None, _version: int) -> None:
        apps = parse_applications(data)
        with self.owner.lock:
            starting = [self.owner.acquire_app(app) for app in sorted(apps - self.apps)]
            closing = [self.owner.release_app(app) for app in self.apps - apps]
            self.apps = apps
            self.mapping_read = True
        # Watches start and stop outside the lock: a cancel may wait for a callback in
        # progress on another thread, which may be waiting for the lock.
        for watch in closing:
            if watch is not None:
                watch.close()
        for watch in starting:
            if watch is not None:
                watch.start()
        self.refresh()

    def refresh(self) -> None:
        with self.owner.lock:
            watches = [self.owner.app_watch(a) for a in sorted(self.apps)]
            urls: list[URL] = []
            for watch in watches:
                if watch is not None:
                    urls.extend(watch.urls(self.interface))
            read = self.mapping_read and all(w is not None and w.read for w in watches)
            # Deterministic order (application, instance, service) without sorting URL texts.
            state = AppLevelProviders(tuple(dict.fromkeys(urls)), self.apps, read)
            if state == self.last:
                return
            self.last = state
            listeners = list(self.listeners)
        for listener in listeners:
            try:
                listener(state)
            except Exception:
                log.exception("application-level listener of %s failed", self.interface)


class ApplicationDiscovery:
    """Application-level providers of any interface, on one store (see the module doc)."""

    def __init__(self, store: Store, *, local_metadata: LocalMetadata | None = None) -> None:
        self.store = store
        self.local_metadata = local_metadata
        self.lock = threading.RLock()
        self._interfaces: dict[str, _InterfaceWatch] = {}
        self._apps: dict[str, _AppWatch] = {}
        self._metadata: dict[tuple[str, str], MetadataInfo] = {}
        self._warned: set[str] = set()

    def subscribe(self, interface: str, listener: Callable[[AppLevelProviders], None]) -> Cancel:
        """Call ``listener`` with the interface's application-level providers once read and
        on every change; returns a function that stops it."""
        with self.lock:
            watch = self._interfaces.get(interface)
            fresh = watch is None
            if watch is None:
                watch = self._interfaces[interface] = _InterfaceWatch(self, interface)
            watch.listeners.append(listener)
            last = watch.last
        if fresh:
            watch.start()
        elif last is not None:
            listener(last)

        def cancel() -> None:
            with self.lock:
                if listener in watch.listeners:
                    watch.listeners.remove(listener)
                empty = not watch.listeners and self._interfaces.get(interface) is watch
                if empty:
                    del self._interfaces[interface]
            if empty:
                watch.close()

        return cancel

    def close(self) -> None:
        """Stop every watch."""
        with self.lock:
            watches, self._interfaces = list(self._interfaces.values()), {}
        for watch in watches:
            watch.close()

    # ----------------------------------------------------------------- shared parts

    def acquire_app(self, app: str) -> _AppWatch | None:
        """Count one more interface using ``app``'s instances (called under the lock);
        returns a new watch for the caller to start outside the lock."""
        watch = self._apps.get(app)
        if watch is None:
            watch = self._apps[app] = _AppWatch(self, app)
            watch.users = 1
            return watch
        watch.users += 1
        return None

    def release_app(self, app: str) -> _AppWatch | None:
        """Count one fewer (called under the lock); returns the watch to close outside the
        lock when that was the last user."""
        watch = self._apps.get(app)
        if watch is None:
            return None
        watch.users -= 1
        if watch.users <= 0:
            del self._apps[app]
            return watch
        return None

    def app_watch(self, app: str) -> _AppWatch | None:
        """The watch of one application's instances (None when nobody uses it)."""
        return self._apps.get(app)

    def app_changed(self, app: str) -> None:
        """Rebuild every interface served by ``app``."""
        with self.lock:
            watches = [w for w in self._interfaces.values() if app in w.apps]
        for watch in watches:
            watch.refresh()

    def instances(self, app: str) -> list[ServiceInstance]:
        """The instances of a watched application now."""
        with self.lock:
            watch = self._apps.get(app)
            return [] if watch is None else list(watch.instances.values())

    def metadata(self, instance: ServiceInstance) -> MetadataInfo | None:
        """The instance's revision's metadata: cached, else fetched (None when unavailable)."""
        revision = instance.revision
        if not revision or revision == EMPTY_REVISION:
            return None
        key = (instance.app, revision)
        cached = self._metadata.get(key)
        if cached is not None:
            return cached
        info = self._fetch(instance)
        if info is not None:
            self._metadata[key] = info
        return info

    def cached_revisions(self) -> list[tuple[str, str]]:
        """(application, revision) of every metadata document fetched so far."""
        return sorted(self._metadata)

    def _fetch(self, instance: ServiceInstance) -> MetadataInfo | None:
        if instance.storage_type != "remote":
            if self.local_metadata is not None:
                return self.local_metadata(instance)
            self.warn_once(
                f"local:{instance.app}:{instance.revision}",
                "skipping %d instance(s) of %s: their metadata (revision %s) is stored locally "
                "on each provider, which dubbo-py cannot read; set metadata-type=remote on the "
                "provider (dubbo.application.metadata-type=remote) or register it at the "
                "interface level too (register-mode=all)",
                1,
                instance.app,
                instance.revision,
            )
            return None
        path = metadata_path(instance.app, instance.revision)
        try:
            data, _ = self.store.get(path)
        except NoNodeError:
            self.warn_once(path, "metadata %s is missing; its instances wait for it", path)
            return None
        except StoreError as exc:
            log.warning("could not read metadata %s: %s", path, exc)
            return None
        try:
            return MetadataInfo.parse(data, path)
        except MetadataError as exc:
            self.warn_once(path + str(exc), "skipping instances of a bad document: %s", exc)
            return None

    def warn_once(self, key: str, message: str, *args: object) -> None:
        """Log a warning the first time ``key`` is seen."""
        with self.lock:
            if key in self._warned:
                return
            self._warned.add(key)
        log.warning(message, *args)


def describe(urls: Iterable[URL]) -> str:
    """``host:port`` of each URL, for logs."""
    return ", ".join(sorted({u.address for u in urls})) or "none"
