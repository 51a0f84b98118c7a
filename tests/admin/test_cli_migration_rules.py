"""``dubbo-py rules`` on an application's migration rule ``<app>.migration``, against a real
ZooKeeper: written where Dubbo's MigrationRuleListener reads it
(``/dubbo/config/DUBBO_SERVICEDISCOVERY_MIGRATION/<app>.migration``), validated with line and
column, fields dubbo-py does not act on named, listed, read back, recorded in its history,
rolled back and deleted, its folder made private by an authenticated push."""

from __future__ import annotations

import json
import shlex
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from dubbo_py.admin.cli import cli
from dubbo_py.registry.application.publisher import InstancePublisher
from dubbo_py.url import URL
from tests.support.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.zookeeper

KEY = "shop.migration"
FOLDER = "/dubbo/config/DUBBO_SERVICEDISCOVERY_MIGRATION"
FORCE_INTERFACE = "key: shop\nstep: FORCE_INTERFACE\n"
PARAMS = "application=greeter&methods=SayHello&side=provider"
FORCE_APPLICATION = "key: shop\nstep: FORCE_APPLICATION\nthreshold: 0.5\n"


@pytest.fixture(scope="module")
def zk(zookeeper: ZooKeeperServer) -> Iterator[KazooClient]:
    client = KazooClient(hosts=zookeeper.address)
    client.start(20)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture
def chroot() -> str:
    return f"/migration-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def where(zookeeper: ZooKeeperServer, chroot: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.delenv("DUBBO_PY_REGISTRY", raising=False)
    monkeypatch.delenv("DUBBO_PY_REGISTRY_AUTH", raising=False)
    monkeypatch.setenv("USER", "ada")
    return f"zookeeper://{zookeeper.address}{chroot}"


def dubbo_py(where: str, command: str, *files: tuple[Path, str]) -> Result:
    """``dubbo-py <command> --registry <where>`` as typed on a shell line."""
    for path, text in files:
        path.write_text(text)
    return CliRunner().invoke(cli, [*shlex.split(command), "--registry", where])


def test_push_writes_where_dubbo_reads_and_every_rule_command_handles_it(
    where: str, chroot: str, zk: KazooClient, tmp_path: Path
) -> None:
    rule = tmp_path / "migration.yaml"
    pushed = dubbo_py(where, f"rules push {rule}", (rule, FORCE_INTERFACE))
    assert pushed.exit_code == 0, pushed.output
    assert pushed.stdout.startswith(f"pushed {KEY} to {where} (version 0, history #0)")
    # Dubbo's path, not the dubbo group's; the dubbo group holds no such node.
    data, _ = zk.get(f"{chroot}{FOLDER}/{KEY}")
    assert data.decode() == FORCE_INTERFACE
    assert not zk.exists(f"{chroot}/dubbo/config/dubbo/{KEY}")

    listed = json.loads(dubbo_py(where, "rules list --json").stdout)
    assert listed == [
        {"key": KEY, "kind": "migration", "target": "shop", "version": 0, "enabled": None}
    ]
    table = dubbo_py(where, "rules list --kind migration").stdout
    assert KEY in table and "migration" in table
    got = dubbo_py(where, f"rules get {KEY}")
    assert got.exit_code == 0 and got.stdout == FORCE_INTERFACE

    again = dubbo_py(where, f"rules push {rule} --key {KEY}", (rule, FORCE_APPLICATION))
    assert again.exit_code == 0, again.output
    history = json.loads(dubbo_py(where, f"rules history {KEY} --json").stdout)
    assert [(h["seq"], h["action"], h["operator"], h["text"]) for h in history] == [
        (0, "push", "ada", FORCE_INTERFACE),
        (1, "push", "ada", FORCE_APPLICATION),
    ]
    back = dubbo_py(where, f"rules rollback {KEY}")
    assert back.exit_code == 0, back.output
    assert zk.get(f"{chroot}{FOLDER}/{KEY}")[0].decode() == FORCE_INTERFACE

    # No 'enabled' flag: Dubbo reads none, so flipping one would change nothing.
    disabled = dubbo_py(where, f"rules disable {KEY}")
    assert disabled.exit_code == 1
    assert "a migration rule has no 'enabled' flag" in disabled.stderr
    assert zk.get(f"{chroot}{FOLDER}/{KEY}")[0].decode() == FORCE_INTERFACE

    deleted = dubbo_py(where, f"rules delete {KEY}")
    assert deleted.exit_code == 0, deleted.output
    assert not zk.exists(f"{chroot}{FOLDER}/{KEY}")
    assert json.loads(dubbo_py(where, "rules list --json").stdout) == []
    undone = dubbo_py(where, f"rules rollback {KEY}")
    assert undone.exit_code == 0, undone.output
    assert zk.get(f"{chroot}{FOLDER}/{KEY}")[0].decode() == FORCE_INTERFACE


