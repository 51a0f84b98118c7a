"""``registry status``: which registry, whether it answers, and what it holds."""

from __future__ import annotations

from typing import Any

import click

from dubbo_py.admin import rules
from dubbo_py.admin.common import (
    CONTEXT_SETTINGS,
    AdminError,
    SuggestingGroup,
    emit_json,
    env_of,
    json_option,
    print_table,
)
from dubbo_py.errors import StoreError
from dubbo_py.registry import layout

__all__ = ["registry_group"]


@click.group("registry", cls=SuggestingGroup, context_settings=CONTEXT_SETTINGS)
def registry_group() -> None:
    """The registry itself."""


def _counts(env: Any) -> dict[str, int]:
    registry = env.registry
    counts = dict.fromkeys(("services", *layout.CATEGORIES, "rules"), 0)
    for name in registry.services():
        counts["services"] += 1
        for category in layout.CATEGORIES:
            counts[category] += len(registry.lookup(name, category))
    for key in registry.config_keys():
        try:
            rules.parse_key(key)
        except ValueError:
            continue
        counts["rules"] += 1
    return counts


@registry_group.command("status", context_settings=CONTEXT_SETTINGS)
@json_option
def status() -> None:
    """Which registry is used, whether it answers, and how many services, providers,
    consumers, router URLs, overrides and rule documents it holds (exit 1 when unreachable).

    \b
    Examples:
      dubbo-py registry status
      dubbo-py registry status --registry zookeeper://127.0.0.1:2181

    \b
    JSON: {"registry", "kind", "reachable", "error", "services", "providers", "consumers",
           "routers", "configurators", "rules"}
    """
    env = env_of()
    address = env.address
    info: dict[str, Any] = {
        "registry": str(address),
        "kind": "embedded" if address.kind == "sqlite" else address.kind,
        "reachable": False,
        "error": None,
    }
    try:
        info.update(_counts(env))
        info["reachable"] = True
    except StoreError as exc:
        info["error"] = str(exc) or type(exc).__name__
    if env.json:
        emit_json(info)
    else:
        print_table(
            None,
            ["", ""],
            ([k, "-" if v is None else v] for k, v in info.items() if k != "error"),
            header=False,
        )
    if not info["reachable"]:
        error = str(info["error"])
        message = error if str(address) in error else f"registry {address} unreachable: {error}"
        raise AdminError(message, reason="unreachable", printed=True)
