"""``route test`` and calling a method, from the browser."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from dubbo_py.admin.call import CallError, CallRequest, call_method, describe
from dubbo_py.admin.console.web import Web, form_of
from dubbo_py.admin.java_call import (
    CallPath,
    JavaCallError,
    JavaMethods,
    call_java,
    call_path,
    describe_java,
)
from dubbo_py.admin.reflect import ReflectionError
from dubbo_py.admin.rules import scenario
from dubbo_py.errors import RuleError, StoreError
from dubbo_py.registry.service_definition import split_type_list

__all__ = ["call_page", "call_run", "route_test", "typed_request"]

#: The scenario the route test form starts from (the format of ``dubbo-py route test``).
SCENARIO_TEMPLATE = """\
consumer: consumer://10.0.0.1/demo.Greeter?application=shop&version=1.0.0
invocation:
  method: SayHello
  attachments: {}
providers:
  - tri://10.0.0.5:50051/demo.Greeter?version=1.0.0
  - tri://10.0.0.6:50051/demo.Greeter?version=1.0.0
rules:
  - config: condition-router
    yaml: |
      configVersion: v3.0
      scope: service
      key: demo.Greeter
      conditions:
        - method = SayHello => host = 10.0.0.6
"""

_INTEGERS = frozenset(
    {"int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64", "sfixed32",
     "sfixed64"}
)  # fmt: skip


def route_test(web: Web, request: Request) -> Response:
    """The scenario form, and on POST the survivors and the trace (``route test``)."""
    if request.method == "GET":
        return web.render(request, "route_test.html", text=SCENARIO_TEMPLATE)
    text = form_of(request).get("scenario", "").replace("\r\n", "\n")
    try:
        result = scenario.run_text(text, "scenario")
    except RuleError as exc:
        return web.render(request, "route_result.html", error=exc, result=None)
    return web.render(request, "route_result.html", error=None, result=result)


def call_page(web: Web, request: Request) -> Response:
    """A service's unary methods, each with a form built from its request type; for a
    Java-interface service (``dubbo://`` providers only) each method's signature from the
    metadata report, with a JSON-array input for its arguments."""
    params = request.query_params
    service = params.get("service", "")
    version, group = params.get("version", ""), params.get("group", "")
    protocol = params.get("protocol", "")
    # "No IDL": the tri:// providers are Java interfaces over Triple even where their URLs do
    # not say so (``dubbo-py call --no-idl``; docs/java-services.md).
    no_idl = _checked(params.get("no_idl", ""))
    registry = web.env(request).registry
    shape, java, problem = None, None, ""
    java_protocol = ""
    if protocol not in ("", "dubbo", "tri"):
        problem = f"protocol {protocol!r}: expected dubbo or tri (or none: every protocol)"
    elif service:
        try:
            path = call_path(registry, service, version, group, protocol or None, no_idl=no_idl)
            if path.generic:
                java = describe_java(
                    registry, service, version, group, path.protocol, no_idl=path.no_idl
                )
                java_protocol = path.protocol or ""
            else:
                shape = describe(registry, service, version, group)
        except (ReflectionError, CallError) as exc:
            problem = str(exc)
    return web.render(
        request,
        "call.html",
        service=service,
        version=version,
        group=group,
        shape=shape,
        java=java,
        java_forms=_java_forms(java) if java is not None else [],
        java_protocol=java_protocol,
        protocol=protocol,
        no_idl=no_idl,
        problem=problem,
        services=registry.services(),
    )


def _checked(value: str) -> bool:
    """Whether a form's checkbox (or a hand-written ``&no_idl=1``) is on."""
    return value.strip().lower() in ("on", "1", "true", "yes")


def _java_forms(java: JavaMethods) -> list[dict[str, Any]]:
    """One form per method: its id (overloads numbered), name, signature and the types it
    sends (empty when the metadata report has no definition: the provider picks by name)."""
    if java.definition is None:
        return [
            {"id": name, "name": name, "signature": f"{name}(?)", "types": "", "placeholder": "[]"}
            for name in java.names
        ]
    forms = []
    seen: dict[str, int] = {}
    for method in java.definition.sorted_methods():
        count = seen[method.name] = seen.get(method.name, 0) + 1
        forms.append(
            {
                "id": method.name if count == 1 else f"{method.name}-{count}",
                "name": method.name,
                "signature": method.signature,
                "types": ",".join(method.invoke_types),
                "placeholder": "[" + ", ".join(method.parameter_types) + "]",
            }
        )
    return forms


def typed_request(fields: Mapping[str, str]) -> dict[str, Any]:
    """The call form's inputs (named ``<type>.<json name>``) as a JSON request: numbers and
    booleans by their field's type, messages and repeated fields as JSON text, the rest as
    text (json_format then checks them against the message type)."""
    out: dict[str, Any] = {}
    for spec, text in fields.items():
        type_name, _, name = spec.partition(".")
        value: Any = text
        try:
            if type_name in ("repeated", "message"):
                value = json.loads(text)
            elif type_name in _INTEGERS:
                value = int(text)
            elif type_name in ("float", "double"):
                value = float(text)
            elif type_name == "bool":
                value = text.strip().lower() in ("true", "on", "1", "yes")
        except ValueError:
            value = text  # left as typed: the parser names the field and what it expected
        out[name] = value
    return out


def call_run(web: Web, request: Request) -> Response:
    """One call through the registry's rules and balancer (as ``dubbo-py call``); a generic
    call for a Java-interface service's form."""
    form = form_of(request)
    fields = {k[6:]: v for k, v in form.items() if k.startswith("field.") and v != ""}
    # The Java forms post protocol=java and the providers' protocol (empty: all of them).
    java = form.get("protocol", "") in ("java", "dubbo")
    java_protocol = form.get("java_protocol", "dubbo" if form.get("protocol") == "dubbo" else "")
    default = "[]" if java else json.dumps(typed_request(fields))
    body = form.get("json", "").strip() or default
    attachments = {}
    for line in form.get("attachments", "").splitlines():
        name, sep, value = line.partition("=")
        if sep and name.strip():
            attachments[name.strip()] = value.strip()
    env = web.env(request)
    call = CallRequest(
        form.get("service", ""),
        form.get("method", ""),
        body,
        version=form.get("version", ""),
        group=form.get("group", ""),
        attachments=attachments,
    )
    if java:
        path = CallPath(True, java_protocol or None, _checked(form.get("no_idl", "")))
        return _java_run(web, request, call, form.get("types", ""), path)
    try:
        result = call_method(str(env.address), call, auth=env.auth, check=max(env.timeout, 15.0))
    except (CallError, ReflectionError, StoreError) as exc:
        return web.render(
            request, "call_result.html", error=str(exc), result=None, request_json=body
        )
    return web.render(request, "call_result.html", error="", result=result, request_json=body)


def _java_run(
    web: Web, request: Request, call: CallRequest, types: str, path: CallPath
) -> Response:
    env = web.env(request)
    # The form sends the types the definition names; none (the provider picks by name)
    # when the metadata report has no definition.
    sent = split_type_list(types) if types.strip() else None
    try:
        result = call_java(
            str(env.address),
            call,
            types=sent,
            auth=env.auth,
            check=max(env.timeout, 15.0),
            path=path,
        )
    except JavaCallError as exc:
        return web.render(
            request,
            "call_result.html",
            error=str(exc),
            exception=exc.to_json().get("exception"),
            result=None,
            request_json=call.request_json,
        )
    except (CallError, StoreError) as exc:
        return web.render(
            request, "call_result.html", error=str(exc), result=None, request_json=call.request_json
        )
    return web.render(
        request,
        "call_result.html",
        error="",
        java_result=result,
        result=None,
        request_json=call.request_json,
    )
