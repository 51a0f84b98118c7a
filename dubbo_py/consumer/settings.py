"""A reference's per-method call settings, resolved from its options and consumer overrides, and
the live :class:`ReferenceSettings` that keeps them current.

Options are held as Dubbo holds them on the consumer URL: one flat map of parameters, with
``<method>.<key>`` for a single method (``SayHello.retries=0``) and ``<key>`` for all of them.
A method reads ``<method>.<key>``, else ``<key>``. Consumer-side override rules (``side:
consumer``) are merged over that map, so an override of ``timeout`` changes every method that has
no timeout of its own, and ``SayHello.timeout`` changes that one method -- as in Apache Dubbo,
where override parameters are merged into the consumer URL and read with
``getMethodParameter``. Timeouts in the map are milliseconds, as in Dubbo's URLs.

What the consumer leaves unset, its providers may set: the ``timeout`` and ``retries`` on their
registered URLs (:func:`provider_defaults`) are read after the consumer's own parameters at the
same level -- consumer ``<method>.<key>``, provider ``<method>.<key>``, consumer ``<key>``,
provider ``<key>``, then the default (no deadline, 2 retries).

A reference's live per-method settings and balancer: its own options, with consumer-side
override rules and its providers' defaults merged over them whenever those change.

Consumer overrides of ``cluster`` and ``mock`` (service level, or ``<method>.cluster`` /
``<method>.mock``) replace a method's strategy or mock: :attr:`ReferenceSettings.calls` says which
are in force, and the reference rebuilds the method's call stack when they change. A value that
cannot be used (an unknown strategy, a mock spec that does not parse) is logged and ignored:
what was in force before stays. ``actives`` is a setting like ``retries``
(:class:`~dubbo_py.cluster.method_settings.MethodSettings`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from urllib.parse import unquote_plus

from dubbo_py.cluster.hedging_policy import HEDGING_OFF, HedgingPolicy, parse_hedging_text
from dubbo_py.cluster.loadbalance import STATS_LOADBALANCES, LoadBalance, get_loadbalance
from dubbo_py.cluster.method_settings import MethodSettings, SettingsTable
from dubbo_py.cluster.mock import MockSpec, parse_mock
from dubbo_py.cluster.stats import CallStats, default_stats
from dubbo_py.cluster.strategies import STRATEGIES
from dubbo_py.config.options import MethodOptions
from dubbo_py.errors import MockSpecError
from dubbo_py.url import URL

__all__ = [
    "STATS_BALANCERS",
    "CallOverride",
    "MethodSettings",
    "ReferenceSettings",
    "base_parameters",
    "check_method_options",
    "provider_defaults",
    "resolve_hedging",
    "resolve_settings",
]

log = logging.getLogger(__name__)


def check_method_options(
    methods: Iterable[str], options: Mapping[str, MethodOptions], service: str
) -> None:
    """ValueError naming the methods ``options`` sets that the service does not have (a typo
    must not pass silently; the option names themselves are checked by
    :class:`~dubbo_py.config.options.MethodOptions`)."""
    unknown_methods = set(options) - set(methods)
    if unknown_methods:
        raise ValueError(f"{service} has no method(s) {sorted(unknown_methods)}")


def _timeout_ms(seconds: float | None) -> str:
    return "" if seconds is None else repr(float(seconds) * 1000.0)


def base_parameters(
    *,
    retries: int | None,
    timeout: float | None,
    forks: int,
    sticky: bool,
    loadbalance: str,
    methods: Mapping[str, MethodOptions],
    actives: int = 0,
    hedging: HedgingPolicy | None = None,
) -> dict[str, str]:
    """The reference's options as a Dubbo-style parameter map (timeouts in ms). ``retries`` and
    ``timeout`` of None are left out: not set by the consumer, so the providers' apply;
    ``hedging`` is the policy's text (:meth:`HedgingPolicy.text`), left out when None."""
    params = {
        "forks": str(int(forks)),
        "sticky": "true" if sticky else "false",
        "loadbalance": loadbalance,
    }
    if actives:
        params["actives"] = str(int(actives))
    if retries is not None:
        params["retries"] = str(int(retries))
    if timeout is not None:
        params["timeout"] = _timeout_ms(timeout)
    if hedging is not None:
        params["hedging"] = hedging.text()
    for method, opts in methods.items():
        if opts.hedging is not None:
            params[f"{method}.hedging"] = opts.hedging.text()
        if opts.retries is not None:
            params[f"{method}.retries"] = str(opts.retries)
        if opts.forks is not None:
            params[f"{method}.forks"] = str(opts.forks)
        if opts.timeout is not None:
            params[f"{method}.timeout"] = _timeout_ms(opts.timeout)
        if opts.sticky is not None:
            params[f"{method}.sticky"] = "true" if opts.sticky else "false"
        if opts.actives is not None:
            params[f"{method}.actives"] = str(opts.actives)
    return params


#: What a provider's URL sets for its consumers (Dubbo passes them on through the registry).
PROVIDER_DEFAULT_KEYS = ("timeout", "retries")

_NO_PARAMETERS: Mapping[str, str] = {}


