"""Commands over several registries (``--registry`` repeated, or ``dubbo.yaml`` registry
ids): each registry read or written on its own, its rows labelled with the registry and its
zone, and a registry that cannot be reached reported without stopping the others."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import click

from dubbo_py.admin.common import (
    AdminError,
    CliEnv,
    RegistryTarget,
    as_admin_error,
    emit_json,
    print_table,
)

if TYPE_CHECKING:
    from dubbo_py.admin.rules.operations import WriteResult

__all__ = ["Outcome", "each_registry", "labelled", "raise_failures", "report_writes"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    """What one registry gave: ``value``, or the ``error`` that stopped it."""

    target: RegistryTarget
    value: T | None = None
    error: AdminError | None = None

    def labels(self) -> dict[str, str | None]:
        """The fields a row of this registry carries."""
        return {"registry": self.target.id, "zone": self.target.zone}


def each_registry(env: CliEnv, run: Callable[[CliEnv], T]) -> list[Outcome[T]]:
    """``run`` on each registry the run names, in order, each on a store of its own (closed
    after); a refused or unreachable registry is said on stderr and the others go on."""
    outcomes: list[Outcome[T]] = []
    for target in env.targets():
        child = env.for_target(target)
        try:
            outcomes.append(Outcome(target, value=run(child)))
        except (click.UsageError, click.exceptions.Exit):
            raise
        except Exception as exc:
            error = as_admin_error(exc)
            if error is None:
                raise
            click.echo(f"error: registry {target.id}: {error.format_message()}", err=True)
            outcomes.append(Outcome(target, error=error))
        finally:
            child.close()
    return outcomes


def raise_failures(outcomes: list[Outcome[T]], printed: bool = True) -> None:
    """Exit 1 when any registry failed (after the others' output was printed)."""
    failed = [o for o in outcomes if o.error is not None]
    if failed:
        names = ", ".join(o.target.id for o in failed)
        reasons = {o.error.reason for o in failed if o.error is not None}
        raise AdminError(
            f"{len(failed)} of {len(outcomes)} registries failed ({names})",
            reason=reasons.pop() if len(reasons) == 1 else "registry",
            printed=printed,
        )


def labelled(outcomes: list[Outcome[list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    """The rows of every registry that answered, each with its ``registry`` and ``zone``."""
    return [{**o.labels(), **row} for o in outcomes for row in o.value or []]


def report_writes(
    env: CliEnv,
    key: str,
    done: str,
    outcomes: list[Outcome[WriteResult]],
    extra: Callable[[RegistryTarget], dict[str, Any]] | None = None,
) -> None:
    """Print one row per registry of a write of ``key`` (``done``: "pushed", "deleted"...):
    its result, version and history entry, or the error that stopped it (JSON: a list of the
    single-registry objects, each with ``registry`` and ``zone``, or ``error`` and
    ``reason``); then exit 1 if any registry failed. ``extra`` adds fields to a written row."""
    rows: list[dict[str, Any]] = []
    for outcome in outcomes:
        row: dict[str, Any] = dict(outcome.labels())
        if outcome.value is not None:
            row.update(outcome.value.to_json())
            if extra is not None:
                row.update(extra(outcome.target))
        else:
            assert outcome.error is not None
            row.update(key=key, error=outcome.error.format_message())
            row["reason"] = outcome.error.reason
        rows.append(row)
    if env.json:
        emit_json(rows)
    else:
        print_table(
            f"{done} {key}",
            ["REGISTRY", "ZONE", "RESULT", "VERSION", "HISTORY"],
            (
                [
                    r["registry"],
                    r["zone"] or "",
                    "error: " + r["error"]
                    if "error" in r
                    else (done if r["changed"] else "unchanged"),
                    "" if r.get("version") is None else r["version"],
                    "" if r.get("history_seq") is None else f"#{r['history_seq']}",
                ]
                for r in rows
            ),
        )
    raise_failures(outcomes)
