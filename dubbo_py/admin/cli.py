"""``dubbo-py``: the admin CLI (docs/design.md §6).

One entry point with subcommands; the registry comes from ``--registry``, ``$DUBBO_PY_REGISTRY``
or the embedded default. Tables by default, ``--json`` everywhere. Exit codes: 0 success, 1 a
refused operation, 2 usage. See ``docs/cli.md``.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Iterator, Mapping, MutableMapping, Sequence

import click

from dubbo_py.admin.common import (
    CONFIG_ENV,
    CONTEXT_SETTINGS,
    DEBUG_ENV,
    AdminGroup,
    CliEnv,
    global_options,
    seconds_option,
    set_registries,
)
from dubbo_py.registry.store.address import ENV_REGISTRY
from dubbo_py.version import __version__

__all__ = ["COMMANDS", "LazyCommands", "cli", "main"]

#: Every subcommand, as ``module:attribute``. A command's module is imported only when that
#: command runs (or a help page lists the commands): ``dubbo-py --version`` and ``rules
#: validate`` must not load the console's web stack, gRPC or ZooKeeper to start
#: (tests/core/test_startup_imports.py).
COMMANDS: Mapping[str, str] = {
    "services": "dubbo_py.admin.commands.services:services",
    "providers": "dubbo_py.admin.commands.services:providers",
    "consumers": "dubbo_py.admin.commands.services:consumers",
    "rules": "dubbo_py.admin.commands.rules:rules_group",
    "override": "dubbo_py.admin.commands.override:override_group",
    "route": "dubbo_py.admin.commands.route:route_group",
    "registry": "dubbo_py.admin.commands.registry:registry_group",
    "acl": "dubbo_py.admin.commands.acl:acl_group",
    "call": "dubbo_py.admin.commands.call:call",
    "console": "dubbo_py.admin.console.command:console_command",
    "top": "dubbo_py.admin.top:top",
    "snapshot": "dubbo_py.admin.commands.snapshot:snapshot_group",
    "log-level": "dubbo_py.admin.commands.log_level:log_level",
    # The shard tools (dubbo_py/admin/commands/shard.py, written on its own branch).
    "shard": "dubbo_py.admin.commands.shard:shard",
}


class LazyCommands(MutableMapping[str, click.Command]):
    """A group's commands by name, each imported from its ``module:attribute`` when first
    read. Names, membership and length need no import, so click lists the commands and
    checks a name without loading any; reading one (``group.commands[name]``, what click's
    ``get_command`` does) imports it and gives it the global options (:func:`global_options`),
    as :meth:`~dubbo_py.admin.common.SuggestingGroup.add_command` would have."""

    def __init__(self, lazy: Mapping[str, str]) -> None:
        self._lazy = dict(lazy)
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        command = self._loaded.get(name)
        if command is None:
            module, _, attribute = self._lazy[name].partition(":")
            loaded = getattr(importlib.import_module(module), attribute)
            if not isinstance(loaded, click.Command):
                raise TypeError(f"{self._lazy[name]} is not a click command")
            command = self._loaded[name] = global_options(loaded)
        return command

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._lazy.pop(name, None)
        self._loaded.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._lazy or name in self._loaded

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self._lazy, *self._loaded]))

    def __len__(self) -> int:
        return len(self._lazy.keys() | self._loaded.keys())


@click.group(cls=AdminGroup, commands=LazyCommands(COMMANDS), context_settings=CONTEXT_SETTINGS)
@click.option(
    "--registry",
    "registry_text",
    metavar="ADDRESS",
    multiple=True,
    help="zookeeper://host:port[/chroot], etcd://host:port[/prefix], nacos://host:port, "
    f"sqlite:///path or a registry id of dubbo.yaml (default: ${ENV_REGISTRY}, "
    "else the embedded registry in your data directory); repeat it to read several.",
)
@click.option(
    "--config",
    "config_path",
    metavar="FILE",
    help=f"The dubbo.yaml whose registries: ids --registry may name (default: ${CONFIG_ENV}, "
    "else ./dubbo.yaml).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of tables.")
@click.option(
    "--auth",
    metavar="USER:PASSWORD",
    envvar="DUBBO_PY_REGISTRY_AUTH",
    help=(
        "Registry identity: a ZooKeeper digest or an etcd user "
        "(prefer $DUBBO_PY_REGISTRY_AUTH: not in `ps`)."
    ),
)
@click.option("--operator", help="Who to record in rule history (default: $USER).")
@seconds_option("--timeout", 5.0, "Seconds to wait for the registry to answer.")
@click.version_option(__version__, "-V", "--version", prog_name="dubbo-py")
@click.pass_context
def cli(
    ctx: click.Context,
    registry_text: tuple[str, ...],
    config_path: str | None,
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
    set_registries(env, registry_text)
    env.config_path = config_path or env.config_path
    env.json = env.json or as_json
    env.operator = operator or env.operator
    env.auth = auth or env.auth
    env.timeout = timeout
    ctx.call_on_close(env.close)


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
