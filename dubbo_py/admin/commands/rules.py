"""``rules``: list, get, push, validate, enable, disable, delete, history and roll back
config-center rule documents (docs/design.md §5, §6).

Every write is versioned (a concurrent change makes it fail with a conflict, exit 1) and
recorded in the key's history. Validation runs exactly what consumers run.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from typing import Any

import click

from dubbo_py.admin.common import (
    CONTEXT_SETTINGS,
    AdminError,
    CliEnv,
    attachment_pairs,
    command_group,
    console,
    did_you_mean,
    emit_json,
    env_of,
    json_option,
    operator_option,
    print_table,
)
from dubbo_py.admin.fanout import each_registry, labelled, raise_failures, report_writes
from dubbo_py.admin.input_file import InputFileError, read_input_file
from dubbo_py.admin.rules import documents as rules
from dubbo_py.admin.rules.diff import change_summary
from dubbo_py.admin.rules.lint import LintWarning, lint_rule
from dubbo_py.admin.rules.operations import WriteResult
from dubbo_py.errors import StoreError
from dubbo_py.registry import rule_kinds
from dubbo_py.registry.registry import Registry
from dubbo_py.registry.store.address import ENV_REGISTRY

__all__ = ["rules_group"]


class RuleKeyType(click.ParamType):  # type: ignore[type-arg,unused-ignore]
    """A config key such as ``demo.Greeter::.condition-router`` (usage error when malformed)."""

    name = "KEY"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> rules.RuleKey:
        if isinstance(value, rules.RuleKey):
            return value
        try:
            return rules.parse_key(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


RULE_KEY = RuleKeyType()
KIND = click.Choice(rules.KINDS)
expect_version_option = click.option(
    "--expect-version",
    type=click.IntRange(min=-1),
    default=None,
    metavar="N",
    help="Write only if the key is at version N (-1: only if absent); default: the version read.",
)


strict_option = click.option(
    "--strict",
    is_flag=True,
    help="Refuse (exit 1) when a check warns, instead of warning and going on.",
)


def _lint(
    rule: rules.RuleKey,
    text: str,
    file: str,
    registry: Registry | None,
    strict: bool,
    where: str = "",
) -> tuple[list[LintWarning], list[str]]:
    """Run the checks on a valid rule; print the warnings on stderr (the JSON output carries
    them too); with ``strict`` a warning refuses the command."""
    warnings, notes = lint_rule(rule, text, file, registry, where)
    for warning in warnings:
        click.echo(f"warning: {warning.message}", err=True)
    if strict and warnings:
        count = f"{len(warnings)} warning" + ("s" if len(warnings) > 1 else "")
        raise AdminError(
            f"refused with --strict: {count} for {rule.key or file}",
            reason="invalid",
            payload={
                "error": f"refused with --strict: {count}",
                "reason": "invalid",
                "warnings": [w.to_json() for w in warnings],
            },
        )
    return warnings, notes


def _named_registry() -> Registry | None:
    # validate works offline: it reads the registry only when one is named.
    env = env_of()
    if env.registry_text is None and not os.environ.get(ENV_REGISTRY, "").strip():
        return None
    return env.registry


def _read_file(path: str) -> str:
    try:
        return read_input_file(path)
    except InputFileError as exc:
        raise AdminError(str(exc), reason="invalid") from None


def _missing_key(key: str, env: CliEnv | None = None) -> AdminError:
    env = env or env_of()
    keys = env.registry.config_keys()
    return AdminError(
        f"no rule at {key} in registry {env.address}{did_you_mean(key, keys)}",
        reason="not-found",
    )


def _report_write(
    result: WriteResult, done: str, warnings: list[LintWarning] | None = None
) -> None:
    """One line naming what was written and the registry it went to (a write to a registry
    nobody reads, e.g. with ``DUBBO_PY_REGISTRY`` forgotten, shows where it went)."""
    env = env_of()
    where = str(env.address)
    if env.json:
        out = {**result.to_json(), "registry": where}
        if warnings is not None:
            out["warnings"] = [w.to_json() for w in warnings]
        emit_json(out)
        return
    if not result.changed:
        click.echo(
            f"unchanged: {result.key} in {where} already has this text (version {result.version})"
        )
        return
    entry = result.entry
    restored = f" to #{entry.restored}" if entry and entry.restored is not None else ""
    seq = f", history #{entry.seq}" if entry else ""
    version = "deleted" if result.version is None else f"version {result.version}"
    preposition = "to" if done == "pushed" else "in"
    click.echo(f"{done} {result.key}{restored} {preposition} {where} ({version}{seq})")


@command_group("rules")
def rules_group() -> None:
    """Config-center rule documents: condition, affinity, tag, script, shard rules,
    configurators and migration rules.

    Keys look like demo.Greeter::.condition-router (service: interface:version:group),
    shop.tag-router (provider application), demo.Greeter:1.0.0:.shard-router or
    shop.migration (the consumer application's migration rule, stored where Dubbo reads it:
    /dubbo/config/DUBBO_SERVICEDISCOVERY_MIGRATION/shop.migration).
    """


@rules_group.command("list", context_settings=CONTEXT_SETTINGS)
@click.option("--kind", type=KIND, help="Only rules of this kind.")
@click.option("--service", help="Only rules keyed by this service interface.")
@json_option
def list_rules(kind: str | None, service: str | None) -> None:
    """List every rule document with its kind, version and enabled flag.

    \b
    Examples:
      dubbo-py rules list
      dubbo-py rules list --kind condition-router --service demo.Greeter

    \b
    JSON: [{"key", "kind", "target", "version", "enabled"}]
    """
    env = env_of()
    several = env.several
    if several:
        outcomes = each_registry(env, lambda child: _rule_rows(child.registry, kind, service))
        rows = labelled(outcomes)
    else:
        rows = _rule_rows(env.registry, kind, service)
    if env.json:
        emit_json(rows)
    else:
        print_table(
            None,
            [*(["REGISTRY", "ZONE"] if several else []), "KEY", "KIND", "VERSION", "ENABLED"],
            (
                [
                    *([r["registry"], r["zone"] or ""] if several else []),
                    r["key"],
                    r["kind"],
                    r["version"],
                    _enabled_cell(r),
                ]
                for r in rows
            ),
            empty="no rules",
        )
    if several:
        raise_failures(outcomes)


def _enabled_cell(row: dict[str, Any]) -> object:
    if row["enabled"] is not None:
        return row["enabled"]
    kind = rule_kinds.kind_named(row["kind"])
    # "-": the kind has no flag (a migration rule); "?": the document is not a mapping.
    return "-" if kind is not None and not kind.has_enabled else "?"


def _rule_rows(registry: Registry, kind: str | None, service: str | None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for key in sorted(registry.config_keys()):
        try:
            rule = rules.parse_key(key)
        except ValueError:
            continue  # not a rule document (other config-center data)
        if (kind and rule.kind != kind) or (service and rule.interface != service):
            continue
        doc = registry.get_config(key)
        if doc is None:
            continue
        rows.append(
            {
                "key": key,
                "kind": rule.kind,
                "target": rule.target,
                "version": doc.version,
                "enabled": rules.document_enabled(doc.text) if rule.rule_kind.has_enabled else None,
            }
        )
    return rows


@rules_group.command("get", context_settings=CONTEXT_SETTINGS)
@click.argument("key", type=RULE_KEY)
@json_option
def get_rule(key: rules.RuleKey) -> None:
    """Print the rule document at KEY exactly as stored (redirect it to a file to edit it).

    With several --registry, each registry's document follows a '# registry ID (zone Z):
    version N' line; a registry without it is an error (exit 1) after the others are printed.

    \b
    Examples:
      dubbo-py rules get demo.Greeter:1.0.0:.condition-router > rule.yaml

    \b
    JSON: {"key", "kind", "version", "enabled", "text"}
    several registries: [{"registry", "zone", "key", ...}]
    """
    env = env_of()

    def read(child: CliEnv) -> dict[str, Any]:
        doc = child.registry.get_config(key.key)
        if doc is None:
            raise _missing_key(key.key, child)
        return {
            "key": key.key,
            "kind": key.kind,
            "version": doc.version,
            "enabled": rules.document_enabled(doc.text) if key.rule_kind.has_enabled else None,
            "text": doc.text,
        }

    if env.several:
        outcomes = each_registry(env, lambda child: [read(child)])
        rows = labelled(outcomes)
        if env.json:
            emit_json(rows)
        for row in [] if env.json else rows:
            zone = f" (zone {row['zone']})" if row["zone"] else ""
            click.echo(f"# registry {row['registry']}{zone}: version {row['version']}")
            click.echo(row["text"], nl=not row["text"].endswith("\n"))
        raise_failures(outcomes)
        return
    found = read(env)
    if env.json:
        emit_json(found)
        return
    click.echo(found["text"], nl=not found["text"].endswith("\n"))


def _resolve(file: str, text: str, key: rules.RuleKey | None, kind: str | None) -> rules.RuleKey:
    return rules.resolve_key(text, file, key=None if key is None else key.key, kind=kind)


@rules_group.command("validate", context_settings=CONTEXT_SETTINGS)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--key", type=RULE_KEY, help="The key the rule is meant for (sets the kind).")
@click.option("--kind", type=KIND, help="The rule kind (default: from --key or the fields).")
@strict_option
@json_option
def validate_rule(file: str, key: rules.RuleKey | None, kind: str | None, strict: bool) -> None:
    """Check a rule file exactly as consumers would read it.

    An invalid rule is reported as FILE:LINE:COLUMN: reason (exit 1). A valid one is then
    checked for what Dubbo accepts but does not do what was meant, each reported as a warning
    (exit 0; 1 with --strict): keys that never match (arguments/attachments without an index
    or name, and -- when a registry is named with --registry or $DUBBO_PY_REGISTRY -- keys no
    registered provider or consumer has), a scope contradicting the key, a key naming no
    registered service or read by no consumer, a rule leaving a consumer with no provider.
    Without a named registry, the registry is not read.

    \b
    Examples:
      dubbo-py rules validate greeter-condition.yaml
      dubbo-py rules validate shards.yaml --key demo.Greeter:1.0.0:.shard-router

    \b
    JSON: {"file", "key", "kind", "valid": true, "routers": [names],
           "warnings": [{"code", "message"}], "notes": [text]}
    """
    env = env_of()
    text = _read_file(file)
    try:
        rule = _resolve(file, text, key, kind)
    except rules.KeyUnknown:
        # A rule that names no key can still be checked when its kind is known.
        data = rules.load_document(text, file).data
        found = kind or rules.infer_kind(data)
        if found is None:
            raise
        rule = rules.RuleKey("", rules.scope_target(data, found), found)
    names = rules.validate(rule, text, file)
    try:
        warnings, notes = _lint(rule, text, file, _named_registry(), strict)
    except StoreError as exc:
        # validate stays usable offline: a named registry that cannot be read only costs
        # the registry checks
        click.echo(f"note: registry checks skipped: {exc}", err=True)
        warnings, _ = _lint(rule, text, file, None, strict)
        notes = [f"registry checks skipped: {exc}"]
    if env.json:
        emit_json(
            {
                "file": file,
                "key": rule.key or None,
                "kind": rule.kind,
                "valid": True,
                "routers": names,
                "warnings": [w.to_json() for w in warnings],
                "notes": notes,
            }
        )
        return
    where = f" for {rule.key}" if rule.key else ""
    tail = f" ({len(warnings)} warning{'s' if len(warnings) != 1 else ''})" if warnings else ""
    click.echo(f"ok: {file} is a valid {rule.kind} rule{where}{tail}")


def _dry_run(
    rule: rules.RuleKey,
    text: str,
    file: str,
    methods: tuple[str, ...],
    attachments: dict[str, str],
    warnings: list[LintWarning],
    env: CliEnv | None = None,
    where: str = "",
) -> dict[str, Any]:
    """Show what pushing would change on ``env``'s registry (``where`` names it in the
    text output) and return it as JSON (printed only by the caller)."""
    env = env or env_of()
    current = env.registry.get_config(rule.key)
    old = "" if current is None else current.text
    label = f"{rule.key} (version {current.version})" if current else f"{rule.key} (absent)"
    diff = "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True), text.splitlines(keepends=True), label, file
        )
    )
    from dubbo_py.admin.rules.reach import reach_of_change  # only a dry run needs it

    report = reach_of_change(env.registry, rule, text, methods=methods, attachments=attachments)
    found = {
        "key": rule.key,
        "kind": rule.kind,
        "dry_run": True,
        "current_version": None if current is None else current.version,
        "diff": diff,
        "reach": [r.to_json() for r in report.rows],
        "notes": report.notes,
        "warnings": [w.to_json() for w in warnings],
    }
    if env.json:
        return found
    out = console()
    out.print(f"dry run{where}: {rule.key} would be " + ("updated" if current else "created"))
    click.echo(diff if diff else "(no change to the text)\n", nl=False)
    if diff and not diff.endswith("\n"):
        click.echo()
    print_table(
        "reach per consumer (before -> after)",
        ["CONSUMER", "APPLICATION", "METHOD", "BEFORE", "AFTER", ""],
        (
            [
                r.consumer.host,
                r.consumer.get_str("application"),
                r.method or "(none)",
                ", ".join(r.before) or "-",
                ", ".join(r.after) or "-",
                "changed" if r.changed else "",
            ]
            for r in report.rows
        ),
    )
    for note in report.notes:
        click.echo(f"note: {note}")
    return found


@rules_group.command("push", context_settings=CONTEXT_SETTINGS)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--key", type=RULE_KEY, help="Where to write (default: from the rule's fields).")
@click.option("--kind", type=KIND, help="The rule kind (default: from --key or the fields).")
@expect_version_option
@click.option("--dry-run", is_flag=True, help="Show the diff and the effect; write nothing.")
@click.option("--method", "methods", multiple=True, help="Dry run: methods to route (repeat).")
@click.option(
    "--attachment", "attachments", multiple=True, metavar="NAME=VALUE", help="Dry run: attachment."
)
@strict_option
@operator_option
@json_option
def push_rule(
    file: str,
    key: rules.RuleKey | None,
    kind: str | None,
    expect_version: int | None,
    dry_run: bool,
    methods: tuple[str, ...],
    attachments: tuple[str, ...],
    strict: bool,
) -> None:
    """Validate a rule file and write it to the registry (a versioned write).

    The key comes from --key, or from the rule's own fields: 'scope' and 'key' as Dubbo 3
    rules carry them (tag and script rules name the provider application), the kind from
    --kind or the fields (conditions, tags, script, scheme/shards, configs). A concurrent
    change makes the push fail with a conflict (exit 1): re-read and retry.

    A valid rule is checked against the registry as `rules validate` does; each finding is a
    warning on stderr (the push goes on), or with --strict a refusal (nothing is written).

    \b
    Examples:
      dubbo-py rules push greeter-condition.yaml --dry-run
      dubbo-py rules push greeter-condition.yaml
      dubbo-py rules push tags.yaml --key greeter.tag-router --expect-version 3

    \b
    JSON: {"key", "action", "version", "changed", "history_seq", "warnings"}
    dry run: {"key", "kind", "dry_run", "current_version", "diff", "reach", "notes",
              "warnings"}
    several registries: a list of those, each with "registry" and "zone" (or "error")
    """
    env = env_of()
    text = _read_file(file)
    rule = _resolve(file, text, key, kind)
    rules.validate(rule, text, file)
    if env.several:
        if dry_run:
            _dry_run_each(rule, text, file, methods, attachment_pairs(attachments), strict)
        else:
            _push_each(rule, text, file, expect_version, strict)
        return
    # A push may create the registry (an embedded one not written yet); a dry run only reads.
    ops = None if dry_run else env.rule_ops()
    warnings, _ = _lint(rule, text, file, env.registry, strict, str(env.address))
    if ops is None:
        found = _dry_run(rule, text, file, methods, attachment_pairs(attachments), warnings)
        if env.json:
            emit_json(found)
        return
    result = ops.put(rule.key, text, action="push", expect_version=expect_version)
    _report_write(result, "pushed", warnings)


def _push_each(
    rule: rules.RuleKey, text: str, file: str, expect_version: int | None, strict: bool
) -> None:
    """Push a validated rule to each registry the run names, and report each one: a registry
    that refuses it (conflict, --strict, unreachable) does not stop the others."""
    env = env_of()

    warned: dict[str, list[LintWarning]] = {}

    def push(child: CliEnv) -> WriteResult:
        ops = child.rule_ops()
        warnings, _ = _lint(rule, text, file, child.registry, strict, str(child.address))
        warned[str(child.registry_text)] = warnings
        return ops.put(rule.key, text, action="push", expect_version=expect_version)

    report_writes(
        env,
        rule.key,
        "pushed",
        each_registry(env, push),
        lambda target: {"warnings": [w.to_json() for w in warned.get(target.address, [])]},
    )


def _dry_run_each(
    rule: rules.RuleKey,
    text: str,
    file: str,
    methods: tuple[str, ...],
    attachments: dict[str, str],
    strict: bool,
) -> None:
    """A dry run on each registry the run names: its diff against what that registry holds
    and the reach on that registry's consumers, one section (JSON: one object) each."""
    env = env_of()
    targets = env.targets()

    def dry_run(child: CliEnv) -> list[dict[str, Any]]:
        target = next(t for t in targets if t.address == child.registry_text)
        zone = f" (zone {target.zone})" if target.zone else ""
        warnings, _ = _lint(rule, text, file, child.registry, strict, str(child.address))
        where = f" on registry {target.id}{zone}"
        return [_dry_run(rule, text, file, methods, attachments, warnings, child, where)]

    outcomes = each_registry(env, dry_run)
    if env.json:
        # In the order given; a registry that failed has its error where its dry run would be.
        emit_json(
            [
                {**o.labels(), **o.value[0]}
                if o.value
                else {
                    **o.labels(),
                    "key": rule.key,
                    "error": o.error.format_message() if o.error else "",
                    "reason": o.error.reason if o.error else "",
                }
                for o in outcomes
            ]
        )
    raise_failures(outcomes)


