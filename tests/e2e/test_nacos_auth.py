"""dubbo-py on a real Nacos server with its auth plugin on (issue 44, the auth items).

One auth-on server for the module (tests/support/nacos.py, ``NacosServer(auth=True)``:
``nacos.core.auth.enabled`` and ``nacos.core.auth.admin.enabled``, the administrator ``nacos``
given a password at start). It shows:

* an identity written either way Dubbo writes it (``user:password@`` or
  ``?username=&password=``) registers, discovers and publishes config;
* a wrong password stops the store at start with one error naming the address and the user,
  never the password (the store, an application, the CLI and ``registry status``);
* the advice of ``dubbo-py acl nacos-auth`` applied as printed (its ``curl`` lines run against
  the server's auth API, for users made there first): the applications' identity registers,
  discovers and reads rules but cannot write one; the operators' identity pushes, lists and
  keeps the history of rules with ``dubbo-py rules push``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import grpc
import pytest
from click.testing import CliRunner, Result
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.admin.cli import cli
from dubbo_py.app.registries import parse_auth
from dubbo_py.errors import StoreError
from dubbo_py.registry.store.address import parse_registry_address
from dubbo_py.registry.store.nacos.store import NacosStore
from tests.e2e.conftest import wait_until
from tests.support.nacos import NacosServer, NacosUnavailable

pytestmark = pytest.mark.nacos

VERSION = "1.0.0"
APP_USER, APP_PASSWORD = "dubbo-app", "app-Pw-1"
OPS_USER, OPS_PASSWORD = "dubbo-ops", "ops-Pw-2"
WRONG = "not-the-Pw-9"


@pytest.fixture(scope="module")
def secured() -> Iterator[NacosServer]:
    """The module's Nacos with auth on, and the advice of ``acl nacos-auth`` applied."""
    server = NacosServer(auth=True)
    try:
        server.start()
    except NacosUnavailable as exc:
        pytest.fail(f"no auth-on Nacos server: {exc}")
    try:
        for user, password in ((APP_USER, APP_PASSWORD), (OPS_USER, OPS_PASSWORD)):
            server.auth_api("POST", "user", username=user, password=password)
        apply_advice(server)
        yield server
    finally:
        server.close()


