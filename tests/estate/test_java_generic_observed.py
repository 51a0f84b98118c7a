"""Generic calls (``$invoke``) to live Apache Dubbo 3.3.6 providers of estate.UserService, over
``dubbo://`` and over Triple without IDL, pass through the consumer chain a stub call does:
the call metrics are the Java method's (not ``$invoke``), the application's and the
reference's own consumer filters see each call and each attempt (blocking and asyncio), the
access log writes a line per attempt, and a traced call has a CLIENT span named for the Java
method whose context reaches the Java provider (tests/support/generic_traced_peer.py, in a
process of its own: a tracer provider is set once per process).
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import dubbo_py
from dubbo_py.consumer.filters import ConsumerFilters
from dubbo_py.invocation import GenericRequest, Invocation
from dubbo_py.qos.access_log import writer
from dubbo_py.url import URL
from tests.support.java_estate import JavaDubboProvider
from tests.support.processes import dubbo_py_cli

pytestmark = pytest.mark.zookeeper

SERVICE = "estate.UserService"
ROOT = Path(__file__).resolve().parents[2]
PROTOCOLS = ("dubbo", "tri")


@pytest.fixture(scope="module")
def providers(estate_registry: str, estate_group: str) -> Iterator[dict[str, JavaDubboProvider]]:
    """One Java provider per protocol, both of the module's group."""
    started: dict[str, JavaDubboProvider] = {}
    try:
        for protocol in PROTOCOLS:
            started[protocol] = JavaDubboProvider(
                "--registry", estate_registry, "--application", "java-estate-generic-observed",
                "--name", f"o-{protocol}", "--version", "1.0.0", "--group", estate_group,
                "--protocol", protocol,
            ).__enter__()  # fmt: skip
        yield started
    finally:
        for provider in started.values():
            provider.__exit__(None, None, None)


