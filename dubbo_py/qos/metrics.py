"""Call metrics with Apache Dubbo's standard names and labels, cheap on the call path.

Each (side, interface, method, group, version) has one :class:`MethodStats`: plain integers
behind one lock, updated twice per call (:meth:`MethodStats.begin` and :meth:`MethodStats.end`,
well under a microsecond each). Nothing Prometheus-shaped is built until a scrape:
:class:`MetricsCollector` turns the integers into metric families then, with Dubbo's names
(``dubbo_consumer_requests_total``, ``dubbo_provider_rt_milliseconds_p99``, ...) and labels
(``application_name``, ``interface``, ``method``, ``group``, ``version``) -- what Dubbo Java's
Micrometer registry exports, so dashboards built for Dubbo read dubbo-py too.

Failures are counted by reason as Dubbo's ``MetricsSupport.getMetricsKey`` sorts them, from the
call's gRPC status (see :func:`failure_reason`).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

import grpc
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from dubbo_py.callbacks import add_callback

__all__ = [
    "BUCKETS_MS",
    "FAILURE_REASONS",
    "MethodKey",
    "MethodStats",
    "Metrics",
    "MetricsCollector",
    "failure_reason",
    "hedging_families",
]

Side = Literal["consumer", "provider"]

#: Why a call failed, as Dubbo counts it (each has its own ``*_total`` counter).
FAILURE_REASONS = (
    "timeout",
    "limit",
    "network",
    "service_unavailable",
    "business",
    "codec",
    "unknown",
)

#: Histogram bucket bounds in milliseconds: finer than Dubbo's default (100 ms and up), which
#: would put every loopback call in its first bucket; Dubbo's own bounds are all included.
BUCKETS_MS = (1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 300.0, 500.0, 1000.0, 3000.0, 5000.0, 10000.0)

# Read on every call: bound once (a module attribute lookup each is measurable per call).
_now = time.perf_counter
_bucket = bisect.bisect_left

#: How many recent latencies each method keeps for p50/p90/p95/p99 (Dubbo keeps a sliding window).
RECENT = 1024

_TIMEOUT = {grpc.StatusCode.DEADLINE_EXCEEDED}
_LIMIT = {grpc.StatusCode.RESOURCE_EXHAUSTED}
_NETWORK = {grpc.StatusCode.UNAVAILABLE}
_UNAVAILABLE = {grpc.StatusCode.UNIMPLEMENTED}
_UNKNOWN = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL, grpc.StatusCode.CANCELLED}
_CODEC = {grpc.StatusCode.DATA_LOSS}


def failure_reason(code: grpc.StatusCode | None, *, no_provider: bool = False) -> str:
    """The Dubbo failure counter a call that ended with ``code`` goes to.

    ``no_provider`` (the consumer found no provider to call: Dubbo's "No provider available")
    is ``service_unavailable``; DEADLINE_EXCEEDED is ``timeout``; RESOURCE_EXHAUSTED (a shed
    call, Dubbo's limit filters) is ``limit``; UNAVAILABLE is ``network``; UNIMPLEMENTED (the
    provider does not serve the method) is ``service_unavailable``; DATA_LOSS is ``codec``;
    UNKNOWN, INTERNAL, CANCELLED and exceptions without a status are ``unknown``; every other
    status was set by the application, which Dubbo calls a ``business`` failure.
    """
    if no_provider:
        return "service_unavailable"
    if code is None or code in _UNKNOWN:
        return "unknown"
    if code in _TIMEOUT:
        return "timeout"
    if code in _LIMIT:
        return "limit"
    if code in _NETWORK:
        return "network"
    if code in _UNAVAILABLE:
        return "service_unavailable"
    if code in _CODEC:
        return "codec"
    return "business"


@dataclass(frozen=True, slots=True)
class MethodKey:
    """What a method's metrics are labelled with (besides the application)."""

    side: Side
    interface: str
    method: str
    group: str = ""
    version: str = ""


class MethodStats:
    """One method's counters on one side. ``begin`` returns the start time to hand to ``end``."""

    __slots__ = (
        "_lock",
        "buckets",
        "failed",
        "key",
        "processing",
        "recent",
        "rt_last",
        "rt_max",
        "rt_min",
        "rt_sum",
        "succeed",
        "total",
    )

    def __init__(self, key: MethodKey) -> None:
        self.key = key
        self._lock = threading.Lock()
        self.total = 0
        self.succeed = 0
        self.processing = 0
        self.failed = dict.fromkeys(FAILURE_REASONS, 0)
        self.rt_last = 0.0
        self.rt_min = float("inf")  # 0 in exports until a call ends
        self.rt_max = 0.0
        self.rt_sum = 0.0
        #: Counts per bucket (the last one is +Inf); cumulated only at a scrape.
        self.buckets = [0] * (len(BUCKETS_MS) + 1)
        self.recent: deque[float] = deque(maxlen=RECENT)

    def begin(self) -> float:
        """Count a call that starts now."""
        with self._lock:
            self.total += 1
            self.processing += 1
        return _now()

    def end(self, started: float, reason: str | None = None) -> None:
        """Count the end of a call begun at ``started``: a success when ``reason`` is None,
        else a failure for that reason (one of :data:`FAILURE_REASONS`)."""
        elapsed_ms = (_now() - started) * 1000.0
        slot = _bucket(BUCKETS_MS, elapsed_ms)
        with self._lock:
            self.processing -= 1
            if reason is None:
                self.succeed += 1
            else:
                self.failed[reason] += 1
            if elapsed_ms < self.rt_min:
                self.rt_min = elapsed_ms
            if elapsed_ms > self.rt_max:
                self.rt_max = elapsed_ms
            self.rt_last = elapsed_ms
            self.rt_sum += elapsed_ms
            self.buckets[slot] += 1
        self.recent.append(elapsed_ms)

    @property
    def failed_total(self) -> int:
        """Every failed call, whatever the reason."""
        return sum(self.failed.values())

    def snapshot(self) -> dict[str, object]:
        """A consistent copy of the counters (for ``/ls``, ``dubbo-py top`` and tests)."""
        with self._lock:
            done = self.succeed + sum(self.failed.values())
            return {
                "total": self.total,
                "succeed": self.succeed,
                "failed": self.failed_total,
                "failed_by_reason": dict(self.failed),
                "processing": self.processing,
                "rt_avg_ms": self.rt_sum / done if done else 0.0,
                "rt_max_ms": self.rt_max,
                "rt_min_ms": self.rt_min if done else 0.0,
                "p50_ms": quantile(list(self.recent), 0.50),
                "p99_ms": quantile(list(self.recent), 0.99),
            }


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank; 0 for none)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.5) - 1))
    return ordered[index]


