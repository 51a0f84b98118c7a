"""``dubbo-py console``: serve the web console over the CLI's registry."""

from __future__ import annotations

import socket

import click

from dubbo_py.admin.common import CONTEXT_SETTINGS, env_of, operator_option
from dubbo_py.admin.console.security import is_loopback

__all__ = ["console_command"]


def _listen(bind: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((bind, port))
    except OSError as exc:
        sock.close()
        raise click.UsageError(f"cannot listen on {bind}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


@click.command("console", context_settings=CONTEXT_SETTINGS)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8080,
    show_default=True,
    help="Port to serve on (0: any free port, printed at start).",
)
@click.option(
    "--bind",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; anything but loopback exposes the console.",
)
@operator_option
def console_command(port: int, bind: str) -> None:
    """Serve the web console: services, providers, consumers and their reach; rules with
    validation, dry run, versioned push, history and rollback; provider weight and disabling;
    route test; calling a method.

    It reads and writes the registry this command is given (--registry, $DUBBO_PY_REGISTRY).
    On ZooKeeper it writes only with your registry identity (--auth or
    $DUBBO_PY_REGISTRY_AUTH); every write is versioned and recorded in the rule history
    with the operator (--operator, else the identity's user, else $USER) and the time.

    \b
    Examples:
      dubbo-py console
      DUBBO_PY_REGISTRY_AUTH=ada:secret dubbo-py --registry zookeeper://zk:2181 console --port 9090
    """
    # Imported here: the web stack loads only for this command.
    import uvicorn

    from dubbo_py.admin.console.app import ConsoleState, create_app
    from dubbo_py.admin.console.live import LiveReader

    env = env_of()
    if env.several:
        raise click.UsageError(
            "the console serves one registry: its pages change rules and providers with "
            "versioned writes whose conflicts, history and rollback are one registry's, and "
            "a page of several would hide which one a click writes; start one console per "
            "registry (each with its own --port), or use the CLI, whose commands take several"
        )
    env.writable = True
    if env.auth and not env.operator:
        env.operator = env.auth.partition(":")[0]
    registry = env.registry  # fail now, in one line, when it is unreachable
    registry.services()
    if not is_loopback(bind):
        click.echo(
            f"warning: listening on {bind}: anyone who can reach it can read the registry "
            "(and write, with this console's identity)",
            err=True,
        )
    sock = _listen(bind, port)
    host, bound = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    extra = (bind, shown) if bind not in ("0.0.0.0", "::") else ()
    state = ConsoleState(env, allowed_hosts=extra, live=LiveReader(registry))
    app = create_app(state)
    click.echo(f"dubbo-py console: http://{shown}:{bound}/ (registry {env.address})", err=False)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
