"""Access control on ZooKeeper: rules pushed by an authenticated operator can be changed only by
that identity; an unauthenticated push is refused with a clear message while consumers keep
routing by the rule in force. The attacks: open parent folders left by earlier tools, and a
rewritten (or forged) rule history that an operator's rollback would push."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from demo import greeter_pb2, greeter_pb2_grpc
from kazoo.security import make_acl, make_digest_acl

import dubbo_py
from tests.e2e.conftest import wait_until
from tests.e2e.test_cli_e2e import dubbo_py as run_cli
from tests.support.processes import ProviderProcess
from tests.support.zookeeper import ZooKeeperServer

ADMIN = "admin:s3cret"


def rule(port: int) -> str:
    return (
        "configVersion: v3.0\nscope: service\nkey: demo.Greeter:1.0.0\nforce: true\n"
        f"conditions:\n  - '=> port = {port}'\n"
    )


@pytest.fixture
def zk_registry(zookeeper: ZooKeeperServer) -> Iterator[str]:
    yield f"zookeeper://{zookeeper.address}/acl-{uuid.uuid4().hex[:8]}"


@pytest.mark.zookeeper
def test_unauthenticated_push_is_denied_and_consumers_keep_routing(
    zk_registry: str, tmp_path: Path
) -> None:
    p1 = ProviderProcess(zk_registry).start()
    p2 = ProviderProcess(zk_registry).start()
    try:
        good = tmp_path / "only-p1.yaml"
        good.write_text(rule(p1.port))
        pushed = run_cli(zk_registry, "--auth", ADMIN, "rules", "push", str(good))
        assert pushed.returncode == 0, pushed.stderr

        with dubbo_py.Application("shop", zk_registry, cache_path=tmp_path / "c") as app:
            ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0")
            request = greeter_pb2.HelloRequest(name="acl")

            def only_p1() -> bool:
                return {ref.stub.SayHello(request).provider for _ in range(10)} == {p1.address}

            wait_until(only_p1, 10, "the admin's rule to apply")

            hostile = tmp_path / "only-p2.yaml"
            hostile.write_text(rule(p2.port))
            denied = run_cli(zk_registry, "rules", "push", str(hostile))
            assert denied.returncode == 1
            assert "not authorised" in denied.stderr and "--auth" in denied.stderr

            wrong = run_cli(zk_registry, "--auth", "mallory:guess", "rules", "push", str(hostile))
            assert wrong.returncode == 1 and "not authorised" in wrong.stderr

            # A new rule key cannot be slipped in beside the protected ones either.
            sneaky = run_cli(
                zk_registry,
                "rules",
                "push",
                str(hostile),
                "--key",
                "shop.condition-router",
                "--kind",
                "condition-router",
            )
            assert sneaky.returncode == 1, sneaky.stdout

            assert app.registry is not None
            stored = app.registry.get_config("demo.Greeter:1.0.0:.condition-router")
            assert stored is not None and stored.text == rule(p1.port)
            assert only_p1(), "consumers keep routing by the rule in force"
    finally:
        p1.kill()
        p2.kill()


@pytest.mark.zookeeper
def test_providers_registered_with_an_identity_keep_others_out(zk_registry: str) -> None:
    from dubbo_py.errors import StoreError
    from examples.quickstart.provider import make_greeter

    with dubbo_py.Application("greeter", zk_registry, auth="provider:pw") as owner:
        owner.start(make_greeter("1.0.0", None, None))
        with dubbo_py.Application("rogue", zk_registry) as rogue:
            with pytest.raises(StoreError, match="not authorised"):
                rogue.start(make_greeter("1.0.0", None, None))
            assert rogue.registry is not None
            assert len(rogue.registry.lookup("demo.Greeter")) == 1  # everyone may read


def _open_config_tree(zookeeper: ZooKeeperServer, chroot: str) -> None:
    """What any earlier unauthenticated tool leaves: /dubbo/config/dubbo open to everyone."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zookeeper.address)
    client.start(20)
    try:
        client.ensure_path(f"{chroot}/dubbo/config/dubbo")
        client.ensure_path(f"{chroot}/dubbo/config-history")
    finally:
        client.stop()
        client.close()


