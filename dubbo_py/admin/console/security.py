"""What keeps the console's writes to the operator who started it.

* **Loopback by default.** ``dubbo-py console`` binds 127.0.0.1; another address must be asked
  for with ``--bind``.
* **Host check.** Requests must name the console by a loopback name or the bound address
  (``Host`` header), so a web page on another site cannot reach it through DNS rebinding.
* **CSRF on every write.** Each browser gets a random token in a ``SameSite=Strict`` cookie and
  in the page; a write (any method but GET/HEAD/OPTIONS) must send it back in the
  ``X-CSRF-Token`` header and, when the browser sends an ``Origin``, come from the console's own
  origin. A page on another origin can neither read the token nor set the header.
* **Writes as the registry allows them.** The console writes where the registry lets its
  identity write, as the CLI does: on ZooKeeper it reads the ACLs of the rule and history
  folders (:func:`dubbo_py.admin.rules.acl.rule_write_refusal`), so on an open ZooKeeper it
  writes without an identity (as ``dubbo-py rules push`` does), and once the rules are secured
  (``dubbo-py acl secure``) only with the identity that owns them (``--auth`` /
  ``$DUBBO_PY_REGISTRY_AUTH``); a banner on every page says why it is read-only. Its writes are
  the CLI's (versioned, in the same rule history, naming the operator). The embedded registry
  has no identities: its file's permissions are the protection.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "CSRF_COOKIE",
    "CSRF_HEADER",
    "SAFE_METHODS",
    "GuardMiddleware",
    "WriteAccess",
    "is_loopback",
    "new_token",
]

CSRF_COOKIE = "dubbo_py_csrf"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


def new_token() -> str:
    """A fresh CSRF token."""
    return secrets.token_urlsafe(32)


def is_loopback(host: str) -> bool:
    """Whether a bind address or host name is on this machine only."""
    name = host.strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class WriteAccess:
    """Whether this console may write, and if not, why (shown on every page)."""

    allowed: bool
    reason: str = ""


def _host_name(host_header: str) -> str:
    if host_header.startswith("["):
        return host_header.split("]", 1)[0] + "]"
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


class GuardMiddleware:
    """The host check and the CSRF check (see the module docstring), in front of every route."""

    def __init__(self, app: ASGIApp, allowed_hosts: Iterable[str]) -> None:
        self.app = app
        self.allowed_hosts = frozenset(h.lower() for h in allowed_hosts) | _LOOPBACK_NAMES

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = _host_name(headers.get("host", "").lower())
        if host not in self.allowed_hosts:
            await PlainTextResponse(f"unknown host {host!r}", status_code=400)(scope, receive, send)
            return
        if scope["method"] not in SAFE_METHODS:
            problem = self._write_problem(headers)
            if problem:
                await PlainTextResponse(problem, status_code=403)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _write_problem(self, headers: Headers) -> str:
        cookie = _cookie(headers.get("cookie", ""), CSRF_COOKIE)
        sent = headers.get(CSRF_HEADER, "")
        if not cookie or not sent or not hmac.compare_digest(cookie, sent):
            return "refused: missing or wrong CSRF token (reload the page)"
        origin = headers.get("origin")
        if origin and origin != "null":
            origin_host = origin.split("://", 1)[-1]
            if origin_host.lower() != headers.get("host", "").lower():
                return f"refused: a write from another origin ({origin})"
        return ""


def _cookie(header: str, name: str) -> str:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return ""
