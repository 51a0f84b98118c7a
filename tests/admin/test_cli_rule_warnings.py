"""``rules validate`` / ``rules push`` warn about valid rules that will not do what was meant
(keys that never match, unknown services, consumers left with no provider), and refuse them
with ``--strict``. These run the real rule compilers, as consumers do."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli_fixtures import CONSUMER, P1, P2, Cli, lines
from tests.support.memory_store import MemoryTree

KEY = "demo.Greeter:1.0.0:.condition-router"
REGISTRY = ("--registry", "zookeeper://127.0.0.1:1")  # names a registry; the test store answers


def condition(rule: str, *, key: str = "demo.Greeter:1.0.0", extra: str = "") -> str:
    return f"scope: service\nkey: {key}\n{extra}conditions:\n  - '{rule}'\n"


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cli]:
    """The CLI on an in-memory registry holding two providers and a consumer of demo.Greeter."""
    monkeypatch.setenv("USER", "tester")
    monkeypatch.delenv("DUBBO_PY_REGISTRY", raising=False)
    run = Cli(MemoryTree(), tmp_path)
    run.register(P1, P2, CONSUMER)
    yield run


def warnings_of(stderr: str) -> list[str]:
    return [ln for ln in lines(stderr) if ln.startswith("warning: ")]


def test_a_clean_rule_gives_no_warning(cli: Cli) -> None:
    path = cli.file("ok.yaml", condition("method = SayHello => host = 10.0.0.5"))
    result = cli(*REGISTRY, "rules", "validate", path)
    assert result.exit_code == 0, result.output
    assert warnings_of(result.stderr) == []
    assert cli(*REGISTRY, "rules", "validate", path, "--strict").exit_code == 0


@pytest.mark.parametrize(
    ("rule", "typo", "meant"),
    [
        ("methd = SayHello => host = 10.0.0.5", "methd", "method"),
        ("=> prot = 50051", "prot", "port"),
        ("=> verison = 1.0.0", "verison", "version"),
    ],
)
def test_a_key_no_registered_url_has_is_a_warning_with_a_suggestion(
    cli: Cli, rule: str, typo: str, meant: str
) -> None:
    path = cli.file("typo.yaml", condition(rule))
    result = cli(*REGISTRY, "rules", "validate", path)
    assert result.exit_code == 0, result.output
    [warning] = warnings_of(result.stderr)
    assert f"conditions[0]: key {typo!r}" in warning and "never matches" in warning
    assert f"did you mean {meant!r}?" in warning
    strict = cli(*REGISTRY, "rules", "validate", path, "--strict")
    assert strict.exit_code == 1
    assert "refused with --strict: 1 warning" in strict.stderr


def test_push_warns_and_writes_but_strict_refuses_and_writes_nothing(cli: Cli) -> None:
    path = cli.file("typo.yaml", condition("methd = SayHello => host = 10.0.0.5"))
    strict = cli("rules", "push", path, "--strict", "--json")
    assert strict.exit_code == 1
    refused = json.loads(strict.stdout)
    assert refused["reason"] == "invalid"
    assert [w["code"] for w in refused["warnings"]] == ["never-matches"]
    assert cli.text(KEY) is None
    pushed = cli("rules", "push", path, "--json")
    assert pushed.exit_code == 0, pushed.output
    assert [w["code"] for w in json.loads(pushed.stdout)["warnings"]] == ["never-matches"]
    assert len(warnings_of(pushed.stderr)) == 1
    assert cli.text(KEY) is not None


def test_a_rule_for_an_unregistered_service_suggests_the_registered_one(cli: Cli) -> None:
    path = cli.file("svc.yaml", condition("=> host = 10.0.0.5", key="demo.Greter:1.0.0"))
    result = cli("rules", "push", path)
    assert result.exit_code == 0, result.output
    [warning] = warnings_of(result.stderr)
    assert "no service 'demo.Greter' is registered; did you mean 'demo.Greeter'?" in warning
    assert cli.text("demo.Greter:1.0.0:.condition-router") is not None
    tag = cli.file("tag.yaml", "key: greeterr\ntags:\n  - name: gray\n    addresses: [10.0.0.5]\n")
    result = cli("rules", "push", tag, "--strict")
    assert result.exit_code == 1
    assert "application 'greeterr' is registered; did you mean 'greeter'?" in result.stderr
    assert cli.text("greeterr.tag-router") is None


def test_a_key_no_consumer_reads_is_a_warning_naming_the_one_read(cli: Cli) -> None:
    # the consumer asks for version 1.0.0, so it reads demo.Greeter:1.0.0:.condition-router
    path = cli.file("unversioned.yaml", condition("=> host = 10.0.0.5", key="demo.Greeter"))
    result = cli("rules", "push", path, "--strict")
    assert result.exit_code == 1
    [warning] = warnings_of(result.stderr)
    assert "demo.Greeter::.condition-router: no registered consumer reads this key" in warning
    assert f"did you mean {KEY!r}?" in warning


def test_a_forced_rule_leaving_a_consumer_without_providers_is_a_warning(cli: Cli) -> None:
    forced = condition("=> host = 10.9.9.9", extra="force: true\n")
    path = cli.file("forced.yaml", forced)
    result = cli("rules", "push", path, "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    codes = {w["code"] for w in report["warnings"]}
    assert codes == {"no-provider"}
    messages = [w["message"] for w in report["warnings"]]
    assert any(
        "consumer shop on 10.0.0.1 would have no provider for SayHello" in m for m in messages
    )
    assert cli("rules", "push", path, "--strict").exit_code == 1
    assert cli.text(KEY) is None
    # without force the rule falls back to every provider: nobody is starved, no warning
    unforced = cli.file("unforced.yaml", condition("=> host = 10.9.9.9"))
    assert warnings_of(cli("rules", "push", unforced, "--strict").stderr) == []


def test_arguments_without_an_index_are_accepted_with_a_warning_even_offline(cli: Cli) -> None:
    path = cli.file("args.yaml", condition("arguments = alice => host = 10.0.0.5"))
    result = cli("rules", "validate", path)  # no registry named: not read
    assert result.exit_code == 0, result.output
    [warning] = warnings_of(result.stderr)
    assert "key 'arguments' never matches" in warning
    assert cli.opened == []
    assert cli("rules", "validate", path, "--strict").exit_code == 1


def test_a_document_without_scope_is_valid_and_a_contradicting_scope_warns(cli: Cli) -> None:
    bare = cli.file("bare.yaml", "conditions:\n  - '=> host = 10.0.0.5'\n")
    result = cli("rules", "push", bare, "--key", KEY, "--strict")
    assert result.exit_code == 0, result.output
    assert cli.text(KEY) is not None
    app = cli.file(
        "app.yaml", condition("=> host = 10.0.0.5").replace("scope: service", "scope: application")
    )
    result = cli("rules", "validate", app, "--key", KEY)
    assert result.exit_code == 0, result.output
    [warning] = warnings_of(result.stderr)
    assert f"scope 'application' but {KEY} is a service key" in warning


def test_tag_rule_match_keys_are_checked_too(cli: Cli) -> None:
    tag = (
        "configVersion: v3.0\nkey: greeter\ntags:\n  - name: gray\n    match:\n"
        "      - key: verison\n        value: {exact: 1.0.0}\n"
    )
    result = cli(*REGISTRY, "rules", "validate", cli.file("tag.yaml", tag))
    assert result.exit_code == 0, result.output
    [warning] = warnings_of(result.stderr)
    assert "tags[0].match[0]: key 'verison'" in warning and "'version'" in warning


def test_validate_with_a_named_registry_that_cannot_be_read_still_validates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from dubbo_py.admin.cli import cli as dubbo_py_cli

    monkeypatch.delenv("DUBBO_PY_REGISTRY", raising=False)
    rule = tmp_path / "ok.yaml"
    rule.write_text(condition("=> host = 10.0.0.5"), encoding="utf-8")
    missing = f"sqlite://{tmp_path}/absent.db"
    result = CliRunner().invoke(
        dubbo_py_cli, ["--registry", missing, "rules", "validate", str(rule)]
    )
    assert result.exit_code == 0, result.output
    assert "note: registry checks skipped" in result.stderr
    assert not (tmp_path / "absent.db").exists()  # nothing created


def test_configurator_fields_not_acted_on_are_warnings_and_strict_refuses(cli: Cli) -> None:
    # A typo in match (params for param) would widen the rule to every provider, and a v3.0
    # match in a v2.7 document is not read (as in Dubbo): both named, refused with --strict.
    text = (
        "configVersion: v2.7\nscope: service\nkey: demo.Greeter:1.0.0\nconfigs:\n"
        "  - side: provider\n    match: {param: [{key: zone, value: {exact: a}}]}\n"
        "    parameters: {disabled: true}\n"
        "  - side: provider\n    parameters: {weight: 5}\n    priority: 2\n"
    )
    path = cli.file("overrides.yaml", text)
    key = "demo.Greeter:1.0.0:.configurators"
    result = cli(*REGISTRY, "rules", "validate", path, "--key", key)
    assert result.exit_code == 0, result.output
    found = warnings_of(result.stderr)
    assert any(
        "'configs[0].match' is ignored by dubbo-py: read only with configVersion v3.0" in w
        for w in found
    )
    assert any("'configs[1].priority' is ignored by dubbo-py: not a field" in w for w in found)
    strict = cli("rules", "push", path, "--key", key, "--strict")
    assert strict.exit_code == 1
    assert cli.text(key) is None
