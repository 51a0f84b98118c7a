"""The dead-provider quarantine (a zombie list, after SolrJ's ``LBHttpSolrClient``).

A provider that fails in a way that says "this server is down" (connection refused, UNAVAILABLE)
is put in quarantine; calls then skip it, and a background thread probes every quarantined
provider each ``interval`` seconds and lets it back in when the probe succeeds (SolrJ's
``zombieServers`` and its ``checkZombieServers`` ping task)::

    quarantine = Quarantine(grpc_health_probe, interval=1.0)
    quarantine.start()
    healthy, quarantined = quarantine.partition(candidates)
    ...
    quarantine.add(provider, "UNAVAILABLE: connection refused")

Providers are identified by address (``host:port``): a dead server is dead whatever the
parameters of its URL. Use one quarantine per service directory: :meth:`retain` drops the
entries of providers that are no longer registered, which only makes sense against one
service's provider list.

``partition`` costs O(1) while the quarantine is empty (it returns the candidate tuple itself),
and otherwise O(n) once per (candidate tuple, quarantine change): the result is cached, so the
healthy tuple handed on to the load balancer stays the same object and keeps the balancer's
per-tuple cache warm.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Literal, TypeVar

from dubbo_py.callbacks import add_callback
from dubbo_py.url import URL

__all__ = ["Quarantine", "QuarantineEntry", "QuarantineEvent"]

_log = logging.getLogger(__name__)

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class QuarantineEntry:
    """One quarantined provider: since when (epoch seconds), why, and how many probes ran."""

    url: URL
    since: float
    reason: str
    probe_attempts: int = 0

    @property
    def address(self) -> str:
        """The provider's ``host:port``."""
        return self.url.address


@dataclass(frozen=True, slots=True)
class QuarantineEvent:
    """A change of the quarantine: ``added``, ``revived`` (a probe succeeded) or ``removed``
    (by :meth:`Quarantine.remove` or because the provider left the registry)."""

    kind: Literal["added", "revived", "removed"]
    entry: QuarantineEntry


_EMPTY: tuple[URL, ...] = ()


