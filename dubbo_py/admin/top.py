"""``dubbo-py top [SERVICE]``: a live view of the applications found in the registry, read from
their QoS ports (the ``qos.port`` their registered URLs carry).

Per provider: calls, calls/s, error rate, p50/p99, how many consumers hold it in quarantine,
its weight. Per consumer: the same figures for what it calls, its providers, and the rule
versions in force on it. ``--once`` prints one view (rates over ``--interval`` seconds);
``--json`` prints it for scripts. With several ``--registry``, applications are found in each
and every row names the registries (and zones) its application was found in: an application
registered in two registries is one process with one QoS port, shown once.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import click
from rich.console import Group
from rich.live import Live
from rich.table import Table

from dubbo_py.admin.common import (
    CONTEXT_SETTINGS,
    AdminError,
    CliEnv,
    as_admin_error,
    console,
    emit_json,
    env_of,
    json_option,
    seconds_option,
)
from dubbo_py.qos.client import (
    MethodCounts,
    QosReading,
    QosUnreachableError,
    qos_json,
    read_qos,
)
from dubbo_py.registry import layout
from dubbo_py.registry.registry import Registry
from dubbo_py.url import URL

__all__ = ["Endpoint", "discover", "discover_each", "fetch_each", "fetch_json", "top", "view"]

QOS_PORT_KEY = "qos.port"
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """An application's QoS port as the registry tells it."""

    application: str
    host: str
    port: int
    #: The ``(registry id, zone)`` of each registry it was found in (several registries).
    registries: tuple[tuple[str, str | None], ...] = ()

    @property
    def address(self) -> str:
        """``host:port`` of the QoS port."""
        return f"{self.host}:{self.port}"


def discover(
    registry: Registry,
    service: str | None,
    categories: tuple[str, ...] = (layout.PROVIDERS, layout.CONSUMERS),
    matches: Callable[[str], bool] | None = None,
) -> tuple[list[Endpoint], dict[str, URL]]:
    """The QoS endpoints of every application registered for ``service`` (or any service;
    ``matches`` chooses the services instead when given) in ``categories``, and the provider
    URLs by address (for weights)."""
    endpoints: dict[tuple[str, int], Endpoint] = {}
    providers: dict[str, URL] = {}
    for name in registry.services():
        if service is not None and name != service:
            continue
        if matches is not None and not matches(name):
            continue
        for category in categories:
            for url in registry.lookup(name, category):
                if category == layout.PROVIDERS:
                    providers[f"{url.service_key}@{url.address}"] = url
                port = url.get_int(QOS_PORT_KEY, 0)
                if port > 0:
                    endpoint = Endpoint(url.get_str("application"), url.host, port)
                    endpoints.setdefault((url.host, port), endpoint)
    return sorted(endpoints.values(), key=lambda e: (e.application, e.address)), providers


def discover_each(
    registries: list[tuple[tuple[str, str | None], Registry]], service: str | None
) -> tuple[list[Endpoint], dict[str, URL]]:
    """:func:`discover` on each ``((id, zone), registry)``: an endpoint found in several is
    one, labelled with each registry it was found in."""
    merged: dict[tuple[str, int], Endpoint] = {}
    providers: dict[str, URL] = {}
    for found_in, registry in registries:
        endpoints, found = discover(registry, service)
        for key, url in found.items():
            providers.setdefault(key, url)
        for endpoint in endpoints:
            known = merged.get((endpoint.host, endpoint.port)) or endpoint
            merged[(endpoint.host, endpoint.port)] = Endpoint(
                known.application, known.host, known.port, (*known.registries, found_in)
            )
    return sorted(merged.values(), key=lambda e: (e.application, e.address)), providers


def _label_rows(
    rows: dict[str, Any], failures: list[dict[str, Any]], endpoints: list[Endpoint]
) -> None:
    """Give each row (and failure) the registries and zones its application was found in
    (its QoS address as registered, or on loopback where :func:`_read` fell back to it)."""
    where: dict[str, tuple[tuple[str, str | None], ...]] = {}
    for endpoint in endpoints:
        where.setdefault(endpoint.address, endpoint.registries)
        where.setdefault(f"{LOOPBACK}:{endpoint.port}", endpoint.registries)
    for row in (*rows["providers"], *rows["consumers"], *failures):
        found = where.get(str(row["qos"]), ())
        row["registries"] = [r for r, _ in found]
        row["zones"] = [z for _, z in found]


