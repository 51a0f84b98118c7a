"""Every CLI command over several real registries (issue 34, item 4): two ZooKeeper servers as
two zones and one etcd, named by ``dubbo.yaml`` registry ids. A provider and a consumer
(with QoS ports) registered in all three; ``consumers``, ``rules push --dry-run``, ``rules
push/get/disable/enable/history/rollback/delete`` and ``top`` each label their rows with the
registry and zone they came from, writes report one row per registry, and an unreachable
registry is reported without stopping the others. The console started with the three serves
each, one per page, and a write goes to the registry of the page it was made on."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.admin.cli import cli
from dubbo_py.config.model import RegistryConfig
from tests.admin.test_console_http import Browser
from tests.app.test_qos_port import Greeter
from tests.e2e.conftest import wait_until
from tests.support.console_process import ConsoleProcess
from tests.support.etcd import EtcdServer
from tests.support.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.zookeeper, pytest.mark.etcd, pytest.mark.e2e]

KEY = "demo.Greeter:1.0.0:.condition-router"
DOWN = "zookeeper://127.0.0.1:1"


@pytest.fixture(scope="module")
def zones() -> Iterator[tuple[ZooKeeperServer, ZooKeeperServer]]:
    with ZooKeeperServer() as a, ZooKeeperServer() as b:
        yield a, b


@pytest.fixture
def registries(
    zones: tuple[ZooKeeperServer, ZooKeeperServer], etcd: EtcdServer
) -> dict[str, RegistryConfig]:
    chroot = f"/several-{uuid.uuid4().hex[:8]}"
    return {
        "a": RegistryConfig(f"zookeeper://{zones[0].address}{chroot}", zone="A"),
        "b": RegistryConfig(f"zookeeper://{zones[1].address}{chroot}", zone="B"),
        "e": RegistryConfig(f"etcd://{etcd.address}{chroot}", zone="E"),
    }


class Cli:
    """``dubbo-py`` with ``--config`` naming the test's dubbo.yaml and every registry id."""

    def __init__(self, config: Path, ids: list[str]) -> None:
        self.config = config
        self.several = [arg for i in ids for arg in ("--registry", i)]

    def run(self, *args: str, extra: tuple[str, ...] = ()) -> Result:
        return CliRunner().invoke(cli, ["--config", str(self.config), *args, *self.several, *extra])

    def json(self, *args: str, extra: tuple[str, ...] = (), code: int = 0) -> Any:
        result = self.run(*args, "--json", extra=extra)
        assert result.exit_code == code, result.output
        return json.loads(result.stdout)


@pytest.fixture
def estate(registries: dict[str, RegistryConfig], tmp_path: Path) -> Iterator[tuple[Cli, int]]:
    """A provider and a consumer in all three registries; the CLI, and the provider's port."""
    lines = ["application: ops", "registries:"]
    lines += [f'  {i}: {{address: "{r.address}", zone: {r.zone}}}' for i, r in registries.items()]
    config = tmp_path / "dubbo.yaml"
    config.write_text("\n".join(lines) + "\n")
    with (
        dubbo_py.Application("greeter", registry=registries, qos_port=0) as provider,
        dubbo_py.Application(
            "shop", registry=registries, qos_port=0, cache_path=tmp_path / "c"
        ) as shop,
    ):
        server = provider.start(Greeter(), port=0)
        ref = shop.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0")
        wait_until(lambda: len(ref.directory.providers) >= 1, 20, "the provider")
        for _ in range(5):
            ref.stub.SayHello(greeter_pb2.HelloRequest(name="several"))
        yield Cli(config, list(registries)), int(server.address.rsplit(":", 1)[1])


@pytest.fixture
def config(estate: tuple[Cli, int]) -> Path:
    return estate[0].config


def _labels(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(r["registry"], r["zone"]) for r in rows]


def test_consumers_and_top_say_which_registry_and_zone(estate: tuple[Cli, int]) -> None:
    cli_, _ = estate
    rows = cli_.json("consumers", "demo.Greeter")
    assert _labels(rows) == [("a", "A"), ("b", "B"), ("e", "E")]
    assert {r["application"] for r in rows} == {"shop"}
    table = cli_.run("consumers", "demo.Greeter")
    assert table.exit_code == 0, table.output
    header = [w for w in table.stdout.splitlines()[1].split() if w.isalpha()]
    assert header[:3] == ["REGISTRY", "ZONE", "ADDRESS"]

    view = cli_.json("top", "--once", "--interval", "0.2")
    served = [r for r in view["providers"] if r["method"] == "SayHello"]
    assert served and all(r["registries"] == ["a", "b", "e"] for r in served), served
    assert all(r["zones"] == ["A", "B", "E"] for r in served)
    assert sum(r["requests_total"] for r in served) == 5
    assert {r["application"] for r in view["consumers"]} == {"shop"}


