"""``route test``: which providers an invocation would reach under some rules (a scenario file),
evaluated by the code a live consumer runs (:mod:`dubbo_py.admin.rules.scenario`)."""

from __future__ import annotations

import click

from dubbo_py.admin.common import (
    CONTEXT_SETTINGS,
    AdminError,
    command_group,
    emit_json,
    env_of,
    json_option,
    print_table,
)
from dubbo_py.admin.input_file import InputFileError, read_input_file
from dubbo_py.admin.rules import scenario
from dubbo_py.errors import RuleError

__all__ = ["route_group"]


@command_group("route")
def route_group() -> None:
    """Try routing rules without a registry."""


@route_group.command("test", context_settings=CONTEXT_SETTINGS)
@click.argument("scenario_file", metavar="SCENARIO", type=click.Path(dir_okay=False))
@json_option
def route_test(scenario_file: str) -> None:
    """Show which providers an invocation reaches under the rules of a SCENARIO file.

    The scenario names the consumer, the invocation, the providers and the rules (see
    docs/cli.md). Exit 0 when the scenario is valid, even if no provider survives; exit 1
    naming the rule and its line and column when it is not.

    Each provider reached also shows its weight for the invocation's method: the configured one
    (after override rules) and the effective one the load balancers use at the scenario's
    now_ms (warmup applied; the wall clock when now_ms is absent).

    \b
    Examples:
      dubbo-py route test scenario.yaml
      dubbo-py route test scenario.yaml --json

    \b
    JSON: {"providers": [as written, input order],
           "trace": [{"router", "in", "out"}],
           "weights": [{"provider", "configured", "weight"}], "now_ms": N,
           "error": null | message}
    """
    env = env_of()
    if env.several:
        # Not a registry command: there is nothing to run once per registry.
        raise click.UsageError(
            "route test reads no registry: the scenario file names the providers, the rules "
            "and the invocation, so several --registry would all give the same answer; give "
            "none (to try the rules of a registry, 'rules push --dry-run' takes several)"
        )
    try:
        text = read_input_file(scenario_file)
        result = scenario.run_text(text, scenario_file)
    except InputFileError as exc:
        message = str(exc)
        raise AdminError(message, reason="invalid", payload=_failure(message)) from None
    except scenario.ScenarioError as exc:
        raise AdminError(str(exc), reason="invalid", payload=_failure(str(exc))) from None
    except RuleError as exc:
        message = f"{scenario_file}: {exc}"
        raise AdminError(message, reason="invalid", payload=_failure(message)) from None
    if env.json:
        emit_json(result.to_json())
        return
    print_table(
        f"providers reached (weights at now_ms={result.now_ms})",
        ["#", "PROVIDER", "WEIGHT", "CONFIGURED"],
        ([i + 1, w.provider, w.weight, w.configured] for i, w in enumerate(result.weights)),
        empty="no provider is reached",
    )
    print_table(
        "trace",
        ["ROUTER", "IN", "OUT", "WHY EMPTY"],
        ([s.router, s.count_in, s.count_out, s.reason or ""] for s in result.trace),
        empty="(no router ran)",
    )


def _failure(message: str) -> dict[str, object]:
    return {"providers": [], "trace": [], "weights": [], "now_ms": None, "error": message}
