"""Live figures per provider for the service page, read from the applications' QoS ports with
the computation behind ``dubbo-py top`` (:mod:`dubbo_py.admin.top`): calls/s summed over the
provider's methods, the slowest method's p99, the error rate, and the consumer applications
that hold the provider in quarantine.

A rate needs two reads: the console keeps each QoS port's last reading, and the page polls the
live figures, so calls/s shows from the second poll on.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from dubbo_py.admin.top import discover, fetch_json, read_all, view
from dubbo_py.qos.client import QosReading, QosUnreachableError
from dubbo_py.registry import layout
from dubbo_py.registry.registry import Registry

__all__ = ["ConsumerSnapshot", "LiveProvider", "LiveReader", "merge_rows"]


@dataclass(frozen=True, slots=True)
class ConsumerSnapshot:
    """One live consumer's router snapshot of a service: the chains in force (one per
    registry stack) and its recent recorded calls (``/getRouterSnapshot`` and
    ``/getRecentRouterSnapshot``)."""

    application: str
    qos: str
    references: list[dict[str, Any]]
    calls: list[dict[str, Any]]
    #: Whether it records calls now.
    recording: bool


@dataclass(frozen=True, slots=True)
class LiveProvider:
    """One provider's live figures."""

    address: str
    #: Calls per second since the previous poll (None at the first).
    calls_per_second: float | None
    p99_ms: float
    error_rate: float
    #: Consumer applications that hold it in quarantine now.
    quarantined_by: tuple[str, ...]


def merge_rows(rows: Iterable[Mapping[str, Any]]) -> dict[str, LiveProvider]:
    """``dubbo-py top``'s provider rows (one per method) folded into one per address."""
    out: dict[str, LiveProvider] = {}
    for row in rows:
        address = str(row.get("address") or "")
        if not address:
            continue
        rate = row.get("calls_per_second")
        seen = out.get(address)
        if seen is not None:
            rate = (
                None
                if rate is None or seen.calls_per_second is None
                else (seen.calls_per_second + float(rate))
            )
        out[address] = LiveProvider(
            address,
            None if rate is None else round(float(rate), 2),
            max(float(row.get("p99_ms") or 0.0), seen.p99_ms if seen else 0.0),
            max(float(row.get("error_rate") or 0.0), seen.error_rate if seen else 0.0),
            tuple(
                sorted(
                    set(row.get("quarantined_by") or ()) | set(seen.quarantined_by if seen else ())
                )
            ),
        )
    return out


class LiveReader:
    """Reads a service's QoS figures, remembering each port's last reading for the rates."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._lock = threading.Lock()
        self._last: dict[str, tuple[float, QosReading]] = {}

    def snapshots(self, service: str) -> tuple[list[ConsumerSnapshot], list[dict[str, str]]]:
        """The router snapshots of the service's consumers that registered a QoS port, and
        those that did not answer (with why)."""
        endpoints, _ = discover(self.registry, service, (layout.CONSUMERS,))
        pattern = quote(re.escape(service))
        found: list[ConsumerSnapshot] = []
        failures: list[dict[str, str]] = []
        for endpoint in endpoints:
            try:
                chains = fetch_json(endpoint, f"/getRouterSnapshot?service={pattern}")
                recent = fetch_json(endpoint, f"/getRecentRouterSnapshot?service={pattern}")
            except QosUnreachableError as exc:
                failures.append(
                    {
                        "application": endpoint.application,
                        "qos": endpoint.address,
                        "error": str(exc),
                    }
                )
                continue
            references = list(chains.get("references", []))
            found.append(
                ConsumerSnapshot(
                    endpoint.application,
                    endpoint.address,
                    references,
                    list(recent.get("calls", []))[::-1],
                    any(r.get("recording") for r in references),
                )
            )
        return found, failures

    def read(self, service: str) -> tuple[dict[str, LiveProvider], list[dict[str, str]]]:
        """Figures by provider address, and the QoS ports that did not answer (with why)."""
        endpoints, providers = discover(self.registry, service)
        readings, failures = read_all(endpoints)
        now = time.monotonic()
        with self._lock:
            earlier = {
                r.address: self._last[r.address] for r in readings if r.address in self._last
            }
            for reading in readings:
                self._last[reading.address] = (now, reading)
        previous = {address: reading for address, (_, reading) in earlier.items()}
        elapsed = min((now - at for at, _ in earlier.values()), default=0.0)
        rows = view(readings, previous, elapsed, providers, service)["providers"]
        return merge_rows(rows), failures
