"""Observability: call metrics with Apache Dubbo's names (:mod:`.metrics`), OpenTelemetry
tracing through the API (:mod:`.tracing`), the provider-side interceptor that records both
(:mod:`.provider`), and the QoS HTTP port that serves them (:mod:`.server`).

This package sits below :mod:`dubbo_py.consumer` and :mod:`dubbo_py.provider`: it knows
calls, metadata and metrics, not applications; :mod:`dubbo_py.app.observability` answers the
QoS port's questions for an application. See docs/observability.md.
"""
