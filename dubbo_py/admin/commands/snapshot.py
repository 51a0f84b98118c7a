"""``dubbo-py snapshot``: router snapshots of live consumers, read from their QoS ports (Dubbo's
``enableRouterSnapshot`` ... ``getRecentRouterSnapshot`` commands). The consumers are found in
the registry as ``dubbo-py top`` finds them: every consumer URL of the service carrying a
``qos.port``."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

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
from dubbo_py.admin.top import Endpoint, discover, fetch_each
from dubbo_py.registry import layout

__all__ = ["consumers_of", "snapshot_group", "warn_unreachable"]

_APPLICATION = click.option(
    "--application", "application", default=None, help="Only the consumers of this application."
)


def _pattern(service: str) -> re.Pattern[str]:
    try:
        return re.compile(service)
    except re.error as exc:
        raise AdminError(
            f"SERVICE {service!r} is not a regular expression: {exc}", reason="invalid"
        ) from None


def consumers_of(
    service: str, application: str | None, categories: tuple[str, ...] = (layout.CONSUMERS,)
) -> list[Endpoint]:
    """The QoS ports of the applications registered for the services ``service`` matches (a
    service name, or a regular expression matching it in full), in ``categories``; an
    :class:`AdminError` when there is none."""
    env = env_of()
    pattern = _pattern(service)
    # A service key (group/interface:version) names its interface's folder.
    interface = service.split("/")[-1].split(":")[0]

    def matches(name: str) -> bool:
        return bool(pattern.fullmatch(name)) or name == interface

    endpoints, _ = discover(env.registry, None, categories, matches)
    if application is not None:
        endpoints = [e for e in endpoints if e.application == application]
    if not endpoints:
        who = "consumer" if categories == (layout.CONSUMERS,) else "application"
        raise AdminError(
            f"no {who} of {service!r} with a QoS port in registry {env.address}"
            + (f" (application {application})" if application else "")
            + " -- start it with qos_port= (or qos.port in dubbo.yaml, $DUBBO_PY_QOS_PORT)",
            reason="not-found",
        )
    return endpoints


def _each(
    service: str, application: str | None, path: str, read: Callable[[Endpoint, Any], Any]
) -> tuple[list[Any], list[dict[str, str]]]:
    """GET ``path`` of every consumer's QoS port; (what ``read`` makes of each answer, the
    consumers that did not answer)."""
    answers, failures = fetch_each(consumers_of(service, application), path, env_of().timeout)
    return [read(endpoint, answer) for endpoint, answer in answers], failures


def warn_unreachable(
    payload: dict[str, Any],
    failures: list[dict[str, str]],
    any_answer: bool,
    who: str = "consumer",
) -> None:
    """Print the applications (``who``) that did not answer; exit 1 when none answered."""
    for failure in failures:
        click.echo(
            f"warning: {failure['application']} ({failure['qos']}): {failure['error']}", err=True
        )
    if not any_answer and failures:
        raise AdminError(
            f"no {who}'s QoS port answered", reason="unreachable", payload=payload, printed=True
        )


@command_group("snapshot")
def snapshot_group() -> None:
    """Router snapshots of live consumers: how their last calls were routed, and why.

    SERVICE is a service name (demo.Greeter), a service key (demo.Greeter:1.0.0) or a regular
    expression matching them in full. The consumers are those registered with a QoS port.
    """


def _service_command(name: str) -> Callable[[Callable[..., None]], click.Command]:
    """Declare ``snapshot NAME SERVICE [--application APP]``, a command on the consumers of
    SERVICE."""

    def declare(f: Callable[..., None]) -> click.Command:
        f = json_option(f)
        f = _APPLICATION(f)
        f = click.argument("service")(f)
        return snapshot_group.command(name, context_settings=CONTEXT_SETTINGS)(f)

    return declare


def _switch(command: str, service: str, application: str | None) -> None:
    path = f"/{command}?service={quote(service)}"
    rows, failures = _each(
        service,
        application,
        path,
        lambda e, answer: {
            "application": e.application,
            "qos": e.address,
            "services": answer.get("services", []),
        },
    )
    payload = {"consumers": rows, "unreachable": failures}
    if env_of().json:
        emit_json(payload)
    else:
        print_table(
            None,
            ["APPLICATION", "QOS", "SERVICES SWITCHED"],
            ([r["application"], r["qos"], ", ".join(r["services"]) or "-"] for r in rows),
        )
    warn_unreachable(payload, failures, bool(rows))


@_service_command("enable")
def enable(service: str, application: str | None) -> None:
    """Start recording how the consumers of SERVICE route each call (costs a little per call
    while on; `dubbo-py snapshot disable` stops it).

    \b
    Examples:
      dubbo-py snapshot enable demo.Greeter
      dubbo-py snapshot enable 'demo\\..*' --application shop
    """
    _switch("enableRouterSnapshot", service, application)


@_service_command("disable")
def disable(service: str, application: str | None) -> None:
    """Stop recording the calls of SERVICE (what was recorded stays readable).

    \b
    Examples:
      dubbo-py snapshot disable demo.Greeter
    """
    _switch("disableRouterSnapshot", service, application)


@_service_command("show")
def show(service: str, application: str | None) -> None:
    """The router chain in force on each consumer of SERVICE: each router's priority, rule
    and version, and the providers it keeps out of the full list (per method, for a call
    without attachments).

    \b
    JSON: {"consumers": [{"application", "qos", "references": [{"service", "providers",
           "valid", "recording", "routers": [{"router", "priority", "rule", "version",
           "excluded": {method: [address]}}]}]}], "unreachable": [...]}

    \b
    Examples:
      dubbo-py snapshot show demo.Greeter
      dubbo-py snapshot show demo.Greeter --json
    """
    rows, failures = _each(
        service,
        application,
        f"/getRouterSnapshot?service={quote(service)}",
        lambda e, answer: {"application": e.application, "qos": e.address, **answer},
    )
    payload = {"consumers": rows, "unreachable": failures}
    if env_of().json:
        emit_json(payload)
    else:
        for row in rows:
            for ref in row.get("references", []):
                print_table(
                    f"{row['application']} ({row['qos']}) {ref['service']}: "
                    f"{len(ref['providers'])} providers, {len(ref['valid'])} not quarantined",
                    ["ROUTER", "PRIORITY", "RULE", "VERSION", "KEEPS OUT"],
                    (
                        [
                            r["router"],
                            r["priority"],
                            r["rule"] or "(built in)",
                            r["version"] or "",
                            "; ".join(f"{m}: {', '.join(a)}" for m, a in r["excluded"].items())
                            or "-",
                        ]
                        for r in ref["routers"]
                    ),
                )
    warn_unreachable(payload, failures, bool(rows))


@_service_command("recent")
def recent(service: str, application: str | None) -> None:
    """The last calls the consumers of SERVICE recorded (after `dubbo-py snapshot enable`):
    the call's attachments and arguments, each router's providers in and out, then the
    balancer's pick and every retry.

    \b
    Examples:
      dubbo-py snapshot recent demo.Greeter
      dubbo-py snapshot recent demo.Greeter:1.0.0 --json

    \b
    JSON: {"calls": [{"application", "qos", "time", "service", "method", "attachments",
           "arguments", "routers": [{"router", "priority", "rule", "version", "in", "out",
           "removed"}], "no_provider", "attempts": [{"provider", "retry", "outcome"}]}],
           "unreachable": [...]}
    """
    answers, failures = _each(
        service,
        application,
        f"/getRecentRouterSnapshot?service={quote(service)}",
        lambda e, answer: [
            {"application": e.application, "qos": e.address, **call}
            for call in answer.get("calls", [])
        ],
    )
    calls = sorted((c for answer in answers for c in answer), key=lambda c: c["time"])
    payload = {"calls": calls, "unreachable": failures}
    if env_of().json:
        emit_json(payload)
    else:
        if not calls and answers:
            click.echo("no call recorded (is it enabled? dubbo-py snapshot enable SERVICE)")
        for call in calls:
            _print_call(call)
    warn_unreachable(payload, failures, bool(answers))


def _print_call(call: dict[str, Any]) -> None:
    when = time.strftime("%H:%M:%S", time.localtime(call["time"]))
    when += f".{int(call['time'] * 1000) % 1000:03d}"
    attempts = " then ".join(
        f"{a['provider']} {a['outcome'] or '...'}" + (" (retry)" if a["retry"] else "")
        for a in call["attempts"]
    )
    title = (
        f"{when} {call['application']} {call['service']}.{call['method']}"
        f"({', '.join(call['arguments'])})"
    )
    if call["attachments"]:
        title += " " + ", ".join(f"{k}={v}" for k, v in call["attachments"].items())
    print_table(
        title + f" -> {attempts or call['no_provider'] or 'no attempt recorded'}",
        ["ROUTER", "RULE", "IN", "OUT", "REMOVED"],
        (
            [
                r["router"],
                f"{r['rule']}@{r['version']}" if r["rule"] else "",
                len(r["in"]),
                ", ".join(r["out"]) or "(none)",
                ", ".join(r["removed"]) or "-",
            ]
            for r in call["routers"]
        ),
    )
