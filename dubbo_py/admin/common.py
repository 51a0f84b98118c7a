"""What every ``dubbo-py`` command shares: the run's environment (registry, ``--json``,
operator), errors with their exit codes, output helpers and the suggesting command group.

Exit codes: 0 success, 1 a refused operation (invalid rule, conflict, denied, not found,
registry unreachable), 2 usage. Errors are one line on stderr; with ``--json`` an object
``{"error": message, "reason": ...}`` is also printed on stdout.
"""

from __future__ import annotations

import contextlib
import difflib
import getpass
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, TypeVar

import click

# Only what the root group needs is imported with this module: every command imports it, and
# ``dubbo-py --version`` must start without rich, the rule tools or gRPC (which dubbo_py.errors
# imports). The rest is imported where it is used, by the commands that use it.
if TYPE_CHECKING:
    from rich.console import Console

    from dubbo_py.admin.connection import StoreOpener
    from dubbo_py.admin.rules.history import History
    from dubbo_py.admin.rules.operations import RuleOps
    from dubbo_py.registry.registry import Registry
    from dubbo_py.registry.store.address import RegistryAddress
    from dubbo_py.registry.store.base import Store

__all__ = [
    "CONFIG_ENV",
    "CONTEXT_SETTINGS",
    "AdminError",
    "CliEnv",
    "RegistryTarget",
    "SuggestingGroup",
    "as_admin_error",
    "attachment_pairs",
    "closest",
    "command_group",
    "emit_json",
    "env_of",
    "global_options",
    "json_option",
    "operator_option",
    "print_table",
    "seconds_option",
]

F = TypeVar("F", bound=Callable[..., Any])

#: Set to see the traceback of an internal error instead of one line.
DEBUG_ENV = "DUBBO_PY_DEBUG"

#: The ``dubbo.yaml`` whose ``registries:`` ids ``--registry`` may name (default:
#: ``dubbo.yaml`` in the current directory).
CONFIG_ENV = "DUBBO_PY_CONFIG"

#: What a command that reads or writes one registry says when given several.
_ONE_REGISTRY = (
    "this command takes one --registry; services, providers, consumers, rules (but validate), "
    "top and console take several (docs/cli.md, 'Several registries')"
)


@dataclass(frozen=True, slots=True)
class RegistryTarget:
    """One registry a command reads or writes: its id (the ``dubbo.yaml`` id, else the
    address as given), its address and its zone (from ``dubbo.yaml``, None otherwise)."""

    id: str
    address: str
    zone: str | None = None


CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class AdminError(click.ClickException):
    """A refused operation: exit 1, one line on stderr (and ``{"error": ...}`` with --json).

    ``reason`` is a short word scripts can test: invalid, conflict, not-found, denied,
    unreachable, registry, unsupported. ``payload`` replaces the JSON error object when a
    command has its own error shape; ``printed`` says stdout output was already written.
    """

    exit_code = 1

    def __init__(
        self,
        message: str,
        *,
        reason: str = "refused",
        payload: dict[str, Any] | None = None,
        printed: bool = False,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.payload = payload
        self.printed = printed
        self.json = False
        # The registry a "not found" searched, added to the message when shown (click 8.5
        # declares ``message`` final, so it is not rewritten).
        self.searched: str | None = None

    def format_message(self) -> str:
        """The message, with the registry searched when one was noted."""
        if self.searched is None:
            return self.message
        return f"{self.message} (searched registry {self.searched})"

    def show(self, file: IO[Any] | None = None) -> None:
        """One line on stderr; the JSON object on stdout when ``--json`` was asked for."""
        text = self.format_message()
        if self.json and not self.printed:
            emit_json(self.payload or {"error": text, "reason": self.reason})
        click.echo(f"error: {text}", err=True)


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice most like ``word`` (difflib), None when none is close."""
    matches = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.5)
    return matches[0] if matches else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` or ``""``."""
    match = closest(word, choices)
    return f"; did you mean {match!r}?" if match else ""


def _operator_default() -> str:
    with contextlib.suppress(Exception):
        return os.environ.get("USER") or getpass.getuser()
    return "unknown"


@dataclass
class CliEnv:
    """One CLI run: which registry, output mode, who is operating. The registry is opened on
    first use (``rules validate`` and ``route test`` never open it) and closed at exit.

    Tests pass a ``CliEnv`` with their own ``opener`` as the click ``obj``."""

    registry_text: str | None = None
    #: Every ``--registry`` given (addresses or ``dubbo.yaml`` registry ids), when several.
    registry_texts: tuple[str, ...] = ()
    #: The ``dubbo.yaml`` registry ids are read from (``--config``, ``$DUBBO_PY_CONFIG``).
    config_path: str | None = None
    json: bool = False
    operator: str | None = None
    timeout: float = 5.0
    #: The registry identity ``user:password``, a ZooKeeper digest or an etcd user (``--auth`` /
    #: ``$DUBBO_PY_REGISTRY_AUTH``).
    auth: str | None = None
    opener: StoreOpener | None = None
    history_limit: int = 20
    #: Set by commands that write: only they may create an embedded registry that does not
    #: exist yet (a read of a mistyped path is an error, not a new empty database).
    writable: bool = False
    _store: Store | None = field(default=None, repr=False)
    _registry: Registry | None = field(default=None, repr=False)

    @property
    def address(self) -> RegistryAddress:
        """The registry address: ``--registry`` (an address, or a registry id of
        ``dubbo.yaml``), ``$DUBBO_PY_REGISTRY`` or the embedded default."""
        from dubbo_py.errors import RegistryAddressError
        from dubbo_py.registry.store.address import parse_registry_address

        if len(self.registry_texts) > 1:
            raise click.UsageError(_ONE_REGISTRY)
        text = self.registry_text
        if text is not None:
            text = self._resolve(text).address
        try:
            return parse_registry_address(text)
        except RegistryAddressError as exc:
            raise click.UsageError(f"bad registry address: {exc}") from None

    @property
    def several(self) -> bool:
        """Whether the run names more than one registry."""
        return len(self.registry_texts) > 1

    def targets(self) -> list[RegistryTarget]:
        """The registries the run names, in order (one: the usual :attr:`address`)."""
        if not self.several:
            text = self.registry_text
            if text is not None:
                return [self._resolve(text)]
            return [RegistryTarget(str(self.address), str(self.address))]
        return [self._resolve(text) for text in self.registry_texts]

    def for_target(self, target: RegistryTarget) -> CliEnv:
        """This run's settings on one of its registries (its own store, closed with it)."""
        return CliEnv(
            registry_text=target.address,
            json=self.json,
            operator=self.operator,
            timeout=self.timeout,
            auth=self.auth,
            opener=self.opener,
            history_limit=self.history_limit,
            writable=self.writable,
        )

    def _resolve(self, text: str) -> RegistryTarget:
        """An address as it is; a bare name as a registry id of ``dubbo.yaml``."""
        if "://" in text:
            return RegistryTarget(text, text)
        registries = self._configured_registries()
        found = registries.get(text)
        if found is None or found.address is None:
            where = self.config_path or os.environ.get(CONFIG_ENV) or "dubbo.yaml"
            known = ", ".join(registries) or "none"
            raise click.UsageError(
                f"--registry {text!r} is neither an address (zookeeper://..., etcd://..., "
                f"sqlite:///...) nor a registry id of {where} (registries: {known})"
            )
        return RegistryTarget(text, found.address, found.zone)

    def _configured_registries(self) -> dict[str, Any]:
        from pathlib import Path

        from dubbo_py.config.loader import load_config
        from dubbo_py.errors import ConfigError

        path = self.config_path or os.environ.get(CONFIG_ENV) or "dubbo.yaml"
        if not Path(path).is_file():
            return {}
        try:
            return dict(load_config(path, environ={}).registries)
        except ConfigError as exc:
            raise click.UsageError(str(exc)) from None

    @property
    def store(self) -> Store:
        """The connected store (opened on first use)."""
        if self._store is None:
            if self.opener is not None:
                self._store = self.opener(self.address, self.timeout)
            else:
                from dubbo_py.admin.connection import open_admin_store

                self._store = open_admin_store(
                    self.address, self.timeout, self._auth_pair(), create=self.writable
                )
        return self._store

    def _identity(self) -> str | None:
        """``--auth`` / ``$DUBBO_PY_REGISTRY_AUTH``, else the address's own
        ``user:password@`` (Dubbo's registry URL identity)."""
        if self.auth:
            return self.auth
        found = self.address.settings().get("auth")
        return None if found is None else str(found)

    def _auth_pair(self) -> tuple[str, str] | None:
        identity = self._identity()
        if not identity:
            return None
        user, sep, password = identity.partition(":")
        if not sep or not user:
            raise click.UsageError("--auth / DUBBO_PY_REGISTRY_AUTH must be user:password")
        return user, password

    @property
    def registry(self) -> Registry:
        """The registry on :attr:`store`."""
        if self._registry is None:
            from dubbo_py.registry.registry import Registry

            # An authenticated operator's rules are protected: only that identity may change
            # them, every consumer may read them.
            self._registry = Registry(self.store, protect=bool(self._identity()))
        return self._registry

    def who(self) -> str:
        """The operator recorded in history: ``--operator``, else ``$USER``."""
        return self.operator or _operator_default()

    def rule_ops(self) -> RuleOps:
        """Versioned rule writes with history, as this operator."""
        from dubbo_py.admin.rules.history import History
        from dubbo_py.admin.rules.operations import RuleOps

        self.writable = True
        return RuleOps(self.registry, History(self.store, self.history_limit), self.who())

    def history(self) -> History:
        """The rule history on this registry."""
        from dubbo_py.admin.rules.history import History

        return History(self.store, self.history_limit)

    def close(self) -> None:
        """Close the store if it was opened."""
        store, self._store, self._registry = self._store, None, None
        if store is not None:
            with contextlib.suppress(Exception):
                store.close()


def env_of(ctx: click.Context | None = None) -> CliEnv:
    """The run's :class:`CliEnv`."""
    ctx = ctx or click.get_current_context()
    env = ctx.find_object(CliEnv)
    if env is None:  # a command invoked without the root group (unit tests of one command)
        env = ctx.ensure_object(CliEnv)
    return env


def attachment_pairs(values: tuple[str, ...]) -> dict[str, str]:
    """``--attachment NAME=VALUE`` options as a mapping (a value without ``=`` is a usage error)."""
    out = {}
    for value in values:
        name, sep, text = value.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{value!r} is not NAME=VALUE", param_hint="--attachment")
        out[name] = text
    return out


def _set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        env_of(ctx).json = True


def json_option(f: F) -> F:
    """``--json``: print one JSON value on stdout instead of tables."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        expose_value=False,
        callback=_set_json,
        help="Print JSON for scripts instead of tables.",
    )(f)


def seconds_option(name: str, default: float, help: str) -> Callable[[F], F]:
    """An option taking a number of seconds, at least 0.1, its default shown in the help."""
    return click.option(
        name, type=click.FloatRange(min=0.1), default=default, show_default=True, help=help
    )


def _set_operator(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value:
        env_of(ctx).operator = value


def operator_option(f: F) -> F:
    """``--operator NAME``: who is recorded in the rule history (default ``$USER``)."""
    return click.option(
        "--operator",
        expose_value=False,
        callback=_set_operator,
        help="Who to record in the history (default: $USER).",
    )(f)


def set_registries(env: CliEnv, values: Sequence[str]) -> None:
    """Take ``--registry`` values: one is :attr:`CliEnv.registry_text`, several are all kept
    (given again after the subcommand, they replace those given before it)."""
    if not values:
        return
    env.registry_text = values[0]
    env.registry_texts = tuple(values) if len(values) > 1 else ()


def _set_registry(ctx: click.Context, _param: click.Parameter, value: Sequence[str]) -> None:
    set_registries(env_of(ctx), value)


def _set_auth(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value:
        env_of(ctx).auth = value


#: The options every command takes, before or after its name (``dubbo-py --json services``
#: and ``dubbo-py services --json`` are the same); given after the name, they win.
_GLOBAL_OPTIONS: tuple[tuple[str, Callable[[F], F]], ...] = (
    (
        "--registry",
        click.option(
            "--registry",
            "registry_text",
            metavar="ADDRESS",
            multiple=True,
            expose_value=False,
            callback=_set_registry,
            help="zookeeper://host:port[/chroot], etcd://host:port[/prefix], nacos://host:port, "
            "sqlite:///path or a registry id of dubbo.yaml (default: $DUBBO_PY_REGISTRY, "
            "else the embedded registry in your data directory); repeat it to read several.",
        ),
    ),
    (
        "--auth",
        click.option(
            "--auth",
            metavar="USER:PASSWORD",
            expose_value=False,
            callback=_set_auth,
            help=(
                "Registry identity: a ZooKeeper digest or an etcd user "
                "(prefer $DUBBO_PY_REGISTRY_AUTH: not in `ps`)."
            ),
        ),
    ),
    ("--json", json_option),
)


def global_options(command: click.Command) -> click.Command:
    """Add ``--registry``, ``--auth`` and ``--json`` to a command that lacks them (a group's
    commands get them through :class:`SuggestingGroup`), so they work after the subcommand and
    show in its ``--help``."""
    if isinstance(command, click.Group):
        return command
    have = {opt for param in command.params for opt in getattr(param, "opts", ())}
    for name, option in _GLOBAL_OPTIONS:
        if name not in have:
            option(command)  # on a Command object, click appends the parameter
    return command


def emit_json(value: Any) -> None:
    """Print one JSON value on stdout."""
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def console() -> Console:
    """A rich console on the current stdout (wide and plain when it is not a terminal)."""
    from rich.console import Console

    out = Console(file=sys.stdout, highlight=False)
    if not out.is_terminal:
        out = Console(file=sys.stdout, highlight=False, width=200, no_color=True)
    return out


def print_table(
    title: str | None,
    columns: Sequence[str],
    rows: Iterable[Sequence[object]],
    empty: str = "",
    *,
    header: bool = True,
) -> None:
    """A rich table (or ``empty`` when there are no rows)."""
    from rich.table import Table

    rows = list(rows)
    out = console()
    if not rows:
        if empty:
            out.print(empty)
        return
    table = Table(
        title=title, title_justify="left", show_edge=False, pad_edge=False, show_header=header
    )
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("" if cell is None else str(cell) for cell in row))
    out.print(table)


def as_admin_error(exc: BaseException) -> AdminError | None:
    """A domain error as the :class:`AdminError` a command reports it with (None: not one)."""
    return _as_admin_error(exc)


def _as_admin_error(exc: BaseException) -> AdminError | None:
    from dubbo_py.admin.connection import RegistryUnreachable
    from dubbo_py.admin.rules.acl import Untrusted
    from dubbo_py.admin.rules.operations import Conflict, NotFound
    from dubbo_py.errors import RuleError, StoreError

    if isinstance(exc, AdminError):
        return exc
    if isinstance(exc, RuleError):
        return AdminError(str(exc), reason="invalid")
    if isinstance(exc, Conflict):
        return AdminError(str(exc), reason="conflict")
    if isinstance(exc, NotFound):
        return AdminError(str(exc), reason="not-found")
    if isinstance(exc, Untrusted):
        return AdminError(f"refusing to restore it: {exc}", reason="denied")
    if isinstance(exc, RegistryUnreachable):
        return AdminError(str(exc), reason="unreachable")
    if isinstance(exc, StoreError):
        text = str(exc)
        reason = "denied" if "auth" in text.lower() or "denied" in text.lower() else "registry"
        return AdminError(f"registry error: {text or type(exc).__name__}", reason=reason)
    return None


class SuggestingGroup(click.Group):
    """A group that suggests the closest subcommand (difflib) for a mistyped one, turns
    domain errors into :class:`AdminError` with the right exit code, and gives each of its
    commands the global options (:func:`global_options`)."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        super().add_command(global_options(cmd), name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if (
            name
            and not name.startswith("-")
            and self.get_command(ctx, name) is None
            and not ctx.resilient_parsing
        ):
            commands = self.list_commands(ctx)
            hint = did_you_mean(name, commands) or f" (commands: {', '.join(commands)})"
            raise click.UsageError(f"no such command {name!r}{hint}", ctx)
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except AdminError as exc:
            # Looked up now: the root group's callback creates the CliEnv (and --json sets
            # it) during super().invoke, so before it there is none outside tests.
            env = ctx.find_object(CliEnv)
            exc.json = exc.json or bool(env and env.json)
            _name_registry(exc, env)
            raise
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            error = _as_admin_error(exc)
            if error is None:
                raise
            env = ctx.find_object(CliEnv)
            error.json = bool(env and env.json)
            _name_registry(error, env)
            raise error from None


