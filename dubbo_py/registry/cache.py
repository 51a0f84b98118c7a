"""The consumer's local cache of the last notified registry data.

A consumer writes every notification it gets (provider, router and configurator URLs, and the
config-center documents it watches) to one JSON file per application and registry, and starts
from it when the registry cannot be reached, so a ZooKeeper outage does not stop a restart.
Writes are atomic (temp file + rename); a corrupt file is reported and ignored, never fatal.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
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


class NotifyCache:
    """Per-service cached URLs (by category) and config documents (by key)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._data: dict[str, dict[str, dict[str, list[str] | str]]] = self._read()

    def _read(self) -> dict[str, dict[str, dict[str, list[str] | str]]]:
        try:
            raw = json.loads(self.path.read_text("utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable registry cache %s: %s", self.path, exc)
            return {}
        return raw if isinstance(raw, dict) else {}

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(self._data, out, sort_keys=True)
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("could not write registry cache %s: %s", self.path, exc)
            Path(tmp).unlink(missing_ok=True)

    def save_urls(self, service: str, category: str, urls: list[URL]) -> None:
        """Remember a category's URLs for a service."""
        with self._lock:
            entry = self._data.setdefault(service, {}).setdefault("urls", {})
            entry[category] = [u.to_string() for u in urls]
            self._write()

    def save_config(self, service: str, key: str, text: str | None) -> None:
        """Remember (or forget, with None) a config document a service's consumer watches."""
        with self._lock:
            configs = self._data.setdefault(service, {}).setdefault("configs", {})
            if text is None:
                configs.pop(key, None)
            else:
                configs[key] = text
            self._write()

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