class Metrics:
    """Every method's statistics for one application, plus the governance sources that are
    read at each scrape (quarantine sizes, rule versions, registry state ...)."""

    def __init__(self, application: str) -> None:
        self.application = application
        self._lock = threading.Lock()
        self._methods: dict[MethodKey, MethodStats] = {}
        self._sources: list[Callable[[], Iterable[Metric]]] = []
        self._counters: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        self._help: dict[str, str] = {}

    def method(self, key: MethodKey) -> MethodStats:
        """The statistics of ``key`` (made on first use; callers keep the object)."""
        stats = self._methods.get(key)
        if stats is None:
            with self._lock:
                stats = self._methods.setdefault(key, MethodStats(key))
        return stats

    def methods(self) -> tuple[MethodStats, ...]:
        """Every method seen so far."""
        with self._lock:
            return tuple(self._methods.values())

    def add_source(self, source: Callable[[], Iterable[Metric]]) -> Callable[[], None]:
        """Read ``source`` at every scrape; returns a function that stops reading it."""
        return add_callback(self._lock, self._sources, source)

    def inc(self, name: str, help_text: str, labels: dict[str, str], amount: float = 1.0) -> None:
        """Add to a governance counter (events off the call path: ejections, rule changes)."""
        key = (name, tuple(sorted(labels.items())))
        with self._lock:
            self._help.setdefault(name, help_text)
            self._counters[key] = self._counters.get(key, 0.0) + amount

    def counters(self) -> Iterator[Metric]:
        """The governance counters as metric families."""
        with self._lock:
            items = list(self._counters.items())
            helps = dict(self._help)
        families: dict[str, CounterMetricFamily] = {}
        for (name, labels), value in sorted(items):
            family = families.get(name)
            if family is None:
                family = families[name] = CounterMetricFamily(
                    name, helps[name], labels=["application_name", *(k for k, _ in labels)]
                )
            family.add_metric([self.application, *(v for _, v in labels)], value)
        yield from families.values()

    def sources(self) -> tuple[Callable[[], Iterable[Metric]], ...]:
        """The scrape-time sources."""
        with self._lock:
            return tuple(self._sources)


_LABELS = ["application_name", "interface", "method", "group", "version"]

# (suffix, help) of the counters every side has, in Dubbo's naming.
_COUNTERS = (
    ("requests", "Total Requests"),
    ("requests_succeed", "Total Succeed Requests"),
    ("requests_failed", "Total Failed Requests"),
    ("requests_business_failed", "Total Failed Business Requests"),
    ("requests_timeout", "Total Timeout Failed Requests"),
    ("requests_limit", "Total Limit Failed Requests"),
    ("requests_unknown_failed", "Total Unknown Failed Requests"),
    ("requests_failed_network", "Total network Failed Requests"),
    ("requests_failed_service_unavailable", "Total Service Unavailable Failed Requests"),
    ("requests_failed_codec", "Total Codec Failed Requests"),
)
_REASON_COUNTER = {
    "business": "requests_business_failed",
    "timeout": "requests_timeout",
    "limit": "requests_limit",
    "unknown": "requests_unknown_failed",
    "network": "requests_failed_network",
    "service_unavailable": "requests_failed_service_unavailable",
    "codec": "requests_failed_codec",
}
_RT_GAUGES = (
    ("last", "Last Response Time"),
    ("min", "Min Response Time"),
    ("max", "Max Response Time"),
    ("sum", "Sum Response Time"),
    ("avg", "Average Response Time"),
    ("p50", "Response Time P50"),
    ("p90", "Response Time P90"),
    ("p95", "Response Time P95"),
    ("p99", "Response Time P99"),
)