def _read(endpoint: Endpoint) -> QosReading:
    """Read the endpoint at its registered host, else on loopback (the QoS port listens on
    127.0.0.1 unless the application accepts foreign addresses) when the application there is
    the one registered."""
    try:
        return read_qos(endpoint.address)
    except QosUnreachableError:
        if endpoint.host == LOOPBACK:
            raise
        reading = read_qos(f"{LOOPBACK}:{endpoint.port}")
        if reading.application != endpoint.application:
            raise
        return reading


def fetch_json(endpoint: Endpoint, path: str, timeout: float = 5.0) -> Any:
    """GET ``path`` of the endpoint's QoS port as JSON: at its registered host, else on
    loopback (as :func:`_read`); raises :class:`QosUnreachableError`."""
    try:
        return qos_json(endpoint.address, path, timeout)
    except QosUnreachableError as exc:
        if endpoint.host == LOOPBACK or " 400 " in str(exc):
            raise
        local = f"{LOOPBACK}:{endpoint.port}"
        # Only when the application listening there is the one registered: a command such as
        # enableRouterSnapshot must not reach another process that happens to use the port.
        listing = qos_json(local, "/ls", timeout)
        if not isinstance(listing, dict) or listing.get("application") != endpoint.application:
            raise
        return qos_json(local, path, timeout)


def fetch_each(
    endpoints: Iterable[Endpoint], path: str, timeout: float
) -> tuple[list[tuple[Endpoint, Any]], list[dict[str, str]]]:
    """GET ``path`` of each endpoint's QoS port in turn (:func:`fetch_json`): each endpoint that
    answered with its answer; those that did not are listed with the reason."""
    answers: list[tuple[Endpoint, Any]] = []
    failures: list[dict[str, str]] = []
    for endpoint in endpoints:
        try:
            answers.append((endpoint, fetch_json(endpoint, path, timeout)))
        except QosUnreachableError as exc:
            failures.append(_failure(endpoint, str(exc)))
    return answers, failures


def _failure(endpoint: Endpoint, error: str) -> dict[str, str]:
    return {"application": endpoint.application, "qos": endpoint.address, "error": error}


def read_all(endpoints: Iterable[Endpoint]) -> tuple[list[QosReading], list[dict[str, str]]]:
    """Read every endpoint at once; those that do not answer are listed with the reason."""
    chosen = list(endpoints)
    readings: list[QosReading] = []
    failures: list[dict[str, str]] = []
    if not chosen:
        return readings, failures
    with ThreadPoolExecutor(max_workers=min(16, len(chosen))) as pool:
        results = list(pool.map(_try_read, chosen))
    for endpoint, result in zip(chosen, results, strict=True):
        if isinstance(result, QosReading):
            readings.append(result)
        else:
            failures.append(_failure(endpoint, result))
    return readings, failures


def _try_read(endpoint: Endpoint) -> QosReading | str:
    try:
        return _read(endpoint)
    except QosUnreachableError as exc:
        return str(exc)


def _figures(now: MethodCounts, before: MethodCounts | None, elapsed: float) -> dict[str, Any]:
    calls = now.total - (before.total if before else 0.0)
    failed = now.failed - (before.failed if before else 0.0)
    # With no calls in the window, the error rate is the one over the process's life.
    rate_of = (failed / calls) if calls > 0 else (now.failed / now.total if now.total else 0.0)
    return {
        "interface": now.interface,
        "method": now.method,
        "version": now.version,
        "group": now.group,
        "requests_total": int(now.total),
        "succeed_total": int(now.succeed),
        "failed_total": int(now.failed),
        "processing": int(now.processing),
        "calls_per_second": round(calls / elapsed, 2) if before is not None and elapsed else None,
        "error_rate": round(rate_of, 4),
        "p50_ms": round(now.p50_ms, 3),
        "p99_ms": round(now.p99_ms, 3),
    }


def _provider_row(
    row: dict[str, Any],
    exported: dict[str, Any],
    providers: dict[str, URL],
    quarantined_by: dict[str, list[str]],
) -> dict[str, Any]:
    address = str(exported.get("address", ""))
    url = providers.get(f"{exported.get('service', '')}@{address}")
    row["address"] = address
    row["registered"] = bool(exported.get("registered", False))
    row["weight"] = url.get_int("weight", 100) if url is not None else None
    row["quarantined_by"] = sorted(quarantined_by.get(address, []))
    return row


