"""``dubbo-py rules validate / push``: input size limits and rules too costly to run.

The CLI checks a rule with the consumers' own compilers (real ones here, not the fakes), so a
catastrophic regex is accepted and harmless (RE2), a construct RE2 lacks is refused with its
position, and input past ZooKeeper's node limit is refused with that reason, at once.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli_fixtures import Cli
from tests.support.memory_store import MemoryTree

PROVIDER = (
    "tri://127.0.0.1:50051/demo.Greeter?application=greeter&methods=SayHello&blob=" + "a" * 20_000
)
CONSUMER = "consumer://127.0.0.9/demo.Greeter?application=shop&category=consumers"
TAG_RULE = (
    "configVersion: v3.0\nkey: greeter\ntags:\n  - name: gray\n    match:\n"
    "      - key: blob\n        value: {{regex: '{regex}'}}\n"
)


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.setenv("USER", "tester")
    monkeypatch.delenv("DUBBO_PY_REGISTRY", raising=False)
    return Cli(MemoryTree(), tmp_path)


def test_push_from_dev_zero_is_refused_at_once_naming_the_limit(cli: Cli) -> None:
    result = cli("rules", "push", "/dev/zero", "--key", "greeter.tag-router")
    assert result.exit_code == 1
    assert "/dev/zero is larger than 1024 KiB" in result.stderr
    assert "ZooKeeper" in result.stderr


def test_a_five_megabyte_rule_is_refused_for_its_size_not_the_connection(cli: Cli) -> None:
    big = TAG_RULE.format(regex="x") + "#" + "x" * (5 * 1024 * 1024) + "\n"
    for command in ("validate", "push"):
        result = cli("rules", command, cli.file("big.yaml", big), "--json")
        assert result.exit_code == 1
        error = json.loads(result.stdout)["error"]
        assert "larger than 1024 KiB" in error and "node size limit" in error
        assert "connect" not in error
    assert cli.text("greeter.tag-router") is None


def test_validate_accepts_a_catastrophic_regex_and_dry_run_finishes(cli: Cli) -> None:
    cli.register(PROVIDER, CONSUMER)
    path = cli.file("tag.yaml", TAG_RULE.format(regex="((.+)+)+Q"))
    assert cli("rules", "validate", path).exit_code == 0
    dry = cli.json("rules", "push", path, "--dry-run")
    assert dry["dry_run"] is True and dry["key"] == "greeter.tag-router"
    assert [row["after"] for row in dry["reach"]] == [["127.0.0.1:50051"]]


def test_validate_refuses_a_lookahead_naming_line_and_column(cli: Cli) -> None:
    path = cli.file("tag.yaml", TAG_RULE.format(regex="gray(?=-eu)"))
    result = cli("rules", "validate", path)
    assert result.exit_code == 1
    assert f"{path}:7:" in result.stderr
    assert "tags[0].match[0].value" in result.stderr
    assert "column 5" in result.stderr and "lookahead" in result.stderr and "RE2" in result.stderr


def test_providers_does_not_list_a_node_that_is_not_a_url(
    cli: Cli, caplog: pytest.LogCaptureFixture
) -> None:
    from dubbo_py.registry import layout
    from tests.support.memory_store import MemoryStore

    cli.register("tri://127.0.0.1:50051/demo.Greeter?application=greeter")
    store = MemoryStore(cli.tree)
    path = layout.category_path("demo.Greeter", layout.PROVIDERS)
    store.create(f"{path}/hello+world", b"")
    listed = cli.json("providers", "demo.Greeter")
    assert [p["address"] for p in listed] == ["127.0.0.1:50051"]
    assert f"{path}/hello+world" in caplog.text and "not a Dubbo URL" in caplog.text


def test_dry_run_notes_a_rule_over_the_bind_budget(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dubbo_py.admin.rules import scenario

    # A budget no rule can meet: the dry run must refuse the rule as consumers would.
    monkeypatch.setattr(scenario, "DEFAULT_RULE_BUDGET", 1e-9)
    cli.register(PROVIDER, CONSUMER)
    path = cli.file("tag.yaml", TAG_RULE.format(regex="((.+)+)+Q"))
    dry = cli.json("rules", "push", path, "--dry-run")
    notes = " ".join(dry["notes"])
    assert "refused (as consumers would)" in notes
    assert "binding tag:greeter" in notes and "rule budget" in notes
