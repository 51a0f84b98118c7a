"""The registry: Apache Dubbo's ZooKeeper layout on top of any coordination store.

Providers and consumers register ephemeral nodes; routers and configurators are persistent;
config-center rules are YAML documents under ``/dubbo/config/dubbo``. Subscribers get the full
list of a category every time it changes (Dubbo's notify contract), with an ``empty://`` URL
standing for an empty category. After a session expiry every ephemeral node this registry
registered is written again, so a provider that survives a ZooKeeper outage reappears by itself.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, count, islice
from operator import is_not, ne

from dubbo_py.errors import NodeExistsError, NoNodeError, StoreError, URLError
from dubbo_py.registry import layout
from dubbo_py.registry.store.base import Cancel, SessionState, Store
from dubbo_py.url import URL

__all__ = ["ChangedURLs", "ConfigDocument", "Registry", "empty_url", "is_empty"]

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


class ChangedURLs(list[URL]):
    """The URLs of one folder's notification (a list, in the names' order) that also says how
    it follows from the list the same folder gave before: ``base`` (the ``serial`` of that
    list, or None), and the URL objects that ``arrived`` and ``departed`` since. A consumer
    that processed the list numbered ``base`` takes the change without a pass over the fleet
    (:class:`~dubbo_py.registry.provider_list.ProviderList`). Numbers, not the list itself, so
    that a list does not keep every earlier one alive."""

    __slots__ = ("arrived", "base", "departed", "serial")

    def __init__(
        self,
        urls: Iterable[URL],
        base: int | None,
        arrived: list[URL],
        departed: list[URL],
    ) -> None:
        super().__init__(urls)
        self.serial = next(_serials)
        self.base = base
        self.arrived = arrived
        self.departed = departed


_serials = itertools.count(1)
_ROUTERS_FOLDER = "/" + layout.ROUTERS


def _decode_name(path: str, name: str, warned: set[str]) -> URL | None:
    try:
        return URL.decode(name)
    except URLError as exc:
        if name not in warned:
            warned.add(name)
            log.warning("skipping registry node %s/%s: not a Dubbo URL (%s)", path, name, exc)
        return None


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
            found = _decode_name(path, name, warned)
            if found is None:
                continue
        urls.append(found)
        if decoded is not None:
            decoded[name] = found
    return urls


@dataclass(slots=True)
class _Folder:
    """What a registry remembers of one folder's last notification (changed in place under
    the registry's decode lock)."""

    #: The names that decoded, -> their URLs (dict order: the order of the URL list given).
    known: dict[str, URL]
    #: The names that are not URLs (skipped, warned about once).
    bad: set[str]
    #: The names as given, when no name was listed twice (the next list is compared with it
    #: position by position), else None.
    names: tuple[str, ...] | None
    #: The serial of the URL list given (:class:`ChangedURLs`).
    serial: int | None


def _decode_folder(path: str, names: list[str], warned: set[str], folder: _Folder) -> ChangedURLs:
    """The URLs of ``names``, and ``folder`` updated to remember them.

    A store lists a folder's children in an order that one change leaves alone elsewhere
    (ZooKeeper's hash order, etcd's key order, the embedded store's sorted order), so the
    names that came and went are found between the longest common head and tail of the
    previous list and this one: two C-level scans that compare string objects (the same
    object, or equal bytes -- no hashing of the 100 000 names), then set operations over the
    few names in between. When the lists differ throughout, or a name is listed twice, the
    whole list is compared as a set (every name hashed once). Python code runs only for the
    names that came and went."""
    known = folder.known
    if not known:  # the first list: in the order given
        fresh: dict[str, URL] = {}
        bad: set[str] = set()
        for name in names:
            if name not in fresh and name not in bad:
                url = _decode_name(path, name, warned)
                if url is None:
                    bad.add(name)
                else:
                    fresh[name] = url
        folder.known, folder.bad = fresh, bad
        folder.names = tuple(names) if len(fresh) + len(bad) == len(names) else None
        urls = ChangedURLs(fresh.values(), None, [], [])
        folder.serial = urls.serial
        return urls
    middle = _middle(folder, names) if folder.names is not None else None
    if middle is not None:
        came, went = middle
        distinct = True
    else:
        # One pass touches every name (hashing it into a set); the others run over hashes
        # already stored in the set and the dict.
        present = set(names)
        came = present.difference(known)
        went = known.keys() - present if len(known) + len(came) != len(present) else set()
        went |= folder.bad - present
        distinct = len(present) == len(names)
    # The list is the previous one's order with the names that went taken out and those that
    # came added at the end: nothing downstream reads the order (the provider list is sorted
    # by full string), and following the names' order would cost a pass over them. Changed
    # in place (the caller holds the folder's lock): a copy of 100 000 entries would cost more
    # than everything else a one-provider change does here.
    bad = folder.bad
    departed = []
    for name in went:
        gone = known.pop(name, None)
        if gone is None:
            bad.discard(name)
        else:
            departed.append(gone)
    arrived: list[URL] = []
    for name in came:
        if name in bad:
            continue  # still not a URL (warned about already)
        url = _decode_name(path, name, warned)
        if url is None:
            bad.add(name)
        else:
            known[name] = url
            arrived.append(url)
    folder.names = tuple(names) if distinct else None
    urls = ChangedURLs(known.values(), folder.serial, arrived, departed)
    folder.serial = urls.serial
    return urls


