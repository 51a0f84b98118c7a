"""The services list, a service's page, and changing a provider's weight or taking it out of
service from its row."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from dubbo_py.admin.console import model
from dubbo_py.admin.console.web import Refused, Web, form_int, form_of
from dubbo_py.admin.rules import documents as rules
from dubbo_py.admin.rules import override_documents
from dubbo_py.admin.rules.operations import RuleOps, WriteResult
from dubbo_py.registry.application import lookup as app_level

__all__ = [
    "provider_change",
    "service_live",
    "service_snapshot",
    "service_view",
    "services_page",
]


def services_page(web: Web, request: Request) -> Response:
    """Every service (or those matching ``q``); htmx asks for the table alone."""
    query = request.query_params.get("q", "")
    rows = model.services(web.env(request).registry, query)
    template = "services_table.html" if request.headers.get("hx-request") else "services.html"
    return web.render(request, template, rows=rows, query=query)


def service_view(web: Web, request: Request) -> Response:
    """One service: providers, consumers, the reach matrix, its rules."""
    name = request.path_params["name"]
    registry = web.env(request).registry
    # Known at either level, as for ``dubbo-py providers`` (a service of Java providers
    # registered at the application level only has no interface-level folder).
    if name not in registry.services() and name not in app_level.interfaces(registry.store):
        return web.render(request, "error.html", status=404, message=f"no service {name!r}")
    page = model.service_page(registry, name)
    return web.render(request, "service.html", page=page, live=web.live(request) is not None)


def service_live(web: Web, request: Request) -> Response:
    """The providers' live figures (calls/s, p99, quarantined by), swapped into their rows."""
    live = web.live(request)
    if live is None:
        return web.render(request, "live.html", figures={}, failures=[])
    figures, failures = live.read(request.path_params["name"])
    return web.render(request, "live.html", figures=figures, failures=failures)


def service_snapshot(web: Web, request: Request) -> Response:
    """The router snapshots of the service's live consumers: each router of the chain in
    force and what it keeps out, and the calls recorded since ``dubbo-py snapshot enable``."""
    name = request.path_params["name"]
    live = web.live(request)  # the page's registry, when the console serves several
    if live is None:
        return web.render(request, "snapshot.html", service=name, consumers=[], failures=[])
    consumers, failures = live.snapshots(name)
    return web.render(
        request, "snapshot.html", service=name, consumers=consumers, failures=failures
    )


def provider_change(web: Web, request: Request) -> Response:
    """Set a provider's weight, or disable / enable it: an item of the service's configurators
    document (see :mod:`dubbo_py.admin.rules.override_documents`), a versioned write in its
    history."""
    name = request.path_params["name"]
    form = form_of(request)
    address = form.get("address", "")
    key = override_documents.target_key(name, form.get("version", ""), form.get("group", ""))
    action = form.get("action", "")

    def change(ops: RuleOps) -> WriteResult:
        current = ops.read(key)
        text = None if current is None else current.text
        if action == "weight":
            weight = form_int(form.get("weight", ""), "weight")
            new = override_documents.set_weight(text, name, address, weight, key)
            what = f"weight {address} {weight}"
        elif action in ("disable", "enable"):
            disable = action == "disable"
            new = override_documents.set_disabled(text, name, address, disable, key)
            what = f"{action} {address}"
        else:
            raise Refused(f"unknown action {action!r}")
        rules.validate(rules.parse_key(key), new, key)
        return ops.put(
            key,
            new,
            action=f"console: {what}",
            expect_version=-1 if current is None else current.version,
        )

    result = web.write(request, change)
    if isinstance(result, Response):
        return result
    seq = result.entry.seq if result.entry else None
    text = f"wrote {key} to {web.env(request).address} (version {result.version}, history #{seq})"
    return web.message(request, text, ok=True, refresh=True)