def _write(key: str, done: str, write: Callable[[CliEnv], WriteResult]) -> None:
    """Run ``write`` on the run's registry and report what it did; with several registries,
    on each of them (one that fails does not stop the others)."""
    env = env_of()
    if env.several:
        report_writes(env, key, done, each_registry(env, write))
        return
    _report_write(write(env), done)


def _key_write(name: str) -> Callable[[Callable[..., None]], click.Command]:
    """Declare ``rules NAME KEY``, a versioned write of the rule at KEY (enable, disable,
    delete): --expect-version pins the version, --operator names who is recorded."""

    def declare(f: Callable[..., None]) -> click.Command:
        f = json_option(f)
        f = operator_option(f)
        f = expect_version_option(f)
        f = click.argument("key", type=RULE_KEY)(f)
        return rules_group.command(name, context_settings=CONTEXT_SETTINGS)(f)

    return declare


def _flip(key: rules.RuleKey, enabled: bool, expect_version: int | None) -> None:
    if not key.rule_kind.has_enabled:
        raise AdminError(
            f"{key.key}: a {key.kind} rule has no 'enabled' flag (Dubbo reads none, so "
            f"consumers would ignore it); 'rules delete {key.key}' puts each consumer back "
            "in its configured step, 'rules rollback' restores the previous rule",
            reason="invalid",
        )

    def flip(child: CliEnv) -> WriteResult:
        if child.registry.get_config(key.key) is None:
            raise _missing_key(key.key, child)
        return child.rule_ops().set_enabled(key.key, enabled, expect_version=expect_version)

    _write(key.key, "enabled" if enabled else "disabled", flip)


