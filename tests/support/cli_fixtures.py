"""Fixtures for CLI tests on the in-memory store: run ``dubbo-py`` with CliRunner against a
shared tree, and register providers/consumers as a separate live session would."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from dubbo_py.admin.cli import cli
from dubbo_py.admin.common import CliEnv
from dubbo_py.registry.registry import Registry
from dubbo_py.registry.store.address import RegistryAddress
from dubbo_py.registry.store.base import Store
from dubbo_py.url import URL
from tests.support import fake_rules
from tests.support.memory_store import MemoryStore, MemoryTree

GREETER = "demo.Greeter"
P1 = "tri://10.0.0.5:50051/demo.Greeter?application=greeter&methods=SayHello,SayBye&version=1.0.0"
P2 = "tri://10.0.0.6:50051/demo.Greeter?application=greeter&methods=SayHello,SayBye&version=1.0.0"
CONSUMER = "consumer://10.0.0.1/demo.Greeter?application=shop&category=consumers&version=1.0.0"


@dataclass
class Cli:
    """Runs the CLI on one in-memory registry."""

    tree: MemoryTree
    tmp: Path
    history_limit: int = 20
    opened: list[RegistryAddress] = field(default_factory=list)
    live: MemoryStore | None = None

    def opener(self, address: RegistryAddress, timeout: float) -> Store:
        self.opened.append(address)
        return MemoryStore(self.tree)

    def __call__(self, *args: str, env: dict[str, str] | None = None) -> Result:
        obj = CliEnv(opener=self.opener, history_limit=self.history_limit)
        return CliRunner().invoke(cli, list(args), obj=obj, env=env)

    def json(self, *args: str) -> Any:
        """Run with ``--json``; assert success and return the parsed output."""
        result = self(*args, "--json")
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    def file(self, name: str, text: str) -> str:
        path = self.tmp / name
        path.write_text(text, encoding="utf-8")
        return str(path)

    @property
    def registry(self) -> Registry:
        """A live session (providers and consumers registered on it stay while the test runs)."""
        if self.live is None:
            self.live = MemoryStore(self.tree)
        return Registry(self.live)

    def register(self, *urls: str) -> None:
        for url in urls:
            self.registry.register(URL.parse(url))

    def text(self, key: str) -> str | None:
        doc = Registry(MemoryStore(self.tree)).get_config(key)
        return None if doc is None else doc.text

    def version(self, key: str) -> int | None:
        doc = Registry(MemoryStore(self.tree)).get_config(key)
        return None if doc is None else doc.version


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cli]:
    """The CLI on a fresh in-memory registry, with the fake rule compilers installed."""
    fake_rules.install(monkeypatch)
    monkeypatch.setenv("USER", "tester")
    monkeypatch.delenv("DUBBO_PY_REGISTRY", raising=False)
    yield Cli(MemoryTree(), tmp_path)


def lines(text: str) -> list[str]:
    """Non-empty lines."""
    return [ln for ln in text.splitlines() if ln.strip()]


Runner = Callable[..., Result]
