"""The address a provider registers and listens on, and the one a consumer registers."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.config.loader import parse_config
from dubbo_py.registry.local_host import (
    LOOPBACK,
    consumer_host,
    default_host,
    provider_hosts,
    route_address,
)
from dubbo_py.registry.store.address import parse_registry_address

LOCAL_ZK = parse_registry_address("zookeeper://127.0.0.1:2181")
EMBEDDED = parse_registry_address("sqlite:///tmp/registry.db")
#: TEST-NET-1: routable on paper, never contacted (finding a route sends no packet).
REMOTE_ZK = parse_registry_address("zookeeper://192.0.2.10:2181")


def test_unconfigured_a_loopback_zookeeper_or_the_embedded_registry_gives_loopback() -> None:
    assert provider_hosts(LOCAL_ZK, environ={}).register == LOOPBACK
    assert provider_hosts(EMBEDDED, environ={}).register == LOOPBACK
    assert consumer_host(LOCAL_ZK, environ={}) == LOOPBACK


def test_a_remote_zookeeper_gives_the_local_address_of_the_route_to_it() -> None:
    routed = route_address(REMOTE_ZK.hosts)
    # Where the machine has a route, that is what peers on ZooKeeper's network reach us at;
    # without one, loopback (with a warning).
    expected = routed if routed is not None else LOOPBACK
    assert default_host(REMOTE_ZK) == expected
    listen = provider_hosts(REMOTE_ZK, environ={})
    assert (listen.register, listen.bind) == (expected, expected)
    assert consumer_host(REMOTE_ZK, environ={}) == expected
    assert route_address(["no-such-host.invalid:2181"]) is None


def test_the_environment_names_the_address_as_in_dubbo() -> None:
    env = {"DUBBO_IP_TO_REGISTRY": "10.1.1.1", "DUBBO_PY_HOST": "10.2.2.2"}
    listen = provider_hosts(LOCAL_ZK, configured_host="10.3.3.3", environ=env)
    # Dubbo's variable first, dubbo-py's next, the file after; bound where registered.
    assert (listen.register, listen.bind) == ("10.1.1.1", "10.1.1.1")
    assert provider_hosts(LOCAL_ZK, environ={"DUBBO_PY_HOST": "10.2.2.2"}).register == "10.2.2.2"
    assert provider_hosts(LOCAL_ZK, configured_host="10.3.3.3", environ={}).register == "10.3.3.3"
    # Code names it explicitly: that wins.
    assert provider_hosts(LOCAL_ZK, host="10.4.4.4", environ=env).register == "10.4.4.4"
    assert consumer_host(LOCAL_ZK, environ=env) == "10.1.1.1"


def test_the_bind_address_defaults_to_the_registered_one_unless_told_otherwise() -> None:
    anywhere = provider_hosts(LOCAL_ZK, environ={"DUBBO_IP_TO_BIND": "0.0.0.0"})
    assert (anywhere.register, anywhere.bind) == (LOOPBACK, "0.0.0.0")
    # A concrete bind address is registered when nothing else is named (Dubbo's rule).
    concrete = provider_hosts(LOCAL_ZK, environ={"DUBBO_IP_TO_BIND": "127.0.0.2"})
    assert (concrete.register, concrete.bind) == ("127.0.0.2", "127.0.0.2")
    code = provider_hosts(LOCAL_ZK, bind_host="127.0.0.5", environ={"DUBBO_IP_TO_BIND": "0.0.0.0"})
    assert code.bind == "127.0.0.5"
    filed = provider_hosts(LOCAL_ZK, configured_bind="0.0.0.0", environ={})
    assert (filed.register, filed.bind) == (LOOPBACK, "0.0.0.0")


@pytest.mark.parametrize("value", ["0.0.0.0", "::", "  "])
def test_an_address_nobody_can_connect_to_is_refused_naming_where_it_came_from(value: str) -> None:
    with pytest.raises(ValueError, match="DUBBO_IP_TO_REGISTRY"):
        provider_hosts(LOCAL_ZK, environ={"DUBBO_IP_TO_REGISTRY": value.strip() or "0.0.0.0"})
    with pytest.raises(ValueError, match="host="):
        provider_hosts(LOCAL_ZK, host="0.0.0.0", environ={})


def test_the_configuration_file_reads_dubbos_variables() -> None:
    env = {"DUBBO_IP_TO_REGISTRY": "10.1.1.1", "DUBBO_IP_TO_BIND": "0.0.0.0"}
    config = parse_config("application: shop\nprotocol: {host: 10.9.9.9}\n", environ=env)
    assert (config.protocol.host, config.protocol.bind_host) == ("10.1.1.1", "0.0.0.0")


@dubbo_py.service(version="1.0.0")
class Greeter(greeter_pb2_grpc.GreeterServicer):
    def SayHello(self, request: greeter_pb2.HelloRequest, context: object) -> object:
        return greeter_pb2.HelloReply(message="hi")


def test_a_provider_registers_one_address_and_listens_on_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DUBBO_IP_TO_REGISTRY", "127.0.0.3")
    monkeypatch.setenv("DUBBO_IP_TO_BIND", "127.0.0.1")
    with dubbo_py.Application("greeter", f"sqlite://{tmp_path}/r.db") as app:
        server = app.start(Greeter())
        assert server.host == "127.0.0.3"
        assert app.registry is not None
        (registered,) = app.registry.lookup("demo.Greeter")
        assert (registered.host, registered.port) == ("127.0.0.3", server.port)
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            reply = greeter_pb2_grpc.GreeterStub(channel).SayHello(
                greeter_pb2.HelloRequest(name="a"), timeout=5
            )
        assert reply.message == "hi"
