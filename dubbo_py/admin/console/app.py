"""The console's web application: Starlette routes over the CLI's computations, pages
rendered on the server (Jinja2), small updates in place with htmx (shipped in ``static/``).

Handlers run in Starlette's thread pool (the registry clients, kazoo and sqlite, block).
Writes go through :class:`~dubbo_py.admin.rules.operations.RuleOps`: versioned, and recorded in
the rule history with the operator and the time. The host and CSRF checks sit in front of every
route
(:mod:`dubbo_py.admin.console.security`).
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from dubbo_py.admin.console import rule_pages, service_pages, tool_pages
from dubbo_py.admin.console.security import GuardMiddleware
from dubbo_py.admin.console.state import ConsoleState
from dubbo_py.admin.console.web import HERE, Web

__all__ = ["ConsoleState", "create_app"]


def _health(request: Request) -> Response:
    return PlainTextResponse("ok")


def create_app(state: ConsoleState) -> Starlette:
    """The console application over ``state``'s registry."""
    web = Web(state)
    page = web.endpoint
    post = ["POST"]
    routes = [
        Route("/", page(service_pages.services_page)),
        Route("/services", page(service_pages.services_page)),
        Route("/service/{name}", page(service_pages.service_view)),
        Route("/service/{name}/provider", page(service_pages.provider_change), methods=post),
        Route("/service/{name}/live", page(service_pages.service_live)),
        Route("/service/{name}/snapshot", page(service_pages.service_snapshot)),
        Route("/rules", page(rule_pages.rules_page)),
        Route("/rule", page(rule_pages.rule_view)),
        Route("/rule/validate", page(rule_pages.rule_check), methods=post),
        Route("/rule/dry-run", page(rule_pages.rule_check), methods=post),
        Route("/rule/push", page(rule_pages.rule_push), methods=post),
        Route("/rule/enable", page(rule_pages.rule_enable), methods=post),
        Route("/rule/history", page(rule_pages.rule_history)),
        Route("/rule/rollback", page(rule_pages.rule_rollback), methods=post),
        Route("/route-test", page(tool_pages.route_test), methods=["GET", "POST"]),
        Route("/call", page(tool_pages.call_page)),
        Route("/call", page(tool_pages.call_run), methods=post),
        Route("/healthz", _health),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(GuardMiddleware, allowed_hosts=state.allowed_hosts)],
    )
