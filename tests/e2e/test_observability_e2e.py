"""Observability end to end, with real processes on a real ZooKeeper: both sides' /metrics after
N calls, one trace across the consumer's CLIENT span and the provider's SERVER span (the
OpenTelemetry SDK set up in both processes), /offline draining a provider under load with no
failed call and /online bringing it back, and ``dubbo-py top --once --json`` agreeing with the
endpoints."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.app.test_qos_port import get, sample
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.zookeeper]

ROOT = Path(__file__).resolve().parents[2]
PEER = ROOT / "tests" / "support" / "observed_peer.py"
LABELS = {"interface": "demo.Greeter", "method": "SayHello", "version": "1.0.0"}


class Peer:
    """One observed_peer.py process; ``address`` and ``qos`` are known once it printed READY."""

    def __init__(self, role: str, registry: str, spans: Path, *args: str) -> None:
        self.spans = spans
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, str(PEER), role, "--registry", registry, "--spans", str(spans), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=ROOT,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        wait_until(lambda: self.line("READY") is not None, 60, f"{role} READY\n{self.output}")
        ready = self.line("READY")
        assert ready is not None
        _, self.address, qos = ready.split()
        self.qos = int(qos)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def line(self, prefix: str) -> str | None:
        return next((x for x in self.lines if x.startswith(prefix + " ")), None)

    def finish(self) -> None:
        """Close the peer's standard input (a ``--until-stdin-closes`` consumer stops calling)."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def done(self, timeout: float = 120) -> tuple[int, int]:
        """(succeeded, failed) once a consumer printed DONE."""
        wait_until(lambda: self.line("DONE") is not None, timeout, f"DONE\n{self.output}")
        line = self.line("DONE")
        assert line is not None
        _, ok, failed = line.split()
        return int(ok), int(failed)

    def read_spans(self) -> list[dict[str, Any]]:
        if not self.spans.exists():
            return []
        return [json.loads(x) for x in self.spans.read_text().splitlines() if x.strip()]

    def metric(self, name: str, **labels: str) -> float:
        return sample(get(self.qos, "/metrics")[1], name, **labels)

    def stop(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)


@pytest.fixture
def peers(zookeeper: Any, tmp_path: Path) -> Iterator[Callable[..., Peer]]:
    registry = f"zookeeper://{zookeeper.address}/obs-{uuid.uuid4().hex[:8]}"
    started: list[Peer] = []

    def start(role: str, *args: str) -> Peer:
        peer = Peer(role, registry, tmp_path / f"{role}-{len(started)}.jsonl", *args)
        started.append(peer)
        return peer

    start.registry = registry  # type: ignore[attr-defined]
    yield start
    for peer in started:
        peer.stop()


def test_metrics_on_both_sides_one_trace_and_top_agree(peers: Callable[..., Peer]) -> None:
    calls = 40
    provider = peers("provider")
    consumer = peers("consumer", "--calls", str(calls))
    assert consumer.done() == (calls, 0)

    served = provider.metric("dubbo_provider_requests_total", **LABELS)
    sent = consumer.metric("dubbo_consumer_requests_total", **LABELS)
    assert served >= calls and sent >= calls
    assert provider.metric("dubbo_provider_requests_succeed_total", **LABELS) == served
    assert consumer.metric("dubbo_consumer_requests_succeed_total", **LABELS) == sent

    # One trace: the consumer's checkout span, a CLIENT span per call under it, and the
    # provider's SERVER spans as their children, in the other process.
    wait_until(lambda: len(provider.read_spans()) >= calls, 10, "provider spans")
    wait_until(lambda: len(consumer.read_spans()) >= calls + 1, 10, "consumer spans")
    consumer_spans = consumer.read_spans()
    [checkout] = [s for s in consumer_spans if s["name"] == "checkout"]
    clients = [s for s in consumer_spans if s["kind"] == "CLIENT"]
    servers = [s for s in provider.read_spans() if s["kind"] == "SERVER"]
    assert len(clients) == calls and len(servers) >= calls
    assert {s["trace_id"] for s in clients} == {checkout["trace_id"]}
    assert {s["parent"] for s in clients} == {checkout["span_id"]}
    client_ids = {s["span_id"] for s in clients}
    assert {s["trace_id"] for s in servers} == {checkout["trace_id"]}
    assert {s["parent"] for s in servers} <= client_ids
    assert all(s["name"] == "demo.Greeter/SayHello" for s in clients + servers)
    assert all(s["attributes"]["rpc.system"] == "grpc" for s in clients + servers)

    # dubbo-py top reads the same counts from the QoS ports it finds in the registry.
    registry = peers.registry  # type: ignore[attr-defined]
    result = subprocess.run(
        [sys.executable, "-m", "dubbo_py.admin", "--registry", registry, "top", "--once",
         "--json", "--interval", "0.2"],
        capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    view = json.loads(result.stdout)
    [provided] = [r for r in view["providers"] if r["method"] == "SayHello"]
    [consumed] = [r for r in view["consumers"] if r["method"] == "SayHello"]
    assert provided["requests_total"] == provider.metric("dubbo_provider_requests_total", **LABELS)
    assert consumed["requests_total"] == consumer.metric("dubbo_consumer_requests_total", **LABELS)
    assert provided["address"] == provider.address
    assert consumed["providers"] == [provider.address]
    assert view["unreachable"] == []
    # Nothing printed but the JSON: no library noise on the CLI's output.
    assert result.stderr == ""


def test_offline_drains_a_provider_under_load_and_online_brings_it_back(
    peers: Callable[..., Peer],
) -> None:
    first = peers("provider", "--application", "greeter-a", "--delay", "0.005")
    second = peers("provider", "--application", "greeter-b", "--delay", "0.005")
    # Calls until the test has seen the provider back (60 s: a bound, never reached).
    consumer = peers("consumer", "--seconds", "60", "--until-stdin-closes")

    def served(peer: Peer) -> float:
        return peer.metric("dubbo_provider_requests_total", **LABELS)

    wait_until(lambda: served(first) > 20 and served(second) > 20, 30, "both providers busy")
    assert get(first.qos, "/offline") == (200, json.dumps({"services": ["demo.Greeter:1.0.0"]}))
    assert get(first.qos, "/ready")[0] == 503
    time.sleep(2.0)  # ZooKeeper's notification reaches the consumer well within this
    drained = served(first)
    time.sleep(2.0)
    assert served(first) == drained, "an offline provider still received new calls"
    assert served(second) > 0

    assert get(first.qos, "/online")[0] == 200
    assert get(first.qos, "/ready") == (200, "true")
    wait_until(lambda: served(first) > drained + 20, 20, "calls to the provider back online")

    consumer.finish()
    succeeded, failed = consumer.done(timeout=60)
    assert failed == 0, consumer.output
    assert succeeded > 0
