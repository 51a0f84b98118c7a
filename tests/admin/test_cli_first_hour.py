"""Issue 35 (a newcomer's first hour): every write names the registry it went to, a rule pushed
where nobody reads it is warned about, and ``providers`` shows the parameters rules route on."""

from __future__ import annotations

from tests.support.cli_fixtures import CONSUMER, P1, P2, Cli, lines, run

__all__ = ["run"]

KEY = "demo.Greeter:1.0.0:.condition-router"
RULE = "scope: service\nkey: demo.Greeter:1.0.0\nconditions:\n  - '=> host = 10.0.0.5'\n"
ZK = "zookeeper://127.0.0.1:2181"
#: A provider with a parameter of its own (the tutorial's ``warehouse``) besides dubbo-py's.
NORTH = (
    "tri://10.0.0.7:50051/demo.Greeter?application=greeter&methods=SayHello&version=1.0.0"
    "&warehouse=north&timestamp=1&pid=42&release=0.9&dubbo=2.0.2&side=provider&anyhost=false"
    "&interface=demo.Greeter&weight=100&warmup=0"
)


def _warnings(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("warning: ")]


def test_a_push_names_the_registry_it_went_to(run: Cli) -> None:
    run.register(P1, P2, CONSUMER)
    pushed = run("rules", "push", run.file("r.yaml", RULE), env={"DUBBO_PY_REGISTRY": ZK})
    assert pushed.exit_code == 0, pushed.output
    assert pushed.stdout == f"pushed {KEY} to {ZK} (version 0, history #0)\n"
    assert _warnings(pushed.stderr) == []  # providers and a consumer read it there
    disabled = run("rules", "disable", KEY, env={"DUBBO_PY_REGISTRY": ZK})
    assert disabled.stdout == f"disabled {KEY} in {ZK} (version 1, history #1)\n"
    rolled = run("rules", "rollback", KEY, env={"DUBBO_PY_REGISTRY": ZK})
    assert rolled.stdout == f"rolled back {KEY} to #0 in {ZK} (version 2, history #2)\n"
    assert run.json("rules", "enable", KEY)["registry"].startswith("sqlite://")


def test_an_override_names_the_registry_it_went_to(run: Cli) -> None:
    run.register(P1, P2)
    done = run(
        "override", "weight", "demo.Greeter", "10.0.0.5:50051", "50", env={"DUBBO_PY_REGISTRY": ZK}
    )
    assert done.exit_code == 0, done.output
    assert done.stdout.rstrip().endswith(f" in {ZK}"), done.stdout


def test_a_push_where_nobody_reads_the_rule_warns_and_still_writes(run: Cli) -> None:
    """The tutorial's forgotten ``export``: the service registered there once, gone now."""
    run.register(P1, CONSUMER)
    assert run.live is not None
    run.live.close()  # the provider and the consumer stopped: only the service folder stays
    run.live = None
    pushed = run("rules", "push", run.file("r.yaml", RULE), env={"DUBBO_PY_REGISTRY": ZK})
    assert pushed.exit_code == 0, pushed.output
    assert _warnings(pushed.stderr) == [
        f"warning: {KEY}: no provider or consumer of demo.Greeter is registered in {ZK} now, so "
        "nothing there reads this rule (is this the registry your services use? name it with "
        "--registry or DUBBO_PY_REGISTRY)"
    ]
    assert pushed.stdout == f"pushed {KEY} to {ZK} (version 0, history #0)\n"
    assert run.version(KEY) == 0  # warned, not refused
    strict = run("rules", "push", run.file("r.yaml", RULE.replace("5'", "6'")), "--strict")
    assert strict.exit_code == 1  # --strict makes it a refusal, as for every check


def test_a_push_to_an_empty_registry_warns(run: Cli) -> None:
    pushed = run("rules", "push", run.file("r.yaml", RULE))
    assert pushed.exit_code == 0
    [warning] = _warnings(pushed.stderr)
    assert "no provider or consumer of demo.Greeter is registered in sqlite://" in warning


def test_providers_show_their_own_parameters(run: Cli) -> None:
    """Issue 35, finding 6: the parameters rules route on (``warehouse``) were not shown."""
    run.register(NORTH, P1)
    table = lines(run("providers", "demo.Greeter").stdout)
    header = [c.strip() for c in table[1].split("┃")]
    assert header[-1] == "PARAMETERS"
    rows = {r.split("│")[0].strip(): r.split("│")[-1].strip() for r in table[3:]}
    assert rows == {"10.0.0.5:50051": "", "10.0.0.7:50051": "warehouse=north"}
    [north] = [r for r in run.json("providers", "demo.Greeter") if r["address"] == "10.0.0.7:50051"]
    assert north["parameters"] == {"warehouse": "north"}
    everything = run.json("providers", "demo.Greeter", "--all-parameters")
    [north] = [r for r in everything if r["address"] == "10.0.0.7:50051"]
    assert north["parameters"]["pid"] == "42" and north["parameters"]["warehouse"] == "north"
    wide = run("providers", "demo.Greeter", "--all-parameters").stdout
    assert "pid=42" in wide
