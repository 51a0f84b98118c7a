"""``dubbo-py`` over several registries: ``--registry`` repeated or ``dubbo.yaml`` registry
ids; ``services``, ``providers`` and ``rules list`` label each row with its registry and zone;
``rules push`` reports per registry; an unreachable registry does not hide the others."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from dubbo_py.admin.cli import cli
from dubbo_py.admin.common import CliEnv
from dubbo_py.admin.connection import RegistryUnreachable
from dubbo_py.registry.registry import Registry
from dubbo_py.registry.store.address import RegistryAddress
from dubbo_py.registry.store.base import Store
from dubbo_py.url import URL
from tests.support.cli_fixtures import CONSUMER, P1, P2
from tests.support.memory_store import MemoryStore, MemoryTree

A = "zookeeper://zk-a:2181"
B = "zookeeper://zk-b:2181"
DOWN = "zookeeper://zk-down:2181"
KEY = "demo.Greeter::.condition-router"
RULE = "scope: service\nkey: demo.Greeter\nconditions:\n  - '=> host = 10.0.0.5'\n"
CONFIG = f"""
application: shop
registries:
  a: {{address: "{A}", zone: A}}
  b: {{address: "{B}", zone: B}}
"""


class Trees:
    """One in-memory registry per address; ``DOWN`` never answers."""

    def __init__(self) -> None:
        self.trees = {A: MemoryTree(), B: MemoryTree()}
        self.live: list[MemoryStore] = []

    def opener(self, address: RegistryAddress, _timeout: float) -> Store:
        if str(address) == DOWN:
            raise RegistryUnreachable(f"{address} does not answer")
        return MemoryStore(self.trees[str(address)])

    def register(self, address: str, *urls: str) -> None:
        store = MemoryStore(self.trees[address])
        self.live.append(store)
        for url in urls:
            Registry(store).register(URL.parse(url))

    def run(self, *args: str, cwd: Path | None = None) -> Result:
        obj = CliEnv(opener=self.opener, config_path=str(cwd / "dubbo.yaml") if cwd else None)
        return CliRunner().invoke(cli, list(args), obj=obj)

    def json(self, *args: str, cwd: Path | None = None) -> Any:
        result = self.run(*args, "--json", cwd=cwd)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)


def test_providers_show_the_registry_and_zone_they_came_from(tmp_path: Path) -> None:
    trees = Trees()
    trees.register(A, P1)
    trees.register(B, P2)
    (tmp_path / "dubbo.yaml").write_text(CONFIG)
    rows = trees.json(
        "providers", "demo.Greeter", "--registry", "a", "--registry", "b", cwd=tmp_path
    )
    assert [(r["registry"], r["zone"], r["address"]) for r in rows] == [
        ("a", "A", "10.0.0.5:50051"),
        ("b", "B", "10.0.0.6:50051"),
    ]
    table = trees.run("providers", "demo.Greeter", "--registry", A, "--registry", B)
    assert table.exit_code == 0, table.output
    header = table.stdout.splitlines()[1]
    assert [w for w in header.split() if w.isalpha()][:3] == ["REGISTRY", "ZONE", "ADDRESS"]
    assert A in table.stdout and B in table.stdout
    # Known to neither: not found, naming both.
    missing = trees.run("providers", "demo.Nope", "--registry", A, "--registry", B)
    assert missing.exit_code == 1
    assert f"registries {A}, {B}" in missing.stderr


def test_services_per_registry_and_one_id_alone(tmp_path: Path) -> None:
    trees = Trees()
    trees.register(A, P1, P2)
    (tmp_path / "dubbo.yaml").write_text(CONFIG)
    rows = trees.json("--registry", "a", "--registry", "b", "services", cwd=tmp_path)
    assert [(r["registry"], r["service"], r["providers"]) for r in rows] == [
        ("a", "demo.Greeter", 2)
    ]
    # One id: the usual output, on that registry.
    (one,) = trees.json("services", "--registry", "a", cwd=tmp_path)
    assert one["providers"] == 2 and "registry" not in one
    unknown = trees.run("services", "--registry", "c", cwd=tmp_path)
    assert unknown.exit_code == 2
    assert "'c'" in unknown.stderr and "registries: a, b" in unknown.stderr


def test_rules_push_reports_per_registry_and_survives_one_down(tmp_path: Path) -> None:
    trees = Trees()
    trees.register(A, P1)
    rule = tmp_path / "rule.yaml"
    rule.write_text(RULE)
    rows = trees.json("rules", "push", str(rule), "--registry", A, "--registry", B)
    assert [(r["registry"], r["key"], r["changed"], r["version"]) for r in rows] == [
        (A, KEY, True, 0),
        (B, KEY, True, 0),
    ]
    for address in (A, B):
        doc = Registry(MemoryStore(trees.trees[address])).get_config(KEY)
        assert doc is not None and doc.text == RULE
    listed = trees.json("rules", "list", "--registry", A, "--registry", B)
    assert [(r["registry"], r["key"]) for r in listed] == [(A, KEY), (B, KEY)]

    result = trees.run("rules", "push", str(rule), "--registry", DOWN, "--registry", A)
    assert result.exit_code == 1
    assert f"registry {DOWN}" in result.stderr
    assert "pushed demo.Greeter" in result.stdout  # the table's title
    lines = result.stdout.splitlines()
    assert any(DOWN in line and "error" in line for line in lines), result.stdout
    assert any(A in line and "unchanged" in line for line in lines), result.stdout


def test_consumers_and_rule_reads_are_labelled_and_one_missing_is_an_error(
    tmp_path: Path,
) -> None:
    trees = Trees()
    trees.register(A, P1, CONSUMER)
    trees.register(B, P2, CONSUMER)
    (tmp_path / "dubbo.yaml").write_text(CONFIG)
    ids = ("--registry", "a", "--registry", "b")
    rows = trees.json("consumers", "demo.Greeter", *ids, cwd=tmp_path)
    assert [(r["registry"], r["zone"], r["application"]) for r in rows] == [
        ("a", "A", "shop"),
        ("b", "B", "shop"),
    ]
    rule = tmp_path / "rule.yaml"
    rule.write_text(RULE)
    pushed = trees.json("rules", "push", str(rule), "--registry", A)
    assert pushed["version"] == 0
    # In A only: B's row is an error, A's is printed, the exit status is 1.
    result = trees.run("rules", "history", KEY, "--json", "--registry", A, "--registry", B)
    assert result.exit_code == 1
    assert [(r["registry"], r["action"]) for r in json.loads(result.stdout)] == [(A, "push")]
    assert f"error: registry {B}: no rule at {KEY}" in result.stderr
    got = trees.run("rules", "get", KEY, "--registry", A, "--registry", B)
    assert got.exit_code == 1
    assert got.stdout.startswith(f"# registry {A}: version 0\n{RULE}")
    # A dry run diffs against, and looks at the consumers of, each registry.
    dry = trees.json("rules", "push", str(rule), "--dry-run", "--registry", A, "--registry", B)
    assert [(d["registry"], d["current_version"]) for d in dry] == [(A, 0), (B, None)]
    assert [bool(d["diff"]) for d in dry] == [False, True]
    assert all("consumers watch: demo.Greeter:1.0.0" in " ".join(d["notes"]) for d in dry)
    down = trees.run(
        "rules",
        "push",
        str(rule),
        "--dry-run",
        "--json",
        "--registry",
        DOWN,
        *ids[2:],
        cwd=tmp_path,
    )
    assert down.exit_code == 1
    rows = json.loads(down.stdout)
    assert [(r["registry"], r.get("reason"), r.get("dry_run")) for r in rows] == [
        (DOWN, "unreachable", None),
        ("b", None, True),
    ]


def test_top_merges_an_application_found_in_several_registries() -> None:
    from dubbo_py.admin.top import discover_each

    trees = Trees()
    qos = P1 + "&qos.port=22222"
    trees.register(A, qos)
    trees.register(B, qos, P2 + "&qos.port=33333")
    registries = [
        ((name, zone), Registry(MemoryStore(trees.trees[address])))
        for name, zone, address in (("a", "A", A), ("b", "B", B))
    ]
    endpoints, providers = discover_each(registries, None)
    assert [(e.address, e.registries) for e in endpoints] == [
        ("10.0.0.5:22222", (("a", "A"), ("b", "B"))),
        ("10.0.0.6:33333", (("b", "B"),)),
    ]
    assert len(providers) == 2


def test_commands_of_one_registry_say_so_and_the_refusals_give_their_reason(
    tmp_path: Path,
) -> None:
    trees = Trees()
    several = ("--registry", A, "--registry", B)
    result = trees.run("registry", "status", *several)
    assert result.exit_code == 2
    assert "takes one --registry" in result.stderr
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text("providers: []\n")
    route = trees.run("route", "test", str(scenario), *several)
    assert route.exit_code == 2
    assert "route test reads no registry" in route.stderr
    rollback = trees.run("rules", "rollback", KEY, "--to", "0", *several)
    assert rollback.exit_code == 2
    assert "each registry numbers its own history" in rollback.stderr
