"""``dubbo-py shard``: locate keys and plan splits without touching the registry.

``shard locate`` prints key -> hash -> shard(s) for a layout; ``shard plan`` prints which old shard
each new shard of a split takes its keys from, or refuses (exit code 1) with the reason. Bad
options are usage errors (exit code 2). Mounted on the main CLI as ``from
dubbo_py.admin.commands.shard import shard``.
"""

from __future__ import annotations

import json
from typing import Any

import click
import yaml
from rich.console import Console
from rich.table import Table

from dubbo_py.admin.common import command_group, env_of
from dubbo_py.router.shard.plan import SplitPlan, plan_split
from dubbo_py.router.shard.schemes import Layout, LayoutError, Location, Scheme, make_layout

__all__ = ["shard"]

_SCHEMES = click.Choice([s.value for s in Scheme])


def _console() -> Console:
    # Plain text when not on a terminal (pipes, tests); no syntax highlighting of numbers.
    return Console(highlight=False, soft_wrap=False)


@command_group()
def shard() -> None:
    """Shard routing tools: where keys live, and how a split moves them (offline: no
    registry is read)."""


@shard.command()
@click.option("--scheme", type=_SCHEMES, required=True, help="Routing function.")
@click.option("--shards", type=int, required=True, help="Number of shards.")
@click.option(
    "--routing-num-shards",
    type=int,
    default=None,
    help="elasticsearch: number_of_routing_shards (default: what a new index gets).",
)
@click.option(
    "--partition-size",
    type=int,
    default=1,
    show_default=True,
    help="Elasticsearch routing partition size.",
)
@click.option(
    "--initial-shards",
    type=int,
    default=None,
    help="solr: shard count the collection was created with (default: --shards).",
)
@click.option("--id", "doc_id", default=None, help="Document id, for partitioned routing.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.argument("keys", nargs=-1, required=True)
def locate(
    scheme: str,
    shards: int,
    routing_num_shards: int | None,
    partition_size: int,
    initial_shards: int | None,
    doc_id: str | None,
    as_json: bool,
    keys: tuple[str, ...],
) -> None:
    """Print KEY -> hash -> shard(s) (0-based). For solr a key ending in "!" is a route prefix.

    \b
    Examples:
      dubbo-py shard locate --scheme elasticsearch --shards 5 user-42 user-43
      dubbo-py shard locate --scheme solr --shards 4 'tenant1!doc7' --json
    """
    as_json = as_json or env_of().json
    try:
        layout = make_layout(
            scheme,
            shards,
            routing_num_shards=routing_num_shards,
            partition_size=partition_size,
            initial_shards=initial_shards,
        )
    except LayoutError as exc:
        raise click.UsageError(_option_message(exc)) from None
    if doc_id is not None and layout.partition_size == 1:
        raise click.UsageError("--id applies to partitioned routing only (--partition-size > 1)")
    found = [layout.locate(key, doc_id) for key in keys]
    if as_json:
        click.echo(json.dumps([_location_json(loc) for loc in found]))
        return
    table = Table(title=_layout_title(layout))
    table.add_column("key")
    table.add_column("hash", justify="right")
    table.add_column("hex")
    table.add_column("shard(s)")
    for loc in found:
        if loc.hash is None:
            hash_text, hex_text = "-", f"range {loc.range}"
        else:
            hash_text, hex_text = str(loc.hash), f"{loc.hash & 0xFFFFFFFF:08x}"
        table.add_row(loc.key, hash_text, hex_text, ", ".join(str(s) for s in loc.shards))
    _console().print(table)


@shard.command()
@click.option("--scheme", type=_SCHEMES, required=True, help="Routing function.")
@click.option("--from", "from_shards", type=int, required=True, help="Shard count now.")
@click.option("--to", "to_shards", type=int, required=True, help="Shard count after the split.")
@click.option(
    "--routing-num-shards",
    type=int,
    default=None,
    help="elasticsearch: the index's routing_num_shards (default: Elasticsearch's for --from).",
)
@click.option(
    "--initial-shards",
    type=int,
    default=None,
    help="solr: shard count the collection was created with (default: --from).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def plan(
    scheme: str,
    from_shards: int,
    to_shards: int,
    routing_num_shards: int | None,
    initial_shards: int | None,
    as_json: bool,
) -> None:
    """Plan a split: which old shard each new shard takes its keys from (exit 1 if refused).

    \b
    Examples:
      dubbo-py shard plan --scheme elasticsearch --from 5 --to 10
      dubbo-py shard plan --scheme solr --from 2 --to 4 --json
    """
    as_json = as_json or env_of().json
    try:
        result = plan_split(scheme, from_shards, to_shards, routing_num_shards, initial_shards)
    except LayoutError as exc:
        if exc.field == "shards":
            raise click.UsageError(f"--from: {exc.reason}") from None
        if exc.field == "to_shards":
            raise click.UsageError(f"--to: {exc.reason}") from None
        raise click.UsageError(_option_message(exc)) from None
    if as_json:
        click.echo(json.dumps(_plan_json(result)))
    elif result.ok:
        _print_plan(result)
    else:
        click.echo(f"refused: {result.refusal}", err=True)
    if not result.ok:
        raise SystemExit(1)


# ---------------------------------------------------------------- rendering


def _option_message(exc: LayoutError) -> str:
    return f"--{exc.field.replace('_', '-')}: {exc.reason}"


def _layout_title(layout: Layout) -> str:
    title = f"{layout.scheme.value}, {layout.shards} shards"
    if layout.scheme is Scheme.ELASTICSEARCH:
        title += f", routing_num_shards {layout.routing_num_shards}"
    if layout.partition_size != 1:
        title += f", partition_size {layout.partition_size}"
    if layout.scheme is Scheme.SOLR and layout.initial_shards != layout.shards:
        title += f", created with {layout.initial_shards}"
    return title


def _location_json(loc: Location) -> dict[str, Any]:
    return {"key": loc.key, "hash": loc.hash, "shards": list(loc.shards)}


def _plan_json(result: SplitPlan) -> dict[str, Any]:
    out: dict[str, Any] = {
        "scheme": result.scheme.value,
        "from_shards": result.from_shards,
        "to_shards": result.to_shards,
        "ok": result.ok,
        "refusal": result.refusal,
    }
    if not result.ok:
        return out
    new_shards = []
    for j, source in enumerate(result.sources):
        entry: dict[str, Any] = {"shard": j, "from": source}
        if result.new_ranges:
            entry["range"] = str(result.new_ranges[j])
        new_shards.append(entry)
    out["routing_num_shards"] = result.routing_num_shards
    out["initial_shards"] = result.initial_shards
    out["new_shards"] = new_shards
    out["rule_during_split"] = result.rule_fields(during=True)
    out["rule_after_split"] = result.rule_fields(during=False)
    return out


def _print_plan(result: SplitPlan) -> None:
    console = _console()
    table = Table(
        title=f"{result.scheme.value} split {result.from_shards} -> {result.to_shards} shards"
    )
    table.add_column("new shard", justify="right")
    table.add_column("from old shard", justify="right")
    if result.new_ranges:
        table.add_column("new range")
        table.add_column("old range")
    for j, source in enumerate(result.sources):
        row = [str(j), str(source)]
        if result.new_ranges:
            row += [str(result.new_ranges[j]), str(result.old_ranges[source])]
        table.add_row(*row)
    console.print(table)
    if result.routing_num_shards is not None:
        why = (
            "Elasticsearch computes it anew when a one-shard index splits"
            if result.from_shards == 1
            else "kept across the split"
        )
        console.print(f"routing_num_shards: {result.routing_num_shards} ({why})")
    console.print(
        "\nRule while the split runs (start each new provider with "
        f"shard=<n>&shards={result.to_shards}, once it holds its data):"
    )
    console.print(yaml.safe_dump(result.rule_fields(during=True), sort_keys=False).rstrip())
    console.print(
        "\nRule once every new shard serves its keys (stop the old providers first, or have "
        f"them advertise shards={result.from_shards}):"
    )
    console.print(yaml.safe_dump(result.rule_fields(during=False), sort_keys=False).rstrip())
