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


#: Not usable: the filter skipped the URL, or its override rules disabled it.
_OUT = None


class ProviderList:
    """The usable, sorted providers of one consumer, from the registered URLs (not
    thread-safe: the directory calls it under its lock).

    One index of the registered URLs, by id; what each one gave is the URL itself unless one
    of two small tables says otherwise (a fleet's providers are almost all taken as they are
    registered): ``_judged`` where the filter's verdict is not the URL (``None``: skipped, or
    the URL normalised), ``_configured`` where override rules changed the filter's verdict
    (``None``: disabled). This replaced three id-keyed dicts and the filter's own verdict
    table, ~300 B per provider (docs/benchmarks.md, issue 42)."""

    def __init__(
        self, select: ProviderFilter, configure: Configure, *, limit: int | None = None
    ) -> None:
        self._filter = select
        self._configure = configure
        #: Most changes patched (default: PATCH_LIMIT and an eighth of the list).
        self._limit = limit
        self.providers: tuple[URL, ...] = ()
        #: The last registered list, by id (the dict keeps the objects, so no id is reused
        #: while it is here).
        self._registered: dict[int, URL] = {}
        #: Whether the next update may patch from ``_registered`` (False: the full pass).
        self._patchable = False
        #: id -> the filter's verdict, where it is not the registered URL itself.
        self._judged: dict[int, URL | None] = {}
        #: id -> the provider after override rules, where it is not the filter's verdict.
        self._configured: dict[int, URL | None] = {}
        #: The last registered list indexed by id, and that list (see :meth:`arrivals`).
        self._indexed: tuple[list[URL], dict[int, URL]] | None = None
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
            and self._patchable
        ):
            return raw
        return None

    def arrivals(self, raw: list[URL]) -> list[URL]:
        """The URLs of ``raw`` that were not in the last registered list (every one of them
        when there is nothing to compare with)."""
        if not self._patchable:
            return raw
        changed = self._follows(raw)
        if changed is not None:
            return changed.arrived
        before = self._registered
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

    def _given(self, i: int, url: URL) -> URL | None:
        """The provider the registered ``url`` (id ``i``, indexed) gives, None if unusable."""
        judged, configured = self._judged, self._configured
        verdict = judged.get(i, url)
        return configured.get(i, verdict)

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
        before, before_judged = self._registered, self._judged
        before_configured = self._configured
        judge = self._filter.judge
        judged: dict[int, URL | None] = {}
        ids: list[int] = []
        verdicts: list[URL] = []
        for url in raw:
            i = id(url)
            # The same object as last time was judged then.
            verdict = before_judged.get(i, url) if before.get(i) is url else judge(url)
            if verdict is not url:
                judged[i] = verdict
            if verdict is not None:
                ids.append(i)
                verdicts.append(verdict)
        self._filter.retain_reports(raw)
        configured = self._configure(verdicts, urls, documents)
        made: dict[int, URL | None] = {}
        usable: list[URL] = []
        index: dict[int, URL] = {}
        if len(configured) == len(verdicts):
            for i, verdict, provider in zip(ids, verdicts, configured, strict=True):
                if is_usable(provider):
                    usable.append(provider)
                    if provider is not verdict:
                        made[i] = provider
                else:
                    made[i] = _OUT
            index = self._index(raw)
            patchable = len(index) == len(raw)

            def out(i: int, judged: Mapping[int, object], made: Mapping[int, object]) -> bool:
                return (i in judged and judged[i] is None) or (i in made and made[i] is None)

            # ``before`` holds the old URLs, so no id of it can be a new URL's.
            self.departed = tuple(
                u
                for i, u in before.items()
                if not out(i, before_judged, before_configured)
                and (i not in index or out(i, judged, made))
            )
            self.arrived = tuple(
                u
                for i, u in index.items()
                if not out(i, judged, made)
                and (i not in before or out(i, before_judged, before_configured))
            )
        else:  # not one result per provider: nothing to patch from next time
            usable = [p for p in configured if is_usable(p)]
            judged, patchable = {}, False
            self.departed = self.arrived = ()  # unknown
        unique = set(usable)
        if len(unique) != len(usable):
            patchable = False  # duplicates: only the full pass counts them right
        # Sorted so every consumer indexes the same providers the same way.
        self.providers = tuple(sorted(unique, key=_full_string))
        self._registered, self._judged, self._configured = index, judged, made
        self._patchable = patchable
        self._serial = raw.serial if patchable and isinstance(raw, ChangedURLs) else None
        self._indexed = None
        return Update(self.providers, None)

    def _patch(
        self, raw: list[URL], urls: list[URL], documents: Mapping[str, str]
    ) -> Update | None:
        if not self._patchable:
            return None
        before = self._registered
        limit = self._limit if self._limit is not None else min(PATCH_LIMIT, len(raw) // 8)
        changed = self._follows(raw)
        now: dict[int, URL] | None = None
        if changed is not None:
            # The registry said what changed: the index is patched in place below, without a
            # pass over the fleet (nothing is changed before the patch is known to go through).
            if len(changed.departed) + len(changed.arrived) > limit:
                return None
            left_ids = [id(u) for u in changed.departed]
            if any(before.get(i) is not u for i, u in zip(left_ids, changed.departed, strict=True)):
                return None
            left = list(changed.departed)
            arrived_ids = [id(u) for u in changed.arrived]
            arrived = changed.arrived
            if len(set(arrived_ids)) != len(arrived_ids) or any(i in before for i in arrived_ids):
                return None  # a URL twice: only the full pass counts it right
            if len(before) - len(left_ids) + len(arrived_ids) != len(raw):
                return None
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
        judge = self._filter.judge
        judged_now = [judge(url) for url in arrived]
        pairs = [
            (i, url, verdict)
            for i, url, verdict in zip(arrived_ids, arrived, judged_now, strict=True)
            if verdict is not None
        ]
        configured = self._configure([verdict for _, _, verdict in pairs], urls, documents)
        if len(configured) != len(pairs):
            return None
        given = [self._given(i, url) for i, url in zip(left_ids, left, strict=True)]
        gone = [p for p in given if p is not None]
        came = [p for p in configured if is_usable(p)]
        placed = _place(self.providers, gone, came)
        if placed is None:
            return None
        providers, delta = placed
        # Through: the index and its tables follow.
        judged, made = self._judged, self._configured
        for i in left_ids:
            judged.pop(i, None)
            made.pop(i, None)
        if now is None:
            for i in left_ids:
                del before[i]
            before.update(zip(arrived_ids, arrived, strict=True))
            now = before
        for i, url, verdict in zip(arrived_ids, arrived, judged_now, strict=True):
            if verdict is not url:
                judged[i] = verdict
        came_sources: list[URL] = []
        for (i, url, verdict), provider in zip(pairs, configured, strict=True):
            if is_usable(provider):
                came_sources.append(url)
                if provider is not verdict:
                    made[i] = provider
            else:
                made[i] = _OUT
        self._filter.forget_reports(left)
        self.departed = tuple(u for u, p in zip(left, given, strict=True) if p is not None)
        self.arrived = tuple(came_sources)
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
