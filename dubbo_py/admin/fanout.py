"""Commands over several registries (``--registry`` repeated, or ``dubbo.yaml`` registry
ids): each registry read or written on its own, its rows labelled with the registry and its
zone, and a registry that cannot be reached reported without stopping the others."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import click

from dubbo_py.admin.common import AdminError, CliEnv, RegistryTarget, as_admin_error

__all__ = ["Outcome", "each_registry", "raise_failures"]

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
