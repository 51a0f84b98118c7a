"""Operators steering a live consumer, end to end with real processes on a real ZooKeeper: router
snapshots of live calls over the QoS port (and ``dubbo-py snapshot``), an access log switched on
and off by an override rule, and the ``dubbo_py`` log level switched at runtime (and ``dubbo-py
log-level``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.app.test_qos_port import get
from tests.support.console_process import ConsoleProcess
from tests.support.processes import ROOT, ProviderProcess
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.zookeeper]

PEER = ROOT / "tests" / "support" / "live_ops_peer.py"
KEY = "demo.Greeter:1.0.0"


class Consumer:
    """One live_ops_peer.py process, driven through its stdin."""

    def __init__(self, registry: str, out: Path, *args: str) -> None:
        self.out = out
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, str(PEER), "--registry", registry, "--accesslog-out", str(out), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=ROOT,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        threading.Thread(target=self._read, daemon=True).start()
        self.qos = int(self._answer("READY", 0).split()[1])

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def _answer(self, prefix: str, seen: int) -> str:
        def found() -> str | None:
            return next((x for x in self.lines[seen:] if x.startswith(prefix + " ")), None)

        wait_until(lambda: found() is not None, 60, f"{prefix}\n" + "\n".join(self.lines))
        answer = found()
        assert answer is not None
        return answer

    def send(self, command: str, prefix: str) -> str:
        seen = len(self.lines)
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self._answer(prefix, seen)

    def call(self, n: int) -> list[str]:
        """The providers that answered ``n`` calls (every call must succeed)."""
        _, ok, failed, served = self.send(f"call {n}", "CALLED").split()
        assert (int(ok), int(failed)) == (n, 0), "\n".join(self.lines)
        return served.split(",")

    def qos_json(self, path: str) -> Any:
        status, body = get(self.qos, path)
        assert status == 200, body
        return json.loads(body)

    def access_lines(self) -> list[str]:
        return self.out.read_text(encoding="utf-8").splitlines() if self.out.exists() else []

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def get_url(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def cli(registry: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dubbo_py.admin", "--registry", registry, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def ok(registry: str, *args: str) -> str:
    result = cli(registry, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture
def estate(zookeeper: Any, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Starts providers and consumers on one registry; ``estate.registry`` is its address."""
    registry = f"zookeeper://{zookeeper.address}/live-{uuid.uuid4().hex[:8]}"
    started: list[Any] = []

    def start(role: str, *args: str) -> Any:
        if role == "provider":
            peer: Any = ProviderProcess(registry, *args).start()
        else:
            peer = Consumer(registry, tmp_path / f"access-{len(started)}.log", *args)
        started.append(peer)
        return peer

    start.registry = registry  # type: ignore[attr-defined]
    yield start
    for peer in started:
        if isinstance(peer, Consumer):
            peer.stop()
        else:
            peer.kill()


def test_recent_router_snapshot_names_the_condition_rule_and_each_provider(
    estate: Callable[..., Any], tmp_path: Path
) -> None:
    registry = estate.registry  # type: ignore[attr-defined]
    kept, dropped = estate("provider"), estate("provider")
    consumer = estate("consumer")
    rule = tmp_path / "rule.yaml"
    rule.write_text(
        "configVersion: v3.0\nscope: service\nkey: demo.Greeter:1.0.0\nforce: true\n"
        f"conditions:\n  - 'method = SayHello => port = {kept.port}'\n",
        encoding="utf-8",
    )
    ok(registry, "rules", "push", str(rule))

    def version_in_force() -> str | None:
        consumed = consumer.qos_json("/ls")["consumed"][0]
        rules = [r for r in consumed["rules"] if "condition-router" in r["key"]]
        return rules[0]["version"] if rules else None

    wait_until(lambda: version_in_force() is not None, 30, "the rule in force")
    version = version_in_force()

    # Nothing is recorded while snapshots are off.
    consumer.call(3)
    assert consumer.qos_json("/getRecentRouterSnapshot?service=demo.Greeter.*")["calls"] == []
    assert consumer.qos_json("/getEnabledRouterSnapshot")["services"] == []

    switched = consumer.qos_json("/enableRouterSnapshot?service=demo.Greeter.*")
    assert switched["services"] == [KEY]
    assert consumer.qos_json("/getEnabledRouterSnapshot")["services"] == [KEY]
    assert consumer.call(5) == [kept.address] * 5

    calls = consumer.qos_json(f"/getRecentRouterSnapshot?service={KEY}")["calls"]
    assert len(calls) == 5
    for call in calls:
        assert call["service"] == KEY and call["method"] == "SayHello"
        assert call["arguments"][0] == "'ada'"
        condition = [r for r in call["routers"] if r["router"].startswith("condition")]
        assert len(condition) == 1, call["routers"]
        step = condition[0]
        assert "condition-router" in step["rule"] and step["version"] == version
        assert sorted(step["in"]) == sorted([kept.address, dropped.address])
        assert step["out"] == [kept.address] and step["removed"] == [dropped.address]
        assert call["attempts"] == [{"provider": kept.address, "retry": False, "outcome": "OK"}]

    # The chain in force, without a call: the condition router keeps the other one out.
    chains = consumer.qos_json("/getRouterSnapshot?service=demo.Greeter.*")["references"]
    routers = {r["router"]: r for r in chains[0]["routers"]}
    condition = next(r for name, r in routers.items() if name.startswith("condition"))
    assert condition["version"] == version
    assert condition["excluded"] == {"SayHello": [dropped.address]}
    assert sorted(chains[0]["providers"]) == sorted([kept.address, dropped.address])

    # dubbo-py snapshot finds the consumer's QoS port in the registry and shows the same.
    shown = json.loads(ok(registry, "snapshot", "recent", KEY, "--json"))
    assert [c["attempts"][0]["provider"] for c in shown["calls"]] == [kept.address] * 5
    assert shown["calls"][0]["application"] == "shop"
    table = ok(registry, "snapshot", "recent", KEY)
    assert "condition" in table and dropped.address in table
    chain = json.loads(ok(registry, "snapshot", "show", "demo.Greeter", "--json"))
    (shop,) = chain["consumers"]
    assert shop["application"] == "shop" and shop["references"][0]["recording"] is True
    shown_condition = [r for r in shop["references"][0]["routers"] if r["version"] == version]
    assert shown_condition[0]["excluded"] == {"SayHello": [dropped.address]}

    # The console's service page shows the same, read from the consumer's QoS port.
    with ConsoleProcess(registry) as console:
        status, page = get_url(console.url + "/service/demo.Greeter/snapshot")
    assert status == 200, page
    assert "recording calls" in page and "condition" in page
    assert page.count(f"removed <code>{dropped.address}</code>") == 5
    assert f"@{version}" in page

    # Disabled: later calls are not recorded.
    assert consumer.qos_json("/disableRouterSnapshot?service=demo.Greeter.*")["services"] == [KEY]
    consumer.call(2)
    assert len(consumer.qos_json(f"/getRecentRouterSnapshot?service={KEY}")["calls"]) == 5
    assert consumer.qos_json("/getEnabledRouterSnapshot")["services"] == []


