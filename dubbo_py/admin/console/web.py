"""What every console page shares: rendering a template with the CSRF token and who is
operating, turning a handler into a Starlette endpoint, reading forms, refusing writes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from dubbo_py.admin.common import CliEnv
from dubbo_py.admin.console.live import LiveReader
from dubbo_py.admin.console.security import CSRF_COOKIE, WriteAccess, new_token
from dubbo_py.admin.console.state import ConsoleRegistry, ConsoleState, write_access
from dubbo_py.admin.rules.acl import Untrusted
from dubbo_py.admin.rules.operations import Conflict, NotFound, RuleOps
from dubbo_py.errors import RuleError, StoreError
from dubbo_py.version import __version__

__all__ = [
    "HERE",
    "REGISTRY_COOKIE",
    "REGISTRY_HEADER",
    "Handler",
    "Refused",
    "Web",
    "form_int",
    "form_of",
]

HERE = Path(__file__).resolve().parent

#: The header every htmx request of a page sends: the id of the registry the page shows.
REGISTRY_HEADER = "X-Dubbo-Registry"
#: The registry chosen last (``?registry=ID``), for the pages that follow.
REGISTRY_COOKIE = "dubbo_py_registry"

T = TypeVar("T")


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
    # An address as an element id ("127.0.0.1:50051" -> "127-0-0-1-50051").
    env.filters["slug"] = lambda v: "".join(c if c.isalnum() else "-" for c in str(v))
    return env


class Web:
    """The console's state and templates, shared by the page handlers."""

    def __init__(self, state: ConsoleState) -> None:
        self.state = state
        self.templates = _templates()

    def chosen(self, request: Request) -> ConsoleRegistry | None:
        """The registry a request is for, when the console serves several (None otherwise):
        a write names it in :data:`REGISTRY_HEADER` (its page set it; a write without it is
        refused, since the registry chosen last may not be the page's); a page takes
        ``?registry=ID``, else the one chosen last, else the first. ValueError for an id
        this console does not serve."""
        registries = self.state.registries
        if not registries:
            return None
        named = request.headers.get(REGISTRY_HEADER)
        if request.method == "POST" and not named:
            raise ValueError(
                "this console serves several registries and the write names none: reload the "
                "page and try again"
            )
        wanted = (
            named or request.query_params.get("registry") or request.cookies.get(REGISTRY_COOKIE)
        )
        if not wanted:
            return next(iter(registries.values()))
        found = registries.get(wanted)
        if found is None:
            raise ValueError(
                f"this console serves no registry {wanted!r} (registries: {', '.join(registries)})"
            )
        return found

    def env(self, request: Request) -> CliEnv:
        """The environment (registry, identity, operator) of the registry a request is for."""
        chosen = self.chosen(request)
        return self.state.env if chosen is None else chosen.env

    def live(self, request: Request) -> LiveReader | None:
        """The live-figures reader of the registry a request is for (None: not shown)."""
        chosen = self.chosen(request)
        return self.state.live if chosen is None else chosen.live

    def access(self, request: Request) -> WriteAccess:
        """Whether the registry a request is for may be written by this console."""
        return write_access(self.env(request))

    def render(
        self,
        request: Request,
        name: str,
        status: int = 200,
        headers: dict[str, str] | None = None,
        **ctx: Any,
    ) -> HTMLResponse:
        """A template as a response, with the browser's CSRF token (set as a cookie the
        first time) and the registry and operator every page shows (with several registries:
        which one, its zone, and the others to switch to)."""
        try:
            chosen = self.chosen(request)
        except ValueError:
            chosen = None  # an error page about that very choice
        env = self.state.env if chosen is None else chosen.env
        token = request.cookies.get(CSRF_COOKIE) or new_token()
        page = self.templates.get_template(name).render(
            request=request,
            csrf=token,
            access=write_access(env),
            registry=str(env.address),
            registry_id=None if chosen is None else chosen.target.id,
            registry_zone=None if chosen is None else chosen.target.zone,
            registries=[(r.target.id, r.target.zone) for r in self.state.registries.values()],
            operator=env.who(),
            dubbo_py_version=__version__,
            **ctx,
        )
        response = HTMLResponse(page, status_code=status, headers=headers)
        if request.cookies.get(CSRF_COOKIE) != token:
            response.set_cookie(CSRF_COOKIE, token, httponly=False, samesite="strict")
        if chosen is not None and request.cookies.get(REGISTRY_COOKIE) != chosen.target.id:
            response.set_cookie(REGISTRY_COOKIE, chosen.target.id, samesite="strict")
        return response

    def message(self, request: Request, text: str, *, ok: bool, refresh: bool = False) -> Response:
        """A one-line result (``refresh``: htmx reloads the page to show the new state)."""
        headers = {"HX-Refresh": "true"} if refresh else None
        return self.render(request, "message.html", ok=ok, message=text, headers=headers)

    def check_writable(self, request: Request) -> None:
        """:class:`Refused` unless this console may write to the request's registry."""
        access = self.access(request)
        if not access.allowed:
            raise Refused(access.reason)

    def write(self, request: Request, change: Callable[[RuleOps], T]) -> T | Response:
        """Make ``change`` with the operator's versioned rule writes, one write at a time, if
        this console may write: what it returns, or the message answering a write that was
        refused, met a newer version, named a missing entry or held a bad rule or value."""
        try:
            self.check_writable(request)
            with self.state.write_lock:
                return change(self.env(request).rule_ops())
        except (Refused, Conflict, NotFound, RuleError, ValueError) as exc:
            return self.message(request, str(exc), ok=False)
        except Untrusted as exc:
            return self.message(request, f"refusing to restore it: {exc}", ok=False)

    def endpoint(self, handler: Handler) -> Callable[[Request], Any]:
        """The handler as a Starlette endpoint: run in the thread pool (the registry clients
        block), a POST's form read first, a registry failure or a malformed form value shown
        to the operator instead of a crash."""

        async def run(request: Request) -> Response:
            if request.method == "POST":
                form = await request.form()
                request.state.form = {k: v for k, v in form.items() if isinstance(v, str)}
            try:
                return await run_in_threadpool(handler, self, request)
            except StoreError as exc:
                text, status = f"registry error: {exc}", 503
            except ValueError as exc:  # a malformed key or number in a form
                text, status = str(exc), 400
            if request.headers.get("hx-request"):  # htmx swaps only 2xx answers in
                return await run_in_threadpool(lambda: self.message(request, text, ok=False))
            return await run_in_threadpool(
                lambda: self.render(request, "error.html", status=status, message=text)
            )

        run.__name__ = getattr(handler, "__name__", "endpoint")
        return run


#: A page handler: the console and the request in, the response out.
Handler = Callable[[Web, Request], Response]


def form_of(request: Request) -> dict[str, str]:
    """The request's url-encoded form (read by :meth:`Web.endpoint` before the handler)."""
    form: dict[str, str] = request.state.form
    return form


def form_int(text: str, what: str) -> int:
    """A whole number from a form; ValueError naming the field otherwise."""
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{what} must be a whole number, not {text!r}") from None
