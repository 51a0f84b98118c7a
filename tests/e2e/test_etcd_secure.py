"""etcd as a production estate runs it: TLS with client certificates (``--client-cert-auth``)
and etcd's authentication on, users with roles on key ranges (docs/registry.md, "etcd: TLS,
users and roles"). Provider processes, a consumer and the CLI meet through an ``etcds://``
address, each as its user; the applications' role cannot change rules; a wrong password or
certificate is a clear error naming the address; the store renews its token when etcd stops
honouring it. Each test starts its own secured etcd."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.admin.rules.etcd_roles import APPLICATIONS, OPERATORS
from dubbo_py.errors import StoreError
from dubbo_py.registry.store.address import parse_registry_address
from dubbo_py.registry.store.etcd import _api as api
from tests.e2e.conftest import wait_until
from tests.support.certs import Certs, make_certs
from tests.support.etcd import EtcdServer
from tests.support.processes import ROOT, ProviderProcess

pytestmark = [pytest.mark.etcd, pytest.mark.e2e]

APP = ("app", "app-secret")
OPS = ("ops", "ops-secret")
KEY = "demo.Greeter:1.0.0:.condition-router"


def secure_estate(server: EtcdServer) -> None:
    """Authentication on, and the two roles exactly as ``dubbo-py acl etcd-roles`` prints them
    (docs/registry.md): the applications' user may not write rules, the operators' may."""
    server.enable_auth("root-secret")
    printed = cli(f"etcd://{server.address}", None, "acl", "etcd-roles", "--json")
    roles = {APPLICATIONS: APP, OPERATORS: OPS}
    for role, (user, password) in roles.items():
        server.auth("UserAdd", name=user, password=password)
        server.auth("RoleAdd", name=role)
        server.auth("UserGrantRole", user=user, role=role)
    perms = {"read": api.PERM_READ, "readwrite": api.PERM_READWRITE}
    for grant in json.loads(ok(printed)):
        server.auth(
            "RoleGrantPermission",
            name=grant["role"],
            perm=api.Permission(
                permType=perms[grant["permission"]],
                key=grant["key"].encode(),
                range_end=grant["end"].encode(),
            ),
        )


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("etcd-certs"))


@pytest.fixture(scope="module")
def stranger(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """Certificates of another CA: etcd trusts none of them, and they trust not etcd's."""
    return make_certs(tmp_path_factory.mktemp("stranger-certs"))


@pytest.fixture
def secured(certs: Certs) -> Iterator[EtcdServer]:
    with EtcdServer(certs=certs) as server:
        secure_estate(server)
        yield server


