"""Register modes and migration steps: which levels providers write and consumers read.

``register_mode`` (Dubbo's ``dubbo.application.register-mode``): ``all`` (the default, as in
Dubbo 3.3) registers both the interface-level provider URLs and the application-level
instance; ``interface`` only the former; ``instance`` only the latter.

The consumer's migration step (Dubbo's ``dubbo.application.service-discovery.migration``):
``APPLICATION_FIRST`` (default), ``FORCE_INTERFACE`` or ``FORCE_APPLICATION``.

Both come from code, then ``dubbo.yaml`` (``registry.register_mode`` /
``registry.migration_step``), then the environment (``DUBBO_PY_REGISTER_MODE`` or Dubbo's
``DUBBO_APPLICATION_REGISTER_MODE``; ``DUBBO_PY_MIGRATION_STEP`` or Dubbo's
``DUBBO_APPLICATION_SERVICE_DISCOVERY_MIGRATION``).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from typing import TypeVar

from dubbo_py.registry import layout
from dubbo_py.registry.application.publisher import InstancePublisher
from dubbo_py.registry.registry import Registry
from dubbo_py.url import URL

__all__ = [
    "MigrationStep",
    "ModeRegistry",
    "RegisterMode",
    "resolve_migration_step",
    "resolve_register_mode",
]

REGISTER_MODE_ENV = ("DUBBO_PY_REGISTER_MODE", "DUBBO_APPLICATION_REGISTER_MODE")
MIGRATION_STEP_ENV = ("DUBBO_PY_MIGRATION_STEP", "DUBBO_APPLICATION_SERVICE_DISCOVERY_MIGRATION")


class RegisterMode(enum.Enum):
    """Which levels a provider registers at."""

    ALL = "all"
    INTERFACE = "interface"
    INSTANCE = "instance"

    @property
    def interface_level(self) -> bool:
        """Whether provider URLs go under ``/dubbo/<interface>/providers``."""
        return self is not RegisterMode.INSTANCE

    @property
    def instance_level(self) -> bool:
        """Whether the application's instance goes under ``/services``."""
        return self is not RegisterMode.INTERFACE

    @classmethod
    def parse(cls, text: str, where: str = "register_mode") -> RegisterMode:
        """``all``, ``interface`` or ``instance`` (any case); ValueError naming ``where``."""
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise ValueError(
                f"{where}: {text!r} is not a register mode (all, interface, instance)"
            ) from None


class MigrationStep(enum.Enum):
    """Which level a consumer reads (Dubbo's ``MigrationStep``)."""

    FORCE_INTERFACE = "FORCE_INTERFACE"
    APPLICATION_FIRST = "APPLICATION_FIRST"
    FORCE_APPLICATION = "FORCE_APPLICATION"

    @classmethod
    def parse(cls, text: str, where: str = "migration step") -> MigrationStep:
        """A step name (any case, ``-`` for ``_``); ValueError naming ``where``."""
        try:
            return cls(text.strip().upper().replace("-", "_"))
        except ValueError:
            names = ", ".join(s.value for s in cls)
            raise ValueError(f"{where}: {text!r} is not a migration step ({names})") from None


_Level = TypeVar("_Level", RegisterMode, MigrationStep)


def _resolve(
    kind: type[_Level],
    given: str | _Level | None,
    env_names: tuple[str, ...],
    default: _Level,
    environ: Mapping[str, str] | None,
) -> _Level:
    """``given`` (code or file), else the first of ``env_names`` set, else ``default``."""
    if isinstance(given, str):
        if given:
            return kind.parse(given)
    elif given is not None:
        return given
    env = os.environ if environ is None else environ
    for name in env_names:
        value = env.get(name, "").strip()
        if value:
            return kind.parse(value, f"${name}")
    return default


def resolve_register_mode(
    given: str | RegisterMode | None, environ: Mapping[str, str] | None = None
) -> RegisterMode:
    """The register mode: ``given`` (code or file), else the environment, else ``all``."""
    return _resolve(RegisterMode, given, REGISTER_MODE_ENV, RegisterMode.ALL, environ)


def resolve_migration_step(
    given: str | MigrationStep | None, environ: Mapping[str, str] | None = None
) -> MigrationStep:
    """The consumer's step: ``given``, else the environment, else ``APPLICATION_FIRST``."""
    return _resolve(
        MigrationStep, given, MIGRATION_STEP_ENV, MigrationStep.APPLICATION_FIRST, environ
    )


class ModeRegistry(Registry):
    """The registry providers export through: provider URLs go to the levels the register
    mode names (interface-level through ``base``, instance-level through ``publisher``);
    everything else is ``base``'s."""

    def __init__(self, base: Registry, publisher: InstancePublisher, mode: RegisterMode) -> None:
        super().__init__(base.store, protect=base.protect)
        self.base = base
        self.publisher = publisher
        self.mode = mode

    def register(self, url: URL) -> None:
        """Register a provider URL at the mode's levels (instance level: see the publisher)."""
        if url.category != layout.PROVIDERS or url.protocol in ("empty", "override", "route"):
            self.base.register(url)
            return
        if self.mode.interface_level:
            self.base.register(url)
        if self.mode.instance_level:
            self.publisher.add(url)

    def unregister(self, url: URL) -> None:
        """Remove a provider URL from every level it was registered at."""
        if url.category == layout.PROVIDERS and self.mode.instance_level:
            self.publisher.remove(url)
        if url.category != layout.PROVIDERS or self.mode.interface_level:
            self.base.unregister(url)