def apply_advice(server: NacosServer) -> None:
    """Run the ``curl`` lines ``dubbo-py acl nacos-auth`` prints, as an operator would, with
    the administrator's token; each must be accepted (Nacos answers code 0)."""
    printed = CliRunner().invoke(
        cli, ["acl", "nacos-auth", "--registry", f"nacos://{server.address}"]
    )
    assert printed.exit_code == 0, printed.output
    lines = printed.stdout.strip().splitlines()
    assert lines and all(line.startswith("curl ") for line in lines), printed.stdout
    env = {
        **os.environ,
        "NACOS_TOKEN": server.login(server.ADMIN_USER, server.admin_password),
        "APP_USER": APP_USER,
        "OPERATOR_USER": OPS_USER,
    }
    for line in lines:
        # -s: no progress bar; the answer is Nacos's JSON result.
        done = subprocess.run(
            ["bash", "-c", line.replace("curl ", "curl -s ", 1)],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert done.returncode == 0 and '"code":0' in done.stdout, (line, done.stdout, done.stderr)
    granted = server.auth_api("GET", "permission/list", pageNo="1", pageSize="100")
    assert granted["data"]["totalCount"] == len(lines) - 2  # two lines give the roles


def opened(text: str, tmp_path: Path) -> NacosStore:
    """An unstarted store on the address ``text`` with the identity it carries."""
    address = parse_registry_address(text)
    auth = parse_auth(str(address.settings()["auth"]))
    store = NacosStore.from_address(address, auth=auth)
    store._given_dir = tmp_path / f"client-{uuid.uuid4().hex[:6]}"
    return store


def greeter_provider(stack: ExitStack, registry: str, app: str, group: str, tmp: Path) -> None:
    """A provider application serving Greeter in ``group`` (replies name ``app``)."""
    application = stack.enter_context(
        dubbo_py.Application(
            app, registry, cache_path=tmp / f"{app}.json", register_mode="interface"
        )
    )

    @dubbo_py.service(version=VERSION, group=group)
    class Greeter(greeter_pb2_grpc.GreeterServicer):
        def SayHello(self, request: Any, context: Any) -> Any:
            return greeter_pb2.HelloReply(message=app, provider=app)

    application.start(Greeter(), port=0, bind_host="127.0.0.1")


def greeter_consumer(stack: ExitStack, registry: str, app: str, group: str, tmp: Path) -> Any:
    application = stack.enter_context(
        dubbo_py.Application(
            app, registry, cache_path=tmp / f"{app}.json", migration_step="FORCE_INTERFACE"
        )
    )
    return application.reference(
        greeter_pb2_grpc.GreeterStub, version=VERSION, group=group, timeout=5.0
    )


def answer(greeter: Any) -> str:
    try:
        return str(greeter.SayHello(greeter_pb2.HelloRequest(name="n")).message)
    except grpc.RpcError as failed:
        return f"error {failed.code()} {failed.details()}"


def cli_on(registry: str, command: str) -> Result:
    return CliRunner().invoke(cli, [*shlex.split(command), "--registry", registry])


@pytest.mark.parametrize("spelling", ["user:password@", "username=&password="])
def test_the_right_identity_either_way_registers_discovers_and_publishes(
    secured: NacosServer, tmp_path: Path, spelling: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    user, password = secured.ADMIN_USER, secured.admin_password
    registry = (
        f"nacos://{user}:{password}@{secured.address}"
        if spelling == "user:password@"
        else f"nacos://{secured.address}?username={user}&password={password}"
    )
    tag = uuid.uuid4().hex[:8]
    with ExitStack() as stack:
        greeter_provider(stack, registry, f"greeter-{tag}", f"g-{tag}", tmp_path)
        greeter = greeter_consumer(stack, registry, f"shop-{tag}", f"g-{tag}", tmp_path)
        wait_until(lambda: answer(greeter) == f"greeter-{tag}", 15, "a call through auth-on Nacos")
        store = stack.enter_context(contextlib.closing(opened(registry, tmp_path)))
        assert store.start(20)
        key = f"/dubbo/config/dubbo/demo.Greeter-{tag}.condition-router"
        store.create(key, b"scope: service\nforce: false\nconditions: []\n")
        assert store.get(key)[0].startswith(b"scope: service")
        assert password not in str(store)
    assert caplog.records and password not in caplog.text


def test_a_wrong_password_stops_the_store_at_start_naming_the_address_not_the_password(
    secured: NacosServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    registry = f"nacos://{secured.address}?username={APP_USER}&password={WRONG}"
    store = opened(registry, tmp_path)
    with pytest.raises(StoreError) as refused:
        store.start(20)
    message = str(refused.value)
    assert f"nacos://{secured.address}" in message and repr(APP_USER) in message, message
    assert "refused the login" in message and WRONG not in message
    store.close()
    # An application stops with the same error (it does not keep trying, nor hang).
    application = dubbo_py.Application("wrong-pw", registry, cache_path=tmp_path / "c.json")
    with pytest.raises(StoreError) as app_refused, application:
        application.start(port=0, bind_host="127.0.0.1")
    assert "refused the login" in str(app_refused.value)
    assert WRONG not in str(app_refused.value)
    # The CLI: one error line, and registry status says it; neither shows the password.
    for command in ("services", "registry status"):
        result = cli_on(registry, command)
        assert result.exit_code != 0, (command, result.output)
        assert "refused the login" in result.output and WRONG not in result.output, result.output
    assert WRONG not in caplog.text


def test_the_advice_keeps_applications_off_the_rules_and_lets_operators_push(
    secured: NacosServer, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    apps = f"nacos://{secured.address}?username={APP_USER}&password={APP_PASSWORD}"
    ops = f"nacos://{OPS_USER}:{OPS_PASSWORD}@{secured.address}"
    service, group = "demo.Greeter", f"g-{tag}"
    key = f"{service}:{VERSION}:{group}.condition-router"
    with ExitStack() as stack:
        # Applications register and discover with their role.
        greeter_provider(stack, apps, f"greeter-{tag}", group, tmp_path)
        greeter = greeter_consumer(stack, apps, f"shop-{tag}", group, tmp_path)
        wait_until(lambda: answer(greeter) == f"greeter-{tag}", 15, "a call as the applications")
        # ... but cannot write a rule: Nacos refuses the publish.
        app_store = stack.enter_context(contextlib.closing(opened(apps, tmp_path)))
        assert app_store.start(20)
        with pytest.raises(StoreError) as denied:
            app_store.create(f"/dubbo/config/dubbo/{key}", b"scope: service\nconditions: []\n")
        assert "authorization failed" in str(denied.value) and APP_PASSWORD not in str(denied.value)
        rule = tmp_path / "rule.yaml"
        rule.write_text(
            f"configVersion: v3.0\nscope: service\nkey: {service}:{VERSION}:{group}\n"
            "force: true\nconditions:\n  - => host = 10.0.0.1\n"
        )
        pushed_as_app = cli_on(apps, f"rules push {rule}")
        assert pushed_as_app.exit_code != 0, pushed_as_app.output
        assert "authorization failed" in pushed_as_app.output, pushed_as_app.output
        assert APP_PASSWORD not in pushed_as_app.output
        # The operators push it with the CLI, list it and keep its history.
        pushed = cli_on(ops, f"rules push {rule}")
        assert pushed.exit_code == 0, pushed.output
        assert OPS_PASSWORD not in pushed.output
        listed = cli_on(ops, "rules list")
        assert listed.exit_code == 0 and key in listed.output, listed.output
        status = cli_on(ops, "registry status")
        assert status.exit_code == 0 and OPS_PASSWORD not in status.output, status.output
        assert f"nacos://{secured.address}" in status.output, status.output
        history = cli_on(ops, f"rules history {key}")
        assert history.exit_code == 0 and "push" in history.output, history.output
        # The applications read it: the consumer obeys it (force: no provider is 10.0.0.1).
        assert app_store.get(f"/dubbo/config/dubbo/{key}")[0] == rule.read_bytes()
        wait_until(lambda: answer(greeter).startswith("error"), 15, "the rule obeyed")


def test_an_identity_nacos_does_not_know_on_a_server_with_auth_off_is_warned_and_unused(
    nacos: NacosServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Dubbo's Nacos client connects to an auth-off server whatever its login gave; so does the
    # store, saying so (an estate may give every environment the same identity).
    namespace = f"auth-off-{uuid.uuid4().hex[:8]}"
    store = opened(
        f"nacos://{nacos.address}?namespace={namespace}&username=nobody&password={WRONG}",
        tmp_path,
    )
    with contextlib.closing(store):
        assert store.start(20)
        assert "its auth is off: connecting without an identity" in caplog.text
        store.create("/dubbo/config/dubbo/k.condition-router", b"scope: service\n")
        assert store.children("/dubbo/config/dubbo") == ["k.condition-router"]
    assert WRONG not in caplog.text
