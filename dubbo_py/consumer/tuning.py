"""A reference's live per-method settings and balancer: its own options, with consumer-side
override rules and its providers' defaults merged over them whenever those change."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from dubbo_py.cluster.loadbalance import STATS_LOADBALANCES, LoadBalance, get_loadbalance
from dubbo_py.cluster.method_settings import SettingsTable
from dubbo_py.cluster.stats import CallStats, default_stats
from dubbo_py.consumer.settings import provider_defaults, resolve_hedging, resolve_settings
from dubbo_py.url import URL

__all__ = ["STATS_BALANCERS", "ReferenceTuning"]

log = logging.getLogger(__name__)

#: Balancers that read call statistics (calls are recorded only for these).
STATS_BALANCERS = STATS_LOADBALANCES


class ReferenceTuning:
    """Settings per method (read by every call, updated in place) and the balancer, with the
    call statistics it reads (None for balancers that read none)."""

    def __init__(self, methods: tuple[str, ...], base: dict[str, str], loadbalance: str) -> None:
        self._methods = methods
        self._base = base
        self._defaults = resolve_settings(methods, base)
        self._hedging_defaults = resolve_hedging(methods, base)
        #: Each method's hedging policy (read when a method is wired, and again when
        #: overrides change it: never on the call path).
        self.hedging = dict(self._hedging_defaults)
        self._overrides: dict[str, str] = {}
        self._provider_defaults: dict[str, str] = {}
        #: Read by every call of the reference; updated in place when overrides change.
        self.settings = SettingsTable(self._defaults)
        self.loadbalance = ""
        self.balancer: LoadBalance
        self.stats: CallStats | None = None
        self._set_balancer(loadbalance)

    def _set_balancer(self, name: str) -> None:
        name = name.strip().lower()
        if name == self.loadbalance:
            return
        stats = default_stats() if name in STATS_BALANCERS else None
        self.balancer = get_loadbalance(name, stats=stats)
        self.loadbalance, self.stats = name, stats

    def update(self, overrides: Mapping[str, str], providers: Iterable[URL] = ()) -> bool:
        """Apply a new set of consumer overrides and the providers' defaults (``timeout``,
        ``retries`` on their URLs); True when the balancer changed."""
        defaults = provider_defaults(self._methods, (p.parameters for p in providers))
        if overrides == self._overrides and defaults == self._provider_defaults:
            return False
        self._overrides, self._provider_defaults = dict(overrides), defaults
        params = {**self._base, **overrides}
        self.settings.update(resolve_settings(self._methods, params, self._defaults, defaults))
        self.hedging = resolve_hedging(self._methods, params, self._hedging_defaults)
        before = self.balancer
        try:
            self._set_balancer(params["loadbalance"])
        except ValueError as exc:
            log.error("ignoring loadbalance override: %s", exc)
            self._set_balancer(self._base["loadbalance"])
        return self.balancer is not before
