"""``dubbo-py route test`` and the scenario module behind it."""

from __future__ import annotations

import json
import textwrap

import pytest

from dubbo_py.admin.rules import scenario
from dubbo_py.errors import RuleError
from tests.support.cli_fixtures import Cli, lines, run

__all__ = ["run"]

SCENARIO = """\
consumer: consumer://10.0.0.1/demo.Greeter?application=shop
invocation:
  method: SayHello
  arguments: ["alice", 3]
  attachments: {dubbo.tag: gray, retries: 2}
now_ms: 1764675600000
providers:
  - tri://10.0.0.7:50051/demo.Greeter?version=1.0.0
  - tri://10.0.0.5:50051/demo.Greeter?version=1.0.0
  - tri://10.0.0.6:50051/demo.Greeter?version=2.0.0
rules:
"""


def scenario_file(run: Cli, rules: str, base: str = SCENARIO) -> str:
    return run.file("scenario.yaml", base + textwrap.dedent(rules))


def test_survivors_are_printed_as_written_in_input_order_with_a_trace(run: Cli) -> None:
    path = scenario_file(
        run,
        """\
        - condition: "method = SayHello => host = 10.0.0.5,10.0.0.7"
        - config: condition-router
          yaml: |
            scope: service
            key: demo.Greeter
            conditions: ["=> host = 10.0.0.7,10.0.0.6"]
        """,
    )
    out = run.json("route", "test", path)
    assert out == {
        "providers": ["tri://10.0.0.7:50051/demo.Greeter?version=1.0.0"],
        "trace": [
            {"router": "fake(rules[0])", "in": 3, "out": 2},
            {"router": "fake(rules[1])#0", "in": 2, "out": 1},
        ],
        "weights": [
            {
                "provider": "tri://10.0.0.7:50051/demo.Greeter?version=1.0.0",
                "configured": 100,
                "weight": 100,
            }
        ],
        "now_ms": 1764675600000,
        "error": None,
    }
    human = run("route", "test", path)
    assert human.exit_code == 0
    assert "tri://10.0.0.7:50051/demo.Greeter?version=1.0.0" in human.stdout
    assert "fake(rules[0])" in human.stdout
    assert run.opened == []  # no registry involved


def test_bare_condition_fields_map_to_the_url_parameters(run: Cli) -> None:
    # priority orders the chain; enabled=false makes the rule pass everything through.
    path = scenario_file(
        run,
        """\
        - condition: "=> host = 10.0.0.6"
          priority: 5
        - condition: "=> host = 10.0.0.5,10.0.0.6"
          priority: 1
        - condition: "=> host = 10.0.0.9"
          enabled: false
          force: true
        """,
    )
    out = run.json("route", "test", path)
    assert out["providers"] == ["tri://10.0.0.6:50051/demo.Greeter?version=2.0.0"]
    assert [(t["router"], t["in"], t["out"]) for t in out["trace"]] == [
        ("fake(rules[2])", 3, 3),
        ("fake(rules[1])", 3, 2),
        ("fake(rules[0])", 2, 1),
    ]


def test_url_rules_and_an_empty_result_is_still_success(run: Cli) -> None:
    path = scenario_file(
        run,
        """\
        - url: "condition://0.0.0.0/demo.Greeter?category=routers&rule=%3D%3E+host+%3D+10.9.9.9"
        """,
    )
    result = run("route", "test", path, "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {
        "providers": [],
        "trace": [{"router": "fake(rules[0])", "in": 3, "out": 0}],
        "weights": [],
        "now_ms": 1764675600000,
        "error": None,
    }
    human = run("route", "test", path)
    assert human.exit_code == 0 and "no provider is reached" in human.stdout


def test_no_rules_reaches_every_provider(run: Cli) -> None:
    out = run.json("route", "test", scenario_file(run, "", SCENARIO.replace("rules:\n", "")))
    assert len(out["providers"]) == 3 and out["trace"] == []


