"""The CLI knows provider-application condition rules and affinity rules: ``rules validate`` /
``push`` check them with the consumers' compilers and name every field with no effect
(``--strict`` refuses), ``route test`` runs them, the rule kinds list them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli_fixtures import CONSUMER, P1, P2, Cli, lines
from tests.support.memory_store import MemoryTree

AFFINITY = (
    "configVersion: v3.1\nscope: application\nkey: greeter\nruntime: true\n"
    "affinityAware:\n  key: region\n  ratio: 50\n"
)


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cli]:
    monkeypatch.setenv("USER", "tester")
    monkeypatch.delenv("DUBBO_PY_REGISTRY", raising=False)
    run = Cli(MemoryTree(), tmp_path)
    run.register(P1, P2, CONSUMER)
    yield run


def _warnings(stderr: str) -> list[str]:
    return [ln for ln in lines(stderr) if ln.startswith("warning: ")]


def test_affinity_rule_validates_and_names_fields_with_no_effect(cli: Cli) -> None:
    path = cli.file("aff.yaml", AFFINITY + "owner: team-a\n")
    result = cli("rules", "validate", path)
    assert result.exit_code == 0, result.output
    warned = _warnings(result.stderr)
    assert any("'runtime' is ignored by dubbo-py" in w for w in warned), warned
    assert any("'owner' is not a field of this document" in w for w in warned), warned
    assert not any("'scope'" in w or "'key'" in w for w in warned), warned
    strict = cli("rules", "validate", path, "--strict")
    assert strict.exit_code != 0
    clean = cli.file("clean.yaml", "configVersion: v3.1\naffinityAware: {key: region}\n")
    assert cli("rules", "validate", clean, "--kind", "affinity-router").exit_code == 0


def test_affinity_rule_errors_name_the_field(cli: Cli) -> None:
    path = cli.file("bad.yaml", AFFINITY.replace("ratio: 50", "ratio: 150"))
    result = cli("rules", "validate", path)
    assert result.exit_code != 0
    assert "affinityAware.ratio must be within 0..100" in result.output + result.stderr


def test_affinity_rule_push_goes_to_the_provider_application_key(cli: Cli) -> None:
    path = cli.file(
        "aff.yaml",
        "configVersion: v3.1\nscope: application\nkey: greeter\n"
        "affinityAware:\n  key: region\n  ratio: 50\n",
    )
    result = cli("rules", "push", path)
    assert result.exit_code == 0, result.output
    shown = cli("rules", "get", "greeter.affinity-router")
    assert "affinityAware" in shown.output


def test_condition_fields_with_no_effect_are_named(cli: Cli) -> None:
    text = (
        "scope: application\nkey: greeter\nruntime: false\ndynamic: true\npriority: 3\n"
        "conditions:\n  - '=> host = 10.0.0.5'\n"
    )
    path = cli.file("cond.yaml", text)
    result = cli("rules", "validate", path)
    assert result.exit_code == 0, result.output
    warned = " ".join(_warnings(result.stderr))
    for name in ("runtime", "dynamic", "priority"):
        assert f"'{name}' is ignored by dubbo-py" in warned, warned


def test_route_test_runs_affinity_and_provider_application_condition_rules(cli: Cli) -> None:
    consumer = "consumer://10.0.0.1/demo.Greeter?application=shop&region=x"
    scenario = (
        f"consumer: {consumer}\n"
        "providers:\n"
        "  - tri://10.0.0.5:50051/demo.Greeter?application=greeter&region=x&zone=a\n"
        "  - tri://10.0.0.6:50051/demo.Greeter?application=greeter&region=y&zone=b\n"
        "  - tri://10.0.0.7:50051/demo.Greeter?application=greeter&region=x&zone=b\n"
        "invocation: {method: SayHello}\n"
        "rules:\n"
        "  - config: affinity-router\n"
        "    yaml: |\n"
        "      configVersion: v3.1\n"
        "      scope: application\n"
        "      key: greeter\n"
        "      affinityAware: {key: region, ratio: 60}\n"
        "  - config: condition-router\n"
        "    yaml: |\n"
        "      scope: application\n"
        "      key: greeter\n"
        "      conditions: ['=> zone = b']\n"
    )
    path = cli.file("scenario.yaml", scenario)
    out = json.loads(cli("route", "test", path, "--json").output)
    assert [_host(p) for p in out["providers"]] == ["10.0.0.7"]
    steps = {s["router"]: (s["in"], s["out"]) for s in out["trace"]}
    # The affinity rule of the providers' application (135): 2 of 3 in region x >= 60 %; then
    # the providers' application's condition rule (145, not 150: greeter is not shop).
    [affinity_step] = [v for k, v in steps.items() if k.startswith("affinity")]
    assert affinity_step == (3, 2)
    names = [s["router"] for s in out["trace"]]
    assert names.index(next(n for n in names if n.startswith("affinity"))) < names.index(
        next(n for n in names if n.startswith("condition"))
    )


def _host(url: str) -> str:
    return url.split("//", 1)[1].split(":", 1)[0]


def test_reach_counts_the_provider_application_rule_for_other_applications(cli: Cli) -> None:
    # Providers of application greeter, a consumer of application shop: shop's consumers read
    # greeter.condition-router (at 145), so a forced rule matching no provider starves them.
    registry = ("--registry", "zookeeper://127.0.0.1:1")
    text = "scope: application\nkey: greeter\nforce: true\nconditions:\n  - '=> host = 10.9.9.9'\n"
    path = cli.file("cond.yaml", text)
    result = cli(*registry, "rules", "validate", path)
    assert result.exit_code == 0, result.output
    starved = [w for w in _warnings(result.stderr) if "no provider" in w]
    assert starved and "shop" in starved[0], _warnings(result.stderr)
    assert cli(*registry, "rules", "validate", path, "--strict").exit_code != 0