@pytest.mark.zookeeper
def test_open_parent_attack_is_refused_after_an_authenticated_push(
    zookeeper: ZooKeeperServer, zk_registry: str, tmp_path: Path
) -> None:
    chroot = "/" + zk_registry.rsplit("/", 1)[1]
    _open_config_tree(zookeeper, chroot)
    key = "demo.Greeter:1.0.0:.condition-router"
    good = tmp_path / "good.yaml"
    good.write_text(rule(20880))
    pushed = run_cli(zk_registry, "--auth", ADMIN, "rules", "push", str(good))
    assert pushed.returncode == 0, pushed.stderr

    # The attacks, each unauthenticated: delete the rule, add a rule beside it, remove or
    # rewrite its history, remove the folders.
    deleted = run_cli(zk_registry, "rules", "delete", key)
    assert deleted.returncode == 1 and "not authorised" in deleted.stderr, deleted.stderr
    beside = tmp_path / "beside.yaml"
    beside.write_text(rule(1))
    added = run_cli(zk_registry, "rules", "push", str(beside), "--key", "shop.condition-router")
    assert added.returncode == 1, added.stdout

    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError, NotEmptyError

    mallory = KazooClient(hosts=zookeeper.address, auth_data=[("digest", "mallory:guess")])
    mallory.start(20)
    try:
        history = f"{chroot}/dubbo/config-history/{key}"
        for path in (
            f"{chroot}/dubbo/config/dubbo/{key}",
            f"{history}/{mallory.get_children(history)[0]}",
        ):
            with pytest.raises(NoAuthError):
                mallory.delete(path)
            with pytest.raises(NoAuthError):
                mallory.set(path, b"configVersion: v3.0\n")
            with pytest.raises(NoAuthError):
                mallory.set_acls(path, [make_acl("world", "anyone", all=True)])
        with pytest.raises(NoAuthError):
            mallory.create(f"{history}/9999999999", b"{}")
        for folder in ("/dubbo/config/dubbo", "/dubbo/config-history", "/dubbo/config"):
            with pytest.raises((NoAuthError, NotEmptyError)):
                mallory.delete(f"{chroot}{folder}", recursive=True)
            with pytest.raises(NoAuthError):
                mallory.set(f"{chroot}{folder}", b"x")
        # Others still add what they own beside ours: service folders, Dubbo's mapping.
        mallory.create(f"{chroot}/dubbo/other.Service")
        mallory.create(f"{chroot}/dubbo/config/mapping")
    finally:
        mallory.stop()
        mallory.close()

    listed = run_cli(zk_registry, "rules", "get", key)
    assert listed.returncode == 0 and listed.stdout == rule(20880)


