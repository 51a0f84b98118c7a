"""The registry: Apache Dubbo's ZooKeeper layout on top of any coordination store.

Providers and consumers register ephemeral nodes; routers and configurators are persistent;
config-center rules are YAML documents under ``/dubbo/config/dubbo``. Subscribers get the full
list of a category every time it changes (Dubbo's notify contract), with an ``empty://`` URL
standing for an empty category. After a session expiry every ephemeral node this registry
registered is written again, so a provider that survives a ZooKeeper outage reappears by itself.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from dubbo_py.errors import NodeExistsError, NoNodeError, StoreError, URLError
from dubbo_py.registry import layout
from dubbo_py.registry.store.base import Cancel, SessionState, Store
from dubbo_py.url import URL

__all__ = ["ConfigDocument", "Registry", "empty_url", "is_empty"]

log = logging.getLogger(__name__)


def empty_url(interface: str, category: str) -> URL:
    """Dubbo's marker for "this category is now empty"."""
    return URL("empty", "0.0.0.0", 0, interface, parameters={"category": category})


def is_empty(urls: Iterable[URL]) -> bool:
    """True when a notification says its category holds nothing."""
    return all(u.protocol == "empty" for u in urls)


@dataclass(frozen=True, slots=True)
class ConfigDocument:
    """A config-center document: its text and the store version (for conditional writes)."""

    key: str
    text: str
    version: int


def decode_children(
    path: str,
    names: Iterable[str],
    warned: set[str],
    known: Mapping[str, URL] | None = None,
    decoded: dict[str, URL] | None = None,
) -> list[URL]:
    """Decode node names into URLs; a node that isn't a URL is skipped with one warning.

    ``known`` (name -> URL, from a previous notification of the same folder) is reused for the
    names seen before, and ``decoded`` receives this notification's names: a fleet where one
    provider changed costs one decode, not one per provider, and unchanged providers keep their
    URL objects (and whatever was cached on them)."""
    urls = []
    previous = known if known is not None else {}
    for name in names:
        found = previous.get(name)
        if found is None:
            try:
                found = URL.decode(name)
            except URLError as exc:
                if name not in warned:
                    warned.add(name)
                    log.warning(
                        "skipping registry node %s/%s: not a Dubbo URL (%s)", path, name, exc
                    )
                continue
        urls.append(found)
        if decoded is not None:
            decoded[name] = found
    return urls


