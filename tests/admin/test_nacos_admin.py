"""The CLI and the console against the real Nacos server (tests/support/nacos.py), each test in
a Nacos namespace of its own (``nacos://...?namespace=``): every rules command (validate, push,
list, get, history, rollback, enable/disable, delete, the dry run's reach, migration rules), the
service listings, the ACL advice (Nacos auth roles and permissions in the namespace, not
ZooKeeper ACLs), and the console listing a provider and pushing a rule."""

from __future__ import annotations

import json
import re
import shlex
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from dubbo_py.admin.cli import cli
from dubbo_py.registry.registry import Registry
from dubbo_py.registry.store.nacos.store import (
    HISTORY_ENTRY_GROUP,
    HISTORY_GROUP,
    NacosStore,
    content_version,
)
from dubbo_py.url import URL
from tests.support.console_process import ConsoleProcess
from tests.support.java_app_level import write_java_provider
from tests.support.nacos import NacosServer

pytestmark = pytest.mark.nacos

SERVICE = "demo.Greeter"
KEY = f"{SERVICE}:1.0.0:.condition-router"
RULE = f"""\
configVersion: v3.0
scope: service
key: {SERVICE}:1.0.0
conditions:
  - method = SayHello => host = 127.0.0.1
"""
NARROW = RULE.replace("host = 127.0.0.1", "port = 50051")
PROVIDER = URL.parse(
    f"tri://127.0.0.1:50051/{SERVICE}?interface={SERVICE}&version=1.0.0"
    "&application=greeter&methods=SayHello&side=provider"
)
CONSUMER = URL.parse(
    f"consumer://127.0.0.1/{SERVICE}?interface={SERVICE}&version=1.0.0"
    "&application=shop&methods=SayHello&side=consumer&category=consumers"
)


@pytest.fixture
def namespace() -> str:
    return f"admin-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def where(nacos: NacosServer, namespace: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.delenv("DUBBO_PY_REGISTRY", raising=False)
    monkeypatch.delenv("DUBBO_PY_REGISTRY_AUTH", raising=False)
    monkeypatch.setenv("USER", "ada")
    return f"nacos://{nacos.address}?namespace={namespace}"


@pytest.fixture
def fleet(nacos: NacosServer, namespace: str, tmp_path: Path) -> Iterator[Registry]:
    """A provider and a consumer of demo.Greeter registered in the test's namespace."""
    store = NacosStore(nacos.address, namespace=namespace, work_dir=tmp_path / "fleet")
    assert store.start(20)
    registry = Registry(store)
    registry.register(PROVIDER)
    registry.register(CONSUMER)
    yield registry
    store.close()


def dubbo_py(where: str, command: str, *files: tuple[Path, str]) -> Result:
    """``dubbo-py <command> --registry <where>`` as typed on a shell line; exit 0 expected
    unless the command is one that fails."""
    for path, text in files:
        path.write_text(text)
    return CliRunner().invoke(cli, [*shlex.split(command), "--registry", where])


