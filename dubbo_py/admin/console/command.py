"""``dubbo-py console``: serve the web console over the CLI's registry."""

from __future__ import annotations

import socket

import click

from dubbo_py.admin.common import (
    CONTEXT_SETTINGS,
    AdminError,
    as_admin_error,
    env_of,
    operator_option,
)
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
    Given several --registry, it serves each, one per page: the header names the registry (and
    zone) a page shows and its writes go to, and switches to the others.
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
    from dubbo_py.admin.console.state import ConsoleRegistry

    env = env_of()
    env.writable = True
    if env.auth and not env.operator:
        env.operator = env.auth.partition(":")[0]
    served: dict[str, ConsoleRegistry] = {}
    if env.several:
        for target in env.targets():
            child = env.for_target(target)
            try:
                child.registry.services()  # fail now, naming it, when one is unreachable
            except Exception as exc:
                error = as_admin_error(exc)
                if error is None:
                    raise
                raise AdminError(f"registry {target.id}: {error.format_message()}") from None
            served[target.id] = ConsoleRegistry(target, child, LiveReader(child.registry))
        first = next(iter(served.values()))
        env, registry = first.env, first.env.registry
    else:
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
    try:
        state = ConsoleState(env, allowed_hosts=extra, live=LiveReader(registry), registries=served)
        app = create_app(state)
        where = f"registries {', '.join(served)}" if served else f"registry {env.address}"
        click.echo(f"dubbo-py console: http://{shown}:{bound}/ ({where})", err=False)
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
        server = uvicorn.Server(config)
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        # uvicorn stops on SIGINT, then raises it again for the caller (and a Ctrl-C before it
        # took the signal over lands here directly): Ctrl-C is how an operator ends the
        # console, not an error -- exit 0, as on SIGTERM.
        pass
    finally:
        sock.close()
        for each in served.values():
            each.env.close()
