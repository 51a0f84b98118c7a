"""Access control on ZooKeeper: rules pushed by an authenticated operator can be changed only by
that identity; an unauthenticated push is refused with a clear message while consumers keep
routing by the rule in force."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from demo import greeter_pb2, greeter_pb2_grpc

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
    from dubbo_py.registry.store import StoreError
    from examples.quickstart.provider import make_greeter

    with dubbo_py.Application("greeter", zk_registry, auth="provider:pw") as owner:
        owner.start(make_greeter("1.0.0", None, None))
        with dubbo_py.Application("rogue", zk_registry) as rogue:
            with pytest.raises(StoreError, match="not authorised"):
                rogue.start(make_greeter("1.0.0", None, None))
            assert rogue.registry is not None
            assert len(rogue.registry.lookup("demo.Greeter")) == 1  # everyone may read
