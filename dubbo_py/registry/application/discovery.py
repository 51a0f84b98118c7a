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

import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

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

_serials = itertools.count(1)

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
    #: The URLs that arrived and departed since the previous state of the same interface, when
    #: this state was patched from it for one instance's change (empty after a full rebuild).
    arrived: tuple[URL, ...] = field(default=(), compare=False)
    departed: tuple[URL, ...] = field(default=(), compare=False)
    #: Whether this state was patched from the previous one (``arrived``/``departed`` say how).
    patched: bool = field(default=False, compare=False)
    #: This state's number, and (when patched) the number of the state it was patched from: a
    #: listener that skipped a state (a newer one was made meanwhile) can tell.
    serial: int = field(default_factory=lambda: next(_serials), compare=False)
    base: int | None = field(default=None, compare=False)


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
        self._built: dict[
            tuple[str, str], tuple[ServiceInstance, MetadataInfo, tuple[URL, ...]]
        ] = {}

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
        #: Instance name -> the instance before this notification (None: there was none).
        changed: dict[str, ServiceInstance | None] = {}
        with self.owner.lock:
            first = not self.read
            for gone in set(self._node_cancels) - set(names):
                self._node_cancels.pop(gone)()
                before = self.instances.pop(gone, None)
                if before is not None:
                    changed.setdefault(gone, before)
                self._forget(gone)
            for name in names:
                if name in self._node_cancels:
                    continue
                # Read now, so this notification already holds the new instance; the data
                # watch then follows its updates (a new revision).
                before = self.instances.get(name)
                try:
                    data, _ = self.owner.store.get(f"{path}/{name}")
                    if self._set(name, data):
                        changed.setdefault(name, before)
                except NoNodeError:
                    continue
                except StoreError as exc:
                    log.warning("could not read instance %s/%s: %s", path, name, exc)
                self._node_cancels[name] = self.owner.store.watch_data(
                    f"{path}/{name}", self._data_listener(name)
                )
            self.read = True
        if first:
            self.owner.app_changed(self.app)  # every interface learns the application is read
        elif changed:
            self.owner.instances_changed(self.app, changed)

    def _forget(self, name: str) -> None:
        for key in [k for k in self._built if k[0] == name]:
            del self._built[key]

    def _data_listener(self, name: str) -> Callable[[bytes | None, int], None]:
        def on_data(data: bytes | None, _version: int) -> None:
            with self.owner.lock:
                if name not in self._node_cancels and data is not None:
                    return  # cancelled meanwhile
                before = self.instances.get(name)
                if data is None:
                    changed = self.instances.pop(name, None) is not None
                else:
                    changed = self._set(name, data)
            if changed:
                self.owner.instances_changed(self.app, {name: before})

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
        """The interface's provider URLs from every instance, in instance-name order."""
        out: list[URL] = []
        for name in sorted(self.instances):
            out.extend(self.urls_of(name, interface))
        return out

    def urls_of(self, name: str, interface: str) -> tuple[URL, ...]:
        """The interface's provider URLs from one instance (none when it is gone or its
        metadata cannot be read yet: then a retry is scheduled). Built once per instance and
        revision: a change of one instance among a thousand builds one instance's URLs."""
        instance = self.instances.get(name)
        if instance is None:
            return ()
        info = self.owner.metadata(instance)
        if info is None:
            if instance.storage_type == "remote" or self.owner.local_metadata is not None:
                self._schedule_retry()
            return ()
        built = self._built.get((name, interface))
        if built is None or built[0] is not instance or built[1] is not info:
            urls = tuple(provider_url(instance, s) for s in info.services_of(interface))
            if built is not None and built[2] == urls:
                urls = built[2]  # equal: keep the objects the consumers hold
            built = (instance, info, urls)
            self._built[(name, interface)] = built
        return built[2]

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
        #: (application, instance name) -> the URLs that instance gives this interface now.
        self._given: dict[tuple[str, str], tuple[URL, ...]] = {}
        #: Every URL of the list -> how many instances give it (the list, in dict order).
        self._present: dict[URL, int] = {}
        #: Serialises listener calls (see :meth:`deliver`).
        self._notify_lock = threading.RLock()

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
        """Rebuild the list from every instance of every mapped application (the mapping
        changed, or an application was read for the first time) and tell the listeners."""
        with self.owner.lock:
            given: dict[tuple[str, str], tuple[URL, ...]] = {}
            present: dict[URL, int] = {}
            watches = [self.owner.app_watch(a) for a in sorted(self.apps)]
            for watch in watches:
                if watch is None:
                    continue
                for name in sorted(watch.instances):
                    urls = watch.urls_of(name, self.interface)
                    if urls:
                        given[(watch.app, name)] = urls
                        for url in urls:
                            present[url] = present.get(url, 0) + 1
            read = self.mapping_read and all(w is not None and w.read for w in watches)
            self._given, self._present = given, present
            # Deterministic order (application, instance, service) without sorting URL texts.
            state = AppLevelProviders(tuple(present), self.apps, read)
            if state == self.last:
                return
            self.last = state
        self.deliver(state)

    def patch(self, app: str, name: str) -> AppLevelProviders | None:
        """Take one instance's change into the list (called under the owner's lock): its old
        URLs out, its new ones in, the other instances' untouched. Returns the new state, or
        None when this interface's list did not change."""
        watch = self.owner.app_watch(app)
        last = self.last
        if watch is None or last is None or app not in self.apps:
            return None
        key = (app, name)
        old = self._given.get(key, ())
        new = watch.urls_of(name, self.interface)
        if old == new:
            return None
        present = self._present
        departed: list[URL] = []
        arrived: list[URL] = []
        for url in old:
            count = present[url] - 1
            if count:
                present[url] = count
            else:
                del present[url]
                departed.append(url)
        for url in new:
            count = present.get(url, 0)
            present[url] = count + 1
            if not count:
                arrived.append(url)
        if new:
            self._given[key] = new
        else:
            self._given.pop(key, None)
        # A URL that left and came back equal (another instance's duplicate) did not change.
        back = set(departed) & set(arrived)
        if back:
            departed = [u for u in departed if u not in back]
            arrived = [u for u in arrived if u not in back]
        if not departed and not arrived:
            return None
        # New URLs at the end: the order downstream reads is the directory's (sorted).
        state = AppLevelProviders(
            tuple(present),
            last.applications,
            last.read,
            tuple(arrived),
            tuple(departed),
            True,
            base=last.serial,
        )
        self.last = state
        return state

    def deliver(self, state: AppLevelProviders) -> None:
        """Tell the listeners about ``state`` unless a newer one was made meanwhile: changes
        made on different threads (two store callbacks, a metadata retry) reach the listeners
        in the order they were made, and a listener never goes back to an older list (whoever
        made the newer state delivers it after this)."""
        with self._notify_lock:
            with self.owner.lock:
                if state is not self.last:
                    return
                listeners = list(self.listeners)
            for listener in listeners:
                try:
                    listener(state)
                except Exception:
                    log.exception("application-level listener of %s failed", self.interface)

    def current(self, listener: Callable[[AppLevelProviders], None]) -> None:
        """Give a new listener the state now (in order with :meth:`deliver`)."""
        with self._notify_lock:
            with self.owner.lock:
                last = self.last
            if last is not None:
                listener(last)


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
        if fresh:
            watch.start()
        else:
            watch.current(listener)

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
        """Rebuild every interface served by ``app`` (its first read, a metadata retry)."""
        with self.lock:
            watches = [w for w in self._interfaces.values() if app in w.apps]
        for watch in watches:
            watch.refresh()

    def instances_changed(self, app: str, before: Mapping[str, ServiceInstance | None]) -> None:
        """Patch the instances named (with what each was before the change) into the lists of
        the interfaces they serve, before or after; other interfaces are not touched."""
        states: list[tuple[_InterfaceWatch, AppLevelProviders]] = []
        with self.lock:
            watch = self._apps.get(app)
            if watch is None:
                return
            for name, old in before.items():
                served: set[str] = set()
                for instance in (old, watch.instances.get(name)):
                    info = None if instance is None else self._cached(instance)
                    if info is not None:
                        served.update(s.name for s in info.services.values())
                for interface in sorted(served):
                    found = self._interfaces.get(interface)
                    if found is not None:
                        state = found.patch(app, name)
                        if state is not None:
                            states.append((found, state))
        for found, state in states:
            found.deliver(state)

    def _cached(self, instance: ServiceInstance) -> MetadataInfo | None:
        """The instance's metadata when already read, else read now (the new revision)."""
        cached = self._metadata.get((instance.app, instance.revision))
        return cached if cached is not None else self.metadata(instance)

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