def test_every_rule_command_reads_and_writes_each_registry(
    estate: tuple[Cli, int], tmp_path: Path
) -> None:
    cli_, port = estate
    rule = tmp_path / "rule.yaml"
    text = (
        "configVersion: v3.0\nscope: service\nkey: demo.Greeter:1.0.0\nforce: true\n"
        f"conditions:\n  - '=> port = {port}'\n"
    )
    rule.write_text(text)

    dry = cli_.json("rules", "push", str(rule), "--dry-run")
    assert _labels(dry) == [("a", "A"), ("b", "B"), ("e", "E")]
    assert all(d["dry_run"] and d["current_version"] is None for d in dry)
    assert all(any(r["consumer"] for r in d["reach"]) for d in dry), dry
    assert cli_.json("rules", "list") == []  # a dry run writes nothing

    pushed = cli_.json("rules", "push", str(rule))
    assert [(r["registry"], r["action"], r["version"]) for r in pushed] == [
        ("a", "push", 0),
        ("b", "push", 0),
        ("e", "push", 0),
    ]
    got = cli_.json("rules", "get", KEY)
    assert _labels(got) == [("a", "A"), ("b", "B"), ("e", "E")]
    assert all(g["text"] == text and g["enabled"] is True for g in got)

    disabled = cli_.json("rules", "disable", KEY)
    assert [(r["registry"], r["changed"], r["version"]) for r in disabled] == [
        ("a", True, 1),
        ("b", True, 1),
        ("e", True, 1),
    ]
    assert all(r["enabled"] is False for r in cli_.json("rules", "get", KEY))
    enabled = cli_.json("rules", "enable", KEY)
    assert all(r["changed"] and r["version"] == 2 for r in enabled)

    history = cli_.json("rules", "history", KEY)
    per_registry: dict[str, list[str]] = {}
    for entry in history:
        per_registry.setdefault(entry["registry"], []).append(entry["action"])
    assert per_registry == {r: ["push", "disable", "enable"] for r in ("a", "b", "e")}

    rolled = cli_.json("rules", "rollback", KEY)
    assert [(r["registry"], r["action"]) for r in rolled] == [
        ("a", "rollback"),
        ("b", "rollback"),
        ("e", "rollback"),
    ]
    assert all(r["enabled"] is False for r in cli_.json("rules", "get", KEY))

    # One registry that does not answer: reported in its row, the others still written.
    deleted = cli_.json("rules", "delete", KEY, extra=("--registry", DOWN), code=1)
    assert [(r["registry"], r.get("action"), r.get("reason")) for r in deleted] == [
        ("a", "delete", None),
        ("b", "delete", None),
        ("e", "delete", None),
        (DOWN, None, "unreachable"),
    ]
    assert cli_.json("rules", "list") == []
    missing = cli_.run("rules", "get", KEY)
    assert missing.exit_code == 1
    assert "registry a: no rule at" in missing.stderr


def test_the_console_serves_each_registry_and_writes_to_the_page_s_one(
    estate: tuple[Cli, int], config: Path
) -> None:
    cli_, port = estate
    rule = (
        "configVersion: v3.0\nscope: service\nkey: demo.Greeter:1.0.0\nforce: true\n"
        f"conditions:\n  - '=> port = {port}'\n"
    )
    # ZooKeeper writes need an identity; the etcd (authentication off) warns it is unused.
    env = {"DUBBO_PY_CONFIG": str(config), "DUBBO_PY_REGISTRY_AUTH": "admin:s3cret"}
    ids = ("--registry", "a", "--registry", "b", "--registry", "e")
    with ConsoleProcess("a", *ids, "--operator", "carol", env=env) as console:
        browser = Browser(console.url)
        status, page = browser.get("/?registry=b")
        assert status == 200, page
        assert '<strong id="registry-id">b</strong>' in page
        assert '<span id="registry-zone">B</span>' in page
        assert "demo.Greeter" in page  # the provider registered there
        assert '"X-Dubbo-Registry": "b"' in page
        for other in ("a", "e"):
            assert f'href="?registry={other}"' in page

        form = {"key": KEY, "text": rule, "version": "-1"}
        # A write that names no registry is refused: the one chosen last may not be its page's.
        status, body = browser.post("/rule/push", form)
        assert "names none" in body  # (htmx is answered 200, to show the message)
        assert cli_.json("rules", "list") == []
        status, body = browser.post("/rule/push", form, X_Dubbo_Registry="b")
        # The message names the registry written (the next lines check it was b).
        assert status == 200 and f"pushed {KEY} to zookeeper://" in body, body
        assert "(version 0, history #0)" in body, body
        rows = cli_.json("rules", "list")
        assert [(r["registry"], r["key"]) for r in rows] == [("b", KEY)]

        # The page remembers the registry chosen last; another is one click away.
        row = f'data-key="{KEY}"'
        status, page = browser.get("/rules")
        assert '<strong id="registry-id">b</strong>' in page and row in page
        status, page = browser.get("/rules?registry=e")
        assert '<strong id="registry-id">e</strong>' in page and row not in page
        status, page = browser.get("/rules?registry=nope")
        assert status == 400 and "serves no registry &#39;nope&#39;" in page
    # The console wrote as admin (ZooKeeper protects what an identity writes): so does this.
    deleted = cli_.json("rules", "delete", KEY, extra=("--auth", "admin:s3cret"), code=1)
    assert [(r["registry"], r.get("action"), r.get("reason")) for r in deleted] == [
        ("a", None, "not-found"),
        ("b", "delete", None),
        ("e", None, "not-found"),
    ]
