"""``dubbo-py call`` as operators run it: a separate process, a real ZooKeeper, real provider
processes, and a routing rule in force deciding which provider answers."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator

import pytest

from tests.support.processes import ROOT, ProviderProcess
from tests.support.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.e2e, pytest.mark.zookeeper]


@pytest.fixture
def zk_registry(zookeeper: ZooKeeperServer) -> str:
    return f"zookeeper://{zookeeper.address}/call-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def start_provider(zk_registry: str) -> Iterator[Callable[..., ProviderProcess]]:
    started: list[ProviderProcess] = []

    def start(*args: str) -> ProviderProcess:
        proc = ProviderProcess(zk_registry, *args).start()
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()


def dubbo_py(registry: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dubbo_py.admin", "--registry", registry, "--timeout", "20", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def rule_to(address: str) -> str:
    return (
        "configVersion: v3.0\nscope: service\nkey: demo.Greeter:1.0.0\n"
        f"conditions:\n  - method = SayHello => address = {address}\n"
    )


def test_call_goes_where_the_rule_in_force_says(
    zk_registry: str, start_provider: Callable[..., ProviderProcess], tmp_path: object
) -> None:
    first, second = start_provider(), start_provider()
    for target in (second, first):
        rule = ROOT / "build" / f"call-rule-{uuid.uuid4().hex[:6]}.yaml"
        rule.parent.mkdir(exist_ok=True)
        try:
            rule.write_text(rule_to(target.address), encoding="utf-8")
            pushed = dubbo_py(zk_registry, "rules", "push", str(rule))
            assert pushed.returncode == 0, pushed.stderr
        finally:
            rule.unlink()
        for _ in range(3):
            result = dubbo_py(
                zk_registry,
                "call",
                "demo.Greeter",
                "SayHello",
                '{"name": "ada"}',
                "--version",
                "1.0.0",
                "--json",
            )
            assert result.returncode == 0, result.stderr
            out = json.loads(result.stdout)
            # The reply itself says who answered: the rule's provider, and only it.
            assert out["reply"]["message"] == "Hello, ada!"
            assert out["reply"]["provider"] == target.address
            assert out["provider"] == target.address
            assert out["routed"] == [target.address]
            condition = [s for s in out["trace"] if s["router"].startswith("condition")]
            assert [(s["in"], s["out"]) for s in condition] == [(2, 1)]


def test_call_prints_reply_provider_and_trace(
    zk_registry: str, start_provider: Callable[..., ProviderProcess]
) -> None:
    provider = start_provider()
    result = dubbo_py(
        zk_registry, "call", "demo.Greeter", "SayHello", '{"name": "bo"}', "--version", "1.0.0"
    )
    assert result.returncode == 0, result.stderr
    assert '"message": "Hello, bo!"' in result.stdout
    assert f"provider: {provider.address}" in result.stdout
    assert "route trace" in result.stdout


def test_call_list_prints_a_grpc_services_methods_from_reflection(
    zk_registry: str, start_provider: Callable[..., ProviderProcess]
) -> None:
    start_provider()
    listed = dubbo_py(zk_registry, "call", "demo.Greeter", "--list", "--version", "1.0.0")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split("│")[0].strip(): line for line in listed.stdout.splitlines() if "│" in line}
    assert "demo.HelloRequest" in rows["SayHello"] and "demo.HelloReply" in rows["SayHello"]
    assert rows["SayHelloStream"].rstrip().endswith("server")
    as_json = dubbo_py(
        zk_registry, "call", "demo.Greeter", "--list", "--version", "1.0.0", "--json"
    )
    methods = {m["name"]: m for m in json.loads(as_json.stdout)["methods"]}
    assert methods["SayHello"]["signature"] == "SayHello(demo.HelloRequest) returns demo.HelloReply"
    # --types is the Java services' option: refused for a gRPC service, not ignored.
    typed = dubbo_py(
        zk_registry, "call", "demo.Greeter", "SayHello", "--types", "int", "--version", "1.0.0"
    )
    assert typed.returncode == 2
    assert "--types is for Java-interface services (generic calls) only" in typed.stderr
    no_method = dubbo_py(zk_registry, "call", "demo.Greeter", "--version", "1.0.0")
    assert no_method.returncode == 2
    assert "give a METHOD of demo.Greeter, or --list to see them" in no_method.stderr


def test_call_explains_bad_requests_and_missing_reflection(
    zk_registry: str,
    start_provider: Callable[..., ProviderProcess],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    start_provider()
    bad = dubbo_py(
        zk_registry, "call", "demo.Greeter", "SayHello", '{"nam": 1}', "--version", "1.0.0"
    )
    assert bad.returncode == 1
    # In the project's words, not protobuf's "Available Fields(except extensions)" (issue 35, 5).
    assert bad.stderr == (
        "error: the request has a field 'nam' that demo.HelloRequest does not have; its fields: "
        "name (string), count (int32), key (string); did you mean 'name'?\n"
    )
    not_json = dubbo_py(
        zk_registry, "call", "demo.Greeter", "SayHello", '{"name": 1', "--version", "1.0.0"
    )
    assert not_json.returncode == 1
    assert "is not a demo.HelloRequest in JSON" in not_json.stderr
    missing = dubbo_py(zk_registry, "call", "demo.Greeter", "Nope", "--version", "1.0.0")
    assert missing.returncode == 1
    assert "has no method 'Nope' (methods: SayHello, SayHelloStream)" in missing.stderr
    # A provider with reflection turned off cannot be described: said, not a crash.
    monkeypatch.setenv("DUBBO_PY_REFLECTION", "false")
    start_provider("--version", "2.0.0")
    off = dubbo_py(zk_registry, "call", "demo.Greeter", "SayHello", "--version", "2.0.0")
    assert off.returncode == 1
    assert "serves no gRPC reflection" in off.stderr


def test_call_without_the_version_lists_what_exists_and_the_flag(
    zk_registry: str, start_provider: Callable[..., ProviderProcess]
) -> None:
    """Issue 35, finding 5: 'no usable provider of stock.Inventory' and nothing more."""
    one = start_provider()  # version 1.0.0
    two = start_provider("--version", "2.0.0")
    plain = dubbo_py(zk_registry, "call", "demo.Greeter", "SayHello", '{"name": "ada"}')
    assert plain.returncode == 1
    offers = "--version 1.0.0 (1 provider); --version 2.0.0 (1 provider)"
    advice = "A consumer matches version and group exactly: pass the flags of one of these"
    assert plain.stderr == (
        f"error: no provider of demo.Greeter with no version in {zk_registry}; it has providers "
        f"for: {offers}. {advice}\n"
    )
    grouped = dubbo_py(
        zk_registry, "call", "demo.Greeter", "SayHello", "--version", "2.0.0", "--group", "gray"
    )
    assert grouped.returncode == 1
    assert grouped.stderr == (
        f"error: no provider of demo.Greeter with version '2.0.0' and group 'gray' in "
        f"{zk_registry}; it has providers for: {offers}. {advice}\n"
    )
    called = dubbo_py(
        zk_registry, "call", "demo.Greeter", "SayHello", '{"name": "ada"}', "--version", "2.0.0",
        "--json",
    )  # fmt: skip
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout)["provider"] == two.address != one.address
