"""Which providers ``dubbo-py call`` takes for a service (tri:// by reflection, dubbo:// by a
generic call) and ``--list`` read from a stored service definition, on the in-memory registry
(the live tests against Dubbo 3.3.6 are tests/estate/test_java_call_cli.py)."""

from __future__ import annotations

import json

from dubbo_py.admin.java_call import CallPath, call_path
from dubbo_py.registry.service_definition import provider_definition_path
from tests.support.cli_fixtures import Cli, run  # noqa: F401 (the fixture)

JAVA = (
    "dubbo://10.0.0.7:20880/demo.Greeter?application=java-shop&interface=demo.Greeter"
    "&methods=SayHello,SayHelloStream&version=1.0.0"
)
TRI = "tri://127.0.0.1:50051/demo.Greeter?application=greeter&methods=SayHello&version=1.0.0"
DEFINITION = {
    "canonicalName": "demo.Greeter",
    "methods": [
        {"name": "SayHello", "parameterTypes": ["demo.HelloRequest"], "returnType": "X"},
    ],
    "types": [{"type": "demo.HelloRequest", "properties": {"name": "java.lang.String"}}],
}


def store_definition(run: Cli) -> None:  # noqa: F811
    path = provider_definition_path("demo.Greeter", "1.0.0", "", "java-shop")
    assert run.registry.store is not None
    run.registry.store.create(path, json.dumps(DEFINITION).encode(), makepath=True)


def test_a_dubbo_only_service_is_listed_from_its_stored_definition(run: Cli) -> None:  # noqa: F811
    run.register(JAVA)
    store_definition(run)
    listed = run.json("call", "demo.Greeter", "--list", "--version", "1.0.0")
    assert listed["protocol"] == "dubbo"
    assert listed["source"] == "/dubbo/metadata/demo.Greeter/1.0.0/provider/java-shop"
    assert [m["signature"] for m in listed["methods"]] == ["X SayHello(demo.HelloRequest)"]
    assert listed["types"] == {"demo.HelloRequest": {"name": "java.lang.String"}}


def test_without_a_definition_the_url_names_the_methods_and_says_types_are_unknown(
    run: Cli,  # noqa: F811
) -> None:
    run.register(JAVA)
    listed = run.json("call", "demo.Greeter", "--list", "--version", "1.0.0")
    assert [m["name"] for m in listed["methods"]] == ["SayHello", "SayHelloStream"]
    assert all(m["parameter_types"] is None for m in listed["methods"])
    assert (
        "/dubbo/metadata/demo.Greeter/1.0.0/provider/java-shop (none)"
        in (listed["signatures_missing"])
    )


def test_tri_providers_win_unless_dubbo_is_asked_for(run: Cli) -> None:  # noqa: F811
    run.register(JAVA, TRI)
    store_definition(run)
    # tri:// chosen (the call would ask its reflection; no process listens here to answer).
    assert call_path(run.registry, "demo.Greeter", "1.0.0", "") == CallPath(False)
    # No provider of the version at all: tri, whose lookup explains what the registry has.
    assert call_path(run.registry, "demo.Greeter", "9.9.9", "") == CallPath(False)
    asked = run.json("call", "demo.Greeter", "--list", "--version", "1.0.0", "--protocol", "dubbo")
    assert asked["protocol"] == "dubbo" and asked["providers"] == ["10.0.0.7:20880"]
    # Another version has no dubbo:// provider: said, naming the version and group.
    none = run("call", "demo.Greeter", "--list", "--version", "2.0.0", "--protocol", "dubbo")
    assert none.exit_code == 1
    assert "no usable dubbo:// provider of demo.Greeter with version 2.0.0, group -" in none.stderr


NO_IDL = (
    "tri://127.0.0.1:50052/demo.Greeter?application=java-shop&interface=demo.Greeter"
    "&methods=SayHello&version=1.0.0&serialization=hessian2"
)


def test_a_tri_provider_naming_a_java_serialization_is_called_generically(
    run: Cli,  # noqa: F811
) -> None:
    # Triple without IDL: the URL names hessian2 (a plain interface's wrapper serialization).
    run.register(NO_IDL)
    store_definition(run)
    assert call_path(run.registry, "demo.Greeter", "1.0.0", "") == CallPath(True)
    assert call_path(run.registry, "demo.Greeter", "1.0.0", "", "tri") == CallPath(True, "tri")
    listed = run.json("call", "demo.Greeter", "--list", "--version", "1.0.0")
    assert listed["protocol"] == "tri" and listed["providers"] == ["127.0.0.1:50052"]
    assert [m["signature"] for m in listed["methods"]] == ["X SayHello(demo.HelloRequest)"]
    shown = run("call", "demo.Greeter", "--list", "--version", "1.0.0")
    assert "demo.Greeter (tri:// (no IDL)): signatures from" in shown.stdout


def test_protobuf_or_no_serialization_stays_grpc_unless_no_idl_is_said(
    run: Cli,  # noqa: F811
) -> None:
    protobuf = TRI.replace("50051", "50053") + "&serialization=protobuf"
    run.register(TRI, protobuf)
    store_definition(run)
    assert call_path(run.registry, "demo.Greeter", "1.0.0", "") == CallPath(False)
    assert call_path(run.registry, "demo.Greeter", "1.0.0", "", "tri") == CallPath(False, "tri")
    forced = call_path(run.registry, "demo.Greeter", "1.0.0", "", "tri", no_idl=True)
    assert forced == CallPath(True, "tri", True)
    listed = run.json("call", "demo.Greeter", "--list", "--version", "1.0.0", "--no-idl")
    assert listed["protocol"] == "tri"
    assert sorted(listed["providers"]) == ["127.0.0.1:50051", "127.0.0.1:50053"]
