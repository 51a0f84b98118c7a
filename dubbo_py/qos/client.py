"""Reading another application's QoS port: its ``/metrics`` (parsed back into per-method
counts) and its ``/ls`` listing. What ``dubbo-py top`` is built from."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["MethodCounts", "QosReading", "QosUnreachableError", "qos_json", "read_qos"]

_COUNTERS = {
    "requests_total": "total",
    "requests_succeed_total": "succeed",
    "requests_failed_total": "failed",
}
_GAUGES = {
    "requests_processing": "processing",
    "rt_milliseconds_p50": "p50_ms",
    "rt_milliseconds_p99": "p99_ms",
    "rt_milliseconds_avg": "avg_ms",
}


class QosUnreachableError(OSError):
    """The QoS port did not answer (or answered something that is not dubbo-py's)."""


@dataclass
class MethodCounts:
    """One method's figures on one side, as ``/metrics`` states them."""

    side: str
    interface: str
    method: str
    group: str
    version: str
    total: float = 0.0
    succeed: float = 0.0
    failed: float = 0.0
    processing: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    avg_ms: float = 0.0

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """What identifies the method (side, interface, method, group, version)."""
        return (self.side, self.interface, self.method, self.group, self.version)


@dataclass
class QosReading:
    """One read of an application's QoS port."""

    address: str
    listing: dict[str, Any]
    methods: list[MethodCounts] = field(default_factory=list)
    #: Every other sample of ``/metrics``: (name, labels) -> value.
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)

    @property
    def application(self) -> str:
        """The application's name, as it says."""
        return str(self.listing.get("application", ""))


def _get(address: str, path: str, timeout: float) -> bytes:
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=timeout) as answer:
            body: bytes = answer.read()
            return body
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise QosUnreachableError(f"QoS port {address}{path}: {reason}") from None


def qos_json(address: str, path: str, timeout: float = 3.0) -> Any:
    """GET ``path`` (with its query) of the QoS port at ``host:port``, as JSON; an answer
    other than 200 is a :class:`QosUnreachableError` carrying the port's message (a 400
    names the bad parameter)."""
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=timeout) as answer:
            body: bytes = answer.read()
    except urllib.error.HTTPError as exc:
        text = exc.read().decode("utf-8", "replace").strip()
        raise QosUnreachableError(f"QoS port {address}{path}: {exc.code} {text}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise QosUnreachableError(f"QoS port {address}{path}: {reason}") from None
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise QosUnreachableError(f"QoS port {address}{path}: not JSON ({exc})") from None


def parse_metrics(text: str) -> tuple[list[MethodCounts], dict[Any, float]]:
    """The per-method figures of Prometheus text from a QoS port, and every sample."""
    methods: dict[tuple[str, ...], MethodCounts] = {}
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = float(sample.value)
            name = sample.name
            for side in ("consumer", "provider"):
                prefix = f"dubbo_{side}_"
                if not name.startswith(prefix):
                    continue
                rest = name[len(prefix) :]
                attribute = _COUNTERS.get(rest) or _GAUGES.get(rest)
                if attribute is None:
                    continue
                labels = sample.labels
                row = MethodCounts(
                    side,
                    labels.get("interface", ""),
                    labels.get("method", ""),
                    labels.get("group", ""),
                    labels.get("version", ""),
                )
                row = methods.setdefault(row.key, row)
                setattr(row, attribute, float(sample.value))
    return list(methods.values()), samples


def read_qos(address: str, timeout: float = 3.0) -> QosReading:
    """Read ``/ls`` and ``/metrics`` of the QoS port at ``host:port``."""
    try:
        listing = json.loads(_get(address, "/ls", timeout))
    except json.JSONDecodeError as exc:
        raise QosUnreachableError(f"QoS port {address}/ls: not JSON ({exc})") from None
    if not isinstance(listing, dict):
        raise QosUnreachableError(f"QoS port {address}/ls: not a dubbo-py listing")
    methods, samples = parse_metrics(_get(address, "/metrics", timeout).decode("utf-8"))
    return QosReading(address, listing, methods, samples)