def view(
    readings: list[QosReading],
    previous: dict[str, QosReading],
    elapsed: float,
    providers: dict[str, URL],
    service: str | None,
) -> dict[str, Any]:
    """The rows of one view (what ``--json`` prints)."""
    quarantined_by: dict[str, list[str]] = {}
    for reading in readings:
        for consumed in reading.listing.get("consumed", []):
            for address in consumed.get("quarantined", []):
                quarantined_by.setdefault(address, []).append(reading.application)
    provider_rows: list[dict[str, Any]] = []
    consumer_rows: list[dict[str, Any]] = []
    for reading in readings:
        before = previous.get(reading.address)
        old = {m.key: m for m in before.methods} if before else {}
        provided = {
            (p.get("interface"), p.get("version", ""), p.get("group", "")): p
            for p in reading.listing.get("provided", [])
        }
        consumed = {
            (c.get("interface"), c.get("version", ""), c.get("group", "")): c
            for c in reading.listing.get("consumed", [])
        }
        for method in reading.methods:
            if service is not None and method.interface != service:
                continue
            figures = _figures(method, old.get(method.key), elapsed if before else 0.0)
            row = {"application": reading.application, "qos": reading.address, **figures}
            where = (method.interface, method.version, method.group)
            if method.side == "provider":
                exported: dict[str, Any] = provided.get(where) or next(
                    (p for p in provided.values() if p.get("interface") == method.interface), {}
                )
                provider_rows.append(_provider_row(row, exported, providers, quarantined_by))
            else:
                reference = consumed.get(where, {})
                row["providers"] = [p.get("address") for p in reference.get("providers", [])]
                row["quarantined"] = list(reference.get("quarantined", []))
                row["rules"] = [
                    {k: r.get(k) for k in ("key", "version", "applied_at")}
                    for r in reference.get("rules", [])
                ]
                consumer_rows.append(row)
        counted = {(m.interface, m.version, m.group) for m in reading.methods}
        for where, exported in provided.items():
            if where in counted or (service is not None and where[0] != service):
                continue
            # A provider nobody called yet: shown, with nothing counted.
            idle = MethodCounts("provider", str(where[0]), "", where[2], where[1])
            row = {"application": reading.application, "qos": reading.address}
            row.update(_figures(idle, None, 0.0))
            provider_rows.append(_provider_row(row, exported, providers, quarantined_by))
    order = ("application", "interface", "method", "qos")
    return {
        "providers": sorted(provider_rows, key=lambda r: tuple(str(r[k]) for k in order)),
        "consumers": sorted(consumer_rows, key=lambda r: tuple(str(r[k]) for k in order)),
    }


def _ms(value: float) -> str:
    return f"{value:.1f}" if value >= 1 else f"{value:.2f}"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


#: The columns every row of a view has, providers and consumers alike.
_STATS_COLUMNS = ("CALLS", "CALLS/S", "ERR%", "P50 ms", "P99 ms")


def _table(title: str, before: tuple[str, ...], after: tuple[str, ...]) -> Table:
    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for column in (*before, *_STATS_COLUMNS, *after):
        table.add_column(column, overflow="fold")
    return table


def _service(row: dict[str, Any]) -> str:
    return f"{row['interface']}:{row['version']}" if row["version"] else row["interface"]


def _stats_cells(row: dict[str, Any]) -> tuple[str, ...]:
    return (
        str(row["requests_total"]),
        _rate(row["calls_per_second"]),
        f"{100 * row['error_rate']:.1f}",
        _ms(row["p50_ms"]),
        _ms(row["p99_ms"]),
    )


def _where(row: dict[str, Any]) -> tuple[str, ...]:
    """The REGISTRY cell of a row labelled by :func:`_label_rows` (none otherwise)."""
    if "registries" not in row:
        return ()
    zones = [f"{r} ({z})" if z else r for r, z in zip(row["registries"], row["zones"], strict=True)]
    return (", ".join(zones) or "-",)