def test_an_accesslog_override_logs_every_call_until_it_is_deleted(
    estate: Callable[..., Any], tmp_path: Path
) -> None:
    registry = estate.registry  # type: ignore[attr-defined]
    provider = estate("provider")
    consumer = estate("consumer")
    consumer.call(3)
    assert consumer.access_lines() == []

    override = tmp_path / "override.yaml"
    override.write_text(
        "configVersion: v3.0\nscope: service\nkey: demo.Greeter:1.0.0\nenabled: true\n"
        "configs:\n  - side: consumer\n    parameters:\n      accesslog: 'true'\n",
        encoding="utf-8",
    )
    pushed = json.loads(ok(registry, "rules", "push", str(override), "--json"))

    def accesslog() -> Any:
        return consumer.qos_json("/ls")["consumed"][0]["accesslog"]

    wait_until(lambda: accesslog() == "", 30, "the accesslog override applied")
    consumer.call(5)
    lines = consumer.access_lines()
    assert len(lines) == 5, lines
    for line in lines:
        assert line.startswith("dubbo.accesslog.demo.Greeter [")
        assert f" -> {provider.address} - demo.Greeter:1.0.0 SayHello(demo.HelloRequest) " in line
        assert "[name: 'ada']" in line and " OK " in line and line.endswith("ms")

    ok(registry, "rules", "delete", pushed["key"])
    wait_until(lambda: accesslog() is None, 30, "the accesslog override removed")
    consumer.call(4)
    assert len(consumer.access_lines()) == 5


def test_switch_log_level_sets_the_dubbo_py_logger(estate: Callable[..., Any]) -> None:
    registry = estate.registry  # type: ignore[attr-defined]
    estate("provider")
    consumer = estate("consumer")
    assert consumer.send("level", "LEVEL") == "LEVEL WARNING"
    answer = consumer.qos_json("/switchLogLevel?level=DEBUG")
    assert answer == {"logger": "dubbo_py", "level": "DEBUG", "previous": "WARNING"}
    assert consumer.send("level", "LEVEL") == "LEVEL DEBUG"
    info = consumer.qos_json("/loggerInfo")
    assert info["level"] == "DEBUG" and info["levels"]["dubbo_py"] == "DEBUG"

    status, body = get(consumer.qos, "/switchLogLevel?level=LOUD")
    assert status == 400 and "LOUD" in body
    assert consumer.send("level", "LEVEL") == "LEVEL DEBUG"

    listed = json.loads(ok(registry, "log-level", "--json"))
    assert [(r["application"], r["level"]) for r in listed["applications"]] == [("shop", "DEBUG")]
    refused = cli(registry, "log-level", "LOUD")
    assert refused.returncode == 1 and "'LOUD' is not a log level" in refused.stderr

    # dubbo-py log-level finds the consumer in the registry and switches it back.
    shown = json.loads(ok(registry, "log-level", "INFO", "--service", "demo.Greeter", "--json"))
    assert [(r["application"], r["level"]) for r in shown["applications"]] == [("shop", "INFO")]
    assert consumer.send("level", "LEVEL") == "LEVEL INFO"
