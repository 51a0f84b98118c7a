"""What an :class:`~dubbo_py.app.application.Application` shows on its QoS port: the probes,
``offline``/``online``, the ``/ls`` listing, and the governance metrics read at each scrape
(quarantine, outlier ejections, rule versions, registry session) beside the call metrics.

The QoS server itself (:mod:`dubbo_py.qos.server`) knows nothing of applications; this module
answers its questions from the application's servers and references.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client.core import GaugeMetricFamily, Metric

from dubbo_py import rule_fields
from dubbo_py.config.model import QosConfig
from dubbo_py.consumer.filters import ConsumerFilters
from dubbo_py.consumer.route_snapshots import RouterRule, RouteSnapshots
from dubbo_py.invocation import Invocation
from dubbo_py.protocol.introspect import service_of_servicer
from dubbo_py.provider.service import ServiceOptions, options_of
from dubbo_py.qos.consumer import (
    AsyncAttemptObserver,
    AsyncCallObserver,
    AttemptCounts,
    AttemptObserver,
    CallObserver,
)
from dubbo_py.qos.metrics import Metrics, hedging_families
from dubbo_py.qos.server import ENV_QOS_PORT, QosServer
from dubbo_py.url import URL

if TYPE_CHECKING:
    from dubbo_py.consumer.generic import GenericReference
    from dubbo_py.consumer.reference import Reference
    from dubbo_py.provider.server import AsyncExportedServer, ExportedServer

__all__ = [
    "ENV_QOS_ACCEPT_FOREIGN_IP",
    "QOS_PORT_KEY",
    "ApplicationQos",
    "QosSubject",
    "provider_labels",
    "qos_settings",
    "with_qos_port",
]

#: ``true`` lets the QoS port listen on every interface (Dubbo's ``qos.accept.foreign.ip``).
ENV_QOS_ACCEPT_FOREIGN_IP = "DUBBO_PY_QOS_ACCEPT_FOREIGN_IP"

#: The URL parameter that says where an application's QoS port is.
QOS_PORT_KEY = "qos.port"


def qos_settings(
    port: int | None,
    accept_foreign_ip: bool | None,
    configured: QosConfig | None,
    environ: dict[str, str] | os._Environ[str] | None = None,
) -> QosConfig:
    """The QoS settings: the arguments, else the configuration file, else the environment."""
    env = os.environ if environ is None else environ
    chosen_port = port
    if chosen_port is None and configured is not None:
        chosen_port = configured.port
    if chosen_port is None and env.get(ENV_QOS_PORT, "").strip():
        text = env[ENV_QOS_PORT].strip()
        if not text.isdigit() or int(text) > 65535:
            raise ValueError(f"${ENV_QOS_PORT}={text!r} is not a port (0-65535)")
        chosen_port = int(text)
    foreign = accept_foreign_ip
    if foreign is None and configured is not None and configured.accept_foreign_ip:
        foreign = True
    if foreign is None:
        foreign = env.get(ENV_QOS_ACCEPT_FOREIGN_IP, "").strip().lower() == "true"
    if chosen_port is not None and not 0 <= chosen_port <= 65535:
        raise ValueError(f"qos port {chosen_port} is not a port (0-65535)")
    return QosConfig(chosen_port, bool(foreign))


class QosSubject(Protocol):
    """What the QoS port reads of an application (an :class:`~dubbo_py.app.application.Application`
    is one): a protocol rather than the class, so that this module does not import the module
    that imports it."""

    name: str

    @property
    def servers(self) -> tuple[ExportedServer | AsyncExportedServer, ...]: ...

    @property
    def references(self) -> tuple[Reference[Any], ...]: ...

    @property
    def generic_references(self) -> tuple[GenericReference, ...]: ...

    @property
    def registry_name(self) -> str: ...

    def registry_connected(self) -> bool | None: ...


class ApplicationQos:
    """The QoS endpoints of one application (see :class:`~dubbo_py.qos.server.QosEndpoints`)."""

    def __init__(self, app: QosSubject, metrics: Metrics, settings: QosConfig) -> None:
        self._app = app
        self.metrics = metrics
        self._lock = threading.Lock()
        self._offline = False
        self._started = False
        self._ejections: dict[str, int] = {}
        self._revivals: dict[str, int] = {}
        #: Per service: seconds from a provider's registration (its URL's timestamp) to this
        #: consumer applying the notification that brought it, for the last one that came.
        self._notify_delay: dict[str, float] = {}
        metrics.add_source(self._governance)
        #: Which services' calls are recorded for router snapshots, and the recent records.
        self.route_snapshots = RouteSnapshots()
        assert settings.port is not None
        self.server = QosServer(self, metrics, host=settings.host, port=settings.port).start()

    @property
    def port(self) -> int:
        """The port the QoS server listens on."""
        return self.server.port

    def mark_started(self) -> None:
        """The application has started what it was asked to (``/startup`` answers 200)."""
        self._started = True

    def _quarantine_changed(self, service: str, event: Any) -> None:
        with self._lock:
            if event.kind == "added":
                self._ejections[service] = self._ejections.get(service, 0) + 1
            elif event.kind == "revived":
                self._revivals[service] = self._revivals.get(service, 0) + 1

    def watch_generic(self, ref: GenericReference) -> None:
        """Count a generic reference's quarantine ejections and revivals under its interface
        (its providers and quarantine are read at each scrape); record its calls when router
        snapshots are on for its service."""
        ref.quarantine.on_change(partial(self._quarantine_changed, ref.interface))
        if ref.service_key in self.route_snapshots.enabled():
            self._record_generic(ref)

    def watch_reference(self, ref: Reference[Any]) -> None:
        """Count the reference's quarantine ejections and revivals, and time its registry
        notifications; record its calls when router snapshots are on for its service (as
        Dubbo's switch is by service key, a reference built later is recorded too)."""
        service = ref.consumer.service_interface
        key = ref.consumer.service_key
        if key in self.route_snapshots.enabled():
            for assembly in ref.assemblies:
                assembly.record_routes(
                    self.route_snapshots.recorder(key, partial(_router_rules, assembly.directory))
                )

        if ref.quarantine is not None:
            ref.quarantine.on_change(partial(self._quarantine_changed, service))
        known = {p.address for p in ref.directory.providers}

        def on_chain(bound: Any) -> None:
            now_ms = time.time() * 1000.0
            current = bound.snapshot.providers
            arrived = [p for p in current if p.address not in known]
            known.clear()
            known.update(p.address for p in current)
            stamps = [p.get_int("timestamp", 0) for p in arrived]
            stamps = [t for t in stamps if t > 0]
            if stamps:
                with self._lock:
                    self._notify_delay[service] = max(0.0, (now_ms - max(stamps)) / 1000.0)

        ref.directory.add_listener(on_chain)

    def close(self) -> None:
        """Stop the QoS server."""
        self.server.close()

    # ----------------------------------------------------------------- probes

    def live(self) -> bool:
        """Alive while the QoS port answers (Dubbo's default liveness)."""
        return True

    def started(self) -> bool:
        """Started once a provider is serving or a reference is built."""
        return self._started

    def ready(self) -> bool:
        """Ready when started, every provider registered (not offline) and every reference
        has applied its first provider notification."""
        if not self._started or self._offline:
            return False
        if any(getattr(s, "is_offline", False) for s in self._app.servers):
            return False
        return all(ref.directory.wait_for_providers(0) for ref in self._app.references)

    # ----------------------------------------------------------------- offline / online

    def _switch(self, pattern: re.Pattern[str] | None, online: bool) -> list[str]:
        changed: list[str] = []
        for server in self._app.servers:
            urls = [u for u in server.urls if pattern is None or pattern.fullmatch(u.service_key)]
            if not urls:
                continue
            if online:
                server.online(urls)
            else:
                server.offline(urls)
            changed.extend(u.service_key for u in urls)
        if pattern is None:
            self._offline = not online
        return changed

    def offline(self, pattern: re.Pattern[str] | None) -> list[str]:
        """Unregister the matching providers; they keep serving calls already sent."""
        return self._switch(pattern, online=False)

    def online(self, pattern: re.Pattern[str] | None) -> list[str]:
        """Register the matching providers again."""
        return self._switch(pattern, online=True)

    # ----------------------------------------------------------------- /ls

    def listing(self) -> dict[str, Any]:
        """Services provided and consumed, providers per consumed service, rules in force."""
        provided = [
            {
                "service": url.service_key,
                "interface": url.service_interface,
                "version": url.get_str("version"),
                "group": url.get_str("group"),
                "address": server.address,
                "registered": not getattr(server, "is_offline", False),
            }
            for server in self._app.servers
            for url in server.urls
        ]
        consumed = [_reference_listing(ref) for ref in self._app.references]
        consumed += [_generic_listing(ref) for ref in self._app.generic_references]
        methods = [
            {
                "side": s.key.side,
                "interface": s.key.interface,
                "method": s.key.method,
                "group": s.key.group,
                "version": s.key.version,
                **s.snapshot(),
            }
            for s in self.metrics.methods()
        ]
        return {
            "application": self._app.name,
            "pid": os.getpid(),
            "qos_port": self.port,
            "provided": provided,
            "consumed": consumed,
            "methods": methods,
            "time": time.time(),
        }

    # ----------------------------------------------------------------- router snapshots

    def _matching(self, pattern: re.Pattern[str] | None) -> list[Reference[Any]]:
        """The references whose service key, interface or proto service ``pattern`` matches
        in full (Dubbo matches the service key or its display form); None: every one."""
        return [
            ref
            for ref in self._app.references
            if pattern is None
            or any(
                pattern.fullmatch(name)
                for name in (ref.consumer.service_key, ref.consumer.service_interface, ref.service)
            )
        ]

    def _matching_generic(self, pattern: re.Pattern[str] | None) -> list[GenericReference]:
        """The generic references whose service key or interface ``pattern`` matches."""
        return [
            ref
            for ref in self._app.generic_references
            if pattern is None
            or any(pattern.fullmatch(n) for n in (ref.service_key, ref.interface))
        ]

    def _record_generic(self, ref: GenericReference) -> None:
        ref.record_routes(
            self.route_snapshots.recorder(ref.service_key, partial(_router_rules, ref))
        )

    def enable_router_snapshot(self, pattern: re.Pattern[str] | None) -> list[str]:
        """Record the routing of each call of the matching references (every registry
        stack, and generic references); the service keys switched on."""
        changed: list[str] = []
        for generic in self._matching_generic(pattern):
            if not generic.recording_routes:
                self._record_generic(generic)
            if self.route_snapshots.enable(generic.service_key):
                changed.append(generic.service_key)
        for ref in self._matching(pattern):
            key = ref.consumer.service_key
            for assembly in ref.assemblies:
                if assembly.recording_routes:
                    continue
                directory = assembly.directory
                assembly.record_routes(
                    self.route_snapshots.recorder(key, partial(_router_rules, directory))
                )
            if self.route_snapshots.enable(key):
                changed.append(key)
        return changed

    def disable_router_snapshot(self, pattern: re.Pattern[str] | None) -> list[str]:
        """Stop recording the matching references; the service keys switched off."""
        changed: list[str] = []
        for generic in self._matching_generic(pattern):
            generic.record_routes(None)
            if self.route_snapshots.disable(generic.service_key):
                changed.append(generic.service_key)
        for ref in self._matching(pattern):
            for assembly in ref.assemblies:
                assembly.record_routes(None)
            if self.route_snapshots.disable(ref.consumer.service_key):
                changed.append(ref.consumer.service_key)
        return changed

    def enabled_router_snapshot(self) -> list[str]:
        """The service keys recorded now."""
        return self.route_snapshots.enabled()

    def router_snapshot(self, pattern: re.Pattern[str] | None) -> list[dict[str, Any]]:
        """The chain in force on each matching reference (one entry per registry stack)."""
        out = []
        for ref in self._matching(pattern):
            for assembly in ref.assemblies:
                quarantined = {e.address for e in assembly.quarantine.entries()}
                out.append(
                    _chain_listing(
                        ref.consumer.service_key,
                        ref.service,
                        assembly.directory,
                        quarantined,
                        assembly.service.method_names,
                        assembly.recording_routes,
                    )
                )
        for generic in self._matching_generic(pattern):
            quarantined = {e.address for e in generic.quarantine.entries()}
            for directory in generic.directories:
                entry = _chain_listing(
                    generic.service_key,
                    generic.interface,
                    directory,
                    quarantined,
                    generic.method_names,
                    generic.recording_routes,
                )
                entry["generic"] = True
                out.append(entry)
        return out

    def recent_router_snapshot(self, pattern: re.Pattern[str] | None) -> list[dict[str, Any]]:
        """The last calls recorded of the services ``pattern`` matches (their service keys,
        interfaces or proto names), oldest first."""
        if pattern is None:
            return self.route_snapshots.recent()
        keys = {ref.consumer.service_key for ref in self._matching(pattern)}
        keys |= {ref.service_key for ref in self._matching_generic(pattern)}
        return [r for r in self.route_snapshots.recent() if r["service"] in keys]

    # ----------------------------------------------------------------- governance metrics

    def _governance(self) -> Iterator[Metric]:
        app = self._app.name
        refs = self._app.references
        quarantined = GaugeMetricFamily(
            "dubbo_py_consumer_quarantined_providers",
            "Providers of the service in quarantine now",
            labels=["application_name", "interface"],
        )
        providers = GaugeMetricFamily(
            "dubbo_py_consumer_providers",
            "Providers of the service this consumer may call (after registry matching)",
            labels=["application_name", "interface"],
        )
        rules = GaugeMetricFamily(
            "dubbo_py_rule_applied_timestamp_seconds",
            "When this process applied each rule in force (epoch seconds), by rule version",
            labels=["application_name", "interface", "rule", "rule_version"],
        )
        survivors = GaugeMetricFamily(
            "dubbo_py_consumer_route_survivors",
            "Providers the router chain leaves for a plain call of the method (no attachments)",
            labels=["application_name", "interface", "method"],
        )
        kept = GaugeMetricFamily(
            "dubbo_py_consumer_kept_providers",
            "Providers the registry lost at once that empty protection keeps while they answer",
            labels=["application_name", "interface"],
        )
        delay = GaugeMetricFamily(
            "dubbo_py_registry_notify_delay_seconds",
            "From a provider's registration (its URL timestamp) to this consumer applying it, "
            "for the last provider that arrived",
            labels=["application_name", "interface"],
        )
        with self._lock:
            ejections, revivals = dict(self._ejections), dict(self._revivals)
            delays = dict(self._notify_delay)
        called: dict[str, set[str]] = {}
        hedges: dict[tuple[str, str], dict[str, int]] = {}
        for stats in self.metrics.methods():
            if stats.key.side == "consumer":
                called.setdefault(stats.key.interface, set()).add(stats.key.method)
        # Summed per interface: a stub and a generic reference to one service are one series.
        quarantined_by: dict[str, int] = {}
        providers_by: dict[str, int] = {}
        for generic in self._app.generic_references:
            interface = generic.interface
            quarantined_by[interface] = quarantined_by.get(interface, 0) + len(generic.quarantine)
            providers_by[interface] = providers_by.get(interface, 0) + len(generic.providers)
        for ref in refs:
            interface = ref.consumer.service_interface
            quarantined_by[interface] = quarantined_by.get(interface, 0) + _count(ref.quarantine)
            providers_by[interface] = providers_by.get(interface, 0) + len(ref.directory.providers)
        for interface, count in quarantined_by.items():
            quarantined.add_metric([app, interface], count)
        for interface, count in providers_by.items():
            providers.add_metric([app, interface], count)
        for generic in self._app.generic_references:
            for method, counted in generic.hedge_counts.items():
                summed = hedges.setdefault((generic.interface, method), {})
                for key in ("sent", "won", "refused"):
                    summed[key] = summed.get(key, 0) + getattr(counted, key)
        for ref in refs:
            interface = ref.consumer.service_interface
            kept.add_metric([app, interface], len(_kept(ref)))
            for source, (version, applied) in sorted(ref.directory.rules_in_force.items()):
                rules.add_metric([app, interface, _rule_key(source), version], applied)
            chain = ref.directory.chain
            for method in sorted(called.get(interface, ())):
                survivors.add_metric([app, interface, method], _survivors(chain, ref, method))
            if interface in delays:
                delay.add_metric([app, interface], delays[interface])
            for assembly in ref.assemblies:
                for method, counted in assembly.hedge_counts.items():
                    summed = hedges.setdefault((interface, method), {})
                    for key in ("sent", "won", "refused"):
                        summed[key] = summed.get(key, 0) + getattr(counted, key)
        yield quarantined
        yield providers
        yield rules
        yield survivors
        yield kept
        yield delay
        yield from hedging_families(app, hedges)
        yield _counter_family(
            "dubbo_py_consumer_ejections",
            "Providers put into quarantine (unavailable, or outlier ejection)",
            app,
            ejections,
        )
        yield _counter_family(
            "dubbo_py_consumer_revivals", "Providers revived from quarantine", app, revivals
        )
        registry = GaugeMetricFamily(
            "dubbo_py_registry_connected",
            "1 while the registry session is connected (ZooKeeper session state)",
            labels=["application_name", "registry"],
        )
        connected = self._app.registry_connected()
        if connected is not None:
            registry.add_metric([app, self._app.registry_name], 1.0 if connected else 0.0)
        yield registry
        yield _unread_fields(app)


def _unread_fields(app: str) -> Metric:
    """Rule-document fields this process's consumers read and do not act on (no silent drop:
    dubbo_py/rule_fields.py), one count per document version holding the field."""
    from prometheus_client.core import CounterMetricFamily

    family = CounterMetricFamily(
        "dubbo_py_rule_fields_unread",
        "Fields of rule documents read and not acted on (logged by name), per document version",
        labels=["application_name", "kind", "field"],
    )
    for (kind, path), count in sorted(rule_fields.UNREAD_COUNTS.items()):
        family.add_metric([app, kind, path], count)
    return family


def _router_rules(directory: Any) -> list[RouterRule]:
    return [
        (r.name, r.priority, _rule_key(r.source) if r.source else None, r.version)
        for r in directory.routers_in_force()
    ]


def _chain_listing(
    service_key: str,
    service: str,
    directory: Any,
    quarantined: set[str],
    methods: Iterable[str],
    recording: bool,
) -> dict[str, Any]:
    """``/getRouterSnapshot``'s entry for one stack (a stub reference's registry stack, or a
    generic reference's directory on one registry): its providers, and per router what it
    keeps out of the full list for a plain call of each method."""
    methods = tuple(methods)
    chain = directory.chain
    snapshot = chain.snapshot
    rules = {
        name: (priority, key, version) for name, priority, key, version in _router_rules(directory)
    }
    routers = []
    for name, bound in chain.stages:
        priority, key, version = rules.get(name, (None, None, None))
        excluded: dict[str, list[str]] = {}
        for method in methods:
            try:
                kept = bound.route(snapshot.all, Invocation(service, method))
            except Exception as exc:  # a router that needs the request: say so
                excluded[method] = [f"(needs the call: {exc})"]
                continue
            out = snapshot.all & ~kept
            if out:
                excluded[method] = [p.address for p in snapshot.select(out)]
        routers.append(
            {
                "router": name,
                "priority": priority,
                "rule": key,
                "version": version,
                "excluded": excluded,
            }
        )
    return {
        "service": service_key,
        "recording": recording,
        "providers": [p.address for p in snapshot.providers],
        "valid": [p.address for p in snapshot.providers if p.address not in quarantined],
        "routers": routers,
    }


def _survivors(chain: Any, ref: Reference[Any], method: str) -> int:
    try:
        return len(chain.route(Invocation(ref.service, method)))
    except Exception:  # no provider left (NoProviderError), or a rule that needs the request
        return 0


def _kept(ref: Reference[Any]) -> list[str]:
    """The providers empty protection keeps for ``ref`` (addresses)."""
    return _kept_by(ref.directory)


def _kept_by(directory: Any) -> list[str]:
    """The providers empty protection keeps in ``directory`` (addresses)."""
    protection = getattr(directory, "empty_protection", None)
    return [k.url.address for k in protection.kept()] if protection is not None else []


def _count(quarantine: Any) -> int:
    return len(quarantine) if quarantine is not None else 0


def _counter_family(name: str, help_text: str, app: str, values: dict[str, int]) -> Metric:
    from prometheus_client.core import CounterMetricFamily

    family = CounterMetricFamily(name, help_text, labels=["application_name", "interface"])
    for service, count in sorted(values.items()):
        family.add_metric([app, service], count)
    return family


def _rule_key(source: str) -> str:
    # Config-center sources are node paths; operators know the key (the node's name).
    return source.rsplit("/", 1)[-1] if "/config/" in source else source


def _reference_listing(ref: Reference[Any]) -> dict[str, Any]:
    consumer = ref.consumer
    directory = ref.directory
    quarantined = [e.address for e in ref.quarantine.entries()] if ref.quarantine else []
    return {
        "service": consumer.service_key,
        "interface": consumer.service_interface,
        "version": consumer.get_str("version"),
        "group": consumer.get_str("group"),
        "providers": [_provider(p) for p in directory.providers],
        "quarantined": quarantined,
        "kept": _kept(ref),
        "rules": [
            {"key": _rule_key(source), "source": source, "version": version, "applied_at": at}
            for source, (version, at) in sorted(directory.rules_in_force.items())
        ],
        "rule_errors": directory.rule_errors,
        # Where the access log goes (None: off; "": the dubbo.accesslog logger; a path).
        "accesslog": ref.assembly.access_log,
        "router_snapshot": ref.assembly.recording_routes,
    }


def _generic_listing(ref: GenericReference) -> dict[str, Any]:
    """``/ls``'s entry for a generic reference: the fields of a stub reference's
    (:func:`_reference_listing`), its providers those generic calls may go to (``dubbo://``
    and ``tri://``), and ``generic: true``."""
    rules: dict[str, tuple[str, float]] = {}
    errors: dict[str, str] = {}
    for directory in ref.directories:
        rules.update(directory.rules_in_force)
        errors.update(directory.rule_errors)
    return {
        "service": ref.service_key,
        "interface": ref.interface,
        "version": ref.version,
        "group": ref.group,
        "generic": True,
        "providers": [{**_provider(p), "protocol": p.protocol} for p in ref.providers],
        "quarantined": [e.address for e in ref.quarantine.entries()],
        "kept": [a for d in ref.directories for a in _kept_by(d)],
        "rules": [
            {"key": _rule_key(source), "source": source, "version": version, "applied_at": at}
            for source, (version, at) in sorted(rules.items())
        ],
        "rule_errors": errors,
        "accesslog": ref.access_log,
        "router_snapshot": ref.recording_routes,
    }


def _provider(url: URL) -> dict[str, Any]:
    return {
        "address": url.address,
        "weight": url.get_int("weight", 100),
        "qos_port": url.get_str(QOS_PORT_KEY),
        "application": url.get_str("application"),
    }


def with_qos_port(parameters: Iterable[tuple[str, str]], port: int | None) -> dict[str, str]:
    """URL parameters with ``qos.port`` when the QoS port is on."""
    out = dict(parameters)
    if port is not None:
        out[QOS_PORT_KEY] = str(port)
    return out


def provider_labels(
    servicers: Sequence[object], options: Mapping[str, ServiceOptions] | None
) -> dict[str, tuple[str, str] | None]:
    """Each service's (version, group) for metrics: the options of the one servicer that
    serves it; None for a service exported several times (its calls are told apart by their
    headers)."""
    seen: dict[str, list[tuple[str, str]]] = {}
    for servicer in servicers:
        spec = service_of_servicer(servicer)
        chosen = (options or {}).get(spec.name) or options_of(servicer)
        seen.setdefault(spec.name, []).append((chosen.version, chosen.group))
    return {name: pairs[0] if len(pairs) == 1 else None for name, pairs in seen.items()}


class ConsumerSide:
    """The consumer observers of one application's references, and the governance counters
    read from them at each scrape: attempts and retries per method, retry-budget refusals per
    service (summed over the references to it, so each label set appears once)."""

    def __init__(self, metrics: Metrics | None) -> None:
        self.metrics = metrics
        self._lock = threading.Lock()
        self._attempts: list[AttemptCounts] = []
        self._budgets: dict[str, dict[int, Any]] = {}
        if metrics is not None:
            metrics.add_source(self._collect)

    def filters(self, consumer: URL, budget: Any) -> ConsumerFilters:
        """The observers of a new reference (consumer URL ``consumer``), both flavours."""
        interface = consumer.service_interface
        version, group = consumer.get_str("version"), consumer.get_str("group")
        attempts, async_attempts = (
            AttemptObserver(self.metrics, interface),
            AsyncAttemptObserver(self.metrics, interface),
        )
        with self._lock:
            self._attempts += [attempts, async_attempts]
            if budget is not None:
                self._budgets.setdefault(interface, {})[id(budget)] = budget
        return ConsumerFilters(
            calls=(CallObserver(self.metrics, interface, version, group),),
            attempts=(attempts,),
            async_calls=(AsyncCallObserver(self.metrics, interface, version, group),),
            async_attempts=(async_attempts,),
        )

    def _collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily

        assert self.metrics is not None
        app = self.metrics.application
        with self._lock:
            observers = list(self._attempts)
            budgets = {k: list(v.values()) for k, v in self._budgets.items()}
        attempts: dict[tuple[str, str], int] = {}
        for observer in observers:
            with observer.lock:
                counts = dict(observer.counts)
            for method, count in counts.items():
                key = (observer.interface, method)
                attempts[key] = attempts.get(key, 0) + count
        calls: dict[tuple[str, str], int] = {}
        for stats in self.metrics.methods():
            if stats.key.side == "consumer":
                key = (stats.key.interface, stats.key.method)
                calls[key] = calls.get(key, 0) + int(stats.snapshot()["total"])  # type: ignore[call-overload]
        labels = ["application_name", "interface", "method"]
        tried = CounterMetricFamily(
            "dubbo_py_consumer_attempts", "Providers tried (one per attempt)", labels=labels
        )
        retried = CounterMetricFamily(
            "dubbo_py_consumer_retries", "Attempts beyond one per call", labels=labels
        )
        for (interface, method), count in sorted(attempts.items()):
            tried.add_metric([app, interface, method], count)
            extra = max(0, count - calls.get((interface, method), 0))
            retried.add_metric([app, interface, method], extra)
        refused = CounterMetricFamily(
            "dubbo_py_consumer_retry_budget_refusals",
            "Retries the service's retry budget refused",
            labels=["application_name", "interface"],
        )
        for interface, held in sorted(budgets.items()):
            refused.add_metric([app, interface], sum(getattr(b, "refused", 0) for b in held))
        yield tried
        yield retried
        yield refused