@pytest.mark.zookeeper
def test_history_rewrite_attack_is_refused_by_rollback(
    zookeeper: ZooKeeperServer, zk_registry: str, tmp_path: Path
) -> None:
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError

    chroot = "/" + zk_registry.rsplit("/", 1)[1]
    key = "demo.Greeter:1.0.0:.condition-router"
    history = f"{chroot}/dubbo/config-history/{key}"
    # Before access control: pushes without an identity left an open history.
    first = tmp_path / "first.yaml"
    first.write_text(rule(1111))
    assert run_cli(zk_registry, "rules", "push", str(first)).returncode == 0
    mallory = KazooClient(hosts=zookeeper.address)
    mallory.start(20)
    try:
        entry = f"{history}/{mallory.get_children(history)[0]}"
        data, _ = mallory.get(entry)
        hostile = rule(6666)
        forged = data.replace(b"1111", b"6666")
        mallory.set(entry, forged)  # the open history lets anyone rewrite it
        # And an entry claiming to be the admin's, with the admin's ACL copied onto it.
        digest = make_digest_acl("admin", "s3cret", all=True)
        mallory.create(
            f"{history}/0000000005",
            forged.replace(b'"operator"', b'"writer": "admin", "operator"'),
            acl=[digest, make_acl("world", "anyone", read=True)],
        )

        # The operator now works with an identity: the push protects the path and removes
        # the entry forged with the copied ACL; the open one stays, untrusted.
        second = tmp_path / "second.yaml"
        second.write_text(rule(2222))
        pushed = run_cli(zk_registry, "--auth", ADMIN, "rules", "push", str(second))
        assert pushed.returncode == 0, pushed.stderr
        assert not mallory.exists(f"{history}/0000000005")

        for target in ([], ["--to", "0"]):
            refused = run_cli(zk_registry, "--auth", ADMIN, "rules", "rollback", key, *target)
            assert refused.returncode == 1, refused.stdout
            assert "refusing to restore" in refused.stderr and "anyone" in refused.stderr
        stored = run_cli(zk_registry, "rules", "get", key)
        assert stored.stdout == rule(2222) and hostile not in stored.stdout

        # Entries written with the identity carry the rule's ACL: they cannot be rewritten.
        newest = f"{history}/{sorted(mallory.get_children(history))[-1]}"
        with pytest.raises(NoAuthError):
            mallory.set(newest, forged)
        with pytest.raises(NoAuthError):
            mallory.create(f"{history}/0000000099", forged)
    finally:
        mallory.stop()
        mallory.close()

    # A rollback to an entry the admin wrote is allowed.
    third = tmp_path / "third.yaml"
    third.write_text(rule(3333))
    assert run_cli(zk_registry, "--auth", ADMIN, "rules", "push", str(third)).returncode == 0
    back = run_cli(zk_registry, "--auth", ADMIN, "rules", "rollback", key)
    assert back.returncode == 0, back.stderr
    assert run_cli(zk_registry, "rules", "get", key).stdout == rule(2222)
    shown = run_cli(zk_registry, "--json", "rules", "history", key)
    writers = [e["writer"] for e in json.loads(shown.stdout)]
    assert writers[0] is None and writers[-2:] == ["admin", "admin"]


@pytest.mark.zookeeper
def test_acl_secure_protects_rules_pushed_before_access_control(
    zk_registry: str, tmp_path: Path
) -> None:
    key = "demo.Greeter:1.0.0:.condition-router"
    old = tmp_path / "old.yaml"
    old.write_text(rule(4444))
    assert run_cli(zk_registry, "rules", "push", str(old)).returncode == 0
    # Without an identity the command says what it needs.
    bare = run_cli(zk_registry, "acl", "secure")
    assert bare.returncode != 0 and "--auth" in bare.stderr

    secured = run_cli(zk_registry, "--auth", ADMIN, "--json", "acl", "secure")
    assert secured.returncode == 0, secured.stderr
    results = {r["path"]: r["result"] for r in json.loads(secured.stdout)}
    assert results["/dubbo/config/dubbo"] == "secured"
    assert results[f"/dubbo/config/dubbo/{key}"] == "secured"
    assert results[f"/dubbo/config-history/{key}"] == "secured"

    hostile = tmp_path / "hostile.yaml"
    hostile.write_text(rule(5555))
    for attack in (["rules", "delete", key], ["rules", "push", str(hostile)]):
        refused = run_cli(zk_registry, *attack)
        assert refused.returncode == 1 and "not authorised" in refused.stderr, refused.stderr
    again = run_cli(zk_registry, "--auth", ADMIN, "--json", "acl", "secure")
    assert {r["result"] for r in json.loads(again.stdout)} == {"protected"}
    # Another identity cannot take it over.
    other = run_cli(zk_registry, "--auth", "mallory:guess", "acl", "secure")
    assert other.returncode == 1 and "owned by admin" in other.stderr