class Seen:
    """What the filters saw: (flavour, kind, method, parameter types, arguments, provider)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def note(self, flavour: str, kind: str, invocation: Invocation, provider: str = "") -> None:
        request = invocation.request
        assert isinstance(request, GenericRequest)
        self.calls.append(
            (
                flavour,
                kind,
                invocation.method,
                request.parameter_types,
                request.arguments,
                provider,
            )
        )

    def filters(self, label: str) -> ConsumerFilters:
        def call(invocation: Invocation, proceed: Callable[[Invocation], Any]) -> Any:
            self.note(label, "call", invocation)
            return proceed(invocation)

        def attempt(
            provider: URL, invocation: Invocation, timeout: float | None, proceed: Any
        ) -> Any:
            self.note(label, "attempt", invocation, provider.protocol)
            return proceed(provider, invocation, timeout)

        async def async_call(
            invocation: Invocation, proceed: Callable[[Invocation], Awaitable[Any]]
        ) -> Any:
            self.note(f"{label}-async", "call", invocation)
            return await proceed(invocation)

        async def async_attempt(
            provider: URL, invocation: Invocation, timeout: float | None, proceed: Any
        ) -> Any:
            self.note(f"{label}-async", "attempt", invocation, provider.protocol)
            return await proceed(provider, invocation, timeout)

        return ConsumerFilters((call,), (attempt,), (async_call,), (async_attempt,))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_generic_calls_pass_the_consumer_filters_and_metrics(
    providers: dict[str, JavaDubboProvider],
    estate_registry: str,
    estate_group: str,
    protocol: str,
    tmp_path: Path,
) -> None:
    seen = Seen()
    with dubbo_py.Application(
        f"py-generic-observed-{protocol}",
        estate_registry,
        cache_path=tmp_path / "cache.json",
        metrics=True,
        filters=seen.filters("app"),
    ) as app:
        users = app.generic_reference(
            SERVICE,
            version="1.0.0",
            group=estate_group,
            timeout=5.0,
            protocol=protocol,
            filters=seen.filters("ref"),
        )
        assert users.getUser(7)["id"] == 7
        assert users.invoke("getUser", ["java.lang.Long"], [8])["id"] == 8
        user = asyncio.run(users.invoke_async("getUser", ["java.lang.Long"], [9]))
        assert user["id"] == 9
        with pytest.raises(dubbo_py.JavaException):
            users.invoke("getUser", ["java.lang.Long"], [0])

        assert app.metrics is not None
        stats = {
            s.key.method: s.snapshot() for s in app.metrics.methods() if s.key.side == "consumer"
        }
        # Named for the Java method, with the reference's version and group.
        assert set(stats) == {"getUser"}, stats
        [key] = [s.key for s in app.metrics.methods() if s.key.side == "consumer"]
        assert (key.interface, key.version, key.group) == (SERVICE, "1.0.0", estate_group)
        assert stats["getUser"]["total"] == 4
        assert stats["getUser"]["succeed"] == 3
        failed = {k: v for k, v in stats["getUser"]["failed_by_reason"].items() if v}
        assert failed == {"business": 1}  # the Java service's own exception

    long = ("java.lang.Long",)
    # The application's filters wrap the reference's; the call filters see the types the
    # caller gave (None: read from the metadata report), the attempt filters those sent.
    first = [c for c in seen.calls if c[4] == (7,)]
    assert [c[:2] for c in first] == [
        ("app", "call"),
        ("ref", "call"),
        ("app", "attempt"),
        ("ref", "attempt"),
    ]
    assert [c[3] for c in first] == [None, None, long, long]
    assert {c[2] for c in seen.calls} == {"getUser"}
    assert [c[5] for c in first if c[1] == "attempt"] == [protocol, protocol]
    awaited = [c[:2] for c in seen.calls if c[4] == (9,)]
    assert awaited == [
        ("app-async", "call"),
        ("ref-async", "call"),
        ("app-async", "attempt"),
        ("ref-async", "attempt"),
    ]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_generic_calls_write_the_access_log(
    providers: dict[str, JavaDubboProvider],
    estate_registry: str,
    estate_group: str,
    protocol: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="dubbo.accesslog")
    with dubbo_py.Application(
        f"py-generic-accesslog-{protocol}", estate_registry, cache_path=tmp_path / "c.json"
    ) as app:
        users = app.generic_reference(
            SERVICE,
            version="1.0.0",
            group=estate_group,
            timeout=5.0,
            protocol=protocol,
            accesslog="true",
        )
        users.invoke("getUser", ["java.lang.Long"], [7])
        with pytest.raises(dubbo_py.JavaException):
            asyncio.run(users.invoke_async("getUser", ["java.lang.Long"], [0]))
        assert writer().flush()
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("dubbo.accesslog")]
    address = providers[protocol].address
    service = f"{estate_group}/{SERVICE}:1.0.0"
    [ok] = [line for line in lines if "[7]" in line]
    assert f"-> {address} - {service} getUser(java.lang.Long) [7] OK " in ok, ok
    [failed] = [line for line in lines if "[0]" in line]
    assert "getUser(java.lang.Long) [0] JavaException " in failed, failed


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_traced_generic_call_has_a_client_span_for_the_java_method(
    providers: dict[str, JavaDubboProvider],
    estate_registry: str,
    estate_group: str,
    protocol: str,
) -> None:
    peer = ROOT / "tests" / "support" / "generic_traced_peer.py"
    command = [sys.executable, str(peer), "--registry", estate_registry]
    command += ["--group", estate_group, "--protocol", protocol]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    spans = report["spans"]
    [checkout] = [s for s in spans if s["name"] == "checkout"]
    clients = [s for s in spans if s["kind"] == "CLIENT"]
    names = [s["name"] for s in clients]
    assert names == [
        f"{SERVICE}/getUser",
        f"{SERVICE}/attachment",
        f"{SERVICE}/getUser",
        f"{SERVICE}/getUser",
    ], names
    for span in clients:
        assert span["parent"] == checkout["span_id"]
        assert span["trace_id"] == checkout["trace_id"]
        assert span["attributes"]["rpc.method"] in ("getUser", "attachment")
        assert span["attributes"]["dubbo.attempts"] == 1
        assert span["attributes"]["server.port"] == int(providers[protocol].address.split(":")[1])
    # Unset on success (the RPC conventions leave a client's OK unset), an error for the
    # Java exception.
    assert [s["status"] for s in clients] == ["UNSET", "UNSET", "UNSET", "ERROR"]
    # The Java provider received the CLIENT span of its call as the remote parent.
    attachment_span = clients[1]
    version, trace_id, parent_id, _flags = report["traceparent"].split("-")
    assert (version, trace_id, parent_id) == (
        "00",
        attachment_span["trace_id"],
        attachment_span["span_id"],
    ), report


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_killed_provider_is_quarantined_and_passed_over(
    estate_registry: str, estate_group: str, protocol: str, tmp_path: Path
) -> None:
    # After kill -9 its ZooKeeper node outlives the Java provider (until its session ends), so
    # the dead one stays among the providers. The first call that meets it puts it in
    # quarantine; from then on no call tries it (without the quarantine, a refused address is
    # passed over for 2 s only and then tried, and failed over, again).
    group = f"{estate_group}-q-{protocol}"
    killed, survivor = (
        JavaDubboProvider(
            "--registry", estate_registry, "--application", f"java-estate-q-{name}",
            "--name", name, "--version", "1.0.0", "--group", group, "--protocol", protocol,
        )
        for name in ("q1", "q2")
    )  # fmt: skip
    with (
        killed,
        survivor,
        dubbo_py.Application(
            f"py-generic-quarantine-{protocol}",
            estate_registry,
            cache_path=tmp_path / "c.json",
            qos_port=0,
        ) as app,
    ):
        users = app.generic_reference(SERVICE, version="1.0.0", group=group, timeout=5.0)
        deadline = time.monotonic() + 10
        while len(users.providers) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert {p.address for p in users.providers} == {killed.address, survivor.address}
        dead = next(p for p in users.providers if p.address == killed.address)
        assert users._probe(dead)  # alive: the probe says so
        killed.kill()
        attempts = []
        for _ in range(40):  # four seconds of calls
            done = users.invoke_result("getUser", ["java.lang.Long"], [1])
            assert done.provider is not None and done.provider.address == survivor.address
            attempts.append(len(done.attempts))
            time.sleep(0.1)
        # One call met the dead provider (and failed over); none after it did. (Random
        # balancing sends none of 40 calls to it once in 2**40.)
        assert sorted(attempts) == [1] * 39 + [2], attempts
        assert killed.address in {p.address for p in users.providers}  # still registered
        assert [e.address for e in users.quarantine.entries()] == [killed.address]
        assert not users._probe(dead)
        # The QoS port's governance gauges and counters count the generic reference.
        assert app.qos is not None
        with urllib.request.urlopen(f"http://127.0.0.1:{app.qos.port}/metrics") as reply:
            text = reply.read().decode()
        labels = f'application_name="py-generic-quarantine-{protocol}",interface="{SERVICE}"'
        assert f"dubbo_py_consumer_quarantined_providers{{{labels}}} 1.0" in text
        assert f"dubbo_py_consumer_providers{{{labels}}} 2.0" in text
        assert f"dubbo_py_consumer_ejections_total{{{labels}}} 1.0" in text


def test_mocks_answer_generic_calls(
    providers: dict[str, JavaDubboProvider],
    estate_registry: str,
    estate_group: str,
    tmp_path: Path,
) -> None:
    with dubbo_py.Application(
        "py-generic-mock", estate_registry, cache_path=tmp_path / "c.json"
    ) as app:
        # fail: a version nobody serves has no provider; the mock answers instead.
        nobody = app.generic_reference(
            SERVICE, version="9.9.9", group=estate_group, check=0, mock='return {"id": -1}'
        )
        done = nobody.invoke_result("getUser", ["java.lang.Long"], [7])
        assert (done.value, done.provider) == ({"id": -1}, None)
        users = app.generic_reference(
            SERVICE, version="1.0.0", group=estate_group, timeout=5.0, mock="return null"
        )
        # The service's own exception is its answer, never mocked.
        with pytest.raises(dubbo_py.JavaException):
            users.invoke("getUser", ["java.lang.Long"], [0])
        assert users.getUser(7)["id"] == 7
        # force: pushed as an override rule for this consumer (service degradation): no
        # provider is called; deleting the rule brings the providers back.
        key = f"{SERVICE}:1.0.0:{estate_group}.configurators"
        rule = tmp_path / "mock.yaml"
        rule.write_text(
            "configVersion: v3.0\nscope: service\n"
            f"key: {estate_group}/{SERVICE}:1.0.0\nenabled: true\n"
            "configs:\n  - side: consumer\n    applications: [py-generic-mock]\n"
            '    parameters:\n      getUser.mock: \'force:return {"id": 0, "name": "busy"}\'\n',
            encoding="utf-8",
        )
        assert key in dubbo_py_cli(estate_registry, "rules", "push", str(rule), "--key", key)
        try:
            deadline = time.monotonic() + 10
            while users.invoke_result("getUser", None, [7]).provider is not None:
                assert time.monotonic() < deadline, "the mock rule did not take effect"
                time.sleep(0.1)
            forced = asyncio.run(users.invoke_result_async("getUser", ["java.lang.Long"], [7]))
            assert (forced.value, forced.provider) == ({"id": 0, "name": "busy"}, None)
            # Another method: not mocked.
            assert users.invoke("kind", ["java.lang.String"], ["x"]) == "String:x"
        finally:
            dubbo_py_cli(estate_registry, "rules", "delete", key)
        deadline = time.monotonic() + 10
        while users.invoke_result("getUser", None, [7]).provider is None:
            assert time.monotonic() < deadline, "the mock rule was not lifted"
            time.sleep(0.1)


def _qos(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}") as reply:
        return json.loads(reply.read().decode())


def test_router_snapshots_record_generic_calls(
    providers: dict[str, JavaDubboProvider],
    estate_registry: str,
    estate_group: str,
    tmp_path: Path,
) -> None:
    with dubbo_py.Application(
        "py-generic-snapshots", estate_registry, cache_path=tmp_path / "c.json", qos_port=0
    ) as app:
        users = app.generic_reference(
            SERVICE, version="1.0.0", group=estate_group, timeout=5.0, protocol="dubbo"
        )
        assert app.qos is not None
        port = app.qos.port
        key = f"{estate_group}/{SERVICE}:1.0.0"
        assert _qos(port, f"/enableRouterSnapshot?service={SERVICE}")["services"] == [key]
        assert users.recording_routes
        users.getUser(7)  # types read from the metadata report: still the same record
        asyncio.run(users.invoke_async("getUser", ["java.lang.Long"], [8]))
        calls = _qos(port, f"/getRecentRouterSnapshot?service={SERVICE}")["calls"]
        assert [(c["service"], c["method"], c["arguments"]) for c in calls] == [
            (key, "getUser", ["7"]),
            (key, "getUser", ["8"]),
        ]
        for call in calls:
            assert call["routers"] and call["no_provider"] is None
            assert call["attempts"] == [
                {"provider": providers["dubbo"].address, "retry": False, "outcome": "OK"}
            ]
        _qos(port, f"/disableRouterSnapshot?service={SERVICE}")
        assert not users.recording_routes
