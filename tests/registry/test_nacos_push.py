"""Rule changes reach a ``nacos://`` data watch, and providers joining and leaving a folder
watch, by the server's push, not only by the poll.

The watch's poll interval is set far beyond the wait here, so a change seen in time can only
have come through Nacos's config-change or service-change push (which the test server failed to
send until its launcher carried ``com.alipay.hessian.clhm``: tests/peers/java/nacos-server/pom.xml).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dubbo_py.registry import layout
from dubbo_py.registry.store.nacos.store import NacosStore, content_version
from dubbo_py.url import URL
from tests.support.nacos import NacosServer
from tests.support.waiting import Recorder

pytestmark = pytest.mark.nacos

#: Longer than Recorder's patience: a poll can never be what delivers a change in these tests.
SLOW_POLL = 120.0


@pytest.fixture
def stores(nacos: NacosServer, tmp_path: Path) -> Iterator[tuple[NacosStore, NacosStore]]:
    watcher = NacosStore(
        nacos.address, config_poll_interval=SLOW_POLL, work_dir=tmp_path / "watcher"
    )
    writer = NacosStore(nacos.address, work_dir=tmp_path / "writer")
    try:
        assert watcher.start(30) and writer.start(30)
        yield watcher, writer
    finally:
        writer.close()
        watcher.close()


def test_a_pushed_rule_change_reaches_the_watch_without_waiting_for_the_poll(
    stores: tuple[NacosStore, NacosStore],
) -> None:
    watcher, writer = stores
    path = f"/dubbo/config/dubbo/push-{uuid.uuid4().hex[:8]}.condition-router"
    writer.create(path, b"v0")
    seen = Recorder()
    cancel = watcher.watch_data(path, seen)
    try:
        seen.wait_last((b"v0", content_version("v0")))  # the watch's first read
        for version in ("v1", "v2", "v3"):
            writer.set(path, version.encode())
            seen.wait_last((version.encode(), content_version(version)))
        writer.delete(path)
        seen.wait_last((None, -1))
    finally:
        cancel()


def test_two_watches_of_one_rule_in_one_store_both_hear_it_and_one_outlives_the_other(
    stores: tuple[NacosStore, NacosStore],
) -> None:
    # The applications of a process share one store: their watches of a rule share one poller.
    watcher, writer = stores
    path = f"/dubbo/config/dubbo/shared-{uuid.uuid4().hex[:8]}.condition-router"
    writer.create(path, b"v0")
    first, second = Recorder(), Recorder()
    cancel_first = watcher.watch_data(path, first)
    first.wait_last((b"v0", content_version("v0")))
    cancel_second = watcher.watch_data(path, second)
    second.wait_last((b"v0", content_version("v0")))
    writer.set(path, b"v1")
    first.wait_last((b"v1", content_version("v1")))
    second.wait_last((b"v1", content_version("v1")))
    cancel_first()
    heard = first.calls  # a fresh node can first read as absent: Nacos serves a publish late
    writer.set(path, b"v2")
    second.wait_last((b"v2", content_version("v2")))
    assert first.calls == heard
    cancel_second()


def test_providers_joining_and_leaving_reach_a_folder_watch_by_the_servers_push(
    nacos: NacosServer, tmp_path: Path
) -> None:
    # The folder's poll is set past the wait too: only the naming push can deliver these.
    watcher = NacosStore(nacos.address, poll_interval=SLOW_POLL, work_dir=tmp_path / "w")
    first, second = (NacosStore(nacos.address, work_dir=tmp_path / n) for n in ("a", "b"))
    try:
        assert watcher.start(30) and first.start(30) and second.start(30)
        interface = f"org.example.Pushed{uuid.uuid4().hex[:8]}"
        a, b = (
            URL.parse(
                f"tri://127.0.0.1:{port}/{interface}?interface={interface}&version=1.0.0"
                "&side=provider&application=shop&methods=Greet"
            )
            for port in (50071, 50072)
        )
        first.create(layout.node_path(a), ephemeral=True)
        seen = Recorder()
        folder = layout.category_path(interface, "providers")
        cancel = watcher.watch_children(folder, lambda names: seen(sorted(names)))
        try:
            seen.wait_for(lambda names: [URL.decode(n) for n in names] == [a])  # first read
            second.create(layout.node_path(b), ephemeral=True)  # the same service: pushed
            seen.wait_for(lambda names: [URL.decode(n) for n in names] == [a, b])
            first.delete(layout.node_path(a))
            seen.wait_for(lambda names: [URL.decode(n) for n in names] == [b])
        finally:
            cancel()
    finally:
        for store in (second, first, watcher):
            store.close()
