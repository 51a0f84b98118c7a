"""The rule push -> applied path of a consumer: what happens between a document arriving from the
registry and the new chain being in force (bench/bench_push_latency.py measures its latency)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from unittest import mock

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from dubbo_py import yaml_loader
from dubbo_py.errors import RuleError
from dubbo_py.invocation import Invocation
from dubbo_py.registry.cache import NotifyCache
from dubbo_py.registry.directory import RegistryDirectory
from dubbo_py.registry.registry import Registry
from dubbo_py.registry.store.embedded import EmbeddedStore
from dubbo_py.router import factory
from dubbo_py.router.condition import routers_from_yaml
from dubbo_py.url import URL
from tests.support.waiting import wait_until

SERVICE = "demo.Greeter"
KEY = f"{SERVICE}:1.0.0:.condition-router"
SOURCE = f"/dubbo/config/dubbo/{KEY}"
CALL = Invocation(SERVICE, "SayHello")


def only_port(port: int) -> str:
    return (
        f"configVersion: v3.0\nscope: service\nkey: {SERVICE}:1.0.0\nforce: true\n"
        f"conditions:\n  - '=> port = {port}'\n"
    )


class RecordingCache(NotifyCache):
    """Notes, when a rule document is saved, which ports the directory routes to by then."""

    directory: RegistryDirectory | None = None
    seen_at_save: list[set[int]]

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.seen_at_save = []

    def save_config(self, service: str, key: str, text: str | None) -> None:
        if key == KEY and text and self.directory is not None:
            self.seen_at_save.append({u.port for u in self.directory.chain.route(CALL)})
        super().save_config(service, key, text)


def test_a_pushed_rule_is_in_force_before_the_local_cache_is_written(tmp_path: Path) -> None:
    # Dubbo's AbstractRegistry.notify: listener.notify(...) first, then saveProperties(...), so a
    # slow disk never delays a rule; the cache still ends up holding the rule.
    store = EmbeddedStore(tmp_path / "registry.db")
    registry = Registry(store)
    consumer = URL.parse(
        f"consumer://127.0.0.1/{SERVICE}?application=shop&interface={SERVICE}&version=1.0.0"
    )
    for port in (5001, 5002):
        registry.register(
            URL.parse(
                f"tri://127.0.0.1:{port}/{SERVICE}?application=greeter&interface={SERVICE}"
                "&side=provider&version=1.0.0"
            )
        )
    cache = RecordingCache(tmp_path / "cache.json")
    directory = RegistryDirectory(consumer, registry, factory.new_rulebook(), cache=cache)
    cache.directory = directory
    try:
        directory.start(wait=20)
        assert {u.port for u in directory.chain.route(CALL)} == {5001, 5002}
        registry.put_config(KEY, only_port(5002))

        def saved() -> str | None:
            return NotifyCache(tmp_path / "cache.json").configs(SERVICE).get(KEY)

        wait_until(lambda: saved() is not None, what="the rule to be saved")
        assert saved() == only_port(5002)
        assert cache.seen_at_save == [{5002}]
    finally:
        directory.close()
        store.close()


# --------------------------------------------------------------------------- the YAML fast path

needs_libyaml = pytest.mark.skipif(
    getattr(yaml, "CSafeLoader", None) is None, reason="PyYAML built without libyaml"
)

RULES = [
    "=> port = 5002",
    "method = SayHello => region = hangzhou",
    "application = crawler => false",
    "host != 10.0.0.13 & arguments[0] = vip* => tier = gold,silver",
    "attachments[tenant] = t1 => zone = z1",
]


def _quoted(rule: str, style: str) -> str:
    if style == "single":
        return "'" + rule.replace("'", "''") + "'"
    if style == "double":
        return '"' + rule + '"'
    return rule


@st.composite
def documents(draw: st.DrawFn) -> str:
    version = draw(st.sampled_from(["v3.0", "v3.1"]))
    head = (
        f"# {draw(st.integers(0, 99))}\nconfigVersion: {version}\n"
        f"scope: {draw(st.sampled_from(['service', 'application']))}\nkey: {SERVICE}\n"
        f"force: {draw(st.sampled_from(['true', 'false']))}\n"
        f"enabled: {draw(st.sampled_from(['true', 'false']))}\nconditions:\n"
    )
    rules = draw(st.lists(st.sampled_from(RULES), min_size=1, max_size=4))
    style = draw(st.sampled_from(["plain", "single", "double"]))
    if version == "v3.0":
        return head + "".join(f"  - {_quoted(r, style)}\n" for r in rules)
    body = ""
    for rule in rules:
        when, then = (part.strip() for part in rule.split("=>"))
        body += f"  - from:\n      match: {_quoted(when, 'single')}\n    to:\n"
        body += f"      - match: {_quoted(then, 'single')}\n"
        body += f"        weight: {draw(st.integers(0, 100))}\n"
    return head + body


@needs_libyaml
@settings(max_examples=60, deadline=None)
@given(documents())
def test_libyaml_and_pyyaml_read_every_valid_document_alike(text: str) -> None:
    fast = routers_from_yaml(text, SOURCE)
    with mock.patch.object(yaml_loader, "_FAST", None):
        reference = routers_from_yaml(text, SOURCE)
    assert fast == reference


BAD = [
    "configVersion: v3.0\nscope: service\nkey: k\nconditions:\n  - 'method = => x'\n",
    "configVersion: v3.0\nscope: service\nkey: k\nconditions: [\n",
    "configVersion: v3.0\nscope: service\nkey: k\nforce: maybe\nconditions: ['=> a = b']\n",
    "configVersion: v3.0\nscope: service\nkey: k\nconditions:\n\t- '=> a = b'\n",
    "configVersion: v3.0\nscope: service\nkey: k\nconditions:\n  - '=> a = b\x07'\n",
    "configVersion: v3.1\nscope: service\nkey: k\nconditions:\n  - to:\n      - weight: -1\n",
]


@needs_libyaml
@pytest.mark.parametrize("text", BAD)
def test_an_invalid_document_reports_pyyamls_line_and_column(text: str) -> None:
    with pytest.raises(RuleError) as fast:
        routers_from_yaml(text, SOURCE)
    with mock.patch.object(yaml_loader, "_FAST", None), pytest.raises(RuleError) as reference:
        routers_from_yaml(text, SOURCE)
    assert (fast.value.line, fast.value.column) == (reference.value.line, reference.value.column)
    assert str(fast.value) == str(reference.value)


def test_listeners_end_on_the_chain_in_force_when_two_rebuilds_race() -> None:
    # A rule switched off from a call's thread rebuilds on a thread of its own
    # (RegistryDirectory._rebuild_soon) while a rule push rebuilds on the store's thread. The
    # first rebuild's listener (the reference's: it retains channels, the quarantine and
    # provider defaults for the chain's providers) is still running when the other chain is
    # swapped in: the reference must end up told of the chain in force, never of an older one.
    from tests.support.memory_store import MemoryStore

    registry = Registry(MemoryStore())
    consumer = URL.parse(
        f"consumer://127.0.0.1/{SERVICE}?application=shop&interface={SERVICE}&version=1.0.0"
    )
    registry.register(
        URL.parse(
            "tri://127.0.0.1:5001/demo.Greeter?application=greeter&interface=demo.Greeter"
            "&side=provider&version=1.0.0"
        )
    )
    directory = RegistryDirectory(consumer, registry, factory.new_rulebook())
    directory.start(wait=5.0)
    told: list[object] = []
    first = threading.Event()

    def listener(bound: object) -> None:
        if not first.is_set():
            first.set()
            # Hold this notification until the other thread's chain is in force.
            wait_until(lambda: directory.chain is not bound, 5.0)
        told.append(bound)  # what the reference is left with, in the order it was told

    directory.add_listener(listener)
    directory._rebuild_soon()
    assert first.wait(5.0)
    push = threading.Thread(target=registry.put_config, args=(KEY, only_port(5001)))
    push.start()
    push.join(10.0)
    wait_until(lambda: len(told) >= 2, 10.0)
    time.sleep(0.2)  # a stale notification still on its way would land by now
    assert told[-1] is directory.chain
    directory.close()
