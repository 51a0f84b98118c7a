"""``dubbo-py``: the admin CLI (docs/design.md §6).

One entry point with subcommands; the registry comes from ``--registry``, ``$DUBBO_PY_REGISTRY``
or the embedded default. Tables by default, ``--json`` everywhere. Exit codes: 0 success, 1 a
refused operation, 2 usage. See ``docs/cli.md``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

import click

from dubbo_py.admin.acl_commands import acl_group
from dubbo_py.admin.call_commands import call
from dubbo_py.admin.common import CONTEXT_SETTINGS, DEBUG_ENV, AdminGroup, CliEnv
from dubbo_py.admin.console.command import console_command
from dubbo_py.admin.override_commands import override_group
from dubbo_py.admin.registry_commands import registry_group
from dubbo_py.admin.route_commands import route_group
from dubbo_py.admin.rule_commands import rules_group
from dubbo_py.admin.service_commands import consumers, providers, services
from dubbo_py.admin.shard_commands import shard
from dubbo_py.admin.top import top
from dubbo_py.registry.address import ENV_REGISTRY
from dubbo_py.version import __version__

__all__ = ["cli", "main"]


@click.group(cls=AdminGroup, context_settings=CONTEXT_SETTINGS)
@click.option(
    "--registry",
    "registry_text",
    metavar="ADDRESS",
    help="zookeeper://host:port[/chroot], etcd://host:port[/prefix] or sqlite:///path "
    f"(default: ${ENV_REGISTRY}, "
    "else the embedded registry in your data directory).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of tables.")
@click.option(
    "--auth",
    metavar="USER:PASSWORD",
    envvar="DUBBO_PY_REGISTRY_AUTH",
    help="ZooKeeper digest credentials (prefer $DUBBO_PY_REGISTRY_AUTH: not in `ps`).",
)
@click.option("--operator", help="Who to record in rule history (default: $USER).")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    help="Seconds to wait for the registry to answer.",
)
@click.version_option(__version__, "-V", "--version", prog_name="dubbo-py")
@click.pass_context
def cli(
    ctx: click.Context,
    registry_text: str | None,
    as_json: bool,
    auth: str | None,
    operator: str | None,
    timeout: float,
) -> None:
    """Administer a dubbo-py (or Apache Dubbo) registry: services, rules, overrides, routing.

    \b
    Examples:
      dubbo-py services
      dubbo-py providers demo.Greeter --json
      dubbo-py rules push greeter-condition.yaml --dry-run
      dubbo-py route test scenario.yaml
    """
    env = ctx.obj if isinstance(ctx.obj, CliEnv) else CliEnv()
    ctx.obj = env
    if registry_text is not None:
        env.registry_text = registry_text
    env.json = env.json or as_json
    env.operator = operator or env.operator
    env.auth = auth or env.auth
    env.timeout = timeout
    ctx.call_on_close(env.close)


cli.add_command(services)
cli.add_command(providers)
cli.add_command(consumers)
cli.add_command(rules_group)
cli.add_command(override_group)
cli.add_command(route_group)
cli.add_command(registry_group)
cli.add_command(acl_group)
cli.add_command(call)
cli.add_command(console_command)
cli.add_command(top)

# The shard tools (dubbo_py/admin/shard_commands.py, written on its own branch).
cli.add_command(shard)


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (``dubbo-py``)."""
    verbose = bool(os.environ.get(DEBUG_ENV))
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING, format="warning: %(message)s"
    )
    if not verbose:
        # kazoo logs every failed connection attempt; the CLI says "unreachable" once instead.
        logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    cli.main(args=list(argv) if argv is not None else None, prog_name="dubbo-py")


if __name__ == "__main__":
    main()