class MetricsCollector(Collector):
    """A ``prometheus_client`` collector over one application's :class:`Metrics`."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        """Every family, built now from the counters."""
        app = self.metrics.application
        by_side: dict[str, list[MethodStats]] = {"consumer": [], "provider": []}
        for stats in self.metrics.methods():
            by_side[stats.key.side].append(stats)
        for side, methods in by_side.items():
            if methods:
                yield from _side_families(app, side, methods)
        yield from self.metrics.counters()
        for source in self.metrics.sources():
            yield from source()


def _side_families(app: str, side: str, methods: list[MethodStats]) -> Iterator[Metric]:
    prefix = f"dubbo_{side}_"
    # The counter family's name is without _total: prometheus_client adds it to the sample.
    counters = {
        suffix: CounterMetricFamily(prefix + suffix, help_text, labels=_LABELS)
        for suffix, help_text in _COUNTERS
    }
    processing = GaugeMetricFamily(
        prefix + "requests_processing", "Processing Requests", labels=_LABELS
    )
    rt = {
        name: GaugeMetricFamily(prefix + f"rt_milliseconds_{name}", help_text, labels=_LABELS)
        for name, help_text in _RT_GAUGES
    }
    # Micrometer exports Dubbo's rt histogram (a Timer) in seconds, with _seconds appended.
    histogram = HistogramMetricFamily(
        prefix + "rt_milliseconds_histogram_seconds", "Response Time Histogram", labels=_LABELS
    )
    for stats in methods:
        key = stats.key
        labels = [app, key.interface, key.method, key.group, key.version]
        with stats._lock:
            total, succeed, active = stats.total, stats.succeed, stats.processing
            failed = dict(stats.failed)
            last, low, high, summed = stats.rt_last, stats.rt_min, stats.rt_max, stats.rt_sum
            buckets = list(stats.buckets)
            recent = list(stats.recent)
        done = succeed + sum(failed.values())
        counters["requests"].add_metric(labels, total)
        counters["requests_succeed"].add_metric(labels, succeed)
        counters["requests_failed"].add_metric(labels, sum(failed.values()))
        for reason, suffix in _REASON_COUNTER.items():
            counters[suffix].add_metric(labels, failed[reason])
        processing.add_metric(labels, active)
        ordered = sorted(recent)
        values = {
            "last": last,
            "min": low if done else 0.0,
            "max": high,
            "sum": summed,
            "avg": summed / done if done else 0.0,
            "p50": quantile(ordered, 0.50),
            "p90": quantile(ordered, 0.90),
            "p95": quantile(ordered, 0.95),
            "p99": quantile(ordered, 0.99),
        }
        for name, family in rt.items():
            family.add_metric(labels, values[name])
        cumulative, running = [], 0
        for bound, count in zip((*BUCKETS_MS, float("inf")), buckets, strict=True):
            running += count
            le = "+Inf" if bound == float("inf") else repr(bound / 1000.0)
            cumulative.append((le, float(running)))
        histogram.add_metric(labels, cumulative, sum_value=summed / 1000.0)
    yield from counters.values()
    yield processing
    yield from rt.values()
    yield histogram


#: The hedging counters: (name, help, which count of a method's ``HedgeCounts``).
_HEDGING = (
    ("dubbo_py_consumer_hedges_sent", "Hedged (backup) attempts sent", "sent"),
    ("dubbo_py_consumer_hedges_won", "Hedged attempts that answered first", "won"),
    (
        "dubbo_py_consumer_hedge_budget_refusals",
        "Hedges the method's hedging budget refused",
        "refused",
    ),
)


def hedging_families(
    application: str, counts: dict[tuple[str, str], dict[str, int]]
) -> Iterator[Metric]:
    """The hedging counters (sent, won, budget refusals) by (interface, method); ``counts``
    maps each to its ``{"sent": n, "won": n, "refused": n}``. The share of extra load is
    ``hedges_sent / requests`` of the method."""
    for name, help_text, key in _HEDGING:
        family = CounterMetricFamily(
            name, help_text, labels=["application_name", "interface", "method"]
        )
        for (interface, method), values in sorted(counts.items()):
            family.add_metric([application, interface, method], values.get(key, 0))
        yield family