class Registry:
    """Register, unregister and subscribe on a coordination store."""

    def __init__(self, store: Store, *, protect: bool = False) -> None:
        """``protect``: nodes this registry writes (providers, consumers, rules, config
        documents) and the category folders it creates are writable by this store's identity
        only and readable by everyone (see :meth:`Store.create`)."""
        self.store = store
        self.protect = protect
        self._lock = threading.Lock()
        self._ephemeral: set[URL] = set()
        self._warned: set[str] = set()
        #: The URLs last decoded from each folder's node names, by name: shared by every
        #: subscriber of the folder (the references of one application to one service see the
        #: same URL objects) and swapped whole, so readers need no lock.
        self._decoded: dict[str, dict[str, URL]] = {}
        store.add_session_listener(self._on_session)

    @property
    def connected(self) -> bool:
        """Whether the store is connected now (a store that cannot tell, like the embedded
        one, always is)."""
        return bool(getattr(self.store, "connected", True))

    # ----------------------------------------------------------------- registration

    def register(self, url: URL) -> None:
        """Write the URL's node: ephemeral unless the URL says ``dynamic=false`` (Dubbo's rule:
        providers and consumers are ephemeral; operators write rule URLs with dynamic=false)."""
        ephemeral = url.get_bool("dynamic", True)
        path = layout.node_path(url)
        if ephemeral:
            with self._lock:
                self._ephemeral.add(url)
        self._create(path, ephemeral)

    def _create(self, path: str, ephemeral: bool) -> None:
        if self.protect:
            # The service folder stays open, so that providers, consumers and operators (each
            # with their own identity) can each own their category folder beneath it.
            self.store.ensure_path(path.rsplit("/", 2)[0])
        try:
            self.store.create(path, ephemeral=ephemeral, protected=self.protect)
        except NodeExistsError:
            if ephemeral:
                # A node left by our own previous session (not yet expired): take it over so it
                # is tied to the live session and disappears with us.
                with contextlib.suppress(NoNodeError):
                    self.store.delete(path)
                self.store.create(path, ephemeral=True, protected=self.protect)

    def unregister(self, url: URL) -> None:
        """Remove the URL's node (no error if it is already gone)."""
        with self._lock:
            self._ephemeral.discard(url)
        with contextlib.suppress(NoNodeError):
            self.store.delete(layout.node_path(url))

    def _on_session(self, state: SessionState) -> None:
        # After an expiry our ephemeral nodes are gone; after a first connect they may never
        # have been written (registered while the registry was down). Either way, write back
        # whatever is missing.
        if state not in (SessionState.NEW_SESSION, SessionState.CONNECTED):
            return
        with self._lock:
            urls = list(self._ephemeral)
        for url in urls:
            path = layout.node_path(url)
            with self._lock:
                if url not in self._ephemeral:
                    continue  # unregistered meanwhile: writing it back would resurrect it
            try:
                if not self.store.exists(path):
                    self._create(path, True)
                    log.info("re-registered %s (%s)", url, state.value)
            except StoreError as exc:
                log.warning("could not re-register %s: %s", url, exc)

    # ----------------------------------------------------------------- discovery

    def lookup(self, interface: str, category: str = layout.PROVIDERS) -> list[URL]:
        """The URLs in one category now (empty when the folder does not exist)."""
        path = layout.category_path(interface, category)
        try:
            names = self.store.children(path)
        except NoNodeError:
            return []
        return decode_children(path, names, self._warned)

    def _decode(self, path: str, names: list[str]) -> list[URL]:
        fresh: dict[str, URL] = {}
        urls = decode_children(path, names, self._warned, self._decoded.get(path), fresh)
        self._decoded[path] = fresh
        return urls

    def subscribe(
        self,
        interface: str,
        listener: Callable[[str, list[URL]], None],
        categories: Iterable[str] = (layout.PROVIDERS, layout.ROUTERS, layout.CONFIGURATORS),
    ) -> Cancel:
        """Call ``listener(category, urls)`` now and on every change of each category;
        ``urls`` is ``[empty_url(...)]`` when the category is empty."""
        cancels: list[Cancel] = []
        for category in categories:
            path = layout.category_path(interface, category)

            def on_children(names: list[str], category: str = category, path: str = path) -> None:
                urls = self._decode(path, names)
                listener(category, urls or [empty_url(interface, category)])

            cancels.append(self.store.watch_children(path, on_children))

        def cancel() -> None:
            for c in cancels:
                c()

        return cancel

    def services(self) -> list[str]:
        """Every interface that has a folder under ``/dubbo`` (``config`` and the CLI's
        ``config-history`` excluded)."""
        try:
            names = self.store.children(layout.ROOT)
        except NoNodeError:
            return []
        return sorted(n for n in names if n not in layout.RESERVED)

    # ----------------------------------------------------------------- config center

    def get_config(self, key: str) -> ConfigDocument | None:
        """The document at a config key, or None."""
        try:
            data, version = self.store.get(layout.config_path(key))
        except NoNodeError:
            return None
        return ConfigDocument(key, data.decode("utf-8", errors="replace"), version)

    def put_config(self, key: str, text: str, version: int | None = None) -> int:
        """Write a document. ``version=None`` creates or overwrites; ``-1`` requires that the key
        does not exist; ``n >= 0`` requires the stored version to be ``n`` (else
        :class:`~dubbo_py.registry.store.base.BadVersionError` / ``NodeExistsError``)."""
        path = layout.config_path(key)
        data = text.encode("utf-8")
        if version is None:
            try:
                return self.store.set(path, data)
            except NoNodeError:
                try:
                    self._create_config(path, data)
                    return 0
                except NodeExistsError:
                    return self.store.set(path, data)
        if version == -1:
            self._create_config(path, data)
            return 0
        return self.store.set(path, data, version)

    def _create_config(self, path: str, data: bytes) -> None:
        if self.protect:
            self.store.ensure_path(layout.ROOT)
        self.store.create(path, data, protected=self.protect)

    def delete_config(self, key: str, version: int = -1) -> None:
        """Delete a document (NoNodeError if absent)."""
        self.store.delete(layout.config_path(key), version)

    def config_keys(self) -> list[str]:
        """Every config-center key."""
        try:
            return self.store.children(layout.CONFIG_ROOT)
        except NoNodeError:
            return []

    def watch_config(self, key: str, callback: Callable[[str | None], None]) -> Cancel:
        """Call ``callback(text)`` now and on every change; ``None`` while the key is absent."""
        path = layout.config_path(key)

        def on_data(data: bytes | None, _version: int) -> None:
            callback(None if data is None else data.decode("utf-8", errors="replace"))

        return self.store.watch_data(path, on_data)