def render(rows: dict[str, Any], failures: list[dict[str, str]], several: bool = False) -> Group:
    """The rich tables of one view (with ``several``, a REGISTRY column first)."""
    first = ("REGISTRY",) if several else ()
    providers = _table(
        "providers",
        (*first, "APPLICATION", "ADDRESS", "SERVICE", "METHOD"),
        ("QUARANTINED BY", "WEIGHT"),
    )
    for r in rows["providers"]:
        address = r["address"] if r["registered"] else f"{r['address']} (offline)"
        providers.add_row(
            *_where(r),
            r["application"],
            address,
            _service(r),
            r["method"],
            *_stats_cells(r),
            ", ".join(r["quarantined_by"]) or "-",
            "-" if r["weight"] is None else str(r["weight"]),
        )
    consumers = _table(
        "consumers",
        (*first, "APPLICATION", "SERVICE", "METHOD"),
        ("PROVIDERS", "RULES (key@version)"),
    )
    for r in rows["consumers"]:
        rules = ", ".join(f"{x['key']}@{x['version']}" for x in r["rules"]) or "-"
        consumers.add_row(
            *_where(r),
            r["application"],
            _service(r),
            r["method"],
            *_stats_cells(r),
            str(len(r["providers"])),
            rules,
        )
    parts: list[Any] = [providers, consumers]
    for failure in failures:
        parts.append(f"[yellow]unreachable[/] {failure['application']}: {failure['error']}")
    return Group(*parts)


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("service", required=False)
@click.option("--once", is_flag=True, help="Print one view and exit (rates over --interval).")
@seconds_option("--interval", 1.0, "Seconds between reads (the window calls/s is measured over).")
@json_option
def top(service: str | None, once: bool, interval: float) -> None:
    """Live calls/s, error rate, p50/p99 per provider and consumer, from their QoS ports.

    Applications are found in the registry: every provider or consumer URL with a qos.port
    (applications started with a QoS port: qos_port=, qos.port in dubbo.yaml or
    $DUBBO_PY_QOS_PORT).

    \b
    Examples:
      dubbo-py top
      dubbo-py top demo.Greeter
      dubbo-py top --once --json

    \b
    JSON: {"providers": [{"application", "qos", "address", "interface", "method",
           "requests_total", "calls_per_second", "error_rate", "p50_ms", "p99_ms",
           "quarantined_by", "weight", ...}],
           "consumers": [{..., "providers", "quarantined", "rules"}], "unreachable": [...]}
    several registries: every row (and unreachable entry) also has "registries" and "zones",
    the registries its application was found in
    """
    env = env_of()
    several = env.several
    children: list[CliEnv] = []
    try:
        registries: list[tuple[tuple[str, str | None], Registry]] = []
        failed: list[str] = []
        if several:
            for target in env.targets():
                child = env.for_target(target)
                children.append(child)
                try:
                    registries.append(((target.id, target.zone), child.registry))
                except Exception as exc:
                    error = as_admin_error(exc)
                    if error is None:
                        raise
                    # The others are still shown; the exit status says one failed.
                    click.echo(f"error: registry {target.id}: {error.format_message()}", err=True)
                    failed.append(target.id)
            if not registries:
                raise AdminError(f"none of the {len(failed)} registries answered", printed=True)
        else:
            registries = [((str(env.address), None), env.registry)]
        if service is not None and not any(
            service in registry.services() for _, registry in registries
        ):
            where = (
                "registries " + ", ".join(i for (i, _), _ in registries)
                if several
                else (f"registry {env.address}")
            )
            raise AdminError(f"no service {service!r} in {where}", reason="not-found")
        _run(env, registries, service, once, interval, several)
        if failed:
            raise AdminError(
                f"{len(failed)} of {len(failed) + len(registries)} registries failed "
                f"({', '.join(failed)})",
                reason="registry",
                printed=True,
            )
    finally:
        for child in children:
            child.close()


def _run(
    env: CliEnv,
    registries: list[tuple[tuple[str, str | None], Registry]],
    service: str | None,
    once: bool,
    interval: float,
    several: bool,
) -> None:
    def find() -> tuple[list[Endpoint], dict[str, URL]]:
        if several:
            return discover_each(registries, service)
        return discover(registries[0][1], service)

    def rows_of(
        readings: list[QosReading],
        last: dict[str, QosReading],
        elapsed: float,
        endpoints: list[Endpoint],
        providers: dict[str, URL],
        failures: list[dict[str, Any]],
    ) -> dict[str, Any]:
        rows = view(readings, last, elapsed, providers, service)
        if several:
            _label_rows(rows, failures, endpoints)
        return rows

    endpoints, providers = find()
    previous, started = read_all(endpoints)[0], time.monotonic()
    if once or env.json:
        time.sleep(interval)
        endpoints, providers = find()
        readings, failures = read_all(endpoints)
        last = {r.address: r for r in previous}
        rows = rows_of(readings, last, time.monotonic() - started, endpoints, providers, failures)
        if env.json:
            emit_json({**rows, "unreachable": failures})
        else:
            console().print(render(rows, failures, several))
        return
    out = console()
    last = {r.address: r for r in previous}
    first = render(rows_of(previous, {}, 0.0, endpoints, providers, []), [], several)
    with contextlib.suppress(KeyboardInterrupt), Live(first, console=out) as live:
        while True:
            time.sleep(interval)
            now = time.monotonic()
            endpoints, providers = find()
            readings, failures = read_all(endpoints)
            rows = rows_of(readings, last, now - started, endpoints, providers, failures)
            live.update(render(rows, failures, several))
            last, started = {r.address: r for r in readings}, now
