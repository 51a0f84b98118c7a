"""The QoS HTTP port of an application, as Dubbo's QoS server answers over HTTP.

GET endpoints:

``/metrics``
    Prometheus text (every metric of the application: :mod:`dubbo_py.qos.metrics`).
``/live``, ``/ready``, ``/startup``
    200 with ``true`` or 503 with ``false``, as Dubbo's ``live``/``ready``/``startup`` commands:
    live while the process serves this port; started once the application has started what it
    was asked to; ready when every provider is registered (not offline) and every reference has
    applied its first provider notification.
``/offline``, ``/online``
    take this application's providers out of the registry while they keep serving, or register
    them again; ``?service=<regex>`` limits it to matching services (Dubbo's service pattern).
    The answer is JSON: the services changed.
``/ls``
    JSON: services provided and consumed, providers of each consumed service, rules in force.
``/enableRouterSnapshot?service=PATTERN``, ``/disableRouterSnapshot?service=PATTERN``
    start or stop recording how the matching references route each call (Dubbo's commands of
    the same names; PATTERN a regular expression matching the service key or interface in
    full). JSON: the services switched.
``/getEnabledRouterSnapshot``
    JSON: the services whose calls are recorded.
``/getRouterSnapshot?service=PATTERN``
    JSON: each router of the chain in force on the matching references -- name, priority,
    rule key and version, the providers it keeps out of the full list.
``/getRecentRouterSnapshot?service=PATTERN``
    JSON: the last calls recorded (see :mod:`dubbo_py.consumer.route_snapshots`).
``/switchLogLevel?level=LEVEL[&logger=NAME]``, ``/loggerInfo``
    the level of the ``dubbo_py`` loggers, switched and shown at runtime
    (:mod:`dubbo_py.qos.log_levels`).

The port listens on 127.0.0.1 unless the application accepts foreign addresses (Dubbo's
``qos.accept.foreign.ip``). Anything else is 404; the server never raises into the application.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from dubbo_py.qos.log_levels import ROOT_LOGGER, LogLevelError, logger_info, switch_log_level
from dubbo_py.qos.metrics import Metrics, MetricsCollector

__all__ = ["ENV_QOS_PORT", "QosEndpoints", "QosServer"]

log = logging.getLogger(__name__)

#: The environment variable that turns the QoS port on (a port number; 0: any free port).
ENV_QOS_PORT = "DUBBO_PY_QOS_PORT"


#: An endpoint: the query's parameters -> (status, content type, body).
_Route = Callable[[dict[str, list[str]]], tuple[int, str, bytes]]


class QosEndpoints(Protocol):
    """What an application answers on its QoS port."""

    def live(self) -> bool:
        """Whether the application is alive."""

    def ready(self) -> bool:
        """Whether it is registered and has read its providers."""

    def started(self) -> bool:
        """Whether it has finished starting."""

    def offline(self, pattern: re.Pattern[str] | None) -> list[str]:
        """Unregister matching providers (keep serving); the services changed."""

    def online(self, pattern: re.Pattern[str] | None) -> list[str]:
        """Register matching providers again; the services changed."""

    def listing(self) -> dict[str, Any]:
        """What ``/ls`` shows."""

    def enable_router_snapshot(self, pattern: re.Pattern[str] | None) -> list[str]:
        """Record the routing of matching references' calls; the services switched."""

    def disable_router_snapshot(self, pattern: re.Pattern[str] | None) -> list[str]:
        """Stop recording them; the services switched."""

    def enabled_router_snapshot(self) -> list[str]:
        """The services whose calls are recorded."""

    def router_snapshot(self, pattern: re.Pattern[str] | None) -> list[dict[str, Any]]:
        """The router chains in force on matching references."""

    def recent_router_snapshot(self, pattern: re.Pattern[str] | None) -> list[dict[str, Any]]:
        """The last calls recorded of matching services, oldest first."""