def _common_run(old: Sequence[str], new: Sequence[str], most: int, backwards: bool) -> int:
    """How many leading (``backwards``: trailing) names ``old`` and ``new`` have in common, at
    most ``most``."""

    def run(names: Sequence[str]) -> Iterator[str]:
        return reversed(names) if backwards else iter(names)

    # First by identity (a store that hands over the same string objects: a pointer
    # comparison, the strings themselves are not read), then from the first object that
    # differs by value (a store that makes new strings: a memcmp each).
    same = next(compress(count(), map(is_not, run(old), run(new))), most)
    if same >= most:
        return most
    rest = map(ne, islice(run(old), same, most), islice(run(new), same, most))
    return min(most, same + next(compress(count(), rest), most - same))


def _middle(folder: _Folder, names: list[str]) -> tuple[set[str], set[str]] | None:
    """(names that came, names that went) between ``folder.names`` (no name twice) and
    ``names``, from the part where they differ; None when a name of ``names`` is listed twice
    (the caller then compares the whole lists as sets)."""
    old = folder.names
    assert old is not None
    common = min(len(old), len(names))
    head = _common_run(old, names, common, False)
    tail = _common_run(old, names, common - head, True)
    old_part = set(old[head : len(old) - tail])
    new_part = names[head : len(names) - tail]
    came_or_kept = set(new_part)
    if len(came_or_kept) != len(new_part):
        return None  # listed twice
    came = came_or_kept - old_part
    known, bad = folder.known, folder.bad
    for name in came:
        if name in known or name in bad:
            # Also in the head or the tail (the old list had it once, outside its middle):
            # listed twice.
            return None
    return came, old_part - came_or_kept


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
        #: same URL objects), each with the serial of the list it last gave
        #: (:class:`ChangedURLs`); changed in place under ``_decode_lock``.
        self._decoded: dict[str, _Folder] = {}
        self._decode_lock = threading.Lock()
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
        if path.endswith(_ROUTERS_FOLDER):
            # A routers folder holds a few rules and changes when one is pushed: decoded whole
            # each time rather than remembered (names and URLs by name), since its URLs are
            # kept by the rule book anyway and its names are ~250 B each, once per rule and
            # service (20 000 in a consumer of 1 000 services with 20 rules each, issue 42).
            # The rule book compares URLs by value, so a rule decoded again is not recompiled.
            return decode_children(path, names, self._warned)
        with self._decode_lock:
            folder = self._decoded.get(path)
            if folder is None:
                folder = self._decoded[path] = _Folder({}, set(), None, None)
            return _decode_folder(path, names, self._warned, folder)

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
        overwrite = getattr(self.store, "overwrite", None)
        if version is None and callable(overwrite):
            # A store whose writes create and replace alike, with no per-node protection
            # (Nacos: NacosStore.overwrite), does it in one call, not a set refused on an
            # absent node and then a create.
            return int(overwrite(path, data))
        if version is None:
            try:
                return self.store.set(path, data)
            except NoNodeError:
                try:
                    self._create_config(path, data)
                    return self._created_version(data)
                except NodeExistsError:
                    return self.store.set(path, data)
        if version == -1:
            self._create_config(path, data)
            return self._created_version(data)
        return self.store.set(path, data, version)

    def _created_version(self, data: bytes) -> int:
        # A tree store starts a node at version 0; Nacos, which keeps no version counter,
        # reports the content's digest (NacosStore.content_version).
        versioner = getattr(self.store, "content_version", None)
        return int(versioner(data)) if callable(versioner) else 0

    def _create_config(self, path: str, data: bytes) -> None:
        if self.protect:
            self.store.ensure_path(layout.ROOT)
        self.store.create(path, data, protected=self.protect)

    def delete_config(self, key: str, version: int = -1) -> None:
        """Delete a document (NoNodeError if absent)."""
        self.store.delete(layout.config_path(key), version)

    def config_keys(self) -> list[str]:
        """Every config-center key: the ``dubbo`` group's, and the migration rules of the
        ``DUBBO_SERVICEDISCOVERY_MIGRATION`` group (a ``.migration`` node in the ``dubbo``
        group is read by nobody, and its key names the other group's node)."""
        keys: list[str] = []
        with contextlib.suppress(NoNodeError):
            keys += [
                k
                for k in self.store.children(layout.CONFIG_ROOT)
                if not k.endswith(layout.MIGRATION_SUFFIX)
            ]
        with contextlib.suppress(NoNodeError):
            keys += [
                k
                for k in self.store.children(layout.MIGRATION_ROOT)
                if k.endswith(layout.MIGRATION_SUFFIX)
            ]
        return keys

    def watch_config(self, key: str, callback: Callable[[str | None], None]) -> Cancel:
        """Call ``callback(text)`` now and on every change; ``None`` while the key is absent."""
        return self.store.watch_data(layout.config_path(key), _ConfigText(callback))

    def watch_config_data(self, key: str, callback: Callable[[bytes | None, int], None]) -> Cancel:
        """:meth:`watch_config` for a callback that decodes the document itself (the store's
        ``(data, version)``, ``(None, -1)`` while the key is absent): one object less per
        watch for a caller that watches tens of thousands of keys (a directory, issue 42)."""
        return self.store.watch_data(layout.config_path(key), callback)


class _ConfigText:
    """A config watch's store callback: the node's data as text to ``callback``. An object of
    one slot rather than a closure (~100 B less per watch: a consumer of 1 000 services
    watches ~90 000 config keys, docs/benchmarks.md, issue 42)."""

    __slots__ = ("callback",)

    def __init__(self, callback: Callable[[str | None], None]) -> None:
        self.callback = callback

    def __call__(self, data: bytes | None, _version: int) -> None:
        self.callback(None if data is None else data.decode("utf-8", errors="replace"))
