"""What one method's calls use, as the consumer resolved it from the reference's options
(:class:`~dubbo_py.config.options.MethodOptions`, what a user writes), consumer override rules
and the providers' defaults: :class:`MethodSettings` (retries, default timeout, forks,
stickiness, actives -- read on every call, from a :class:`SettingsTable`) and
:class:`~dubbo_py.cluster.strategy_settings.StrategySettings` (the strategy and the mock its
call stack is built with)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MethodSettings", "SettingsTable"]


@dataclass(frozen=True, slots=True)
class MethodSettings:
    """What one method's calls use: retries (attempts = retries + 1), default timeout in seconds
    (None: no deadline), forks (for ``forking``) and stickiness."""

    retries: int = 2
    timeout: float | None = None
    forks: int = 2
    sticky: bool = False
    #: Dubbo's consumer-side ``actives``: calls of the method in flight to one provider at most
    #: (0: no limit); a call over it waits for a slot (:mod:`dubbo_py.consumer.actives`).
    actives: int = 0
    #: A consumer override replaces the method's cluster strategy or mock: its calls take the
    #: method's stack, never a compiled plan (:mod:`dubbo_py.cluster.plan`).
    switched: bool = False


class SettingsTable(dict[str, MethodSettings]):
    """Settings by method name; a method not in the table gets ``default``.

    A plain ``dict`` underneath, so reading a method's settings on the call path is one C-level
    lookup; whoever owns the table (a reference, as overrides arrive) updates it in place, and
    a call in flight keeps the :class:`MethodSettings` it already read."""

    def __init__(
        self,
        settings: dict[str, MethodSettings] | None = None,
        default: MethodSettings | None = None,
    ) -> None:
        super().__init__(settings or {})
        self.default = default or MethodSettings()

    def __missing__(self, method: str) -> MethodSettings:
        return self.default
