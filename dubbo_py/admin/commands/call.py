"""``call``: one call of a service method from JSON, routed and balanced as a consumer's."""

from __future__ import annotations

import json

import click

from dubbo_py.admin.call import DEFAULT_APPLICATION, CallError, CallRequest, call_method
from dubbo_py.admin.common import (
    CONTEXT_SETTINGS,
    AdminError,
    attachment_pairs,
    console,
    emit_json,
    env_of,
    json_option,
    print_table,
    seconds_option,
)
from dubbo_py.admin.reflect import ReflectionError

__all__ = ["call"]

#: Seconds to wait for the providers and the rules in force before calling (at least).
CHECK_WAIT = 15.0


@click.command("call", context_settings=CONTEXT_SETTINGS)
@click.argument("service")
@click.argument("method")
@click.argument("request", default="{}", required=False)
@click.option("--version", default="", help="Call providers of this version.")
@click.option("--group", default="", help="Call providers of this group.")
@click.option(
    "--attachment",
    "attachments",
    multiple=True,
    metavar="NAME=VALUE",
    help="An attachment sent with the call (repeat; dubbo.tag=gray picks tagged providers).",
)
@click.option(
    "--application",
    default=DEFAULT_APPLICATION,
    show_default=True,
    help="The consumer application to call as (rules naming consumers see this name).",
)
@seconds_option("--call-timeout", 10.0, "Seconds the call may take.")
@json_option
def call(
    service: str,
    method: str,
    request: str,
    version: str,
    group: str,
    attachments: tuple[str, ...],
    application: str,
    call_timeout: float,
) -> None:
    """Call METHOD of SERVICE with REQUEST (JSON, default {}) through the registry's routing
    rules, override rules and load balancing, as a consumer would; print the JSON reply, the
    provider that served it and the route trace.

    The request and reply types are read from a provider's gRPC server reflection (dubbo-py
    providers serve it unless turned off). The call is made by a consumer registered as
    --application for its duration. Unary methods only.

    \b
    Examples:
      dubbo-py call demo.Greeter SayHello '{"name": "ada"}' --version 1.0.0
      dubbo-py call demo.Greeter SayHello '{"name": "ada"}' --attachment dubbo.tag=gray --json

    \b
    JSON: {"reply", "provider", "attempts", "routed", "trace": [{"router", "in", "out"}]}
    """
    env = env_of()
    address = str(env.address)
    try:
        result = call_method(
            address,
            CallRequest(
                service,
                method,
                request,
                version=version,
                group=group,
                attachments=attachment_pairs(attachments),
                application=application,
                timeout=call_timeout,
            ),
            auth=env.auth,
            check=max(env.timeout, CHECK_WAIT),
        )
    except (CallError, ReflectionError) as exc:
        raise AdminError(str(exc), reason="call") from None
    if env.json:
        emit_json(result.to_json())
        return
    click.echo(json.dumps(result.reply, indent=2, ensure_ascii=False))
    out = console()
    out.print(f"provider: {result.provider or '?'}")
    if len(result.attempts) > 1:
        out.print(f"attempts: {', '.join(result.attempts)}")
    out.print(f"routed to: {', '.join(result.routed) or '-'}")
    print_table(
        "route trace",
        ["ROUTER", "IN", "OUT", "WHY EMPTY"],
        ([s.router, s.count_in, s.count_out, s.reason or ""] for s in result.trace),
        empty="(no router ran)",
    )
