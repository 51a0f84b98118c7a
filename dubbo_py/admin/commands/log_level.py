"""``dubbo-py log-level [LEVEL]``: the ``dubbo_py`` log level of live applications, shown or
switched through their QoS ports (Dubbo's ``loggerInfo`` and ``switchLogLevel``)."""

from __future__ import annotations

from urllib.parse import quote

import click

from dubbo_py.admin.commands.snapshot import consumers_of, warn_unreachable
from dubbo_py.admin.common import (
    CONTEXT_SETTINGS,
    AdminError,
    emit_json,
    env_of,
    json_option,
    print_table,
)
from dubbo_py.admin.top import Endpoint, discover, fetch_each
from dubbo_py.qos.log_levels import LOG_LEVELS, ROOT_LOGGER
from dubbo_py.registry import layout

__all__ = ["log_level"]


def _targets(service: str | None, application: str | None) -> list[Endpoint]:
    if service is not None:
        return consumers_of(service, application, (layout.PROVIDERS, layout.CONSUMERS))
    env = env_of()
    endpoints, _ = discover(env.registry, None)
    if application is not None:
        endpoints = [e for e in endpoints if e.application == application]
    if not endpoints:
        raise AdminError(
            f"no application with a QoS port in registry {env.address}"
            + (f" (application {application})" if application else ""),
            reason="not-found",
        )
    return endpoints


@click.command("log-level", context_settings=CONTEXT_SETTINGS)
@click.argument("level", required=False)
@click.option("--service", default=None, help="Only the applications serving or calling it.")
@click.option("--application", default=None, help="Only this application.")
@click.option(
    "--logger",
    default=ROOT_LOGGER,
    show_default=True,
    help="The logger to switch: dubbo_py, one below it (dubbo_py.router), or dubbo.accesslog.",
)
@json_option
def log_level(level: str | None, service: str | None, application: str | None, logger: str) -> None:
    """Show the dubbo_py log level of live applications, or switch it to LEVEL without a
    restart (ALL, TRACE, DEBUG, INFO, WARN, ERROR, OFF, or Dubbo's 0-6).

    The applications are those registered with a QoS port (providers and consumers).

    \b
    Examples:
      dubbo-py log-level
      dubbo-py log-level DEBUG --application shop
      dubbo-py log-level INFO --service demo.Greeter

    \b
    JSON: {"applications": [{"application", "qos", "logger", "level", "previous"}],
           "unreachable": [...]}   (showing: "level" and "levels", each logger's own)
    """
    if level is not None:
        text = level.strip().upper()
        if text not in LOG_LEVELS and not (text.isdigit() and int(text) <= 6):
            known = ", ".join(LOG_LEVELS)
            raise AdminError(
                f"LEVEL {level!r} is not a log level; known: {known}, 0-6", reason="invalid"
            )
    path = (
        "/loggerInfo"
        if level is None
        else f"/switchLogLevel?level={quote(level)}&logger={quote(logger)}"
    )
    answers, failures = fetch_each(_targets(service, application), path, env_of().timeout)
    rows = [
        {"application": endpoint.application, "qos": endpoint.address, **answer}
        for endpoint, answer in answers
    ]
    payload = {"applications": rows, "unreachable": failures}
    if env_of().json:
        emit_json(payload)
    elif level is None:
        print_table(
            None,
            ["APPLICATION", "QOS", "DUBBO_PY LEVEL", "LOGGERS WITH THEIR OWN LEVEL"],
            (
                [
                    r["application"],
                    r["qos"],
                    r["level"],
                    ", ".join(f"{k}={v}" for k, v in r.get("levels", {}).items()) or "-",
                ]
                for r in rows
            ),
        )
    else:
        print_table(
            None,
            ["APPLICATION", "QOS", "LOGGER", "LEVEL", "WAS"],
            ([r["application"], r["qos"], r["logger"], r["level"], r["previous"]] for r in rows),
        )
    warn_unreachable(payload, failures, bool(rows), "application")