def command_group(name: str | None = None) -> Callable[[Callable[..., Any]], SuggestingGroup]:
    """Declare a ``dubbo-py`` command with subcommands (``@command_group("rules")``): a
    :class:`SuggestingGroup` with the CLI's context settings (``-h``, 100 columns)."""
    return click.group(name, cls=SuggestingGroup, context_settings=CONTEXT_SETTINGS)


def _name_registry(error: AdminError, env: CliEnv | None) -> None:
    """A "not found" says which registry was searched (a wrong --registry or
    $DUBBO_PY_REGISTRY is the usual cause)."""
    if error.reason != "not-found" or env is None or error.payload is not None:
        return
    try:
        where = str(env.address)
    except click.UsageError:
        return
    if where not in error.message:
        error.searched = where


class AdminGroup(SuggestingGroup):
    """The root group: runs the command and renders every error as one line (exit 1 refused,
    2 usage), in tests (CliRunner) and from the console script alike."""

    def main(  # type: ignore[override,unused-ignore]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            # Always "dubbo-py" in messages, however it was started (python -m, tests).
            result = super().main(args, "dubbo-py", complete_var, standalone_mode=False, **extra)
            code = result if isinstance(result, int) else 0
        except click.UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
            click.echo(f"error: {exc.format_message()}{hint}", err=True)
            code = 2
        except click.ClickException as exc:
            exc.show()
            code = exc.exit_code
        except click.Abort:
            click.echo("error: aborted", err=True)
            code = 1
        except Exception as exc:
            from dubbo_py.errors import StoreError

            if isinstance(exc, StoreError):  # raised while closing, outside any command
                click.echo(f"error: registry error: {exc}", err=True)
            elif os.environ.get(DEBUG_ENV):
                raise
            else:
                click.echo(
                    f"error: internal error ({type(exc).__name__}: {exc}); "
                    f"set {DEBUG_ENV}=1 for the traceback",
                    err=True,
                )
            code = 1
        if standalone_mode:
            sys.exit(code)
        return code
