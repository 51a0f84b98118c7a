"""``override``: change a provider's weight or take it out of service at runtime, with Dubbo 2.6
override URLs (persistent nodes in the service's ``configurators`` category)."""

from __future__ import annotations

from typing import Any

import click

from dubbo_py.admin.commands.services import known_service
from dubbo_py.admin.common import (
    CONTEXT_SETTINGS,
    AdminError,
    command_group,
    emit_json,
    env_of,
    json_option,
    print_table,
)
from dubbo_py.admin.rules import overrides
from dubbo_py.registry import layout
from dubbo_py.registry.registry import Registry
from dubbo_py.url import URL

__all__ = ["override_group"]


def _target_options(f: Any) -> Any:
    f = click.option("--version", "version", default="", help="Only providers of this version.")(f)
    f = click.option("--group", "group", default="", help="Only providers of this group.")(f)
    return click.option(
        "--force",
        is_flag=True,
        help="Write even when no provider is registered at ADDRESS (yet).",
    )(f)


def _address(address: str) -> tuple[str, int]:
    try:
        return overrides.parse_address(address)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="ADDRESS") from None


def _check_provider(registry: Registry, service: str, address: str, force: bool) -> None:
    host, port = _address(address)
    if force:
        return
    known_service(registry, service)
    found = [
        p
        for p in registry.lookup(service, layout.PROVIDERS)
        if (host == overrides.ANYHOST or p.host == host) and (not port or p.port == port)
    ]
    if not found:
        raise AdminError(
            f"no provider of {service} at {address} (see 'dubbo-py providers {service}'; "
            "--force writes the override anyway)",
            reason="not-found",
        )


def _url_json(url: URL, action: str) -> dict[str, Any]:
    return {"action": action, "url": url.to_string(), "service": url.path, "address": url.address}


def _report(written: list[tuple[str, URL]]) -> None:
    env = env_of()
    where = str(env.address)
    if env.json:
        emit_json([{**_url_json(url, action), "registry": where} for action, url in written])
        return
    for action, url in written:
        click.echo(f"{action} {url.to_string()} in {where}")


@command_group("override")
def override_group() -> None:
    """Override rules: provider weight and disabling (Dubbo override:// URLs).

    ADDRESS is host:port of a provider (host alone: every port; 0.0.0.0: every provider).
    Consumers apply overrides as they see them; nothing is restarted.
    """


@override_group.command("weight", context_settings=CONTEXT_SETTINGS)
@click.argument("service")
@click.argument("address")
@click.argument("weight", type=click.IntRange(min=0))
@_target_options
@json_option
def weight(service: str, address: str, weight: int, version: str, group: str, force: bool) -> None:
    """Set the load-balancing weight of the provider(s) at ADDRESS to WEIGHT.

    Replaces an earlier weight override of the same address, version and group.

    \b
    Examples:
      dubbo-py override weight demo.Greeter 10.0.0.5:50051 50

    \b
    JSON: [{"action": "added"|"removed", "url", "service", "address"}]
    """
    env = env_of()
    env.writable = True  # with --force it may be the registry's first write
    registry = env.registry
    _check_provider(registry, service, address, force)
    url = overrides.weight_url(service, address, weight, version=version, group=group)
    written: list[tuple[str, URL]] = []
    for old in registry.lookup(service, layout.CONFIGURATORS):
        if (
            old != url
            and overrides.is_weight(old)
            and overrides.same_target(old, url.host, url.port, version, group)
        ):
            registry.unregister(old)
            written.append(("removed", old))
    registry.register(url)
    written.append(("added", url))
    _report(written)


@override_group.command("disable", context_settings=CONTEXT_SETTINGS)
@click.argument("service")
@click.argument("address")
@_target_options
@json_option
def disable(service: str, address: str, version: str, group: str, force: bool) -> None:
    """Take the provider(s) at ADDRESS out of every consumer's list (disabled=true).

    \b
    Examples:
      dubbo-py override disable demo.Greeter 10.0.0.5:50051

    \b
    JSON: [{"action": "added", "url", "service", "address"}]
    """
    env = env_of()
    env.writable = True  # with --force it may be the registry's first write
    registry = env.registry
    _check_provider(registry, service, address, force)
    url = overrides.disable_url(service, address, version=version, group=group)
    registry.register(url)
    _report([("added", url)])


@override_group.command("enable", context_settings=CONTEXT_SETTINGS)
@click.argument("service")
@click.argument("address")
@click.option("--version", default="", help="Only the override for this version.")
@click.option("--group", default="", help="Only the override for this group.")
@json_option
def enable(service: str, address: str, version: str, group: str) -> None:
    """Remove the override disabling the provider(s) at ADDRESS (no-op when there is none).

    \b
    Examples:
      dubbo-py override enable demo.Greeter 10.0.0.5:50051

    \b
    JSON: [{"action": "removed", "url", "service", "address"}]
    """
    env = env_of()
    registry = env.registry
    host, port = _address(address)
    removed: list[tuple[str, URL]] = []
    for old in registry.lookup(service, layout.CONFIGURATORS):
        if overrides.is_disabling(old) and overrides.same_target(old, host, port, version, group):
            registry.unregister(old)
            removed.append(("removed", old))
    if not removed and not env.json:
        click.echo(f"{service} at {address} is not disabled by an override; nothing to do")
        return
    _report(removed)


@override_group.command("list", context_settings=CONTEXT_SETTINGS)
@click.argument("service", required=False)
@json_option
def list_overrides(service: str | None) -> None:
    """List override URLs (of SERVICE, or of every service).

    \b
    Examples:
      dubbo-py override list
      dubbo-py override list demo.Greeter --json

    \b
    JSON: [{"service", "address", "changes", "enabled", "url"}]
    """
    env = env_of()
    registry = env.registry
    if service:
        known_service(registry, service)
    names = [service] if service else registry.services()
    rows = [
        {
            "service": name,
            "address": url.address,
            "changes": overrides.describe(url),
            "enabled": url.get_bool("enabled", True),
            "url": url.to_string(),
        }
        for name in names
        for url in sorted(registry.lookup(name, layout.CONFIGURATORS), key=lambda u: u.to_string())
        if url.protocol != "empty"
    ]
    if env.json:
        emit_json(rows)
        return
    print_table(
        None,
        ["SERVICE", "ADDRESS", "CHANGES"],
        ([r["service"], r["address"], r["changes"]] for r in rows),
        empty="no overrides",
    )
