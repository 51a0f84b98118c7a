"""A consumer's directory starts with every rule in force: ``start()`` returns only once the
provider list and every watched rule source have been read, or after a bounded wait that names
what is missing."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pytest

from dubbo_py.invocation import Invocation
from dubbo_py.registry.directory import RegistryDirectory
from dubbo_py.registry.registry import Registry
from dubbo_py.registry.store.base import Cancel
from dubbo_py.router import factory
from dubbo_py.url import URL
from tests.support.memory_store import MemoryStore

SERVICE = "demo.Greeter"
CALL = Invocation(SERVICE, "SayHello")
CONSUMER = URL.parse(
    f"consumer://127.0.0.1/{SERVICE}?application=shop&interface={SERVICE}&version=1.0.0"
)
CONDITION_KEY = f"{SERVICE}:1.0.0:.condition-router"


class SlowStore(MemoryStore):
    """A store whose first read of some nodes arrives late (``slow``: path -> delay s) or never
    (``silent`` paths), like a registry answering one watch after another."""

    def __init__(self) -> None:
        super().__init__()
        self.slow: dict[str, float] = {}
        self.silent: set[str] = set()

    def watch_data(self, path: str, callback: Callable[[bytes | None, int], None]) -> Cancel:
        if path in self.silent:
            return lambda: None
        delay = self.slow.get(path)
        if delay is None:
            return super().watch_data(path, callback)
        cancels: list[Cancel] = []

        def first_read() -> None:
            cancels.append(MemoryStore.watch_data(self, path, callback))

        timer = threading.Timer(delay, first_read)
        timer.start()

        def cancel() -> None:
            timer.cancel()
            for c in cancels:
                c()

        return cancel


def _registry_with_providers(store: SlowStore) -> Registry:
    registry = Registry(store)
    for port in (5001, 5002):
        registry.register(
            URL.parse(
                f"tri://127.0.0.1:{port}/{SERVICE}?application=greeter&interface={SERVICE}"
                "&side=provider&version=1.0.0"
            )
        )
    return registry


def _ports(directory: RegistryDirectory) -> set[int]:
    return {u.port for u in directory.chain.route(CALL)}


@pytest.mark.parametrize(
    ("key", "text"),
    [
        (
            CONDITION_KEY,
            f"configVersion: v3.0\nscope: service\nkey: {SERVICE}:1.0.0\nforce: true\n"
            "conditions:\n  - '=> port = 5002'\n",
        ),
        # Watched only once the providers (and so their application) are known.
        (
            "greeter.tag-router",
            "configVersion: v3.0\nforce: true\nenabled: true\nkey: greeter\n"
            "tags:\n  - name: gray\n    addresses: ['127.0.0.1:5001']\n",
        ),
    ],
    ids=["condition", "tag-of-provider-application"],
)
def test_start_returns_with_a_late_rule_already_in_force(key: str, text: str) -> None:
    store = SlowStore()
    registry = _registry_with_providers(store)
    registry.put_config(key, text)
    store.slow[f"/dubbo/config/dubbo/{key}"] = 0.3
    directory = RegistryDirectory(
        CONSUMER, registry, factory.new_rulebook(), assemble=factory.chain_routers
    )
    try:
        directory.start(wait=10)
        # The very first route after start() obeys the rule: 5001 is excluded by the condition
        # rule, and tagged "gray" (so not served to an untagged call) by the tag rule.
        assert _ports(directory) == {5002}
    finally:
        directory.close()


def test_a_source_that_never_answers_is_named_and_start_returns_after_the_wait(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = SlowStore()
    registry = _registry_with_providers(store)
    silent = f"/dubbo/config/dubbo/{CONDITION_KEY}"
    store.silent.add(silent)
    directory = RegistryDirectory(CONSUMER, registry, factory.new_rulebook())
    try:
        with caplog.at_level(logging.WARNING, logger="dubbo_py.registry.directory"):
            started = time.monotonic()
            directory.start(wait=0.3)
            waited = time.monotonic() - started
        assert waited >= 0.3
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and silent in warnings[0], warnings
        # The providers that were read serve meanwhile.
        assert _ports(directory) == {5001, 5002}
    finally:
        directory.close()


def test_nothing_is_named_when_every_source_answered(caplog: pytest.LogCaptureFixture) -> None:
    store = SlowStore()
    registry = _registry_with_providers(store)
    directory = RegistryDirectory(CONSUMER, registry, factory.new_rulebook())
    try:
        with caplog.at_level(logging.WARNING, logger="dubbo_py.registry.directory"):
            directory.start(wait=5)
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert directory.wait_until_read(0) == []
    finally:
        directory.close()
