"""The consumer's cache file: written off the registry's event thread, latest state last."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from unittest import mock

from dubbo_py.registry.cache import NotifyCache
from dubbo_py.url import URL
from tests.support.waiting import wait_until

SERVICE = "demo.Greeter"


def provider(port: int) -> URL:
    return URL.parse(f"tri://127.0.0.1:{port}/{SERVICE}?application=greeter")


def on_disk(path: Path) -> dict[str, object]:
    return json.loads(path.read_text("utf-8")) if path.exists() else {}


def test_a_notification_does_not_wait_for_the_disk(tmp_path: Path) -> None:
    path = tmp_path / "cache.json"
    cache = NotifyCache(path)
    release = threading.Event()
    plain_write = NotifyCache._write

    def slow_disk(self: NotifyCache, text: str) -> None:
        release.wait(10)
        plain_write(self, text)

    with mock.patch.object(NotifyCache, "_write", slow_disk):
        cache.save_urls(SERVICE, "providers", [provider(5001)])  # returns: the disk is stuck
        for port in range(5002, 5012):
            cache.save_urls(SERVICE, "providers", [provider(port)])
        cache.save_config(SERVICE, "demo.Greeter:1.0.0:.condition-router", "conditions: []")
        release.set()
        wait_until(
            lambda: on_disk(path).get(SERVICE, {}).get("configs") is not None,  # type: ignore[union-attr]
            what="the latest state on disk",
        )
    reread = NotifyCache(path)
    assert [u.port for u in reread.urls(SERVICE)["providers"]] == [5011]
    assert reread.configs(SERVICE) == {"demo.Greeter:1.0.0:.condition-router": "conditions: []"}


def test_flush_writes_at_once(tmp_path: Path) -> None:
    path = tmp_path / "cache.json"
    cache = NotifyCache(path)
    cache.save_urls(SERVICE, "providers", [provider(5001)])
    cache.flush()
    assert [u.port for u in NotifyCache(path).urls(SERVICE)["providers"]] == [5001]
