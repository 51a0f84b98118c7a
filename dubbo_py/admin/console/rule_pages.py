"""Rules: the list, the editor (validate with errors at their line, dry run, versioned push,
enable/disable), the history with diffs and rollback. Every check and write is the CLI's own
(:mod:`dubbo_py.admin.rules.documents`, :mod:`~dubbo_py.admin.rules.reach`,
:mod:`~dubbo_py.admin.rules.operations`)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from dubbo_py.admin.console import model
from dubbo_py.admin.console.web import Refused, Web, form_int, form_of
from dubbo_py.admin.rules import documents as rules
from dubbo_py.admin.rules.lint import lint_rule
from dubbo_py.admin.rules.operations import Conflict
from dubbo_py.admin.rules.reach import reach_of_change
from dubbo_py.errors import RuleError

__all__ = [
    "rule_check",
    "rule_enable",
    "rule_history",
    "rule_push",
    "rule_rollback",
    "rule_view",
    "rules_page",
]

#: What the editor starts from for a key that has no document yet.
NEW_RULE_TEMPLATES = {
    "condition-router": (
        "configVersion: v3.0\nscope: service\nkey: {interface}\nenabled: true\n"
        "conditions:\n  - method = SayHello => host = 127.0.0.1\n"
    ),
    "tag-router": (
        "configVersion: v3.0\nkey: {target}\nenabled: true\nforce: false\n"
        "tags:\n  - name: gray\n    addresses: [127.0.0.1:50051]\n"
    ),
    "affinity-router": (
        "configVersion: v3.1\nscope: {scope}\nkey: {target}\nenabled: true\n"
        "affinityAware:\n  key: region\n  ratio: 20\n"
    ),
    "configurators": (
        "configVersion: v3.0\nscope: service\nkey: {interface}\nenabled: true\n"
        "configs:\n  - addresses: [127.0.0.1:50051]\n    side: provider\n"
        "    parameters: {{weight: 50}}\n"
    ),
}


def gutter(text: str, error_line: int | None) -> list[tuple[int, bool]]:
    """The editor's line numbers, each with whether it is the error's line."""
    count = max(1, text.count("\n") + (0 if text.endswith("\n") else 1))
    if error_line is not None and error_line > count:
        count = error_line
    return [(n, n == error_line) for n in range(1, count + 1)]


def rules_page(web: Web, request: Request) -> Response:
    """Every rule document, as ``rules list``."""
    rows = model.rule_rows(web.env(request).registry)
    return web.render(request, "rules.html", rows=rows, kinds=rules.KINDS)


def rule_view(web: Web, request: Request) -> Response:
    """The editor on a key's document (a template when there is none yet)."""
    key = request.query_params.get("key", "").strip()
    rule = rules.parse_key(key)
    doc = web.env(request).registry.get_config(key)
    if doc is None:
        template = NEW_RULE_TEMPLATES.get(rule.kind, "configVersion: v3.0\nenabled: true\n")
        text = template.format(
            interface=rule.interface or rule.target,
            target=rule.target,
            scope="application" if rule.application_scoped else "service",
        )
    else:
        text = doc.text
    return web.render(
        request,
        "rule.html",
        key=key,
        rule=rule,
        text=text,
        version=-1 if doc is None else doc.version,
        exists=doc is not None,
        enabled=None if doc is None else rules.document_enabled(doc.text),
        gutter=gutter(text, None),
    )


def _edited(request: Request) -> tuple[rules.RuleKey, str, dict[str, str]]:
    form = form_of(request)
    text = form.get("text", "").replace("\r\n", "\n")
    return rules.parse_key(form.get("key", "")), text, form


def _invalid(web: Web, request: Request, text: str, exc: RuleError) -> Response:
    lines = text.splitlines()
    line_text = lines[exc.line - 1] if exc.line and 0 < exc.line <= len(lines) else ""
    return web.render(
        request, "rule_error.html", error=exc, line_text=line_text, gutter=gutter(text, exc.line)
    )


def rule_check(web: Web, request: Request) -> Response:
    """Validate the edited text (and for a dry run, the diff and every consumer's reach
    before and after); writes nothing."""
    rule, text, _ = _edited(request)
    dry_run = request.url.path.endswith("dry-run")
    registry = web.env(request).registry
    try:
        names = rules.validate(rule, text, rule.key)
    except RuleError as exc:
        return _invalid(web, request, text, exc)
    warnings, _ = lint_rule(rule, text, rule.key, registry, str(web.env(request).address))
    ctx: dict[str, Any] = {"names": names, "warnings": warnings, "dry_run": dry_run}
    if dry_run:
        current = registry.get_config(rule.key)
        ctx["diff"] = model.unified_diff(
            None if current is None else current.text, text, f"{rule.key} (now)", "edited"
        )
        ctx["report"] = reach_of_change(registry, rule, text)
    return web.render(request, "rule_check.html", gutter=gutter(text, None), **ctx)


def rule_push(web: Web, request: Request) -> Response:
    """Write the edited text if the key is still at the version the editor opened; a
    concurrent change is shown against the edit, not overwritten."""
    rule, text, form = _edited(request)
    state, env = web.state, web.env(request)
    try:
        web.check_writable(request)
        rules.validate(rule, text, rule.key)
    except RuleError as exc:
        return _invalid(web, request, text, exc)
    except Refused as exc:
        return web.message(request, str(exc), ok=False)
    expect = form_int(form.get("version", "-1"), "version")
    try:
        with state.write_lock:
            result = env.rule_ops().put(rule.key, text, action="push", expect_version=expect)
    except Conflict as exc:
        current = env.registry.get_config(rule.key)
        theirs = None if current is None else current.text
        return web.render(
            request,
            "conflict.html",
            message=str(exc),
            current=current,
            diff=model.unified_diff(theirs, text, "in the registry", "yours"),
        )
    return web.render(
        request, "pushed.html", result=result, key=rule.key, gutter=gutter(text, None)
    )


def rule_enable(web: Web, request: Request) -> Response:
    """Flip the document's ``enabled`` field (a versioned write)."""
    form = form_of(request)
    key = form.get("key", "")
    result = web.write(
        request,
        lambda ops: ops.set_enabled(
            key,
            form.get("enabled") == "true",
            expect_version=form_int(form.get("version", ""), "version"),
        ),
    )
    if isinstance(result, Response):
        return result
    text = f"{result.action}d {key} in {web.env(request).address} (version {result.version})"
    return web.message(request, text, ok=True, refresh=True)


def rule_history(web: Web, request: Request) -> Response:
    """A key's history, newest first, with each change's diff."""
    key = request.query_params.get("key", "")
    rules.parse_key(key)
    env = web.env(request)
    return web.render(
        request,
        "history.html",
        key=key,
        rows=model.history_rows(env.history(), key),
        current=env.registry.get_config(key),
    )


def rule_rollback(web: Web, request: Request) -> Response:
    """Restore the version before the current one, or history entry ``seq``."""
    form = form_of(request)
    key = form.get("key", "")
    seq = form.get("seq", "")
    result = web.write(
        request,
        lambda ops: ops.rollback(
            key,
            form_int(seq, "seq") if seq else None,
            expect_version=form_int(form.get("version", ""), "version"),
        ),
    )
    if isinstance(result, Response):
        return result
    restored = result.entry.restored if result.entry else None
    return web.message(request, f"rolled back {key} to #{restored}", ok=True, refresh=True)