@pytest.mark.parametrize(
    ("text", "position", "reason"),
    [
        ("key: shop\nstep: FORCE_INTERFAC\n", "2:7", "step: 'FORCE_INTERFAC' is not a migration"),
        (
            "key: shop\ninterfaces:\n  - serviceKey: demo.Greeter\n    step: FORCE\n",
            "4:11",
            "interfaces[0].step: 'FORCE' is not a migration step",
        ),
        ("key: shop\nstep: FORCE_INTERFACE\nthreshold: half\n", "3:12", "threshold: 'half'"),
        ("key: shop\nstep: FORCE_INTERFACE\nforce: maybe\n", "3:8", "force: 'maybe' is not"),
        ("key: shop\napplications: greeter\n", "2:15", "applications: expected a list"),
        (
            "key: shop\napplications:\n  - step: FORCE_APPLICATION\n",
            "3:5",
            "applications[0]: needs a serviceKey",
        ),
        ("key: shop\nstep: [FORCE_INTERFACE\n", "3:1", "invalid YAML"),
    ],
)
def test_a_malformed_migration_rule_is_refused_naming_line_and_column(
    where: str, chroot: str, zk: KazooClient, tmp_path: Path, text: str, position: str, reason: str
) -> None:
    rule = tmp_path / "bad.yaml"
    for command in (f"rules validate {rule} --key {KEY}", f"rules push {rule} --key {KEY}"):
        result = dubbo_py(where, command, (rule, text))
        assert result.exit_code == 1, (command, result.output)
        assert result.stderr.startswith(f"error: {rule}:{position}: "), result.stderr
        assert reason in result.stderr, result.stderr
    assert not zk.exists(f"{chroot}{FOLDER}/{KEY}")


def test_fields_dubbo_py_reads_but_does_not_act_on_are_warned_about(
    where: str, zk: KazooClient, chroot: str, tmp_path: Path
) -> None:
    rule = tmp_path / "m.yaml"
    text = (
        "key: shop\nstep: APPLICATION_FIRST\nproportion: 50\ndelay: 30\nstepp: FORCE_INTERFACE\n"
        "interfaces:\n  - serviceKey: demo.Greeter\n    step: FORCE_INTERFACE\n    delay: 5\n"
    )
    checked = dubbo_py(where, f"rules validate {rule} --json", (rule, text))
    assert checked.exit_code == 0, checked.output
    found = json.loads(checked.stdout)
    assert (found["key"], found["kind"], found["valid"]) == (KEY, "migration", True)
    warned = {(w["code"], w["message"].split(": ", 1)[1]) for w in found["warnings"]}
    assert (
        "ignored-field",
        "field 'proportion' is ignored by dubbo-py: dubbo-py does not "
        "split one consumer's calls between the levels: APPLICATION_FIRST moves all of "
        "them (threshold decides when)",
    ) in warned
    assert (
        "ignored-field",
        "field 'delay' is ignored by dubbo-py: dubbo-py applies a "
        "migration rule at once, not after a delay",
    ) in warned
    assert any(c == "ignored-field" and "interfaces[0].delay" in m for c, m in warned)
    assert any(c == "unknown-field" and "'stepp'" in m for c, m in warned)
    strict = dubbo_py(where, f"rules push {rule} --strict")
    # the four fields, and: the registry has nobody of application 'shop' to read it
    assert strict.exit_code == 1 and "refused with --strict: 5 warnings" in strict.stderr
    assert f"{KEY}: {where} has no provider or consumer at all" in strict.stderr
    assert not zk.exists(f"{chroot}{FOLDER}/{KEY}")


