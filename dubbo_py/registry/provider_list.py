"""A consumer's provider list, kept up to date notification by notification.

A registry notification carries the whole folder, but from one to the next a fleet of ten
thousand providers usually changes by one. The registry hands the unchanged providers over as
the same URL objects (:func:`~dubbo_py.registry.registry.decode_children`), so what changed is
found by identity, in C; only the URLs that arrived are judged (:class:`ProviderFilter`), have
override rules applied and are placed into the sorted list, and only those that left are taken
out. The result is what the full pipeline gives -- the usable providers, deduplicated, sorted
by their full string -- together with the :class:`~dubbo_py.router.snapshot.Delta` that lets
the routers patch their masks instead of rebuilding them.

The full pipeline runs instead whenever the shortcut could differ from it: the first list,
a change of the override rules, more than :data:`~dubbo_py.router.snapshot.PATCH_LIMIT`
changes (or an eighth of the list), two providers with the same full string, or the same
provider reached from two registered URLs.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass

from dubbo_py.registry.matching import ProviderFilter, is_usable
from dubbo_py.registry.overrides import Configure
from dubbo_py.registry.registry import ChangedURLs
from dubbo_py.router.snapshot import PATCH_LIMIT, Delta
from dubbo_py.url import URL

__all__ = ["ProviderList", "Update"]


def _full_string(url: URL) -> str:
    return url.to_string()


@dataclass(frozen=True, slots=True)
class Update:
    """A new provider list and, when it was patched, how it follows from the previous one."""

    providers: tuple[URL, ...]
    delta: Delta | None


class ProviderList:
    """The usable, sorted providers of one consumer, from the registered URLs (not
    thread-safe: the directory calls it under its lock)."""

    def __init__(
        self, select: ProviderFilter, configure: Configure, *, limit: int | None = None
    ) -> None:
        self._filter = select
        self._configure = configure
        #: Most changes patched (default: PATCH_LIMIT and an eighth of the list).
        self._limit = limit
        self.providers: tuple[URL, ...] = ()
        #: The last registered list, by id (the dict keeps the objects, so no id is reused
        #: while it is here); None: the next update takes the full pass.
        self._registered: dict[int, URL] | None = None
        #: id(registered URL) -> the provider it gave (usable ones only).
        self._provided: dict[int, URL] = {}
        #: The last registered list indexed by id, and that list (see :meth:`arrivals`).
        self._indexed: tuple[list[URL], dict[int, URL]] | None = None
        #: id(registered URL) -> that URL, for the usable ones (what left and arrived is told
        #: by it: :attr:`departed`, :attr:`arrived`).
        self._sources: dict[int, URL] = {}
        #: The registered URLs of usable providers that left, and that arrived, in the last
        #: update (empty protection reads them: O(changes), not O(providers)).
        self.departed: tuple[URL, ...] = ()
        self.arrived: tuple[URL, ...] = ()
        #: The serial of the registry's list (:class:`ChangedURLs`) that ``_registered`` is
        #: the index of, when it was one: the next list based on it says what changed.
        self._serial: int | None = None

    def _follows(self, raw: list[URL]) -> ChangedURLs | None:
        """``raw`` when it says how it follows from the list last indexed."""
        if (
            isinstance(raw, ChangedURLs)
            and raw.base is not None
            and raw.base == self._serial
            and self._registered is not None
        ):
            return raw
        return None

    def arrivals(self, raw: list[URL]) -> list[URL]:
        """The URLs of ``raw`` that were not in the last registered list (every one of them
        when there is nothing to compare with)."""
        before = self._registered
        if before is None:
            return raw
        changed = self._follows(raw)
        if changed is not None:
            return changed.arrived
        now = self._index(raw)
        return [now[i] for i in now.keys() - before.keys()]

    def _index(self, raw: list[URL]) -> dict[int, URL]:
        # Kept for the update that follows arrivals() on the same list (the tuple holds the
        # list, so its id cannot be reused meanwhile).
        indexed = self._indexed
        if indexed is not None and indexed[0] is raw:
            return indexed[1]
        now = dict(zip(map(id, raw), raw, strict=True))
        self._indexed = (raw, now)
        return now

    def update(
        self,
        raw: list[URL],
        configurator_urls: list[URL],
        configurator_docs: Mapping[str, str],
        rules_changed: bool,
    ) -> Update:
        """The providers for the registered URLs ``raw`` under these override rules
        (``rules_changed``: they differ from the last call's)."""
        if not rules_changed:
            patched = self._patch(raw, configurator_urls, configurator_docs)
            if patched is not None:
                return patched
        return self._full(raw, configurator_urls, configurator_docs)

    def _full(self, raw: list[URL], urls: list[URL], documents: Mapping[str, str]) -> Update:
        pairs = self._filter.select_pairs(raw)
        configured = self._configure([provider for _, provider in pairs], urls, documents)
        provided: dict[int, URL] = {}
        sources: dict[int, URL] = {}
        usable: list[URL] = []
        before = self._sources
        if len(configured) == len(pairs):
            for (registered, _), provider in zip(pairs, configured, strict=True):
                if is_usable(provider):
                    provided[id(registered)] = provider
                    sources[id(registered)] = registered
                    usable.append(provider)
            registered_by_id: dict[int, URL] | None = self._index(raw)
            # ``before`` holds the old URLs, so no id of it can be a new URL's.
            self.departed = tuple(u for i, u in before.items() if i not in sources)
            self.arrived = tuple(u for i, u in sources.items() if i not in before)
        else:  # not one result per provider: nothing to patch from next time
            usable = [p for p in configured if is_usable(p)]
            registered_by_id = None
            self.departed = self.arrived = ()  # unknown
        self._sources = sources
        unique = set(usable)
        if len(unique) != len(usable) or (
            registered_by_id is not None and len(registered_by_id) != len(raw)
        ):
            registered_by_id = None  # duplicates: only the full pass counts them right
        # Sorted so every consumer indexes the same providers the same way.
        self.providers = tuple(sorted(unique, key=_full_string))
        self._registered = registered_by_id
        self._serial = (
            raw.serial if registered_by_id is not None and isinstance(raw, ChangedURLs) else None
        )
        self._indexed = None
        self._provided = provided
        return Update(self.providers, None)

    def _patch(
        self, raw: list[URL], urls: list[URL], documents: Mapping[str, str]
    ) -> Update | None:
        before = self._registered
        if before is None:
            return None
        limit = self._limit if self._limit is not None else min(PATCH_LIMIT, len(raw) // 8)
        changed = self._follows(raw)
        if changed is not None:
            # The registry said what changed: the index is kept up to date in place, without
            # a pass over the fleet (a failure below takes the full pass, which rebuilds it).
            if len(changed.departed) + len(changed.arrived) > limit:
                return None
            left_ids = [id(u) for u in changed.departed]
            if any(before.get(i) is not u for i, u in zip(left_ids, changed.departed, strict=True)):
                return None
            arrived_ids = [id(u) for u in changed.arrived]
            left = [before[i] for i in left_ids]
            now = before
            for i in left_ids:
                del now[i]
            now.update(zip(arrived_ids, changed.arrived, strict=True))
            self._serial = None
            self._registered = None
            if len(now) != len(raw):
                return None
            arrived = changed.arrived
        else:
            now = self._index(raw)
            self._indexed = None
            left_ids = list(before.keys() - now.keys())
            arrived_ids = list(now.keys() - before.keys())
            changes = len(left_ids) + len(arrived_ids)
            if changes > limit or len(now) != len(raw):
                return None
            left = [before[i] for i in left_ids]
            arrived = [now[i] for i in arrived_ids]
        self._registered = None  # until this update is known to have gone through
        pairs = self._filter.update(left, arrived)
        configured = self._configure([provider for _, provider in pairs], urls, documents)
        if len(configured) != len(pairs):
            return None
        provided = self._provided
        gone = [provided.pop(i) for i in left_ids if i in provided]
        came: list[tuple[int, URL]] = []
        came_sources: list[URL] = []
        for (registered, _), provider in zip(pairs, configured, strict=True):
            if is_usable(provider):
                came.append((id(registered), provider))
                came_sources.append(registered)
        placed = _place(self.providers, gone, [p for _, p in came])
        if placed is None:
            return None
        providers, delta = placed
        provided.update(came)
        sources = self._sources
        self.departed = tuple(sources.pop(i) for i in left_ids if i in sources)
        self.arrived = tuple(came_sources)
        sources.update(zip((i for i, _ in came), came_sources, strict=True))
        self.providers = providers
        self._registered = now
        self._serial = raw.serial if isinstance(raw, ChangedURLs) else None
        return Update(providers, delta)


def _place(
    providers: tuple[URL, ...], gone: list[URL], came: list[URL]
) -> tuple[tuple[URL, ...], Delta] | None:
    """``providers`` without ``gone`` and with ``came``, each put where sorting by full string
    puts it, and the delta; ``None`` when a full string ties (sorting alone orders ties)."""
    out = list(providers)
    removed: list[int] = []
    for url in gone:
        key = url.to_string()
        i = bisect_left(out, key, key=_full_string)
        if i >= len(out) or out[i] != url or _ties(out, i, key):
            return None
        removed.append(i)
    # Indices in the original list: every removal is looked up before any is made.
    removed.sort()
    if len(set(removed)) != len(removed):
        return None
    for i in reversed(removed):
        del out[i]
    added: list[int] = []
    for url in sorted(came, key=_full_string):
        key = url.to_string()
        j = bisect_left(out, key, key=_full_string)
        if (j < len(out) and out[j].to_string() == key) or (
            j > 0 and out[j - 1].to_string() == key
        ):
            return None  # equal to a provider there (a duplicate) or a tie
        out.insert(j, url)
        added.append(j)  # later ones sort after it: this index is final
    return tuple(out), Delta(tuple(removed), tuple(added))


def _ties(out: list[URL], i: int, key: str) -> bool:
    """Whether a neighbour of ``out[i]`` has the same full string ``key``."""
    return (i > 0 and out[i - 1].to_string() == key) or (
        i + 1 < len(out) and out[i + 1].to_string() == key
    )
