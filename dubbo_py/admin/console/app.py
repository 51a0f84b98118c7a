"""The console's web application: Starlette routes over the CLI's computations, pages
rendered on the server (Jinja2), small updates in place with htmx (shipped in ``static/``).

Every route handler is a plain function, so Starlette runs it in its thread pool: the registry
clients (kazoo, sqlite) are blocking. Writes go through :class:`~dubbo_py.admin.ruleops.RuleOps`
(versioned, recorded in the rule history with the operator and the time).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from dubbo_py import __version__
from dubbo_py.admin import override_documents, rules
from dubbo_py.admin.call import CallError, CallRequest, call_method, describe
from dubbo_py.admin.common import CliEnv
from dubbo_py.admin.console import model
from dubbo_py.admin.console.security import (
    CSRF_COOKIE,
    GuardMiddleware,
    WriteAccess,
    new_token,
)
from dubbo_py.admin.lint import lint_rule
from dubbo_py.admin.reach import reach_of_change
from dubbo_py.admin.reflect import ReflectionError
from dubbo_py.admin.ruleops import Conflict, NotFound
from dubbo_py.errors import RuleError, StoreError
from dubbo_py.router import scenario

__all__ = ["ConsoleState", "create_app"]

HERE = Path(__file__).resolve().parent

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

NEW_RULE_TEMPLATES = {
    "condition-router": (
        "configVersion: v3.0\nscope: service\nkey: {interface}\nenabled: true\n"
        "conditions:\n  - method = SayHello => host = 127.0.0.1\n"
    ),
    "tag-router": (
        "configVersion: v3.0\nkey: {target}\nenabled: true\nforce: false\n"
        "tags:\n  - name: gray\n    addresses: [127.0.0.1:50051]\n"
    ),
    "configurators": (
        "configVersion: v3.0\nscope: service\nkey: {interface}\nenabled: true\n"
        "configs:\n  - addresses: [127.0.0.1:50051]\n    side: provider\n"
        "    parameters: {{weight: 50}}\n"
    ),
}


@dataclass
class ConsoleState:
    """One console: the registry connection (shared by every request), who writes, and the
    lock that keeps its writes one at a time."""

    env: CliEnv
    #: Extra host names the console answers to (the --bind address).
    allowed_hosts: tuple[str, ...] = ()
    #: Reads a provider application's QoS metrics, when the live column is available.
    live: Callable[[str], Mapping[str, Any]] | None = None
    write_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def access(self) -> WriteAccess:
        """Whether writes are allowed (see :mod:`dubbo_py.admin.console.security`)."""
        address = self.env.address
        if address.kind == "zookeeper" and not self.env.auth:
            return WriteAccess(
                False,
                "read-only: start the console with your registry identity "
                "(--auth or $DUBBO_PY_REGISTRY_AUTH) to change rules",
            )
        return WriteAccess(True)


class Refused(Exception):
    """A write that was refused (shown to the operator as is)."""


def _templates() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["tojson_pretty"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False)
    return env


def create_app(state: ConsoleState) -> Starlette:
    """The console application over ``state``'s registry."""
    templates = _templates()

    def render(
        request: Request,
        name: str,
        status: int = 200,
        headers: dict[str, str] | None = None,
        **ctx: Any,
    ) -> HTMLResponse:
        token = request.cookies.get(CSRF_COOKIE) or new_token()
        page = templates.get_template(name).render(
            request=request,
            csrf=token,
            access=state.access,
            registry=str(state.env.address),
            operator=state.env.who(),
            dubbo_py_version=__version__,
            **ctx,
        )
        response = HTMLResponse(page, status_code=status, headers=headers)
        if request.cookies.get(CSRF_COOKIE) != token:
            response.set_cookie(CSRF_COOKIE, token, httponly=False, samesite="strict")
        return response

    def registry_error(request: Request, exc: Exception) -> HTMLResponse:
        return render(request, "error.html", status=503, message=str(exc))

    def guarded(handler: Callable[[Request], Response]) -> Callable[[Request], Any]:
        """The handler run in the thread pool (registry clients block), with a POST's form
        read first and a registry failure shown as a page instead of a crash."""

        async def run(request: Request) -> Response:
            if request.method == "POST":
                form = await request.form()
                request.state.form = {k: v for k, v in form.items() if isinstance(v, str)}
            try:
                return await run_in_threadpool(handler, request)
            except StoreError as exc:
                return await run_in_threadpool(registry_error, request, exc)
            except ValueError as exc:  # a malformed key or number in a form: say so
                message = str(exc)
            return await run_in_threadpool(
                lambda: render(
                    request,
                    "message.html",
                    status=200 if request.headers.get("hx-request") else 400,
                    ok=False,
                    message=message,
                )
            )

        run.__name__ = handler.__name__
        return run

    def writing(request: Request) -> None:
        access = state.access
        if not access.allowed:
            raise Refused(access.reason)

    # ------------------------------------------------------------------ services

    def services_page(request: Request) -> Response:
        query = request.query_params.get("q", "")
        rows = model.services(state.env.registry, query)
        template = "services_table.html" if request.headers.get("hx-request") else "services.html"
        return render(request, template, rows=rows, query=query)

    def service_view(request: Request) -> Response:
        name = request.path_params["name"]
        registry = state.env.registry
        if name not in registry.services():
            return render(request, "error.html", status=404, message=f"no service {name!r}")
        page = model.service_page(registry, name)
        live = _live_rows(state, page)
        return render(request, "service.html", page=page, live=live)

    def provider_change(request: Request) -> Response:
        name = request.path_params["name"]
        form = _form(request)
        address = form.get("address", "")
        version, group = form.get("version", ""), form.get("group", "")
        key = override_documents.target_key(name, version, group)
        try:
            writing(request)
            with state.write_lock:
                ops = state.env.rule_ops()
                current = ops.read(key)
                text = None if current is None else current.text
                action = form.get("action", "")
                if action == "weight":
                    weight = _int(form.get("weight", ""), "weight")
                    new = override_documents.set_weight(text, name, address, weight, key)
                    what = f"weight {address} {weight}"
                elif action in ("disable", "enable"):
                    new = override_documents.set_disabled(
                        text, name, address, action == "disable", key
                    )
                    what = f"{action} {address}"
                else:
                    raise Refused(f"unknown action {action!r}")
                rules.validate(rules.parse_key(key), new, key)
                result = ops.put(
                    key,
                    new,
                    action=f"console: {what}",
                    expect_version=-1 if current is None else current.version,
                )
        except (Refused, Conflict, RuleError, ValueError) as exc:
            return render(request, "message.html", status=200, ok=False, message=str(exc))
        seq = result.entry.seq if result.entry else None
        return render(
            request,
            "message.html",
            ok=True,
            message=f"wrote {key} (version {result.version}, history #{seq})",
            headers={"HX-Refresh": "true"},
        )

    # ------------------------------------------------------------------ rules

    def rules_page(request: Request) -> Response:
        return render(
            request, "rules.html", rows=model.rule_rows(state.env.registry), kinds=rules.KINDS
        )

    def rule_view(request: Request) -> Response:
        key = request.query_params.get("key", "").strip()
        try:
            rule = rules.parse_key(key)
        except ValueError as exc:
            return render(request, "error.html", status=400, message=str(exc))
        doc = state.env.registry.get_config(key)
        if doc is None:
            template = NEW_RULE_TEMPLATES.get(rule.kind, "configVersion: v3.0\nenabled: true\n")
            text = template.format(interface=rule.interface or rule.target, target=rule.target)
        else:
            text = doc.text
        return render(
            request,
            "rule.html",
            key=key,
            rule=rule,
            text=text,
            version=-1 if doc is None else doc.version,
            exists=doc is not None,
            enabled=None if doc is None else rules.document_enabled(doc.text),
            gutter=_gutter(text, None),
        )

    def _checked(request: Request) -> tuple[rules.RuleKey, str, dict[str, str]]:
        form = _form(request)
        key = form.get("key", "")
        text = form.get("text", "").replace("\r\n", "\n")
        return rules.parse_key(key), text, form

    def rule_check(request: Request) -> Response:
        """Validate (and with ``dry_run``, show the reach before/after); writes nothing."""
        rule, text, _ = _checked(request)
        dry_run = request.url.path.endswith("dry-run")
        try:
            names = rules.validate(rule, text, rule.key)
        except RuleError as exc:
            return _invalid(request, text, exc)
        warnings, _ = lint_rule(rule, text, rule.key, state.env.registry)
        ctx: dict[str, Any] = {"names": names, "warnings": warnings, "dry_run": dry_run}
        if dry_run:
            current = state.env.registry.get_config(rule.key)
            ctx["diff"] = model.unified_diff(
                None if current is None else current.text, text, f"{rule.key} (now)", "edited"
            )
            ctx["report"] = reach_of_change(state.env.registry, rule, text)
        return render(request, "rule_check.html", gutter=_gutter(text, None), **ctx)

    def _invalid(request: Request, text: str, exc: RuleError) -> Response:
        lines = text.splitlines()
        line_text = lines[exc.line - 1] if exc.line and 0 < exc.line <= len(lines) else ""
        return render(
            request,
            "rule_error.html",
            error=exc,
            line_text=line_text,
            gutter=_gutter(text, exc.line),
        )

    def rule_push(request: Request) -> Response:
        rule, text, form = _checked(request)
        try:
            writing(request)
            rules.validate(rule, text, rule.key)
        except RuleError as exc:
            return _invalid(request, text, exc)
        except Refused as exc:
            return render(request, "message.html", ok=False, message=str(exc))
        expect = _int(form.get("version", "-1"), "version")
        try:
            with state.write_lock:
                result = state.env.rule_ops().put(
                    rule.key, text, action="push", expect_version=expect
                )
        except Conflict as exc:
            current = state.env.registry.get_config(rule.key)
            return render(
                request,
                "conflict.html",
                message=str(exc),
                current=current,
                diff=model.unified_diff(
                    None if current is None else current.text, text, "in the registry", "yours"
                ),
            )
        return render(
            request, "pushed.html", result=result, key=rule.key, gutter=_gutter(text, None)
        )

    def rule_enable(request: Request) -> Response:
        form = _form(request)
        key = form.get("key", "")
        try:
            writing(request)
            with state.write_lock:
                result = state.env.rule_ops().set_enabled(
                    key,
                    form.get("enabled") == "true",
                    expect_version=_int(form.get("version", ""), "version"),
                )
        except (Refused, Conflict, NotFound, RuleError, ValueError) as exc:
            return render(request, "message.html", ok=False, message=str(exc))
        return render(
            request,
            "message.html",
            ok=True,
            message=f"{result.action}d {key} (version {result.version})",
            headers={"HX-Refresh": "true"},
        )

    def rule_history(request: Request) -> Response:
        key = request.query_params.get("key", "")
        try:
            rules.parse_key(key)
        except ValueError as exc:
            return render(request, "error.html", status=400, message=str(exc))
        current = state.env.registry.get_config(key)
        return render(
            request,
            "history.html",
            key=key,
            rows=model.history_rows(state.env.history(), key),
            current=current,
        )

    def rule_rollback(request: Request) -> Response:
        form = _form(request)
        key = form.get("key", "")
        seq_text = form.get("seq", "")
        try:
            writing(request)
            with state.write_lock:
                result = state.env.rule_ops().rollback(
                    key,
                    _int(seq_text, "seq") if seq_text else None,
                    expect_version=_int(form.get("version", ""), "version"),
                )
        except (Refused, Conflict, NotFound, RuleError, ValueError) as exc:
            return render(request, "message.html", ok=False, message=str(exc))
        restored = result.entry.restored if result.entry else None
        return render(
            request,
            "message.html",
            ok=True,
            message=f"rolled back {key} to #{restored}",
            headers={"HX-Refresh": "true"},
        )

    # ------------------------------------------------------------------ route test, call

    def route_test(request: Request) -> Response:
        if request.method == "GET":
            return render(request, "route_test.html", text=SCENARIO_TEMPLATE)
        text = _form(request).get("scenario", "").replace("\r\n", "\n")
        try:
            result = scenario.run_text(text, "scenario")
        except RuleError as exc:
            return render(request, "route_result.html", error=exc, result=None)
        return render(request, "route_result.html", error=None, result=result)

    def call_page(request: Request) -> Response:
        params = request.query_params
        service = params.get("service", "")
        version, group = params.get("version", ""), params.get("group", "")
        shape, problem = None, ""
        if service:
            try:
                shape = describe(state.env.registry, service, version, group)
            except ReflectionError as exc:
                problem = str(exc)
        return render(
            request,
            "call.html",
            service=service,
            version=version,
            group=group,
            shape=shape,
            problem=problem,
            services=state.env.registry.services(),
        )

    def call_run(request: Request) -> Response:
        form = _form(request)
        fields = {k[6:]: v for k, v in form.items() if k.startswith("field.") and v != ""}
        body = form.get("json", "").strip() or json.dumps(_typed(fields))
        attachments = {}
        for line in form.get("attachments", "").splitlines():
            name, sep, value = line.partition("=")
            if sep and name.strip():
                attachments[name.strip()] = value.strip()
        try:
            result = call_method(
                str(state.env.address),
                CallRequest(
                    form.get("service", ""),
                    form.get("method", ""),
                    body,
                    version=form.get("version", ""),
                    group=form.get("group", ""),
                    attachments=attachments,
                ),
                auth=state.env.auth,
                check=state.env.timeout,
            )
        except (CallError, ReflectionError, StoreError) as exc:
            return render(
                request, "call_result.html", error=str(exc), result=None, request_json=body
            )
        return render(request, "call_result.html", error="", result=result, request_json=body)

    def health(request: Request) -> Response:
        return PlainTextResponse("ok")

    routes = [
        Route("/", guarded(services_page)),
        Route("/services", guarded(services_page)),
        Route("/service/{name}", guarded(service_view)),
        Route("/service/{name}/provider", guarded(provider_change), methods=["POST"]),
        Route("/rules", guarded(rules_page)),
        Route("/rule", guarded(rule_view)),
        Route("/rule/validate", guarded(rule_check), methods=["POST"]),
        Route("/rule/dry-run", guarded(rule_check), methods=["POST"]),
        Route("/rule/push", guarded(rule_push), methods=["POST"]),
        Route("/rule/enable", guarded(rule_enable), methods=["POST"]),
        Route("/rule/history", guarded(rule_history)),
        Route("/rule/rollback", guarded(rule_rollback), methods=["POST"]),
        Route("/route-test", guarded(route_test), methods=["GET", "POST"]),
        Route("/call", guarded(call_page)),
        Route("/call", guarded(call_run), methods=["POST"]),
        Route("/healthz", health),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(GuardMiddleware, allowed_hosts=state.allowed_hosts)],
    )


