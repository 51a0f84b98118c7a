"""``dubbo-py rules``: push, validate, conflicts, history, rollback, enable/disable, delete."""

from __future__ import annotations

import json

import pytest

from dubbo_py.registry import layout
from dubbo_py.registry.registry import Registry
from tests.support.cli_fixtures import CONSUMER, P1, P2, Cli, lines, run
from tests.support.memory_store import MemoryStore

__all__ = ["run"]

KEY = "demo.Greeter::.condition-router"
RULE_A = "scope: service\nkey: demo.Greeter\nconditions:\n  - '=> host = 10.0.0.5'\n"
RULE_B = "scope: service\nkey: demo.Greeter\nconditions:\n  - '=> host = 10.0.0.6'\n"
RULE_C = (
    "scope: service\nkey: demo.Greeter\nconditions:\n  - 'method = SayBye => host = 10.0.0.6'\n"
)


def push(run: Cli, text: str, *args: str, name: str = "rule.yaml") -> tuple[int, str, str]:
    result = run("rules", "push", run.file(name, text), *args)
    return result.exit_code, result.stdout, result.stderr


# ----------------------------------------------------------------------------- push & get


def test_push_takes_the_key_from_scope_and_key_and_get_reads_it_back(run: Cli) -> None:
    code, out, _ = push(run, RULE_A)
    assert code == 0, out
    assert KEY in out
    assert run.text(KEY) == RULE_A
    got = run("rules", "get", KEY)
    assert got.exit_code == 0
    assert got.stdout == RULE_A
    doc = run.json("rules", "get", KEY)
    assert doc == {
        "key": KEY,
        "kind": "condition-router",
        "version": 0,
        "enabled": True,
        "text": RULE_A,
    }


def test_service_key_with_version_and_group_and_application_scope(run: Cli) -> None:
    versioned = RULE_A.replace("key: demo.Greeter", "key: gray/demo.Greeter:1.0.0")
    assert push(run, versioned)[0] == 0
    assert run.text("demo.Greeter:1.0.0:gray.condition-router") == versioned
    colon = RULE_A.replace("key: demo.Greeter", "key: 'demo.Greeter:2.0.0:'")
    assert push(run, colon)[0] == 0
    assert run.text("demo.Greeter:2.0.0:.condition-router") == colon
    app = RULE_A.replace("scope: service", "scope: application").replace("demo.Greeter", "shop")
    assert push(run, app)[0] == 0
    assert run.text("shop.condition-router") == app