@_key_write("enable")
def enable_rule(key: rules.RuleKey, expect_version: int | None) -> None:
    """Set 'enabled: true' in the rule at KEY (the rest of its text is kept).

    \b
    Examples:
      dubbo-py rules enable demo.Greeter:1.0.0:.condition-router
    """
    _flip(key, True, expect_version)


@_key_write("disable")
def disable_rule(key: rules.RuleKey, expect_version: int | None) -> None:
    """Set 'enabled: false' in the rule at KEY (the rest of its text is kept).

    \b
    Examples:
      dubbo-py rules disable demo.Greeter:1.0.0:.condition-router
    """
    _flip(key, False, expect_version)


@_key_write("delete")
def delete_rule(key: rules.RuleKey, expect_version: int | None) -> None:
    """Delete the rule at KEY (recorded in its history, so it can be rolled back).

    \b
    Examples:
      dubbo-py rules delete demo.Greeter:1.0.0:.condition-router
    """

    def delete(child: CliEnv) -> WriteResult:
        if expect_version is None and child.registry.get_config(key.key) is None:
            raise _missing_key(key.key, child)
        return child.rule_ops().delete(key.key, expect_version=expect_version)

    _write(key.key, "deleted", delete)


@rules_group.command("history", context_settings=CONTEXT_SETTINGS)
@click.argument("key", type=RULE_KEY)
@click.option("--text", "show_text", is_flag=True, help="Print each entry's full text.")
@json_option
def rule_history(key: rules.RuleKey, show_text: bool) -> None:
    """List the recorded changes of KEY, oldest first (the newest 20 are kept), each with
    what it changed from the entry before it.

    \b
    Examples:
      dubbo-py rules history demo.Greeter:1.0.0:.condition-router
      dubbo-py rules history demo.Greeter:1.0.0:.condition-router --text

    \b
    JSON: [{"seq", "action", "time", "time_ms", "operator", "version",
            "deleted", "restored", "text", "change"}]
    several registries: each entry also has "registry" and "zone" (each registry keeps, and
    numbers, its own history)
    """
    env = env_of()

    def history(child: CliEnv) -> list[dict[str, Any]]:
        entries = child.history().entries(key.key)
        if not entries and child.registry.get_config(key.key) is None:
            raise _missing_key(key.key, child)
        changes = [
            change_summary(entries[i - 1].text if i else None, e.text, first=(i == 0 and e.seq > 0))
            for i, e in enumerate(entries)
        ]
        return [
            {**e.to_json(), "change": c, "time_iso": e.time_iso}
            for e, c in zip(entries, changes, strict=True)
        ]

    several = env.several
    if several:
        outcomes = each_registry(env, history)
        rows = labelled(outcomes)
    else:
        rows = history(env)
    if env.json:
        emit_json([{k: v for k, v in r.items() if k != "time_iso"} for r in rows])
    elif show_text:
        for r in rows:
            where = f" registry {r['registry']}" if several else ""
            click.echo(f"#{where} {r['seq']} {r['time_iso']} {r['action']} by {r['operator']}")
            click.echo("(deleted)" if r["text"] is None else r["text"].rstrip("\n"))
    else:
        print_table(
            f"history of {key.key}",
            [
                *(["REGISTRY", "ZONE"] if several else []),
                "SEQ",
                "TIME (UTC)",
                "ACTION",
                "OPERATOR",
                "VERSION",
                "CHANGE",
            ],
            (
                [
                    *([r["registry"], r["zone"] or ""] if several else []),
                    r["seq"],
                    r["time_iso"],
                    r["action"] + (f" (to #{r['restored']})" if r["restored"] is not None else ""),
                    r["operator"],
                    "-" if r["version"] is None else r["version"],
                    r["change"],
                ]
                for r in rows
            ),
            empty=f"no history for {key.key} (it was not written with dubbo-py)",
        )
    if several:
        raise_failures(outcomes)