class QosServer:
    """A small threaded HTTP server answering the QoS endpoints of one application."""

    def __init__(
        self, endpoints: QosEndpoints, metrics: Metrics, *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.endpoints = endpoints
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(MetricsCollector(metrics))
        routes: dict[str, _Route] = {
            "/metrics": self._metrics,
            "/live": self._probe(endpoints.live),
            "/ready": self._probe(endpoints.ready),
            "/startup": self._probe(endpoints.started),
            "/offline": self._switch(endpoints.offline),
            "/online": self._switch(endpoints.online),
            "/ls": self._ls,
            "/enableRouterSnapshot": self._switch(endpoints.enable_router_snapshot),
            "/disableRouterSnapshot": self._switch(endpoints.disable_router_snapshot),
            "/getEnabledRouterSnapshot": self._json(
                lambda _pattern: {"services": endpoints.enabled_router_snapshot()}
            ),
            "/getRouterSnapshot": self._json(
                lambda pattern: {"references": endpoints.router_snapshot(pattern)}
            ),
            "/getRecentRouterSnapshot": self._json(
                lambda pattern: {"calls": endpoints.recent_router_snapshot(pattern)}
            ),
            "/switchLogLevel": self._switch_log_level,
            "/loggerInfo": lambda _query: _as_json(logger_info()),
        }
        self._httpd = ThreadingHTTPServer((host, port), _handler_class(routes))
        self._httpd.daemon_threads = True
        self.host = host
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name=f"dubbo-qos-{self.port}", daemon=True
        )

    def start(self) -> QosServer:
        """Start answering (in a daemon thread)."""
        self._thread.start()
        return self

    @property
    def address(self) -> str:
        """``host:port`` of the QoS port."""
        return f"{self.host}:{self.port}"

    def close(self) -> None:
        """Stop answering and free the port."""
        if self._thread.is_alive():
            self._httpd.shutdown()
        self._httpd.server_close()

    # ----------------------------------------------------------------- endpoints

    def _metrics(self, _query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        return 200, CONTENT_TYPE_LATEST, generate_latest(self.registry)

    @staticmethod
    def _probe(check: Callable[[], bool]) -> _Route:
        def answer(_query: dict[str, list[str]]) -> tuple[int, str, bytes]:
            ok = bool(check())
            return (200 if ok else 503), "text/plain", b"true" if ok else b"false"

        return answer

    @staticmethod
    def _switch(action: Callable[[re.Pattern[str] | None], list[str]]) -> _Route:
        return QosServer._json(lambda pattern: {"services": action(pattern)})

    @staticmethod
    def _json(action: Callable[[re.Pattern[str] | None], dict[str, Any]]) -> _Route:
        """An endpoint taking ``?service=PATTERN`` (a regular expression; none: every
        service) and answering JSON."""

        def answer(query: dict[str, list[str]]) -> tuple[int, str, bytes]:
            text = (query.get("service") or [""])[0]
            try:
                pattern = re.compile(text) if text else None
            except re.error as exc:
                return 400, "text/plain", f"service: not a regular expression: {exc}".encode()
            return _as_json(action(pattern))

        return answer

    @staticmethod
    def _switch_log_level(query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        level = (query.get("level") or [""])[0]
        if not level:
            return 400, "text/plain", b"level: missing (e.g. /switchLogLevel?level=DEBUG)"
        logger = (query.get("logger") or [ROOT_LOGGER])[0]
        try:
            return _as_json(switch_log_level(level, logger))
        except LogLevelError as exc:
            return 400, "text/plain", str(exc).encode()

    def _ls(self, _query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        body = json.dumps(self.endpoints.listing(), indent=2, sort_keys=True, default=str)
        return 200, "application/json", body.encode()


def _as_json(value: dict[str, Any]) -> tuple[int, str, bytes]:
    return 200, "application/json", json.dumps(value, default=str).encode()


def _handler_class(routes: dict[str, _Route]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "dubbo-py-qos"

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            route = routes.get(parts.path.rstrip("/") or "/")
            if route is None:
                known = ", ".join(sorted(routes))
                self._send(404, "text/plain", f"unknown endpoint; known: {known}".encode())
                return
            try:
                status, content_type, body = route(parse_qs(parts.query))
            except Exception as exc:  # the application keeps running whatever a probe does
                log.exception("QoS %s failed", parts.path)
                status, content_type, body = 500, "text/plain", f"error: {exc}".encode()
            self._send(status, content_type, body)

        def _send(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("QoS %s", format % args)

    return Handler