def test_an_invalid_condition_is_located_in_the_scenario_file(run: Cli) -> None:
    path = scenario_file(
        run,
        """\
        - condition: "=> host = 10.0.0.5"
        - condition: "method = SayHello => hst = 1"
        """,
    )
    result = run("route", "test", path, "--json")
    assert result.exit_code == 1
    # rules[1] is on line 13 and its text starts at column 15 (after '- condition: "'); the
    # fake compiler reports column 21 of the rule (just after '=>'): 14 + 21 = 35.
    message = f"{path}:13:35: rules[1]: expected 'host = H'"
    assert json.loads(result.stdout) == {
        "providers": [],
        "trace": [],
        "weights": [],
        "now_ms": None,
        "error": message,
    }
    assert lines(result.stderr) == [f"error: {message}"]


def test_an_invalid_document_is_located_inside_its_yaml_block(run: Cli) -> None:
    path = scenario_file(
        run,
        """\
        - config: condition-router
          yaml: |
            scope: service
            key: demo.Greeter
            conditions:
              - "=> hst = 1"
        """,
    )
    result = run("route", "test", path)
    assert result.exit_code == 1
    # Line 17 of the file is '      - "=> hst = 1"': the rule text starts at column 10 and
    # the fake compiler reports column 3 of it.
    assert result.stderr.strip() == f"error: {path}:17:12: rules[0]: expected 'host = H'"


@pytest.mark.parametrize(
    ("rules", "base", "fragment"),
    [
        ("", "providers: []\n", ":1:1: the scenario needs a 'consumer' URL"),
        ("", "consumer: consumer://x/demo.G\n", "needs a 'providers' list"),
        ("", "consumer: 'consumer://x:port/demo.G'\nproviders: []\n", ":1:11: consumer: bad port"),
        (
            "",
            SCENARIO + "  - condition: '=> host = 1'\n  - bogus: 1\n",
            ":13:5: rules[1] needs exactly one",
        ),
        ("", SCENARIO.replace("now_ms", "now_msec"), ":6:1: scenario: unknown field 'now_msec'"),
        ("", SCENARIO.replace("method: SayHello", "method: [1]"), ":3:11: invocation.method"),
        (
            "",
            SCENARIO + "  - config: mock-router\n    yaml: 'x: 1'\n",
            ":12:13: rules[0].config must be",
        ),
        (
            "",
            SCENARIO + "  - condition: '=> host = 1'\n    force: maybe\n",
            ":13:12: rules[0].force",
        ),
        ("", "consumer: [\n", ":2:1: invalid YAML"),
        ("", "- 1\n", ":1:1: a scenario must be a YAML mapping"),
    ],
)
def test_invalid_scenarios_name_the_field_and_position(
    run: Cli, rules: str, base: str, fragment: str
) -> None:
    path = scenario_file(run, rules, base)
    result = run("route", "test", path, "--json")
    assert result.exit_code == 1, result.output
    error = json.loads(result.stdout)["error"]
    assert error.startswith(path) and fragment in error, error


def test_configurators_apply_before_the_routers(run: Cli) -> None:
    path = scenario_file(
        run,
        """\
        - url: "override://10.0.0.7:50051/demo.Greeter?category=configurators&disabled=true"
        - config: configurators
          yaml: |
            configs:
              - addresses: ["10.0.0.6"]
                parameters: {weight: 5}
        - condition: "=> host = 10.0.0.6,10.0.0.7"
        """,
    )
    out = run.json("route", "test", path)
    assert out == {
        "providers": ["tri://10.0.0.6:50051/demo.Greeter?version=2.0.0"],
        "trace": [
            {"router": "configurators", "in": 3, "out": 2},
            {"router": "fake(rules[2])", "in": 2, "out": 1},
        ],
        "weights": [
            {
                "provider": "tri://10.0.0.6:50051/demo.Greeter?version=2.0.0",
                "configured": 5,
                "weight": 5,
            }
        ],
        "now_ms": 1764675600000,
        "error": None,
    }


WARMUP_SCENARIO = """consumer: consumer://10.0.0.1/demo.Greeter?application=shop
invocation: {method: SayHello}
now_ms: 1764675660000
providers:
  - tri://10.0.0.5:50051/demo.Greeter?timestamp=1764675600000
  - tri://10.0.0.6:50051/demo.Greeter?timestamp=1764675000000&SayHello.weight=300
  - tri://10.0.0.7:50051/demo.Greeter?timestamp=1764675700000
  - tri://10.0.0.8:50051/demo.Greeter?timestamp=1764675600000&warmup=120000
rules:
  - config: configurators
    yaml: |
      configs:
        - addresses: ["10.0.0.5"]
          parameters: {weight: 200}
        - addresses: ["10.0.0.8"]
          parameters: {weight: 0}
"""