@rules_group.command("rollback", context_settings=CONTEXT_SETTINGS)
@click.argument("key", type=RULE_KEY)
@click.option("--to", "to_seq", type=click.IntRange(min=0), help="The history entry to restore.")
@expect_version_option
@operator_option
@json_option
def rollback_rule(key: rules.RuleKey, to_seq: int | None, expect_version: int | None) -> None:
    """Restore the version of KEY before the current one (or history entry --to SEQ).

    Repeated rollbacks step further back. Restoring a deletion deletes the rule. The restore
    is a versioned write, recorded in the history as 'rollback'.

    With several --registry, each registry restores its own previous version (its history is
    its own); --to is refused there, since each registry numbers its history itself.

    \b
    Examples:
      dubbo-py rules rollback demo.Greeter:1.0.0:.condition-router
      dubbo-py rules rollback demo.Greeter:1.0.0:.condition-router --to 0
    """
    if to_seq is not None and env_of().several:
        raise click.UsageError(
            "--to takes one --registry: each registry numbers its own history, so entry "
            f"#{to_seq} is a different change in each (see 'rules history' with several "
            "--registry); leave --to out to restore each registry's previous version"
        )
    # With several registries each one restores its own previous version (to_seq is None).
    _write(
        key.key,
        "rolled back",
        lambda child: child.rule_ops().rollback(key.key, to_seq, expect_version=expect_version),
    )