class Quarantine:
    """A thread-safe zombie list with a background prober.

    ``probe(url) -> bool`` says whether a provider is alive again (an exception counts as
    False); ``clock`` gives the ``since`` timestamps (epoch seconds).
    """

    def __init__(
        self,
        probe: Callable[[URL], bool],
        interval: float = 1.0,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not interval > 0:
            raise ValueError(f"quarantine probe interval must be > 0 seconds, got {interval!r}")
        self._probe = probe
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[str, QuarantineEntry] = {}
        #: The quarantined providers by address (a read-only view: truthy while any is in).
        self.addresses: Mapping[str, QuarantineEntry] = MappingProxyType(self._entries)
        # address -> number of the quarantine episode, so a probe that raced with a removal and
        # re-add does not revive (or count against) the new episode
        self._episodes: dict[str, int] = {}
        self._version = 0
        self._listeners: list[Callable[[QuarantineEvent], None]] = []
        self._revive_hooks: list[Callable[[URL], object]] = []
        # partition cache: (candidates, version, healthy, quarantined)
        self._last: tuple[tuple[URL, ...], int, tuple[URL, ...], tuple[URL, ...]] | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    # ------------------------------------------------------------------ membership

    def add(self, url: URL, reason: str) -> bool:
        """Quarantine ``url``; True if it was not already in. An already quarantined provider
        keeps its ``since`` and probe count and takes the newer ``reason``."""
        address = url.address
        with self._lock:
            existing = self._entries.get(address)
            if existing is not None:
                self._entries[address] = replace(existing, url=url, reason=reason)
                return False
            entry = QuarantineEntry(url, self._clock(), reason)
            self._entries[address] = entry
            self._version += 1
            self._episodes[address] = self._version
        self._emit(QuarantineEvent("added", entry))
        return True

    def remove(self, url: URL) -> bool:
        """Let ``url`` out of quarantine by hand; True if it was in."""
        with self._lock:
            entry = self._entries.pop(url.address, None)
            if entry is None:
                return False
            del self._episodes[url.address]
            self._version += 1
        self._emit(QuarantineEvent("removed", entry))
        return True

    def contains(self, url: URL) -> bool:
        """Whether ``url``'s address is quarantined."""
        return url.address in self._entries

    def __contains__(self, url: object) -> bool:
        return isinstance(url, URL) and self.contains(url)

    def __len__(self) -> int:
        return len(self._entries)

    def partition(self, candidates: tuple[URL, ...]) -> tuple[tuple[URL, ...], tuple[URL, ...]]:
        """``(healthy, quarantined)`` in candidate order. With nothing quarantined this is
        ``(candidates, ())`` -- the same tuple, in O(1). Otherwise O(n), cached for the same
        candidate tuple until the quarantine changes. When every candidate is quarantined,
        ``healthy`` is empty; the cluster strategy decides whether to try a quarantined one."""
        entries = self._entries
        if not entries:
            return candidates, _EMPTY
        version = self._version
        last = self._last
        if last is not None and last[0] is candidates and last[1] == version:
            return last[2], last[3]
        healthy: list[URL] = []
        quarantined: list[URL] = []
        for url in candidates:
            (quarantined if url.address in entries else healthy).append(url)
        result = (tuple(healthy) if quarantined else candidates), tuple(quarantined)
        self._last = (candidates, version, result[0], result[1])
        return result

    def retain(self, current_providers: Iterable[URL]) -> None:
        """Drop the entries of providers no longer in ``current_providers`` (they left the
        registry; if they come back they start clean)."""
        if not self._entries:
            return  # nothing to drop: no set of a whole fleet's addresses on every notification
        present = {url.address for url in current_providers}
        with self._lock:
            gone = [e for a, e in self._entries.items() if a not in present]
            for entry in gone:
                del self._entries[entry.address]
                del self._episodes[entry.address]
            if gone:
                self._version += 1
        for entry in gone:
            self._emit(QuarantineEvent("removed", entry))

    def entries(self) -> tuple[QuarantineEntry, ...]:
        """An immutable snapshot of the quarantine, oldest first."""
        with self._lock:
            snapshot = list(self._entries.values())
        return tuple(sorted(snapshot, key=lambda e: (e.since, e.address)))

    # ------------------------------------------------------------------ listeners

    def on_change(self, listener: Callable[[QuarantineEvent], None]) -> Callable[[], None]:
        """Call ``listener`` after every change (on the thread that made it); returns a function
        that unsubscribes it. A listener that raises is logged and otherwise ignored."""
        return add_callback(self._lock, self._listeners, listener)

    def before_revive(self, hook: Callable[[URL], object]) -> Callable[[], None]:
        """Call ``hook(url)`` when a probe found ``url`` alive, *before* it leaves quarantine
        (on the prober's thread); returns a function that unsubscribes it.

        Calls pick a provider the instant it is out of quarantine, so whatever they need to
        reach it afresh -- a new channel instead of one in reconnect backoff -- must be in
        place first; a ``revived`` listener runs too late for that. A hook that raises is
        logged and the provider is revived all the same (it answered the probe)."""
        return add_callback(self._lock, self._revive_hooks, hook)

    def _prepare_revival(self, url: URL) -> None:
        self._call_each(self._revive_hooks, url, "before_revive hook %r failed for %s", url.address)

    def _emit(self, event: QuarantineEvent) -> None:
        self._call_each(self._listeners, event, "quarantine listener %r failed on %s", event.kind)

    def _call_each(
        self, callbacks: Sequence[Callable[[_T], object]], arg: _T, failed: str, about: str
    ) -> None:
        """Call each of ``callbacks`` (as they are now) with ``arg``; one that raises is logged
        by ``failed`` (with the callback and ``about``) and the others still run."""
        with self._lock:
            snapshot = tuple(callbacks)
        for callback in snapshot:
            try:
                callback(arg)
            except Exception:
                _log.exception(failed, callback, about)

    # ------------------------------------------------------------------ probing

    def probe_once(self) -> tuple[URL, ...]:
        """Probe every quarantined provider once, now, on this thread; revive those that answer.
        Returns the revived ones. The background thread calls this every ``interval``."""
        with self._lock:
            snapshot = [(e, self._episodes[a]) for a, e in self._entries.items()]
        revived: list[QuarantineEntry] = []
        for entry, episode in snapshot:
            ok = self._safe_probe(entry.url)
            if ok:
                self._prepare_revival(entry.url)
            with self._lock:
                current = self._entries.get(entry.address)
                if current is None or self._episodes.get(entry.address) != episode:
                    continue  # removed, or removed and quarantined again, while we probed
                counted = replace(current, probe_attempts=current.probe_attempts + 1)
                if ok:
                    del self._entries[entry.address]
                    del self._episodes[entry.address]
                    self._version += 1
                    revived.append(counted)
                else:
                    self._entries[entry.address] = counted
        for entry in revived:
            self._emit(QuarantineEvent("revived", entry))
        return tuple(e.url for e in revived)

    def _safe_probe(self, url: URL) -> bool:
        try:
            return bool(self._probe(url))
        except Exception:
            _log.debug("probe of %s raised", url.address, exc_info=True)
            return False

    def start(self) -> None:
        """Start the background prober (a daemon thread); does nothing if it runs."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._run, name="dubbo-py-quarantine", daemon=True
            )
            self._thread.start()

    def stop(self, timeout: float | None = 5.0) -> None:
        """Stop the background prober and wait (up to ``timeout``) for it to finish."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        self._thread = None

    @property
    def running(self) -> bool:
        """Whether the background prober runs."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            if self._entries:
                try:
                    self.probe_once()
                except Exception:  # never let the prober die silently
                    _log.exception("quarantine probe round failed")

    def __enter__(self) -> Quarantine:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