def test_weights_are_the_effective_weights_after_overrides_and_warmup_at_now_ms(
    run: Cli,
) -> None:
    out = run.json("route", "test", run.file("warmup.yaml", WARMUP_SCENARIO))
    weights = {w["provider"].split("?")[0]: (w["configured"], w["weight"]) for w in out["weights"]}
    assert weights == {
        # one minute into the default 10-minute warmup, weight 200 set by the override: a tenth
        "tri://10.0.0.5:50051/demo.Greeter": (200, 20),
        # warmed up long ago; the method's own weight wins over the default
        "tri://10.0.0.6:50051/demo.Greeter": (300, 300),
        # started after now_ms (its clock is ahead): weight 1, as Dubbo
        "tri://10.0.0.7:50051/demo.Greeter": (100, 1),
        # drained by the override: 0 whatever its warmup
        "tri://10.0.0.8:50051/demo.Greeter": (0, 0),
    }
    assert [w["provider"] for w in out["weights"]] == out["providers"]
    assert out["now_ms"] == 1764675660000
    human = run("route", "test", run.file("warmup.yaml", WARMUP_SCENARIO))
    assert human.exit_code == 0
    assert "now_ms=1764675660000" in human.stdout and "WEIGHT" in human.stdout


def test_weights_follow_the_invocation_method_and_the_scenario_clock() -> None:
    text = WARMUP_SCENARIO.replace("{method: SayHello}", "{method: Other}").replace(
        "now_ms: 1764675660000", "now_ms: 1764675900000"
    )
    result = scenario.run_text(text)
    by_address = {w.provider.split("/")[2]: (w.configured, w.weight) for w in result.weights}
    # five minutes in: half of 200; the SayHello-only weight does not apply to Other
    assert by_address["10.0.0.5:50051"] == (200, 100)
    assert by_address["10.0.0.6:50051"] == (100, 100)


def test_without_now_ms_the_weights_are_read_at_the_wall_clock() -> None:
    text = WARMUP_SCENARIO.replace("now_ms: 1764675660000\n", "")
    result = scenario.run_text(text)
    assert result.now_ms > 1764675660000  # the wall clock, and it is said which
    by_address = {w.provider.split("/")[2]: w.weight for w in result.weights}
    assert by_address["10.0.0.5:50051"] == 200  # long warmed up by now


def test_an_invalid_configurators_document_is_refused(run: Cli) -> None:
    path = scenario_file(
        run,
        """\
        - config: configurators
          yaml: |
            configs:
              - parameters: {}
        """,
    )
    result = run("route", "test", path)
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"error: {path}:15:21: rules[0]: configs[0].parameters: must be a non-empty mapping"
    )


def test_missing_file_is_refused(run: Cli) -> None:
    result = run("route", "test", str(run.tmp / "nope.yaml"), "--json")
    assert result.exit_code == 1
    assert "cannot read" in json.loads(result.stdout)["error"]


def test_load_builds_the_invocation_the_routers_see() -> None:
    loaded = scenario.load(SCENARIO, "s.yaml")
    invocation = loaded.invocation
    assert invocation.service == "demo.Greeter"
    assert invocation.method == "SayHello"
    assert invocation.arguments == ("alice", 3)
    assert dict(invocation.attachments) == {"dubbo.tag": "gray", "retries": "2"}
    assert loaded.now_ms == 1764675600000
    assert loaded.consumer.get_str("application") == "shop"
    assert loaded.providers[1] == "tri://10.0.0.5:50051/demo.Greeter?version=1.0.0"


def test_scenario_errors_are_rule_errors_with_positions() -> None:
    with pytest.raises(RuleError) as info:
        scenario.load("consumer: 'x:/'\nproviders: 3\n", "s.yaml")
    assert isinstance(info.value, scenario.ScenarioError)
    assert (info.value.line, info.value.column) == (2, 12)
