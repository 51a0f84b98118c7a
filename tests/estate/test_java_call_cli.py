"""``dubbo-py call`` on a Java-interface service: a live Apache Dubbo 3.3.6 provider of
estate.UserService over ``dubbo://`` (tests/peers/java/estate, ``estate.DubboProvider``), found
through a real ZooKeeper, the CLI run as a separate process as operators run it.

The signatures come from the service definition the Java provider stored in the metadata
report (ZooKeeper, the registry, as Dubbo does by default); the provider is the oracle for what
our JSON arguments became in Java.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient

from dubbo_py.registry.service_definition import provider_definition_path
from tests.support.java_estate import JavaDubboProvider
from tests.support.processes import ROOT
from tests.support.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.zookeeper

SERVICE = "estate.UserService"
#: Runs ``dubbo-py call estate.UserService ARGS... --version 1.0.0 --group <the module's>``.
Call = Callable[..., subprocess.CompletedProcess[str]]
APPLICATION = "java-estate-call-cli"


@pytest.fixture(scope="module")
def provider(estate_registry: str, estate_group: str) -> Iterator[JavaDubboProvider]:
    with JavaDubboProvider(
        "--registry",
        estate_registry,
        "--application",
        APPLICATION,
        "--name",
        "u1",
        "--version",
        "1.0.0",
        "--group",
        estate_group,
    ) as started:
        yield started


def dubbo_py(
    registry: str, group: str, *args: str, json_out: bool = False
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "dubbo_py.admin", "--registry", registry, "--timeout", "20"]
    command += ["call", SERVICE, *args, "--version", "1.0.0", "--group", group]
    return subprocess.run(
        command + (["--json"] if json_out else []),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


@pytest.fixture
def call(estate_registry: str, estate_group: str, provider: JavaDubboProvider) -> Iterator[Call]:
    def run(*args: str, json_out: bool = False) -> subprocess.CompletedProcess[str]:
        return dubbo_py(estate_registry, estate_group, *args, json_out=json_out)

    yield run


def test_list_prints_the_signatures_from_the_metadata_report(call: Call, estate_group: str) -> None:
    shown = call("--list")
    assert shown.returncode == 0, shown.stderr
    path = provider_definition_path(SERVICE, "1.0.0", estate_group, APPLICATION)
    assert f"signatures from {path}" in shown.stdout
    rows = {line.split("│")[0].strip(): line for line in shown.stdout.splitlines() if "│" in line}
    assert "java.lang.Long" in rows["getUser"] and "estate.User" in rows["getUser"]
    assert "java.util.List<java.lang.Object>" in rows["describe"]
    assert "balance: java.math.BigDecimal" in rows["estate.User"]

    listed = json.loads(call("--list", json_out=True).stdout)
    signatures = {m["signature"] for m in listed["methods"]}
    assert signatures == {
        "estate.User getUser(java.lang.Long)",
        "estate.User save(estate.User)",
        "java.util.Map<java.lang.String,java.lang.Object> describe(java.util.List<java.lang.Object>"
        ", java.util.Map<java.lang.String,java.lang.Object>, java.util.Date, java.math.BigDecimal)",
        "java.lang.String nothing()",
        "long sum(int[])",
        # Overloads: both forms of kind are listed apart.
        "java.lang.String kind(java.lang.String)",
        "java.lang.String kind(long)",
        "java.lang.String attachment(java.lang.String)",
        "int sleep(int)",
    }
    assert listed["types"]["estate.User"]["created"] == "java.util.Date"


def test_a_call_prints_the_java_result_as_json_in_the_stated_forms(
    call: Call, provider: JavaDubboProvider
) -> None:
    done = call("getUser", "[7]")
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout[: done.stdout.rindex("}") + 1])
    assert reply == {
        "class": "estate.User",
        "id": 7,
        "name": "user-7@u1",
        "balance": "12.50",  # BigDecimal: a JSON string, every digit kept
        "created": "2023-11-14T22:13:20.123Z",  # Date: ISO 8601, UTC, milliseconds
        "tags": ["a", "b"],
    }
    assert "method: estate.User getUser(java.lang.Long)" in done.stdout
    # The provider that answered is named, with its protocol.
    assert f"provider: {provider.address} (dubbo://)" in done.stdout
    as_json = json.loads(call("getUser", "[7]", json_out=True).stdout)
    assert as_json["protocol"] == "dubbo"
    assert as_json["provider"] == provider.address
    assert as_json["attempts"] == [provider.address]


def test_json_arguments_become_the_parameter_types_java_declares(call: Call) -> None:
    # No "class" key, a decimal with a trailing zero and an ISO date: the service definition
    # says save takes an estate.User whose balance is a BigDecimal and created a Date.
    sent = '[{"id": 9, "name": "zoë", "balance": 12.10, "created": "2024-02-29T12:30:01.5Z"}]'
    saved = json.loads(call("save", sent, json_out=True).stdout)
    assert saved["signature"] == "estate.User save(estate.User)"
    assert saved["types"] == ["estate.User"]
    assert saved["reply"] == {
        "class": "estate.User",
        "id": 9,
        "name": "ZOË",
        "balance": "12.10",
        "created": "2024-02-29T12:30:01.500Z",
        "tags": None,
    }
    # What Java saw: describe reports the classes and values its parameters arrived as.
    described = call(
        "describe",
        '[[1, "two", 3.5, null], {"k": [1]}, "2001-09-09T01:46:40.25Z", "41.125"]',
        json_out=True,
    )
    out = json.loads(described.stdout)["reply"]
    assert out["itemTypes"] == ["java.lang.Integer", "java.lang.String", "java.lang.Double", "null"]
    assert out["whenMillis"] == 1_000_000_000_250
    assert out["amountPlusOne"] == "42.125"
    summed = json.loads(call("sum", "[[1, 2, 2147483647]]", json_out=True).stdout)
    assert summed["reply"] == 2**31 + 2


def test_a_java_exception_prints_its_class_message_and_cause_and_exits_1(call: Call) -> None:
    failed = call("getUser", "[0]")
    assert failed.returncode == 1
    assert (
        "estate.UserService#getUser threw java.lang.IllegalArgumentException: no user 0 at u1; "
        "caused by java.lang.IllegalStateException: ids start at 1" in failed.stderr
    )
    as_json = call("getUser", "[0]", json_out=True)
    assert as_json.returncode == 1
    payload = json.loads(as_json.stdout)
    assert payload["reason"] == "java-exception"
    assert payload["exception"] == {
        "class": "java.lang.IllegalArgumentException",
        "message": "no user 0 at u1",
        "cause": {"class": "java.lang.IllegalStateException", "message": "ids start at 1"},
    }


def test_bad_arguments_are_refused_naming_where(call: Call) -> None:
    cases = {
        '[{"id": 1,, "name": "x"}]': "the arguments are not JSON: Expecting property name "
        "enclosed in double quotes at line 1, column 11",
        '{"id": 7}': "the arguments must be a JSON array",
        '[{"id": 9, "nmae": "x"}]': "argument 1 (estate.User): estate.User has no property "
        "'nmae' (its properties: balance, created, id, name, tags); did you mean 'name'?",
        '[{"created": "yesterday"}]': "argument 1 (estate.User).created: java.util.Date needs an "
        "ISO 8601 date-time",
        '["seven"]': "argument 1 (java.lang.Long): java.lang.Long needs a whole number, "
        'got "seven"',
        "[1, 2]": "estate.UserService#getUser takes 1 argument(s), not 2 argument(s): "
        "estate.User getUser(java.lang.Long)",
    }
    for arguments, message in cases.items():
        method = "save" if "id" in arguments or "created" in arguments else "getUser"
        refused = call(method, arguments)
        assert refused.returncode == 1, (arguments, refused.stdout)
        assert message in refused.stderr, (arguments, refused.stderr)
        assert "Traceback" not in refused.stderr
    unknown = call("getUsr", "[7]")
    assert unknown.returncode == 1
    assert (
        "has no method 'getUsr'" in unknown.stderr and "did you mean 'getUser'?" in unknown.stderr
    )


def test_without_a_stored_definition_names_come_from_the_url_and_types_from_the_user(
    call: Call,
    zookeeper: ZooKeeperServer,
    estate_group: str,
) -> None:
    # As with a provider whose metadata report is off: only the URL's methods list is left.
    path = provider_definition_path(SERVICE, "1.0.0", estate_group, APPLICATION)
    client = KazooClient(hosts=zookeeper.address)
    client.start(timeout=10)
    stored, _ = client.get(path)
    client.delete(path)
    try:
        listed = call("--list")
        assert listed.returncode == 0, listed.stderr
        assert "method names from its provider URLs" in listed.stdout
        assert {"describe", "getUser", "nothing", "save", "sleep", "sum"} <= set(
            listed.stdout.split()
        )
        assert f"no service definition of {SERVICE} in the metadata report ({path} (none))" in (
            listed.stderr
        )
        assert "give them with --types" in listed.stderr

        typed = json.loads(
            call("getUser", "[5]", "--types", "java.lang.Long", json_out=True).stdout
        )
        assert typed["types"] == ["java.lang.Long"] and typed["reply"]["name"] == "user-5@u1"
        assert typed["notes"] == []
        # No types: the provider finds the method by its name, and the CLI says so.
        by_name = call("getUser", "[5]")
        assert by_name.returncode == 0, by_name.stderr
        assert '"name": "user-5@u1"' in by_name.stdout
        assert "parameter types unknown" in by_name.stderr
        miscounted = call("getUser", "[5]", "--types", "java.lang.Long,int")
        assert miscounted.returncode == 1
        given = "2 parameter type(s) given (java.lang.Long, int) for 1 argument(s)"
        assert given in miscounted.stderr
    finally:
        client.create(path, stored, makepath=True)
        client.stop()
        client.close()


TRI_APPLICATION = "java-estate-call-cli-tri"


@pytest.fixture(scope="module")
def tri_provider(estate_registry: str, estate_group: str) -> Iterator[JavaDubboProvider]:
    """UserService exported over Triple without IDL (a plain interface; its URL says
    serialization=hessian2), in a group of its own."""
    with JavaDubboProvider(
        "--registry",
        estate_registry,
        "--application",
        TRI_APPLICATION,
        "--name",
        "t1",
        "--version",
        "1.0.0",
        "--group",
        f"{estate_group}-tri",
        "--protocol",
        "tri",
    ) as started:
        yield started


def test_a_triple_service_without_idl_is_called_generically_over_tri(
    estate_registry: str, estate_group: str, tri_provider: JavaDubboProvider
) -> None:
    group = f"{estate_group}-tri"
    listed = dubbo_py(estate_registry, group, "--list")
    assert listed.returncode == 0, listed.stderr
    path = provider_definition_path(SERVICE, "1.0.0", group, TRI_APPLICATION)
    assert f"{SERVICE} (tri:// (no IDL)): signatures from {path}" in listed.stdout

    done = dubbo_py(estate_registry, group, "getUser", "[7]")
    assert done.returncode == 0, done.stderr
    assert '"name": "user-7@t1"' in done.stdout
    assert f"provider: {tri_provider.address} (tri://)" in done.stdout
    as_json = json.loads(dubbo_py(estate_registry, group, "save", '[{"id": 3, "balance": 1.50}]',
                                  json_out=True).stdout)  # fmt: skip
    assert as_json["protocol"] == "tri" and as_json["provider"] == tri_provider.address
    assert as_json["signature"] == "estate.User save(estate.User)"
    assert as_json["reply"]["balance"] == "1.50" and as_json["reply"]["class"] == "estate.User"
    # An overload over tri:// is named by --types (the metadata gives two one-argument kinds).
    kinds = dubbo_py(estate_registry, group, "kind", "[5]", "--types", "long", json_out=True)
    assert kinds.returncode == 0, kinds.stderr
    assert json.loads(kinds.stdout)["signature"] == "java.lang.String kind(long)"
    ambiguous = dubbo_py(estate_registry, group, "kind", "[5]")
    assert ambiguous.returncode == 1
    assert "overloaded with 1 parameter(s)" in ambiguous.stderr and "--types" in ambiguous.stderr
    # --protocol dubbo finds no dubbo:// provider in that group, and says so.
    none = dubbo_py(estate_registry, group, "getUser", "[7]", "--protocol", "dubbo")
    assert none.returncode == 1
    assert "no usable dubbo:// provider of estate.UserService" in none.stderr