def _lookup(
    params: Mapping[str, str], method: str, key: str, provider: Mapping[str, str] = _NO_PARAMETERS
) -> str | None:
    # Dubbo's order (a flat merge of provider and consumer parameters read with
    # getMethodParameter): method level before service level, and at each level the consumer
    # before the provider.
    for source, name in (
        (params, f"{method}.{key}"),
        (provider, f"{method}.{key}"),
        (params, key),
        (provider, key),
    ):
        value = source.get(name)
        if value is not None:
            return value
    return None


def _numbers(providers: Iterable[Mapping[str, str]], key: str) -> list[float]:
    # Each distinct text parsed once: a fleet's providers mostly say the same few values.
    texts: set[str] = set()
    fallback = f"default.{key}" if "." not in key else None
    for parameters in providers:
        text = parameters.get(key)
        if text is None and fallback is not None:
            text = parameters.get(fallback)  # Dubbo 2.x providers' service defaults
        if text is not None:
            texts.add(text)
    out = []
    for text in texts:
        try:
            value = float(text)
        except ValueError:
            continue
        if math.isfinite(value) and value >= 0:
            out.append(value)
    return out


def provider_defaults(
    methods: Iterable[str], providers: Iterable[Mapping[str, str]]
) -> dict[str, str]:
    """The ``timeout`` and ``retries`` (service level, and ``<method>.<key>``) the providers'
    URLs set, as one parameter map the consumer's own options are read over. Providers that
    disagree are reconciled for the whole reference, since a call's deadline and retry count
    are fixed before a provider is picked: the longest timeout (no provider has a call cut
    shorter than it asked for) and the fewest retries (a provider that says ``retries=0`` is
    never called twice for one request)."""
    names = [
        (key, name)
        for key in PROVIDER_DEFAULT_KEYS
        for name in (key, *(f"{m}.{key}" for m in methods))
    ]
    read = frozenset(
        [name for _, name in names] + [f"default.{key}" for key in PROVIDER_DEFAULT_KEYS]
    )
    # Every provider of a fleet is read on every notification: first keep, in C, only the
    # providers that set any of these keys at all (often none of them do).
    maps = [p for p in providers if not read.isdisjoint(p)]
    out: dict[str, str] = {}
    for key, name in names:
        values = _numbers(maps, name)
        if not values:
            continue
        chosen = max(values) if key == "timeout" else min(values)
        out[name] = repr(chosen) if key == "timeout" else str(int(chosen))
    return out


def _int(
    params: Mapping[str, str],
    method: str,
    key: str,
    fallback: int,
    minimum: int,
    provider: Mapping[str, str] = _NO_PARAMETERS,
) -> int:
    text = _lookup(params, method, key, provider)
    if text is None:
        return fallback
    try:
        return max(minimum, int(text))
    except ValueError:
        log.error("ignoring %s=%r for %s: not an integer", key, text, method)
        return fallback


def _timeout(
    params: Mapping[str, str],
    method: str,
    fallback: float | None,
    provider: Mapping[str, str] = _NO_PARAMETERS,
) -> float | None:
    text = _lookup(params, method, "timeout", provider)
    if text is None:
        return fallback
    if text == "":
        return None
    try:
        ms = float(text)
    except ValueError:
        ms = math.nan
    if not math.isfinite(ms) or ms < 0:
        log.error("ignoring timeout=%r for %s: not a number of milliseconds >= 0", text, method)
        return fallback
    return ms / 1000.0


def resolve_settings(
    methods: Iterable[str],
    params: Mapping[str, str],
    fallback: Mapping[str, MethodSettings] | None = None,
    provider: Mapping[str, str] | None = None,
) -> dict[str, MethodSettings]:
    """Settings per method from a parameter map, with ``provider`` (from
    :func:`provider_defaults`) filling ``timeout`` and ``retries`` in Dubbo's order: consumer
    method level, provider method level, consumer service level, provider service level. A
    value that does not parse is logged and the method keeps its ``fallback`` setting (its
    settings before an override was pushed)."""
    given = provider or _NO_PARAMETERS
    out = {}
    for method in methods:
        old = (fallback or {}).get(method, MethodSettings())
        sticky = _lookup(params, method, "sticky")
        out[method] = MethodSettings(
            retries=_int(params, method, "retries", old.retries, 0, given),
            timeout=_timeout(params, method, old.timeout, given),
            forks=_int(params, method, "forks", old.forks, 1),
            sticky=old.sticky if sticky is None else sticky.strip().lower() == "true",
            actives=_int(params, method, "actives", old.actives, 0),
        )
    return out


def resolve_hedging(
    methods: Iterable[str],
    params: Mapping[str, str],
    fallback: Mapping[str, HedgingPolicy] | None = None,
) -> dict[str, HedgingPolicy]:
    """Each method's hedging from ``<method>.hedging``, else ``hedging`` (consumer parameters
    and overrides only: whether a call may run twice is the consumer's to say). A value that
    does not parse is logged and the method keeps its ``fallback`` policy."""
    out = {}
    for method in methods:
        text = _lookup(params, method, "hedging")
        old = (fallback or {}).get(method, HEDGING_OFF)
        if text is None:
            out[method] = old
            continue
        try:
            out[method] = parse_hedging_text(text)
        except ValueError as exc:
            log.error("ignoring hedging=%r for %s: %s", text, method, exc)
            out[method] = old
    return out


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


class ReferenceSettings:
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
