"""The provider side: publish an application's instance, metadata and mappings.

For each address a process serves on (``host:port``), :class:`InstancePublisher` keeps one
instance node ``/services/<app>/<host:port>`` (ephemeral) whose metadata names the revision of
the services served there; the revision's MetadataInfo document is written once to
``/dubbo/metadata/<app>/<revision>`` (persistent, shared by every instance with the same
services, as Dubbo's ``remote`` metadata storage); each interface's mapping gets the
application added. After a session expiry the instance nodes are written again.

The instance also names the ``MetadataServiceV2`` every dubbo-py server serves on its own
port (``meta-v`` and ``dubbo.metadata-service.url-params``; see
:mod:`~dubbo_py.registry.application.metadata_server`), which dubbo-go consumers call: they do
not read Java's report layout. The storage type stays ``remote``, so Java (and dubbo-py)
consumers read the report as before; Java itself serves the service only with ``local``.

Unlike Java, a revision's document is never deleted when an instance leaves: other instances
(and consumers' caches) may still name it, and it is small.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable, Iterator

from dubbo_py.errors import NodeExistsError, NoNodeError, StoreError
from dubbo_py.registry.application import mapping
from dubbo_py.registry.application.instance import (
    ENDPOINTS,
    METADATA_SERVICE_URL_PARAMS,
    METADATA_SERVICE_V2,
    METADATA_VERSION,
    REVISION,
    STORAGE_TYPE,
    ServiceInstance,
    endpoints_json,
)
from dubbo_py.registry.application.metadata import MetadataInfo
from dubbo_py.registry.application.metadata_server import SERVED, ServedMetadata, url_params_json
from dubbo_py.registry.application.paths import (
    METADATA_ROOT,
    SERVICES_ROOT,
    instance_path,
    metadata_path,
)
from dubbo_py.registry.store.base import SessionState, Store
from dubbo_py.url import URL

__all__ = ["InstancePublisher"]

log = logging.getLogger(__name__)

Address = tuple[str, int]

#: Seconds a removal waits for more removals before the instance is published again.
REMOVE_DEBOUNCE = 0.2


class InstancePublisher:
    """Publishes the instances of one application on one store (thread-safe)."""

    def __init__(
        self,
        store: Store,
        application: str,
        *,
        protect: bool = False,
        served: ServedMetadata = SERVED,
    ) -> None:
        self.store = store
        self.application = application
        self.protect = protect
        #: What this process's MetadataServiceV2 answers: the revisions published here.
        self.served = served
        self._lock = threading.RLock()
        self._urls: dict[Address, dict[URL, None]] = {}
        self._published: dict[Address, ServiceInstance] = {}
        self._mapped: set[str] = set()
        self._batch = 0
        self._dirty: set[Address] = set()
        self._later: dict[Address, threading.Timer] = {}
        store.add_session_listener(self._on_session)

    # ----------------------------------------------------------------- changes

    def add(self, url: URL) -> None:
        """Publish a provider URL's service (now, or when the current batch ends)."""
        address = (url.host, url.port)
        with self._lock:
            self._urls.setdefault(address, {})[url] = None
            self._changed(address)

    def remove(self, url: URL) -> None:
        """Stop publishing a provider URL's service; the instance goes when it serves nothing."""
        address = (url.host, url.port)
        with self._lock:
            urls = self._urls.get(address)
            if urls is None or url not in urls:
                return
            del urls[url]
            if not urls:
                del self._urls[address]
                self._changed(address)
            elif not self._batch:
                # A server stopping removes its services one by one: publish what is left
                # only if nothing else goes within REMOVE_DEBOUNCE, so a shutdown does not
                # write a revision (and its document) per service on its way out.
                self._publish_later(address)
            else:
                self._dirty.add(address)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Publish once at the end for every change made inside (one revision, not one per
        service, when a server starts with several services)."""
        with self._lock:
            self._batch += 1
        try:
            yield
        finally:
            with self._lock:
                self._batch -= 1
                if self._batch == 0:
                    dirty, self._dirty = self._dirty, set()
                    for address in sorted(dirty):
                        self._publish(address)

    def instances(self) -> list[ServiceInstance]:
        """What is published now."""
        with self._lock:
            return list(self._published.values())

    def close(self) -> None:
        """Remove every instance node this publisher wrote."""
        with self._lock:
            addresses = list(self._published)
            self._urls.clear()
        for address in addresses:
            with self._lock:
                self._publish(address)

    # ----------------------------------------------------------------- writing

    def _publish_later(self, address: Address) -> None:
        timer = self._later.pop(address, None)
        if timer is not None:
            timer.cancel()

        def publish() -> None:
            with self._lock:
                if self._later.get(address) is not timer_now:
                    return
                del self._later[address]
                try:
                    self._publish(address)
                except StoreError as exc:
                    log.warning("could not update the instance at %s:%d: %s", *address, exc)

        timer_now = threading.Timer(REMOVE_DEBOUNCE, publish)
        timer_now.daemon = True
        self._later[address] = timer_now
        timer_now.start()

    def _changed(self, address: Address) -> None:
        timer = self._later.pop(address, None)
        if timer is not None:
            timer.cancel()
        if self._batch:
            self._dirty.add(address)
        else:
            self._publish(address)

    def _publish(self, address: Address) -> None:
        urls = list(self._urls.get(address, {}))
        old = self._published.get(address)
        if not urls:
            if old is not None:
                del self._published[address]
                path = instance_path(self.application, old.id)
                with contextlib.suppress(NoNodeError):
                    self.store.delete(path)
                self.served.release(self.application, old.revision)
                log.debug("unregistered instance %s", path)
            return
        info = MetadataInfo.of(self.application, urls)
        instance = self._instance(address, info, urls, old)
        self._write_metadata(info)
        self._write_mappings(urls)
        # Served before the instance names it: a consumer may call as soon as it sees it.
        self.served.hold(info)
        try:
            self._write_instance(instance, replace=old is not None)
        except BaseException:
            self.served.release(info.app, info.revision)
            raise
        if old is not None:
            self.served.release(self.application, old.revision)
        self._published[address] = instance

    def _instance(
        self,
        address: Address,
        info: MetadataInfo,
        urls: Iterable[URL],
        old: ServiceInstance | None,
    ) -> ServiceInstance:
        urls = list(urls)
        metadata = info.instance_params(urls)
        metadata[REVISION] = info.revision
        metadata[STORAGE_TYPE] = "remote"
        metadata[ENDPOINTS] = endpoints_json({u.protocol: u.port for u in urls})
        metadata[METADATA_VERSION] = METADATA_SERVICE_V2
        metadata[METADATA_SERVICE_URL_PARAMS] = url_params_json(address[1])
        return ServiceInstance(
            self.application,
            address[0],
            address[1],
            metadata,
            registration_time_ms=old.registration_time_ms if old else 0,
        )

    def _write_metadata(self, info: MetadataInfo) -> None:
        path = metadata_path(self.application, info.revision)
        # As Java's publishAppMetadata: written only when absent (a revision never changes).
        if self.store.exists(path):
            return
        if self.protect:
            # The shared folders stay open, so applications with other identities can add
            # theirs; what this application writes below them is its own.
            self.store.ensure_path(METADATA_ROOT)
        with contextlib.suppress(NodeExistsError):
            self.store.create(path, info.to_json().encode("utf-8"), protected=self.protect)

    def _write_mappings(self, urls: Iterable[URL]) -> None:
        for interface in sorted({u.service_interface for u in urls} - self._mapped):
            # The mapping node is shared by every application of the interface: never protected.
            if mapping.add_application(self.store, interface, self.application):
                self._mapped.add(interface)

    def _write_instance(self, instance: ServiceInstance, *, replace: bool) -> None:
        path = instance_path(self.application, instance.id)
        data = instance.to_json().encode("utf-8")
        if replace:
            try:
                self.store.set(path, data)
                log.debug("updated instance %s (revision %s)", path, instance.revision)
                return
            except NoNodeError:
                pass
        if self.protect:
            self.store.ensure_path(SERVICES_ROOT)
        try:
            self.store.create(path, data, ephemeral=True, protected=self.protect)
        except NodeExistsError:
            # Left by our previous session: take it over, tied to this one.
            with contextlib.suppress(NoNodeError):
                self.store.delete(path)
            self.store.create(path, data, ephemeral=True, protected=self.protect)
        log.debug("registered instance %s (revision %s)", path, instance.revision)

    def _on_session(self, state: SessionState) -> None:
        if state not in (SessionState.NEW_SESSION, SessionState.CONNECTED):
            return
        with self._lock:
            published = list(self._published.values())
        for instance in published:
            path = instance_path(self.application, instance.id)
            try:
                if not self.store.exists(path):
                    self._write_instance(instance, replace=False)
                    log.info("re-registered instance %s (%s)", path, state.value)
            except StoreError as exc:
                log.warning("could not re-register instance %s: %s", path, exc)
