"""``route test`` and calling a method, from the browser."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from dubbo_py.admin.call import CallError, CallRequest, call_method, describe
from dubbo_py.admin.console.web import Web, form_of
from dubbo_py.admin.reflect import ReflectionError
from dubbo_py.admin.rules import scenario
from dubbo_py.errors import RuleError, StoreError

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
    """A service's unary methods, each with a form built from its request type."""
    params = request.query_params
    service = params.get("service", "")
    version, group = params.get("version", ""), params.get("group", "")
    registry = web.env(request).registry
    shape, problem = None, ""
    if service:
        try:
            shape = describe(registry, service, version, group)
        except ReflectionError as exc:
            problem = str(exc)
    return web.render(
        request,
        "call.html",
        service=service,
        version=version,
        group=group,
        shape=shape,
        problem=problem,
        services=registry.services(),
    )


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
    """One call through the registry's rules and balancer (as ``dubbo-py call``)."""
    form = form_of(request)
    fields = {k[6:]: v for k, v in form.items() if k.startswith("field.") and v != ""}
    body = form.get("json", "").strip() or json.dumps(typed_request(fields))
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
    try:
        result = call_method(str(env.address), call, auth=env.auth, check=max(env.timeout, 15.0))
    except (CallError, ReflectionError, StoreError) as exc:
        return web.render(
            request, "call_result.html", error=str(exc), result=None, request_json=body
        )
    return web.render(request, "call_result.html", error="", result=result, request_json=body)
