"""``grpc.health.v1.Health`` for the blocking provider server.

grpcio-health-checking's ``HealthServicer`` sends a ``Watch`` response while holding its lock,
and a send on the blocking server waits until the server's event thread has written it. That
same event thread runs a cancelled ``Watch``'s close callback, which takes the lock too: a
``Watch`` that starts while another one is cancelled stops the event thread for good, and with
it every call the server has (seen live: a dubbo-go consumer's health watches beside a Java
consumer's calls on a dubbo-py provider; held by tests/provider/test_health_service.py).

This servicer answers the same two methods the same way, with one rule that makes the deadlock
impossible: no lock is held while a response is sent. Each watcher sends from one thread at a
time, and a status set while a send is under way replaces any status still waiting, so a
watcher always ends on the latest status (the health protocol promises the current status, not
every change).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICE_UNKNOWN = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN


class _Watcher:
    """One ``Watch`` call: the latest status not yet sent, and who is sending."""

    def __init__(self, send: Callable[[health_pb2.HealthCheckResponse], None]) -> None:
        self._send = send
        # Held only to read and write the fields below, never across a send: the close
        # callback takes it on the server's event thread, which a send may be waiting on.
        self._state = threading.Lock()
        self._pending: int | None = None
        self._sending = False
        self._closed = False

    def offer(self, status: int) -> None:
        """Send ``status`` now, or after the send under way (replacing an older waiting one)."""
        with self._state:
            if self._closed:
                return
            self._pending = status
            if self._sending:
                return
            self._sending = True
        while True:
            with self._state:
                status_now = self._pending
                self._pending = None
                if status_now is None or self._closed:
                    self._sending = False
                    return
            self._send(health_pb2.HealthCheckResponse(status=status_now))

    def close(self) -> None:
        """The call ended: nothing more is sent."""
        with self._state:
            self._closed = True


class HealthService(health_pb2_grpc.HealthServicer):
    """The standard health service (``Check`` and ``Watch``), deadlock-free on grpcio's
    blocking server; ``set`` and ``enter_graceful_shutdown`` behave as grpcio-health-checking's
    ``HealthServicer``'s."""

    def __init__(self) -> None:
        # Guards the two maps and the flag; never held while a response is sent.
        self._lock = threading.Lock()
        self._status: dict[str, int] = {"": SERVING}
        self._watchers: dict[str, set[_Watcher]] = {}
        self._shutting_down = False

    def Check(
        self, request: health_pb2.HealthCheckRequest, context: grpc.ServicerContext
    ) -> health_pb2.HealthCheckResponse:
        """The service's status now; NOT_FOUND for a service never set."""
        with self._lock:
            status = self._status.get(request.service)
        if status is None:
            context.set_code(grpc.StatusCode.NOT_FOUND)
            return health_pb2.HealthCheckResponse()
        return health_pb2.HealthCheckResponse(status=status)

    def Watch(
        self,
        request: health_pb2.HealthCheckRequest,
        context: grpc.ServicerContext,
        send_response_callback: Callable[[health_pb2.HealthCheckResponse], None] | None = None,
    ) -> None:
        """The service's status now (SERVICE_UNKNOWN for one never set), then each change,
        until the caller cancels."""
        if send_response_callback is None:
            # Only grpcio's blocking server calls this servicer, and it passes the callback
            # because of ``experimental_non_blocking`` below.
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "Watch needs a non-blocking server")
            return
        service = request.service
        watcher = _Watcher(send_response_callback)
        with self._lock:
            status = self._status.get(service, SERVICE_UNKNOWN)
            self._watchers.setdefault(service, set()).add(watcher)
        context.add_callback(lambda: self._forget(service, watcher))
        watcher.offer(status)

    # grpcio's server passes a send callback to a streaming method so marked, instead of
    # holding a worker thread for the stream's life.
    setattr(Watch, "experimental_non_blocking", True)  # noqa: B010
    setattr(Watch, "experimental_thread_pool", None)  # noqa: B010

    def _forget(self, service: str, watcher: _Watcher) -> None:
        watcher.close()
        with self._lock:
            watching = self._watchers.get(service)
            if watching is not None:
                watching.discard(watcher)
                if not watching:
                    del self._watchers[service]

    def set(self, service: str, status: int) -> None:
        """Set ``service``'s status and tell its watchers (ignored after
        :meth:`enter_graceful_shutdown`)."""
        with self._lock:
            if self._shutting_down:
                return
            self._status[service] = status
            watchers = list(self._watchers.get(service, ()))
        for watcher in watchers:
            watcher.offer(status)

    def enter_graceful_shutdown(self) -> None:
        """Mark every service NOT_SERVING for good: later :meth:`set` calls are ignored."""
        with self._lock:
            if self._shutting_down:
                return
            self._shutting_down = True
            for service in self._status:
                self._status[service] = NOT_SERVING
            told = [(w, NOT_SERVING) for ws in self._watchers.values() for w in ws]
        for watcher, status in told:
            watcher.offer(status)