def cli(
    registry: str, auth: tuple[str, str] | None, *args: str, timeout: str = "10"
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DUBBO_PY_REGISTRY_AUTH"}
    if auth is not None:
        env["DUBBO_PY_REGISTRY_AUTH"] = ":".join(auth)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "dubbo_py.admin",
            "--registry",
            registry,
            "--timeout",
            timeout,
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def rule(port: int) -> str:
    return (
        "configVersion: v3.0\nscope: service\nkey: demo.Greeter:1.0.0\nforce: true\n"
        f"conditions:\n  - '=> port = {port}'\n"
    )


def test_providers_consumers_rules_and_the_cli_work_over_tls_as_etcd_users(
    secured: EtcdServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = secured.url
    assert url.startswith("etcds://")
    monkeypatch.setenv("DUBBO_PY_REGISTRY_AUTH", ":".join(APP))  # the providers' identity
    p1, p2 = ProviderProcess(url).start(), ProviderProcess(url).start()
    try:
        with dubbo_py.Application(
            "shop", url, auth=":".join(APP), cache_path=tmp_path / "c.json"
        ) as app:
            ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0")
            wait_until(lambda: len(ref.directory.providers) == 2, 20, "both providers")
            request = greeter_pb2.HelloRequest(name="tls")

            def answered() -> set[str]:
                return {ref.stub.SayHello(request).provider for _ in range(10)}

            wait_until(lambda: answered() == {p1.address, p2.address}, 10, "both answering")

            assert "demo.Greeter" in ok(cli(url, OPS, "services"))
            providers = ok(cli(url, OPS, "providers", "demo.Greeter"))
            assert p1.address in providers and p2.address in providers
            consumers = json.loads(ok(cli(url, OPS, "--json", "consumers", "demo.Greeter")))
            assert any("shop" in json.dumps(row) for row in consumers), consumers

            rule_file = tmp_path / "only-p1.yaml"
            rule_file.write_text(rule(p1.port))
            ok(cli(url, OPS, "rules", "push", str(rule_file)))
            wait_until(lambda: answered() == {p1.address}, 10, "the operator's rule to apply")
            # The applications' user may not replace it: refused, and the rule stays in force.
            hostile = tmp_path / "only-p2.yaml"
            hostile.write_text(rule(p2.port))
            denied = cli(url, APP, "rules", "push", str(hostile))
            assert denied.returncode == 1 and "not authorised to write" in denied.stderr
            assert answered() == {p1.address}
            assert KEY in ok(cli(url, OPS, "rules", "list"))
            assert "push" in ok(cli(url, OPS, "rules", "history", KEY))

            ok(cli(url, OPS, "rules", "delete", KEY))
            wait_until(lambda: answered() == {p1.address, p2.address}, 10, "the rule gone")

        # The same consumer from dubbo.yaml: the etcds:// address with its TLS files, and the
        # etcd user as the registry's auth.
        config = tmp_path / "dubbo.yaml"
        config.write_text(
            f"application: shop\nregistry:\n  address: '{url}'\n  auth: '{':'.join(APP)}'\n"
        )
        with dubbo_py.Application.from_config(config, environ={}) as app:
            stub = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0")
            assert stub.SayHello(greeter_pb2.HelloRequest(name="yaml")).provider in {
                p1.address,
                p2.address,
            }
    finally:
        p1.kill()
        p2.kill()


def test_the_applications_role_may_not_change_rules(secured: EtcdServer, tmp_path: Path) -> None:
    url = secured.url
    rule_file = tmp_path / "rule.yaml"
    rule_file.write_text(rule(1234))
    denied = cli(url, APP, "rules", "push", str(rule_file))
    assert denied.returncode != 0
    assert "not authorised to write" in denied.stderr, denied.stderr
    assert f"etcds://{secured.address}" in denied.stderr
    assert "user 'app'" in denied.stderr
    # The operators' role may; the applications' may read what it pushed.
    ok(cli(url, OPS, "rules", "push", str(rule_file)))
    assert KEY in ok(cli(url, APP, "rules", "list"))
    assert cli(url, APP, "rules", "delete", KEY).returncode != 0
    rule_file.write_text(rule(4321))
    ok(cli(url, OPS, "rules", "push", str(rule_file)))
    rollback = cli(url, APP, "rules", "rollback", KEY)  # history is the operators' too
    assert rollback.returncode == 1 and "not authorised" in rollback.stderr, rollback.stderr
    assert "port = 4321" in ok(cli(url, OPS, "rules", "get", KEY))
    assert len(json.loads(ok(cli(url, OPS, "--json", "rules", "history", KEY)))) == 2
    # acl secure is ZooKeeper's: on etcd it says where its access control is.
    refused = cli(url, OPS, "acl", "secure")
    assert refused.returncode == 1 and "acl etcd-roles" in refused.stderr, refused.stderr


def test_a_wrong_password_is_a_clear_error_naming_the_address(
    secured: EtcdServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = secured.url
    result = cli(url, ("ops", "wrong"), "services")
    assert result.returncode != 0
    assert f"etcds://{secured.address}: etcd refused user 'ops'" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    with (
        dubbo_py.Application("shop", url, auth="app:wrong", cache_path=tmp_path / "c") as app,
        pytest.raises(StoreError, match=f"etcds://{secured.address}: etcd refused user"),
    ):
        app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0")
    # A provider process: it stops at start, saying the same.
    monkeypatch.setenv("DUBBO_PY_REGISTRY_AUTH", "app:wrong")
    with pytest.raises(RuntimeError, match=f"etcds://{secured.address}: etcd refused user 'app'"):
        ProviderProcess(url).start()
    # Without a user at all, etcd names the client certificate's CN ("client"), unknown to it.
    anonymous = cli(url, None, "services")
    assert anonymous.returncode != 0
    assert f"etcds://{secured.address}" in anonymous.stderr, anonymous.stderr


def test_a_wrong_certificate_is_a_clear_error_naming_the_address(
    secured: EtcdServer, certs: Certs, stranger: Certs
) -> None:
    where = f"etcds://{secured.address}"
    # Our client certificate from a CA etcd does not trust.
    foreign_client = f"{where}?ca={certs.ca}&cert={stranger.client_cert}&key={stranger.client_key}"
    result = cli(foreign_client, OPS, "services")
    assert result.returncode != 0
    assert f"{where}: TLS handshake failed" in result.stderr, result.stderr
    assert "refused this client's certificate" in result.stderr
    # etcd's certificate checked against a CA that did not sign it.
    foreign_ca = f"{where}?ca={stranger.ca}&cert={certs.client_cert}&key={certs.client_key}"
    result = cli(foreign_ca, OPS, "services")
    assert result.returncode != 0
    assert f"{where}: TLS handshake failed" in result.stderr, result.stderr
    assert "CERTIFICATE_VERIFY_FAILED" in result.stderr
    # Plain text sent to an etcd that speaks TLS: unreachable, with the hint.
    plain = cli(f"etcd://{secured.address}", OPS, "services", timeout="2")
    assert plain.returncode == 1
    assert f"registry etcd://{secured.address} unreachable" in plain.stderr, plain.stderr
    assert "use etcds://" in plain.stderr
    # A key file that is not there is named before anything is sent.
    missing = cli(
        f"{where}?ca={certs.ca}&cert={certs.client_cert}&key=/nonexistent.key", OPS, "services"
    )
    assert missing.returncode != 0
    assert "cannot read the key= file /nonexistent.key" in missing.stderr, missing.stderr


def test_the_store_renews_its_token_when_it_expires_and_when_etcd_invalidates_it(
    certs: Certs,
) -> None:
    with EtcdServer(certs=certs, auth_token_ttl=1) as server:
        secure_estate(server)
        store = parse_registry_address(server.url).new_store(auth=APP)
        try:
            assert store.start(20)
            seen: list[list[str]] = []
            store.watch_children("/dubbo/demo.Greeter/providers", seen.append)
            store.create("/dubbo/demo.Greeter/providers/a", b"", ephemeral=True)
            wait_until(lambda: seen[-1:] == [["a"]], 10, "the first child")
            first = store._token  # type: ignore[attr-defined]

            time.sleep(2.5)  # idle longer than --auth-token-ttl: etcd forgets the token
            store.create("/dubbo/demo.Greeter/providers/b", b"", ephemeral=True)
            wait_until(lambda: seen[-1:] == [["a", "b"]], 10, "a write after the expiry")
            second = store._token  # type: ignore[attr-defined]
            assert second and second != first

            # A password set (here: to the same one) invalidates every token of the user.
            server.auth("UserChangePassword", name=APP[0], password=APP[1])
            late: list[tuple[bytes | None, int]] = []
            store.watch_data("/dubbo/demo.Greeter/configurators", lambda d, v: late.append((d, v)))
            store.create("/dubbo/demo.Greeter/configurators", b"c")
            wait_until(lambda: late[-1:] == [(b"c", 0)], 10, "a watch made after the change")
            store.create("/dubbo/demo.Greeter/providers/c", b"", ephemeral=True)
            wait_until(lambda: seen[-1:] == [["a", "b", "c"]], 10, "the old watch still")
            assert store._token not in (first, second)  # type: ignore[attr-defined]
        finally:
            store.close()