def test_a_service_key_is_refused_and_a_rule_without_key_needs_one(
    where: str, tmp_path: Path
) -> None:
    rule = tmp_path / "m.yaml"
    service = dubbo_py(
        where,
        f"rules push {rule} --key demo.Greeter::.migration",
        (rule, "step: FORCE_INTERFACE\n"),
    )
    assert service.exit_code != 0
    assert "migration rules are keyed by application: <app>.migration" in service.output
    keyless = dubbo_py(where, f"rules push {rule}")
    assert keyless.exit_code == 1
    assert "no 'key' field naming its service or application; pass --key" in keyless.stderr


def test_dry_run_shows_each_consumer_of_the_application_moving_level(
    where: str, chroot: str, zk: KazooClient, tmp_path: Path, zookeeper: ZooKeeperServer
) -> None:
    from dubbo_py.registry.registry import Registry
    from dubbo_py.registry.store.zookeeper import ZooKeeperStore

    store = ZooKeeperStore(zookeeper.address, chroot)
    assert store.start(10)
    try:
        registry = Registry(store)
        # interface level: 10.0.0.1 only; application level: 10.0.0.2 only
        registry.register(URL.parse(f"tri://10.0.0.1:50051/demo.Greeter?{PARAMS}"))
        InstancePublisher(store, "greeter").add(
            URL.parse(f"tri://10.0.0.2:50051/demo.Greeter?{PARAMS}")
        )
        consumer = "consumer://10.0.0.9/demo.Greeter?application=shop&category=consumers"
        registry.register(URL.parse(consumer))
        registry.register(URL.parse(consumer.replace("shop", "other")))
        rule = tmp_path / "m.yaml"
        dry = dubbo_py(where, f"rules push {rule} --dry-run --json", (rule, FORCE_INTERFACE))
        assert dry.exit_code == 0, dry.output
        reach = json.loads(dry.stdout)["reach"]
        # shop reads the application level now (APPLICATION_FIRST), the interface level after;
        # 'other' is another application: its consumers do not read shop.migration
        assert [(r["application"], r["before"], r["after"]) for r in reach] == [
            ("shop", ["10.0.0.2:50051"], ["10.0.0.1:50051"])
        ]
        assert not zk.exists(f"{chroot}{FOLDER}/{KEY}")
        # nobody of application 'nobody' is registered: the push warns, and still writes
        other = dubbo_py(
            where, f"rules push {rule}", (rule, "key: nobody\nstep: FORCE_INTERFACE\n")
        )
        assert other.exit_code == 0, other.output
        assert "nobody.migration: no provider or consumer of application 'nobody'" in other.stderr
    finally:
        store.close()


def test_an_authenticated_push_makes_the_migration_folder_private(
    where: str, chroot: str, zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    rule = tmp_path / "m.yaml"
    pushed = dubbo_py(where, f"--auth admin:s3cret rules push {rule}", (rule, FORCE_INTERFACE))
    assert pushed.exit_code == 0, pushed.output
    mallory = KazooClient(hosts=zookeeper.address, auth_data=[("digest", "mallory:guess")])
    mallory.start(20)
    try:
        node = f"{chroot}{FOLDER}/{KEY}"
        assert mallory.get(node)[0].decode() == FORCE_INTERFACE  # anyone reads it
        with pytest.raises(NoAuthError):
            mallory.set(node, b"key: shop\nstep: FORCE_APPLICATION\n")
        with pytest.raises(NoAuthError):
            mallory.delete(node)
        with pytest.raises(NoAuthError):
            mallory.create(f"{chroot}{FOLDER}/other.migration", b"step: FORCE_APPLICATION\n")
    finally:
        mallory.stop()
        mallory.close()
    secured = dubbo_py(where, "--auth admin:s3cret acl secure --json")
    assert secured.exit_code == 0, secured.output
    rows = {r["path"]: r["result"] for r in json.loads(secured.stdout)}
    assert rows[FOLDER] == "protected"
