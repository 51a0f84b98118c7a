"""The ``dubbo-py`` CLI as operators run it: a separate process per command, against a real
ZooKeeper and the embedded registry, with the real rule compilers."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dubbo_py.admin.connection import open_admin_store
from dubbo_py.admin.rules.history import History
from dubbo_py.registry.registry import Registry
from dubbo_py.registry.store.address import parse_registry_address
from dubbo_py.registry.store.advice import start_advice
from tests.support.local_server import free_port
from tests.support.processes import ROOT, ProviderProcess

KEY = "demo.Greeter::.condition-router"
RULE = """\
configVersion: v3.0
scope: service
key: demo.Greeter
conditions:
  - method = SayHello => host = 127.0.0.1
"""
OTHER = RULE.replace("host = 127.0.0.1", "host = 127.0.0.2")
THIRD = RULE.replace("host = 127.0.0.1", "host = 127.0.0.3")


def cli_command(registry: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "dubbo_py.admin", "--registry", registry, *args]


def dubbo_py(registry: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run one CLI command to completion."""
    return subprocess.run(
        cli_command(registry, *args), capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def ok(registry: str, *args: str) -> str:
    result = dubbo_py(registry, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture
def check(registry_address: str) -> Iterator[tuple[Registry, History]]:
    """An in-process view of the test's registry, to check what the CLI processes wrote."""
    store = open_admin_store(parse_registry_address(registry_address), 20.0)
    yield Registry(store), History(store)
    store.close()


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_push_and_read_back(registry_address: str, tmp_path: Path) -> None:
    rule = write(tmp_path, "rule.yaml", RULE)
    out = ok(registry_address, "rules", "push", rule)
    assert out.strip() == f"pushed {KEY} to {registry_address} (version 0, history #0)"
    assert ok(registry_address, "rules", "get", KEY) == RULE
    assert json.loads(ok(registry_address, "rules", "list", "--json")) == [
        {
            "key": KEY,
            "kind": "condition-router",
            "target": "demo.Greeter::",
            "version": 0,
            "enabled": True,
        }
    ]
    disabled = json.loads(ok(registry_address, "rules", "disable", KEY, "--json"))
    assert disabled["version"] == 1
    assert "enabled: false" in ok(registry_address, "rules", "get", KEY)


def test_two_concurrent_pushes_exactly_one_conflict(
    registry_address: str, tmp_path: Path, check: tuple[Registry, History]
) -> None:
    ok(registry_address, "rules", "push", write(tmp_path, "rule.yaml", RULE))
    # Both writers read version 0 (pinned, so the race is certain rather than likely).
    files = [write(tmp_path, "b.yaml", OTHER), write(tmp_path, "c.yaml", THIRD)]
    procs = [
        subprocess.Popen(
            cli_command(registry_address, "rules", "push", f, "--expect-version", "0"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for f in files
    ]
    results = [(p.wait(120), *p.communicate()) for p in procs]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 1], results
    [winner] = [i for i, (code, _, _) in enumerate(results) if code == 0]
    [loser] = [err for code, _, err in results if code == 1]
    # (after the warning that nothing in this empty registry reads the rule)
    last = loser.splitlines()[-1]
    assert re.fullmatch(rf"error: conflict: {re.escape(KEY)} .*; re-read and retry", last), loser
    registry, history = check
    doc = registry.get_config(KEY)
    assert doc is not None and (doc.text, doc.version) == ((OTHER, THIRD)[winner], 1)
    assert [e.text for e in history.entries(KEY)] == [RULE, (OTHER, THIRD)[winner]]


def test_rollback_restores_the_previous_text(
    registry_address: str, tmp_path: Path, check: tuple[Registry, History]
) -> None:
    registry, history = check
    ok(registry_address, "rules", "push", write(tmp_path, "a.yaml", RULE), "--operator", "alice")
    ok(registry_address, "rules", "push", write(tmp_path, "b.yaml", OTHER), "--operator", "bob")
    out = ok(registry_address, "rules", "rollback", KEY)
    assert out.strip() == f"rolled back {KEY} to #0 in {registry_address} (version 2, history #2)"
    assert ok(registry_address, "rules", "get", KEY) == RULE
    ok(registry_address, "rules", "delete", KEY)
    assert registry.get_config(KEY) is None
    ok(registry_address, "rules", "rollback", KEY)
    doc = registry.get_config(KEY)
    assert doc is not None and doc.text == RULE
    assert [(e.action, e.operator) for e in history.entries(KEY)][:2] == [
        ("push", "alice"),
        ("push", "bob"),
    ]
    assert [e.action for e in history.entries(KEY)][2:] == ["rollback", "delete", "rollback"]


def test_invalid_rule_is_refused_with_line_and_column_and_nothing_changes(
    registry_address: str, tmp_path: Path, check: tuple[Registry, History]
) -> None:
    registry, history = check
    ok(registry_address, "rules", "push", write(tmp_path, "good.yaml", RULE))
    bad = write(tmp_path, "bad.yaml", RULE.replace("host = 127.0.0.1", "host 127.0.0.1"))
    result = dubbo_py(registry_address, "rules", "push", bad)
    assert result.returncode == 1
    assert re.fullmatch(
        rf"error: {re.escape(bad)}:5:\d+: conditions\[0\]: expected '=' or '!=' after 'host'.*\n",
        result.stderr,
    ), result.stderr
    assert result.stdout == ""
    syntax = write(tmp_path, "syntax.yaml", "scope: service\nkey: [demo.Greeter\n")
    result = dubbo_py(registry_address, "rules", "push", syntax)
    assert result.returncode == 1
    assert f"{syntax}:3:1: invalid YAML" in result.stderr
    doc = registry.get_config(KEY)
    assert doc is not None and (doc.text, doc.version) == (RULE, 0)
    assert len(history.entries(KEY)) == 1


def test_providers_overrides_and_status_with_a_live_provider(
    registry_address: str, providers: Callable[..., ProviderProcess]
) -> None:
    provider = providers()
    listed = json.loads(ok(registry_address, "providers", "demo.Greeter", "--json"))
    # Registered at both levels (register_mode "all", Dubbo 3.3's default): one provider.
    assert [(p["address"], p["levels"]) for p in listed] == [
        (provider.address, ["interface", "application"]),
    ]
    table = ok(registry_address, "providers", "demo.Greeter")
    [row] = [ln for ln in table.splitlines() if ln.startswith(provider.address)]
    assert "interface+application" in row
    out = json.loads(
        ok(registry_address, "override", "weight", "demo.Greeter", provider.address, "50", "--json")
    )
    assert [o["action"] for o in out] == ["added"]
    listed = json.loads(ok(registry_address, "providers", "demo.Greeter", "--json"))
    # An override applies at both levels, as consumers apply it to either level's providers.
    assert [p["overrides"] for p in listed] == [["weight=50"]]
    status = json.loads(ok(registry_address, "registry", "status", "--json"))
    assert (status["reachable"], status["services"], status["providers"]) == (True, 1, 1)
    assert (status["applications"], status["instances"]) == (1, 1)
    assert status["configurators"] == 1
    ok(registry_address, "override", "disable", "demo.Greeter", provider.address)
    ok(registry_address, "override", "enable", "demo.Greeter", provider.address)
    overrides = json.loads(ok(registry_address, "override", "list", "--json"))
    assert [o["changes"] for o in overrides] == ["weight=50"]


@pytest.mark.parametrize("command", [["services"], ["registry", "status"]])
def test_unreachable_zookeeper_is_one_line_and_exit_1(command: list[str]) -> None:
    address = f"zookeeper://127.0.0.1:{free_port()}"
    result = subprocess.run(
        [
            *cli_command(address, *command)[:3],
            "--timeout",
            "0.5",
            *cli_command(address, *command)[3:],
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 1
    # Said once, also by `registry status` (whose error already names the registry).
    assert result.stderr.splitlines() == [
        f"error: registry {address} unreachable (waited 0.5s): {start_advice(address)}"
    ]