def _form(request: Request) -> dict[str, str]:
    """The request's url-encoded form (handlers run in a worker thread: read it there)."""
    form: dict[str, str] = request.state.form
    return form


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{what} must be a whole number, not {text!r}") from None


_INTEGERS = frozenset(
    {
        "int32",
        "int64",
        "uint32",
        "uint64",
        "sint32",
        "sint64",
        "fixed32",
        "fixed64",
        "sfixed32",
        "sfixed64",
    }
)


def _typed(fields: Mapping[str, str]) -> dict[str, Any]:
    """The call form's inputs (named ``<type>.<json name>``) as a JSON request: numbers and
    booleans by their field's type, messages and repeated fields as JSON text, the rest as
    text (json_format then checks them against the message type)."""
    out: dict[str, Any] = {}
    for spec, text in fields.items():
        type_name, _, name = spec.partition(".")
        value: Any = text
        try:
            if type_name == "repeated" or "." in name or type_name == "message":
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


def _gutter(text: str, error_line: int | None) -> list[tuple[int, bool]]:
    count = max(1, text.count("\n") + (0 if text.endswith("\n") else 1))
    if error_line is not None and error_line > count:
        count = error_line
    return [(n, n == error_line) for n in range(1, count + 1)]


def _live_rows(state: ConsoleState, page: model.ServicePage) -> dict[str, Mapping[str, Any]]:
    if state.live is None:
        return {}
    out: dict[str, Mapping[str, Any]] = {}
    for row in page.providers:
        try:
            out[row.address] = state.live(row.address)
        except Exception:  # a provider without a QoS port shows no live figures
            continue
    return out
