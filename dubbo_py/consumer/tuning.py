"""A reference's live per-method settings and balancer: its own options, with consumer-side
override rules and its providers' defaults merged over them whenever those change.

Consumer overrides of ``cluster`` and ``mock`` (service level, or ``<method>.cluster`` /
``<method>.mock``) replace a method's strategy or mock: :attr:`ReferenceTuning.calls` says which
are in force, and the reference rebuilds the method's call stack when they change. A value that
cannot be used (an unknown strategy, a mock spec that does not parse) is logged and ignored:
what was in force before stays. ``actives`` is a setting like ``retries``
(:class:`~dubbo_py.cluster.method_settings.MethodSettings`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from urllib.parse import unquote_plus

from dubbo_py.cluster.loadbalance import STATS_LOADBALANCES, LoadBalance, get_loadbalance
from dubbo_py.cluster.method_settings import SettingsTable
from dubbo_py.cluster.mock import MockSpec, parse_mock
from dubbo_py.cluster.stats import CallStats, default_stats
from dubbo_py.cluster.strategies import STRATEGIES
from dubbo_py.consumer.settings import provider_defaults, resolve_hedging, resolve_settings
from dubbo_py.errors import MockSpecError
from dubbo_py.url import URL

__all__ = ["STATS_BALANCERS", "CallOverride", "ReferenceTuning"]

log = logging.getLogger(__name__)

#: Balancers that read call statistics (calls are recorded only for these).
STATS_BALANCERS = STATS_LOADBALANCES


@dataclass(frozen=True, slots=True)
class CallOverride:
    """What consumer overrides set for one method's call stack: a strategy name and a mock
    (``mock_text`` None: the reference's own mock; a text that means no mock, such as
    ``false``, gives ``mock`` None with ``mock_text`` set)."""

    cluster: str | None = None
    mock_text: str | None = None
    mock: MockSpec | None = None

    @property
    def empty(self) -> bool:
        """True when nothing is overridden (the method runs as the reference says)."""
        return self.cluster is None and self.mock_text is None


_NO_OVERRIDE = CallOverride()


def _method_value(params: Mapping[str, str], method: str, key: str) -> str | None:
    value = params.get(f"{method}.{key}")
    return params.get(key) if value is None else value


class ReferenceTuning:
    """Settings per method (read by every call, updated in place) and the balancer, with the
    call statistics it reads (None for balancers that read none)."""

    def __init__(
        self,
        methods: tuple[str, ...],
        base: dict[str, str],
        loadbalance: str,
        check_mock: Callable[[str, MockSpec], None] | None = None,
    ) -> None:
        #: Raises MockSpecError when a mock spec cannot answer the method (its response type).
        self.check_mock = check_mock
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
        #: The cluster/mock overrides in force, by method (methods without one are absent).
        self.calls: dict[str, CallOverride] = {}
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
        self.calls = self._calls(overrides)
        settings = resolve_settings(self._methods, params, self._defaults, defaults)
        for method in self.calls:
            settings[method] = replace(settings[method], switched=True)
        self.settings.update(settings)
        self.hedging = resolve_hedging(self._methods, params, self._hedging_defaults)
        before = self.balancer
        try:
            self._set_balancer(params["loadbalance"])
        except ValueError as exc:
            log.error("ignoring loadbalance override: %s", exc)
            self._set_balancer(self._base["loadbalance"])
        return self.balancer is not before

    def _calls(self, overrides: Mapping[str, str]) -> dict[str, CallOverride]:
        """Each method's cluster/mock override; one that cannot be used is logged, and the
        method keeps what it had."""
        calls = {}
        for method in self._methods:
            before = self.calls.get(method, _NO_OVERRIDE)
            cluster = _method_value(overrides, method, "cluster")
            if cluster is not None:
                cluster = cluster.strip().lower()
                if cluster not in STRATEGIES:
                    log.error(
                        "ignoring cluster override %r for %s: choose one of %s",
                        cluster,
                        method,
                        ", ".join(sorted(STRATEGIES)),
                    )
                    cluster = before.cluster
            text = _method_value(overrides, method, "mock")
            if text is not None:
                # As Dubbo reads a mock (URL.decode): an override URL writes return+null.
                text = unquote_plus(text)
            mock, mock_text = None, text
            if text is not None and text != before.mock_text:
                try:
                    mock = parse_mock(text)
                    if mock is not None and self.check_mock is not None:
                        self.check_mock(method, mock)
                except MockSpecError as exc:
                    log.error("ignoring mock override for %s: %s", method, exc)
                    mock, mock_text = before.mock, before.mock_text
            elif text is not None:
                mock = before.mock
            call = CallOverride(cluster, mock_text, mock)
            if not call.empty:
                calls[method] = call
        return calls
