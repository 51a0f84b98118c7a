"""The consumer's local cache of the last notified registry data.

A consumer writes every notification it gets (provider, router and configurator URLs, and the
config-center documents it watches) to one JSON file per application and registry, and starts
from it when the registry cannot be reached, so a ZooKeeper outage does not stop a restart.
Writes are atomic (temp file + rename); a corrupt file is reported and ignored, never fatal.

The file is written by one background thread per process, as Dubbo's ``AbstractRegistry``
does by default (``registry.file.save.sync=false``): a notification updates the cache in
memory and marks it for writing, and the writer writes the latest state (several changes in a
burst cost one write). The registry's event thread -- shared by every application of the
process on one registry, see :mod:`dubbo_py.registry.store.shared` -- therefore never waits for
a disk before handing the next change on. :meth:`NotifyCache.flush` writes at once (an
application flushes its cache when it closes, and pending writes are flushed at exit).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import queue
import tempfile
import threading
import weakref
from pathlib import Path

from dubbo_py.errors import URLError
from dubbo_py.url import URL

__all__ = ["NotifyCache", "default_cache_path"]

log = logging.getLogger(__name__)


def default_cache_path(application: str, registry: str) -> Path:
    """``<user cache dir>/dubbo-py/<application>-<hash of registry address>.json``."""
    from platformdirs import user_cache_dir

    digest = hashlib.sha1(registry.encode("utf-8")).hexdigest()[:12]
    safe_app = "".join(c if c.isalnum() or c in "-_." else "_" for c in application) or "app"
    return Path(user_cache_dir("dubbo-py", appauthor=False)) / f"{safe_app}-{digest}.json"


class _Writer:
    """The process's cache-writing thread (started on first use, again in a forked child)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[NotifyCache] = queue.SimpleQueue()
        self._pid = -1
        self._pending: weakref.WeakSet[NotifyCache] = weakref.WeakSet()
        atexit.register(self.flush_all)

    def schedule(self, cache: NotifyCache) -> None:
        with self._lock:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                self._queue = queue.SimpleQueue()
                threading.Thread(
                    target=self._run, name="dubbo-py-cache-writer", daemon=True
                ).start()
            self._pending.add(cache)
            self._queue.put(cache)

    def _run(self) -> None:
        while True:
            cache = self._queue.get()
            cache.flush()

    def flush_all(self) -> None:
        """Write every cache still waiting (at exit)."""
        with self._lock:
            pending = list(self._pending)
        for cache in pending:
            cache.flush()


_WRITER = _Writer()


class NotifyCache:
    """Per-service cached URLs (by category) and config documents (by key)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        # One write at a time, the newest state last.
        self._write_lock = threading.Lock()
        self._data: dict[str, dict[str, dict[str, list[str] | str]]] = self._read()
        self._changes = 0
        self._written = 0

    def _read(self) -> dict[str, dict[str, dict[str, list[str] | str]]]:
        try:
            raw = json.loads(self.path.read_text("utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable registry cache %s: %s", self.path, exc)
            return {}
        return raw if isinstance(raw, dict) else {}

    def _changed(self) -> None:
        # Under self._lock: the writer thread writes the state as it is when it gets there.
        self._changes += 1
        if self._changes == self._written + 1:
            _WRITER.schedule(self)

    def flush(self) -> None:
        """Write the cache now if it changed since it was last written."""
        with self._write_lock:
            with self._lock:
                changes = self._changes
                if changes == self._written:
                    return
                text = json.dumps(self._data, sort_keys=True)
                # Counted as written before the write: a change from now on schedules again.
                self._written = changes
            self._write(text)

    def _write(self, text: str) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")
        except OSError as exc:
            log.warning("could not write registry cache %s: %s", self.path, exc)
            return
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("could not write registry cache %s: %s", self.path, exc)
            Path(tmp).unlink(missing_ok=True)

    def save_urls(self, service: str, category: str, urls: list[URL]) -> None:
        """Remember a category's URLs for a service."""
        with self._lock:
            entry = self._data.setdefault(service, {}).setdefault("urls", {})
            entry[category] = [u.to_string() for u in urls]
            self._changed()

    def save_config(self, service: str, key: str, text: str | None) -> None:
        """Remember (or forget, with None) a config document a service's consumer watches."""
        with self._lock:
            configs = self._data.setdefault(service, {}).setdefault("configs", {})
            if text is None:
                configs.pop(key, None)
            else:
                configs[key] = text
            self._changed()

    def urls(self, service: str) -> dict[str, list[URL]]:
        """The cached URLs of a service by category (unparseable entries skipped)."""
        with self._lock:
            stored = self._data.get(service, {}).get("urls", {})
        out: dict[str, list[URL]] = {}
        for category, texts in stored.items():
            parsed = []
            for text in texts if isinstance(texts, list) else []:
                try:
                    parsed.append(URL.parse(text))
                except URLError as exc:
                    log.warning("skipping cached URL %r in %s: %s", text, self.path, exc)
            out[category] = parsed
        return out

    def configs(self, service: str) -> dict[str, str]:
        """The cached config documents a service's consumer watched."""
        with self._lock:
            stored = self._data.get(service, {}).get("configs", {})
        return {k: v for k, v in stored.items() if isinstance(v, str)}