def test_application_condition_rules_are_validated_by_the_application_compiler(
    run: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses

    from dubbo_py.errors import RuleError
    from dubbo_py.registry import rule_kinds
    from dubbo_py.registry.rule_kinds import Target
    from dubbo_py.router.base import Router

    def refuse(text: str, source: str) -> list[Router]:
        raise RuleError("read by the application compiler", source=source)

    kinds = tuple(
        dataclasses.replace(k, compilers={**k.compilers, Target.APPLICATION: refuse})
        if k.name == "condition-router"
        else k
        for k in rule_kinds.RULE_KINDS
    )
    monkeypatch.setattr(rule_kinds, "RULE_KINDS", kinds)
    app = RULE_A.replace("scope: service", "scope: application").replace("demo.Greeter", "shop")
    code, _, err = push(run, app)
    assert code == 1
    assert "read by the application compiler" in err
    assert run.text("shop.condition-router") is None


def test_tag_rules_go_to_the_provider_application_and_shard_rules_need_a_key(run: Cli) -> None:
    tag = "key: greeter\nconditions: ['=> host = 10.0.0.5']\ntags: []\n"
    code, _, err = push(run, tag)
    assert code == 1 and "--kind" in err  # conditions and tags: ambiguous
    code, _, err = push(run, tag, "--kind", "tag-router")
    assert code == 0, err
    assert run.text("greeter.tag-router") == tag

    shard = "scheme: elasticsearch\nshards: 4\nconditions: ['=> host = 10.0.0.5']\n"
    code, _, err = push(run, shard, "--kind", "shard-router")
    assert code == 1
    assert "--key" in err and "shard-router" in err
    code, _, err = push(run, shard, "--key", "demo.Greeter:1.0.0:.shard-router")
    assert code == 0, err
    assert run.text("demo.Greeter:1.0.0:.shard-router") == shard


def test_key_option_sets_the_kind_and_must_agree_with_the_document(run: Cli) -> None:
    code, _, err = push(run, RULE_A, "--key", "demo.Other::.condition-router")
    assert code == 1
    assert "demo.Other::.condition-router" in err and "demo.Greeter" in err
    assert run.text("demo.Other::.condition-router") is None
    # Same interface, more precise version: fine (Dubbo rules often name only the interface).
    code, _, err = push(run, RULE_A, "--key", "demo.Greeter:1.0.0:.condition-router")
    assert code == 0, err
    code, _, err = push(run, RULE_A, "--key", KEY, "--kind", "tag-router")
    assert code == 1 and "contradicts" in err


@pytest.mark.parametrize(
    "key",
    ["demo.Greeter::.nonsense", "demo.Greeter:.condition-router", "a/b.condition-router"],
)
def test_malformed_keys_are_usage_errors(run: Cli, key: str) -> None:
    result = run("rules", "get", key)
    assert result.exit_code == 2
    assert len(lines(result.stderr)) == 1


def test_get_of_a_missing_key_suggests_the_closest(run: Cli) -> None:
    push(run, RULE_A)
    result = run("rules", "get", "demo.Greeter::.condition-route")
    assert result.exit_code == 2  # not even a key
    result = run("rules", "get", "demo.Greetr::.condition-router")
    assert result.exit_code == 1
    assert f"did you mean {KEY!r}" in result.stderr
    assert lines(result.stderr) == [result.stderr.strip()]


def test_unchanged_push_writes_nothing(run: Cli) -> None:
    push(run, RULE_A)
    code, out, _ = push(run, RULE_A)
    assert code == 0 and "unchanged" in out
    assert run.version(KEY) == 0
    assert len(run.json("rules", "history", KEY)) == 1


# ----------------------------------------------------------------------------- validation


def test_invalid_rule_is_refused_with_file_line_and_column_and_nothing_changes(run: Cli) -> None:
    push(run, RULE_A)
    bad = "scope: service\nkey: demo.Greeter\nconditions:\n  - 'host = 10.0.0.5'\n"
    path = run.file("bad.yaml", bad)
    result = run("rules", "push", path)
    assert result.exit_code == 1
    # The fake compiler puts the fault after the (missing) arrow: line 4, column 3 + 1 + 17.
    assert f"{path}:4:21:" in result.stderr
    assert lines(result.stderr) == [result.stderr.strip()]
    assert run.text(KEY) == RULE_A
    assert run.version(KEY) == 0
    assert len(run.json("rules", "history", KEY)) == 1


def test_yaml_syntax_errors_carry_the_yaml_mark(run: Cli) -> None:
    path = run.file("broken.yaml", "scope: service\nkey: [demo.Greeter\nconditions: []\n")
    result = run("rules", "push", path)
    assert result.exit_code == 1
    assert f"{path}:3:" in result.stderr
    assert "invalid YAML" in result.stderr


def test_validate_does_not_touch_the_registry(run: Cli) -> None:
    path = run.file("ok.yaml", RULE_A)
    result = run("rules", "validate", path)
    assert result.exit_code == 0, result.output
    assert "valid condition-router rule" in result.stdout
    assert run.opened == []
    data = run.json("rules", "validate", path)
    assert data == {
        "file": path,
        "key": KEY,
        "kind": "condition-router",
        "valid": True,
        "routers": [f"fake({path})#0"],
        "warnings": [],
        "notes": ["registry checks skipped (name a registry with --registry to run them)"],
    }
    bad = run.file("bad.yaml", RULE_A.replace("=> host", "=> hast"))
    result = run("rules", "validate", bad)
    assert result.exit_code == 1
    assert f"{bad}:4:" in result.stderr
    assert run.opened == []


def test_validate_without_a_key_uses_the_kind(run: Cli) -> None:
    shard = "scheme: solr\nconditions: ['=> host = 10.0.0.5']\n"
    path = run.file("shard.yaml", shard)
    result = run("rules", "validate", path, "--kind", "shard-router")
    assert result.exit_code == 0, result.output
    result = run("rules", "validate", run.file("what.yaml", "a: 1\n"))
    assert result.exit_code == 1
    assert "--kind" in result.stderr


def test_configurators_documents_are_validated_as_consumers_validate_them(run: Cli) -> None:
    good = (
        "configVersion: v3.0\nscope: service\nkey: demo.Greeter\nconfigs:\n"
        "  - addresses: ['10.0.0.5:50051']\n    parameters: {weight: 5}\n"
    )
    assert push(run, good)[0] == 0
    assert run.text("demo.Greeter::.configurators") == good
    code, _, err = push(run, good.replace("{weight: 5}", "{}"), name="empty.yaml")
    assert code == 1
    assert "empty.yaml:6:17: configs[0].parameters: must be a non-empty mapping" in err
    code, _, err = push(run, good.replace("configs:", "configs: [").rstrip(), name="syntax.yaml")
    assert code == 1 and "syntax.yaml:" in err and "invalid YAML" in err


# ----------------------------------------------------------------------------- conflicts


def test_a_concurrent_change_between_read_and_write_is_a_conflict(run: Cli) -> None:
    push(run, RULE_A)
    config = layout.config_path(KEY)

    def other_writer(op: str, path: str) -> None:
        if op == "set" and path == config:
            Registry(MemoryStore(run.tree)).put_config(KEY, RULE_C)
            run.tree.before_write = None

    run.tree.before_write = other_writer
    code, _, err = push(run, RULE_B)
    assert code == 1
    assert err.strip().splitlines()[-1] == (
        f"error: conflict: {KEY} changed since read (version 0); re-read and retry"
    )
    assert run.text(KEY) == RULE_C  # the other writer's text stands
    assert [e["action"] for e in run.json("rules", "history", KEY)] == ["push"]


def test_a_concurrent_create_is_a_conflict(run: Cli) -> None:
    config = layout.config_path(KEY)

    def other_writer(op: str, path: str) -> None:
        if op == "create" and path == config:
            Registry(MemoryStore(run.tree)).put_config(KEY, RULE_C)
            run.tree.before_write = None

    run.tree.before_write = other_writer
    code, _, err = push(run, RULE_A)
    assert code == 1
    assert "conflict" in err and "created since read" in err
    assert run.text(KEY) == RULE_C


def test_expect_version_pins_the_write(run: Cli) -> None:
    push(run, RULE_A)
    code, _, err = push(run, RULE_B, "--expect-version", "3")
    assert code == 1
    assert "at version 0, expected version 3" in err
    assert run.text(KEY) == RULE_A
    code, _, err = push(run, RULE_B, "--expect-version", "-1")
    assert code == 1 and "expected absent" in err
    code, _, err = push(run, RULE_B, "--expect-version", "0")
    assert code == 0, err
    assert run.version(KEY) == 1


def test_conflict_with_json_prints_an_error_object(run: Cli) -> None:
    push(run, RULE_A)
    result = run("rules", "push", run.file("b.yaml", RULE_B), "--expect-version", "5", "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {
        "error": f"conflict: {KEY} is at version 0, expected version 5; re-read and retry",
        "reason": "conflict",
    }


# ----------------------------------------------------------------------------- history


def test_history_records_every_change_with_operator_and_action(run: Cli) -> None:
    push(run, RULE_A)
    push(run, RULE_B, "--operator", "alice")
    assert run("rules", "disable", KEY).exit_code == 0
    assert run("--operator", "bob", "rules", "delete", KEY).exit_code == 0
    entries = run.json("rules", "history", KEY)
    assert [(e["seq"], e["action"], e["operator"]) for e in entries] == [
        (0, "push", "tester"),
        (1, "push", "alice"),
        (2, "disable", "tester"),
        (3, "delete", "bob"),
    ]
    assert entries[0]["text"] == RULE_A and entries[0]["version"] == 0
    assert entries[3]["text"] is None and entries[3]["deleted"] is True
    assert set(entries[0]) == {
        "seq",
        "action",
        "time",
        "time_ms",
        "operator",
        "version",
        "deleted",
        "restored",
        "writer",
        "text",
        "change",
    }
    assert entries[3]["change"] == "deleted"
    assert entries[0]["writer"] is None  # no identity: the in-memory registry has none
    table = run("rules", "history", KEY)
    assert table.exit_code == 0 and "alice" in table.stdout and "│ deleted" in table.stdout


def test_history_is_bounded(run: Cli) -> None:
    run.history_limit = 3
    for host in range(5):
        push(run, RULE_A.replace("10.0.0.5", f"10.0.1.{host}"))
    entries = run.json("rules", "history", KEY)
    assert [e["seq"] for e in entries] == [2, 3, 4]
    assert "10.0.1.4" in entries[-1]["text"]


def test_history_does_not_show_up_as_a_service(run: Cli) -> None:
    run.register(P1)
    push(run, RULE_A)
    assert [s["service"] for s in run.json("services")] == ["demo.Greeter"]


# ----------------------------------------------------------------------------- rollback


def test_rollback_restores_the_previous_text_and_steps_further_back(run: Cli) -> None:
    push(run, RULE_A)
    push(run, RULE_B)
    push(run, RULE_C)
    result = run("rules", "rollback", KEY)
    assert result.exit_code == 0, result.output
    assert run.text(KEY) == RULE_B
    assert "#1" in result.stdout
    assert run("rules", "rollback", KEY).exit_code == 0
    assert run.text(KEY) == RULE_A
    result = run("rules", "rollback", KEY)
    assert result.exit_code == 1
    assert "no earlier version" in result.stderr
    entries = run.json("rules", "history", KEY)
    assert [(e["action"], e["restored"]) for e in entries] == [
        ("push", None),
        ("push", None),
        ("push", None),
        ("rollback", 1),
        ("rollback", 0),
    ]


def test_rollback_to_a_given_entry_and_of_a_deletion(run: Cli) -> None:
    push(run, RULE_A)
    push(run, RULE_B)
    assert run("rules", "delete", KEY).exit_code == 0
    assert run.text(KEY) is None
    out = run.json("rules", "rollback", KEY)
    assert out["action"] == "rollback" and out["changed"] is True
    assert run.text(KEY) == RULE_B
    assert run("rules", "rollback", KEY, "--to", "0").exit_code == 0
    assert run.text(KEY) == RULE_A
    # Rolling back to the deletion entry deletes the rule again.
    assert run("rules", "rollback", KEY, "--to", "2").exit_code == 0
    assert run.text(KEY) is None
    missing = run("rules", "rollback", KEY, "--to", "42")
    assert missing.exit_code == 1 and "no history entry 42" in missing.stderr


def test_rollback_of_a_key_changed_outside_the_cli_restores_the_last_recorded(run: Cli) -> None:
    push(run, RULE_A)
    Registry(MemoryStore(run.tree)).put_config(KEY, RULE_C)  # e.g. Dubbo Admin
    assert run("rules", "rollback", KEY).exit_code == 0
    assert run.text(KEY) == RULE_A


def test_rollback_without_history_is_refused(run: Cli) -> None:
    result = run("rules", "rollback", KEY)
    assert result.exit_code == 1 and "no history" in result.stderr


# ------------------------------------------------------------------- enable/disable/delete


def test_disable_and_enable_flip_the_field_keeping_the_rest(run: Cli) -> None:
    original = "# owned by the shop team\n" + RULE_A.replace(
        "key: demo.Greeter\n", "key: demo.Greeter   # keep me\nenabled: true\n"
    )
    push(run, original)
    assert run("rules", "disable", KEY).exit_code == 0
    assert run.text(KEY) == original.replace("enabled: true", "enabled: false")
    assert run.json("rules", "get", KEY)["enabled"] is False
    assert run("rules", "enable", KEY).exit_code == 0
    assert run.text(KEY) == original
    assert run.version(KEY) == 2


def test_disable_adds_the_field_when_absent(run: Cli) -> None:
    push(run, RULE_A)
    out = run.json("rules", "disable", KEY)
    assert out == {
        "key": KEY,
        "action": "disable",
        "version": 1,
        "changed": True,
        "history_seq": 1,
        "registry": out["registry"],
    }
    assert run.text(KEY) == "enabled: false\n" + RULE_A


def test_enable_disable_delete_of_a_missing_rule_are_not_found(run: Cli) -> None:
    push(run, RULE_A)
    for verb in ("enable", "disable", "delete"):
        result = run("rules", verb, "demo.Greeter:1.0.0:.condition-router")
        assert result.exit_code == 1, verb
        assert "no rule at" in result.stderr and f"did you mean {KEY!r}" in result.stderr


def test_delete_is_versioned(run: Cli) -> None:
    push(run, RULE_A)
    result = run("rules", "delete", KEY, "--expect-version", "4")
    assert result.exit_code == 1 and "conflict" in result.stderr
    assert run.text(KEY) == RULE_A
    assert run("rules", "delete", KEY, "--expect-version", "0").exit_code == 0
    assert run.text(KEY) is None


def test_list_shows_kind_version_and_enabled(run: Cli) -> None:
    push(run, RULE_A)
    push(
        run, RULE_A.replace("scope: service", "scope: application").replace("demo.Greeter", "shop")
    )
    run("rules", "disable", "shop.condition-router")
    Registry(MemoryStore(run.tree)).put_config("dubbo.properties", "x=1")  # not a rule
    assert run.json("rules", "list") == [
        {
            "key": KEY,
            "kind": "condition-router",
            "target": "demo.Greeter::",
            "version": 0,
            "enabled": True,
        },
        {
            "key": "shop.condition-router",
            "kind": "condition-router",
            "target": "shop",
            "version": 1,
            "enabled": False,
        },
    ]
    assert [r["key"] for r in run.json("rules", "list", "--service", "demo.Greeter")] == [KEY]


# ----------------------------------------------------------------------------- dry run


def test_dry_run_shows_the_diff_and_each_consumers_reach_and_writes_nothing(run: Cli) -> None:
    run.register(P1, P2, CONSUMER)
    versioned = "demo.Greeter:1.0.0:.condition-router"
    push(run, RULE_A.replace("key: demo.Greeter", "key: demo.Greeter:1.0.0"))
    new = RULE_C.replace("key: demo.Greeter", "key: demo.Greeter:1.0.0")
    result = run("rules", "push", run.file("new.yaml", new), "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["key"] == versioned and report["dry_run"] is True
    assert report["current_version"] == 0
    assert "-  - '=> host = 10.0.0.5'" in report["diff"]
    assert "+  - 'method = SayBye => host = 10.0.0.6'" in report["diff"]
    reach = {r["method"]: (r["before"], r["after"], r["changed"]) for r in report["reach"]}
    assert reach == {
        "SayBye": (["10.0.0.5:50051"], ["10.0.0.6:50051"], True),
        "SayHello": (["10.0.0.5:50051"], ["10.0.0.5:50051", "10.0.0.6:50051"], True),
    }
    assert {r["application"] for r in report["reach"]} == {"shop"}
    assert run.version(versioned) == 0  # nothing written
    human = run("rules", "push", run.file("new.yaml", new), "--dry-run", "--method", "SayBye")
    assert human.exit_code == 0
    assert "changed" in human.stdout and "SayHello" not in human.stdout


def test_dry_run_hints_at_the_keys_consumers_watch(run: Cli) -> None:
    run.register(P1, CONSUMER)
    result = run("rules", "push", run.file("a.yaml", RULE_A), "--dry-run", "--json")
    report = json.loads(result.stdout)
    assert report["reach"] == []
    assert any("demo.Greeter:1.0.0:.condition-router" in n for n in report["notes"])