def ok(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return result.stdout


def test_every_rules_command_works_on_nacos_with_its_history(
    where: str, fleet: Registry, tmp_path: Path
) -> None:
    rule, narrow = tmp_path / "rule.yaml", tmp_path / "narrow.yaml"
    assert "ok:" in ok(dubbo_py(where, f"rules validate {rule}", (rule, RULE)))
    first = content_version(RULE)
    assert ok(dubbo_py(where, f"rules push {rule}")).startswith(
        f"pushed {KEY} to {where} (version {first}, history #0)"
    )
    # Where Dubbo's NacosDynamicConfiguration reads it: data id <key> in group dubbo.
    assert fleet.store.get(f"/dubbo/config/dubbo/{KEY}") == (RULE.encode(), first)

    # The dry run reaches the registered consumer, with the provider the rule leaves it.
    dry = ok(dubbo_py(where, f"rules push {narrow} --dry-run", (narrow, NARROW)))
    assert f"--- {KEY} (version {first})" in dry, dry
    assert "reach per consumer" in dry and "shop" in dry, dry
    assert fleet.store.get(f"/dubbo/config/dubbo/{KEY}")[0] == RULE.encode()  # not written

    second = content_version(NARROW)
    assert f"(version {second}, history #1)" in ok(dubbo_py(where, f"rules push {narrow}"))
    # A push pinned to a version that is no longer current is refused: Nacos's casMd5.
    stale = dubbo_py(where, f"rules push {rule} --expect-version {first}")
    assert stale.exit_code != 0 and "conflict" in stale.output, stale.output

    listed = json.loads(ok(dubbo_py(where, "rules list --json")))
    assert [(r["key"], r["kind"], r["version"]) for r in listed] == [
        (KEY, "condition-router", second)
    ]
    assert ok(dubbo_py(where, f"rules get {KEY}")) == NARROW

    assert "disabled" in ok(dubbo_py(where, f"rules disable {KEY}"))
    assert "enabled: false" in ok(dubbo_py(where, f"rules get {KEY}"))
    rolled = ok(dubbo_py(where, f"rules rollback {KEY}"))
    assert f"rolled back {KEY} to #1" in rolled, rolled
    assert ok(dubbo_py(where, f"rules get {KEY}")) == NARROW
    assert "deleted" in ok(dubbo_py(where, f"rules delete {KEY}"))
    assert json.loads(ok(dubbo_py(where, "rules list --json"))) == []

    history = json.loads(ok(dubbo_py(where, f"rules history {KEY} --json")))
    assert [(e["seq"], e["action"], e["operator"]) for e in history] == [
        (0, "push", "ada"),
        (1, "push", "ada"),
        (2, "disable", "ada"),
        (3, "rollback", "ada"),
        (4, "delete", "ada"),
    ]
    assert history[0]["text"] == RULE and history[-1]["deleted"]
    # The history is config too, in groups of its own: a counter and one data id per entry.
    assert fleet.store.get(f"/dubbo/config-history/{KEY}")[0] == b"5"
    assert fleet.store.children(f"/dubbo/config-history/{KEY}") == [f"{i:010d}" for i in range(5)]
    assert HISTORY_GROUP != HISTORY_ENTRY_GROUP != "dubbo"
    # Deleted, and rolled back from the history (the entry before the deletion).
    again = ok(dubbo_py(where, f"rules rollback {KEY}"))
    assert "history #5" in again and ok(dubbo_py(where, f"rules get {KEY}")) == NARROW


def test_a_migration_rule_is_kept_where_dubbo_reads_it_on_nacos(
    where: str, fleet: Registry, tmp_path: Path
) -> None:
    rule = tmp_path / "migration.yaml"
    text = "key: shop\nstep: FORCE_INTERFACE\n"
    ok(dubbo_py(where, f"rules push {rule}", (rule, text)))
    assert fleet.store.get("/dubbo/config/DUBBO_SERVICEDISCOVERY_MIGRATION/shop.migration")[0] == (
        text.encode()
    )
    listed = json.loads(ok(dubbo_py(where, "rules list --json")))
    assert [(r["key"], r["kind"]) for r in listed] == [("shop.migration", "migration")]
    assert ok(dubbo_py(where, "rules get shop.migration")) == text


def test_services_providers_and_consumers_list_what_is_registered_in_nacos(
    where: str, fleet: Registry
) -> None:
    services = json.loads(ok(dubbo_py(where, "services --json")))
    assert [s["service"] for s in services] == [SERVICE], services
    providers = json.loads(ok(dubbo_py(where, f"providers {SERVICE} --json")))
    assert [p["address"] for p in providers] == ["127.0.0.1:50051"], providers
    consumers = json.loads(ok(dubbo_py(where, f"consumers {SERVICE} --json")))
    assert [c["application"] for c in consumers] == ["shop"], consumers
    status = json.loads(ok(dubbo_py(where, "registry status --json")))
    assert status["reachable"] and (status["providers"], status["consumers"]) == (1, 1), status


def test_an_override_url_is_refused_by_name_on_nacos(where: str, fleet: Registry) -> None:
    # An override:// URL is a persistent node meant to outlive the CLI; a Nacos instance goes
    # with its client. Dubbo reads overrides from the config center: a .configurators rule.
    refused = dubbo_py(where, f"override weight {SERVICE} 127.0.0.1:50051 40")
    assert refused.exit_code != 0
    assert "cannot be kept in Nacos" in refused.output, refused.output
    assert "configurators rule" in refused.output
    assert ok(dubbo_py(where, "override list")).strip() == "no overrides"


def test_acl_advice_on_nacos_is_nacos_auth_in_the_namespace(where: str, namespace: str) -> None:
    secure = dubbo_py(where, "acl secure --auth admin:secret")
    assert secure.exit_code != 0
    assert "Nacos's access control is its auth plugin's users, roles" in secure.output
    assert "namespace" in secure.output and "acl nacos-auth" in secure.output
    grants = json.loads(ok(dubbo_py(where, "acl nacos-auth --json")))
    mine = {(g["role"], g["resource"], g["action"]) for g in grants}
    assert ("dubbo-applications", f"{namespace}:dubbo:config/*", "r") in mine
    assert ("dubbo-operators", f"{namespace}:dubbo:config/*", "rw") in mine
    assert ("dubbo-operators", f"{namespace}:{HISTORY_ENTRY_GROUP}:config/*", "rw") in mine
    assert all(g["resource"].startswith(f"{namespace}:") for g in grants)
    commands = ok(dubbo_py(where, "acl nacos-auth"))
    assert "/nacos/v3/auth/permission?role=dubbo-operators" in commands
    # Services are in the address's naming group (DEFAULT_GROUP without group=); config
    # groups do not change with it.
    assert ("dubbo-applications", f"{namespace}:DEFAULT_GROUP:naming/*", "rw") in mine
    grouped = json.loads(ok(dubbo_py(f"{where}&group=blue", "acl nacos-auth --json")))
    naming = {(g["role"], g["resource"]) for g in grouped if ":naming/" in g["resource"]}
    assert naming == {
        ("dubbo-applications", f"{namespace}:blue:naming/*"),
        ("dubbo-operators", f"{namespace}:blue:naming/*"),
    }
    assert [g for g in grouped if ":config/" in g["resource"]] == [
        g for g in grants if ":config/" in g["resource"]
    ]


def test_the_console_on_nacos_lists_a_provider_and_pushes_a_rule(
    where: str, fleet: Registry
) -> None:
    from tests.admin.test_console_http import Browser

    with ConsoleProcess(where, "--operator", "dana") as console:
        browser = Browser(console.url)
        status, page = browser.get(f"/service/{SERVICE}")
        assert status == 200, page
        assert re.search(r'data-address="127\.0\.0\.1:50051"', page), page
        status, body = browser.post("/rule/push", {"key": KEY, "text": RULE, "version": "-1"})
        version = content_version(RULE)
        assert f"pushed {KEY} to {where} (version {version}, history #0)" in body, body
    assert fleet.get_config(KEY) is not None
    assert fleet.store.get(f"/dubbo/config/dubbo/{KEY}") == (RULE.encode(), version)


def test_registry_status_counts_application_level_instances_on_nacos(
    where: str, fleet: Registry
) -> None:
    # A Java provider application registered at the application level (its instance, the
    # mapping and its metadata in Nacos's layout) beside the interface-level fleet: status
    # counts the application and its instance, and the consumer's migration step.
    for port in (50070, 50071):
        write_java_provider(
            fleet.store, "java-greeter", "127.0.0.1", port, SERVICE, version="1.0.0"
        )
    status = json.loads(ok(dubbo_py(where, "registry status --json")))
    assert (status["applications"], status["instances"]) == (1, 2), status
    assert (status["providers"], status["consumers"]) == (1, 1), status
    modes = {m["application"]: m for m in status["consumer_modes"]}
    assert (modes["shop"]["step"], modes["shop"]["source"]) == ("APPLICATION_FIRST", "default")
