"""Call metrics: Dubbo's names and labels in the Prometheus text, failures counted by reason."""

from __future__ import annotations

import threading

import grpc
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from dubbo_py.qos.metrics import (
    FAILURE_REASONS,
    MethodKey,
    Metrics,
    MetricsCollector,
    failure_reason,
)


def scrape(metrics: Metrics) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Prometheus text parsed back: sample name -> labels -> value."""
    registry = CollectorRegistry()
    registry.register(MetricsCollector(metrics))
    text = generate_latest(registry).decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


LABELS = (
    ("application_name", "shop"),
    ("group", "g"),
    ("interface", "demo.Greeter"),
    ("method", "SayHello"),
    ("version", "1.0.0"),
)


def test_dubbo_names_and_labels_after_calls() -> None:
    metrics = Metrics("shop")
    stats = metrics.method(MethodKey("consumer", "demo.Greeter", "SayHello", "g", "1.0.0"))
    for _ in range(5):
        stats.end(stats.begin())
    stats.end(stats.begin(), "timeout")
    stats.end(stats.begin(), "business")
    in_flight = stats.begin()
    samples = scrape(metrics)
    assert samples["dubbo_consumer_requests_total"][LABELS] == 8
    assert samples["dubbo_consumer_requests_succeed_total"][LABELS] == 5
    assert samples["dubbo_consumer_requests_failed_total"][LABELS] == 2
    assert samples["dubbo_consumer_requests_timeout_total"][LABELS] == 1
    assert samples["dubbo_consumer_requests_business_failed_total"][LABELS] == 1
    assert samples["dubbo_consumer_requests_limit_total"][LABELS] == 0
    assert samples["dubbo_consumer_requests_processing"][LABELS] == 1
    for name in ("min", "max", "avg", "sum", "last", "p50", "p90", "p95", "p99"):
        assert samples[f"dubbo_consumer_rt_milliseconds_{name}"][LABELS] >= 0
    buckets = samples["dubbo_consumer_rt_milliseconds_histogram_seconds_bucket"]
    assert buckets[(*LABELS[:3], ("le", "+Inf"), *LABELS[3:])] == 7
    assert samples["dubbo_consumer_rt_milliseconds_histogram_seconds_count"][LABELS] == 7
    assert not any(name.startswith("dubbo_provider_") for name in samples)
    stats.end(in_flight)
    assert scrape(metrics)["dubbo_consumer_requests_processing"][LABELS] == 0


def test_counts_are_exact_under_concurrent_calls() -> None:
    metrics = Metrics("shop")
    stats = metrics.method(MethodKey("provider", "demo.Greeter", "SayHello"))

    def work() -> None:
        for _ in range(2000):
            stats.end(stats.begin())

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    snap = stats.snapshot()
    assert snap["total"] == snap["succeed"] == 16000
    assert snap["processing"] == 0


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (grpc.StatusCode.DEADLINE_EXCEEDED, "timeout"),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "limit"),
        (grpc.StatusCode.UNAVAILABLE, "network"),
        (grpc.StatusCode.UNIMPLEMENTED, "service_unavailable"),
        (grpc.StatusCode.INVALID_ARGUMENT, "business"),
        (grpc.StatusCode.NOT_FOUND, "business"),
        (grpc.StatusCode.UNKNOWN, "unknown"),
        (grpc.StatusCode.DATA_LOSS, "codec"),
        (None, "unknown"),
    ],
)
def test_failure_reasons_follow_dubbo(code: grpc.StatusCode | None, reason: str) -> None:
    assert failure_reason(code) == reason
    assert reason in FAILURE_REASONS


def test_no_provider_is_service_unavailable() -> None:
    assert failure_reason(grpc.StatusCode.UNAVAILABLE, no_provider=True) == "service_unavailable"


def test_governance_counters_and_sources_appear_in_the_scrape() -> None:
    from prometheus_client.core import GaugeMetricFamily

    metrics = Metrics("shop")
    metrics.inc("dubbo_py_consumer_retries", "Retries", {"interface": "demo.Greeter"}, 3)

    def source() -> list[GaugeMetricFamily]:
        return [GaugeMetricFamily("dubbo_py_example", "An example", value=7)]

    remove = metrics.add_source(source)
    samples = scrape(metrics)
    key = (("application_name", "shop"), ("interface", "demo.Greeter"))
    assert samples["dubbo_py_consumer_retries_total"][key] == 3
    assert samples["dubbo_py_example"][()] == 7
    remove()
    assert "dubbo_py_example" not in scrape(metrics)


def test_provider_observer_labels_by_headers_when_a_service_is_exported_twice() -> None:
    from typing import Any

    from dubbo_py.qos.provider import ProviderObserver

    metrics = Metrics("greeter")
    observer = ProviderObserver(metrics, {"demo.Greeter": None, "demo.Other": ("2.0.0", "g")})
    handler = grpc.unary_unary_rpc_method_handler(lambda request, context: request)

    class Details:
        def __init__(self, method: str, metadata: tuple[tuple[str, str], ...]) -> None:
            self.method = method
            self.invocation_metadata = metadata

    class Context:
        def invocation_metadata(self) -> tuple[()]:
            return ()

        def peer(self) -> str:
            return ""

        def code(self) -> Any:
            return None

    calls = [
        ("/demo.Greeter/SayHello", (("tri-service-version", "1.0.0"),)),
        ("/demo.Greeter/SayHello", (("tri-service-version", "2.0.0"), ("tri-service-group", "b"))),
        ("/demo.Other/Ping", (("tri-service-version", "9.9.9"),)),  # exported once: its labels
        ("/grpc.health.v1.Health/Check", ()),  # the framework's traffic: not counted
    ]
    for path, metadata in calls:
        wrapped = observer.intercept_service(lambda details: handler, Details(path, metadata))
        assert wrapped is not None
        wrapped.unary_unary("request", Context())
    keys = {(s.key.interface, s.key.version, s.key.group) for s in metrics.methods()}
    assert keys == {
        ("demo.Greeter", "1.0.0", ""),
        ("demo.Greeter", "2.0.0", "b"),
        ("demo.Other", "2.0.0", "g"),
    }
