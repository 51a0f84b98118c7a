"""``call``: one call of a service method from JSON, routed and balanced as a consumer's; or,
with ``--list``, the service's methods and their signatures.

gRPC services (Triple providers) are described by a provider's server reflection
(:mod:`dubbo_py.admin.call`); Java-interface services whose providers are ``dubbo://``, or
``tri://`` without IDL (Triple's wrapper around Hessian2), are called generically, typed by the
service definition in the metadata report (:mod:`dubbo_py.admin.java_call`, which also decides
the path: :func:`~dubbo_py.admin.java_call.call_path`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from dubbo_py.admin.call import (
    DEFAULT_APPLICATION,
    CallError,
    CallRequest,
    call_method,
    describe,
)
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
from dubbo_py.admin.reflect import ReflectionError, ServiceShape
from dubbo_py.registry.registry import Registry
from dubbo_py.registry.service_definition import split_type_list

if TYPE_CHECKING:  # imported where used: the CLI starts without the Java codec
    from dubbo_py.admin.java_call import CallPath, JavaMethods

__all__ = ["call"]

#: Seconds to wait for the providers and the rules in force before calling (at least).
CHECK_WAIT = 15.0


#: ``--protocol`` values: how the service is called.
PROTOCOLS = ("tri", "dubbo")


@click.command("call", context_settings=CONTEXT_SETTINGS)
@click.argument("service")
@click.argument("method", required=False)
@click.argument("request", required=False)
@click.option("--version", default="", help="Call providers of this version.")
@click.option("--group", default="", help="Call providers of this group.")
@click.option(
    "--list",
    "list_methods",
    is_flag=True,
    help="List the service's methods and their signatures instead of calling one.",
)
@click.option(
    "--types",
    metavar="TYPE,...",
    default=None,
    help="Java interfaces only: the Java parameter types to call with "
    "(java.lang.Long,estate.User), where the metadata report has no signatures or the method "
    "is overloaded.",
)
@click.option(
    "--protocol",
    type=click.Choice(PROTOCOLS),
    default=None,
    help="Call the tri:// or the dubbo:// (Java interface, generic call) providers; tri:// ones "
    "are gRPC (typed by reflection) unless their URLs name a serialization other than protobuf "
    "(Triple without IDL, called generically) or --no-idl is given; default: gRPC when the "
    "service has gRPC providers, else its Java-interface ones.",
)
@click.option(
    "--no-idl",
    is_flag=True,
    help="Take the tri:// providers as a Java interface exported over Triple without IDL "
    "(generic call, Hessian2) although their URLs name no serialization.",
)
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
    method: str | None,
    request: str | None,
    version: str,
    group: str,
    list_methods: bool,
    types: str | None,
    protocol: str | None,
    no_idl: bool,
    attachments: tuple[str, ...],
    application: str,
    call_timeout: float,
) -> None:
    """Call METHOD of SERVICE with REQUEST through the registry's providers, as a consumer
    would; print the JSON reply. With --list, print the methods and their signatures.

    A gRPC service (tri:// providers): REQUEST is the request message in JSON (default {});
    its types come from a provider's gRPC server reflection, and the call goes through the
    routing rules, override rules and load balancing, printing the provider that served it
    and the route trace. Unary methods only.

    A Java-interface service (dubbo:// providers, or tri:// ones without IDL, as Apache Dubbo
    exports a plain interface; see --protocol and --no-idl): REQUEST is a
    JSON array of the arguments (default []; a bean is a JSON object, "class" optional); the
    parameter types come from the service definition the provider stored in the metadata
    report, or from --types. Dates are ISO 8601 texts, BigDecimal numbers or texts; the reply
    prints dates as ISO 8601 UTC and BigDecimal as a JSON string, then the provider that
    answered. A Java exception prints its class and message (and causes) and exits 1.

    The call is made by a consumer registered as --application for its duration.

    \b
    Examples:
      dubbo-py call demo.Greeter SayHello '{"name": "ada"}' --version 1.0.0
      dubbo-py call demo.Greeter SayHello '{"name": "ada"}' --attachment dubbo.tag=gray --json
      dubbo-py call com.example.UserService --list --version 1.0.0
      dubbo-py call com.example.UserService getUser '[7]' --version 1.0.0

    \b
    JSON (tri): {"reply", "provider", "attempts", "routed", "trace": [{"router", "in", "out"}]}
    JSON (Java): {"reply", "protocol", "provider", "attempts", "method", "types", "signature",
    "providers", "notes"}
    JSON (--list): {"service", "protocol", "methods": [...], ...}
    """
    env = env_of()
    address = str(env.address)
    # Imported here: a gRPC-only `call` needs none of the Java call code at start-up.
    from dubbo_py.admin.java_call import call_path

    path = call_path(env.registry, service, version, group, protocol, no_idl=no_idl)
    if types is not None and not path.generic:
        raise click.UsageError("--types is for Java-interface services (generic calls) only")
    if list_methods:
        if method is not None:
            raise click.UsageError("--list takes no METHOD (it lists them all)")
        _list(env.registry, path, service, version, group)
        return
    if method is None:
        raise click.UsageError(f"give a METHOD of {service}, or --list to see them")
    call_request = CallRequest(
        service,
        method,
        request if request is not None else ("[]" if path.generic else "{}"),
        version=version,
        group=group,
        attachments=attachment_pairs(attachments),
        application=application,
        timeout=call_timeout,
    )
    if path.generic:
        _call_java(address, call_request, types, env.auth, max(env.timeout, CHECK_WAIT), path)
        return
    try:
        result = call_method(
            address, call_request, auth=env.auth, check=max(env.timeout, CHECK_WAIT)
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


def _protocols_label(methods: JavaMethods) -> str:
    return " and ".join(
        "tri:// (no IDL)" if p == "tri" else f"{p}://" for p in methods.protocol.split(",")
    )


def _list(registry: Registry, path: CallPath, service: str, version: str, group: str) -> None:
    env = env_of()
    if path.generic:
        from dubbo_py.admin.java_call import describe_java

        try:
            methods = describe_java(
                registry, service, version, group, path.protocol, no_idl=path.no_idl
            )
        except CallError as exc:
            raise AdminError(str(exc), reason="not-found") from None
        if env.json:
            emit_json(methods.to_json())
            return
        out = console()
        if methods.definition is None:
            out.print(
                f"{service} ({_protocols_label(methods)}): method names from its provider URLs"
            )
            print_table(None, ["METHOD"], ([n] for n in methods.names), empty="(none listed)")
            click.echo(f"warning: {methods.why_no_signatures}", err=True)
            return
        definition = methods.definition
        out.print(f"{service} ({_protocols_label(methods)}): signatures from {definition.source}")
        print_table(
            None,
            ["METHOD", "PARAMETERS", "RETURNS"],
            (
                [m.name, ", ".join(m.parameter_types) or "-", m.return_type]
                for m in definition.sorted_methods()
            ),
        )
        beans = sorted((t for t in definition.types.values() if t.properties), key=str)
        print_table(
            "types",
            ["TYPE", "PROPERTIES"],
            (
                [t.type, ", ".join(f"{k}: {v}" for k, v in sorted(t.properties.items()))]
                for t in sorted(beans, key=lambda t: t.type)
            ),
        )
        enums = sorted((t for t in definition.types.values() if t.enums), key=lambda t: t.type)
        print_table("enums", ["TYPE", "CONSTANTS"], ([t.type, ", ".join(t.enums)] for t in enums))
        return
    try:
        shape = describe(registry, service, version, group)
    except ReflectionError as exc:
        raise AdminError(str(exc), reason="not-found") from None
    if env.json:
        emit_json(_shape_json(shape))
        return
    console().print(f"{service} (tri://): types from a provider's gRPC server reflection")
    print_table(
        None,
        ["METHOD", "REQUEST", "RESPONSE", "STREAMING"],
        (
            [
                m.name,
                m.request_type,
                str(m.response_class.DESCRIPTOR.full_name),
                _streaming(m.client_streaming, m.server_streaming),
            ]
            for m in shape.methods
        ),
    )


def _streaming(client: bool, server: bool) -> str:
    return {(False, False): "-", (True, False): "client", (False, True): "server"}.get(
        (client, server), "both"
    )


def _shape_json(shape: ServiceShape) -> dict[str, object]:
    return {
        "service": shape.name,
        "protocol": "tri",
        "source": "gRPC server reflection",
        "methods": [
            {
                "name": m.name,
                "request_type": m.request_type,
                "response_type": str(m.response_class.DESCRIPTOR.full_name),
                "streaming": _streaming(m.client_streaming, m.server_streaming),
                "signature": f"{m.name}({m.request_type}) returns "
                f"{m.response_class.DESCRIPTOR.full_name}",
            }
            for m in shape.methods
        ],
    }


def _call_java(
    address: str,
    request: CallRequest,
    types: str | None,
    auth: str | None,
    check: float,
    path: CallPath,
) -> None:
    from dubbo_py.admin.java_call import JavaCallError, call_java

    env = env_of()
    try:
        result = call_java(
            address,
            request,
            types=split_type_list(types) if types is not None else None,
            auth=auth,
            check=check,
            path=path,
        )
    except JavaCallError as exc:
        payload = exc.to_json()
        raise AdminError(str(exc), reason=payload["reason"], payload=payload) from None
    except CallError as exc:
        raise AdminError(str(exc), reason="call") from None
    if env.json:
        emit_json(result.to_json())
        return
    click.echo(json.dumps(result.reply, indent=2, ensure_ascii=False))
    out = console()
    if result.signature:
        out.print(f"method: {result.signature}")
    elif result.types is not None:
        out.print(f"method: {result.method}({', '.join(result.types)})")
    out.print(f"provider: {result.provider} ({result.protocol}://)")
    if len(result.attempts) > 1:
        out.print(f"attempts: {', '.join(result.attempts)}")
    out.print(f"providers: {', '.join(result.providers) or '-'}")
    for note in result.notes:
        click.echo(f"warning: {note}", err=True)
