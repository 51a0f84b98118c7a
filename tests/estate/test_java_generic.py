"""Generic calls (``$invoke``) from dubbo-py to a live Apache Dubbo 3.3.6 provider of a plain Java
interface (estate.UserService) over ``dubbo://`` with Hessian2, found through ZooKeeper.

The Java provider (tests/peers/java/estate, ``estate.DubboProvider``) is the oracle: what comes
back is what its ``GenericFilter`` made of our arguments and of its results.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from urllib.parse import unquote

import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.consumer.generic import GenericReference
from dubbo_py.protocol.dubbo.connection import DubboConnection, DubboRemoteError
from dubbo_py.protocol.dubbo.frame import Status
from dubbo_py.protocol.serialization.hessian2 import TypedList
from tests.support.java_estate import JavaDubboProvider, JavaProvider
from tests.support.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.zookeeper

SERVICE = "estate.UserService"


@pytest.fixture(scope="module")
def dubbo_provider(estate_registry: str, estate_group: str) -> Iterator[JavaDubboProvider]:
    with JavaDubboProvider(
        "--registry",
        estate_registry,
        "--application",
        "java-estate-generic",
        "--name",
        "u1",
        "--version",
        "1.0.0",
        "--group",
        estate_group,
        "--greeter",
        "true",
    ) as provider:
        yield provider


@pytest.fixture(scope="module")
def app(
    estate_registry: str,
    dubbo_provider: JavaDubboProvider,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dubbo_py.Application]:
    cache: Path = tmp_path_factory.mktemp("generic") / "cache.json"
    with dubbo_py.Application("py-generic-consumer", estate_registry, cache_path=cache) as app:
        yield app


@pytest.fixture(scope="module")
def users(app: dubbo_py.Application, estate_group: str) -> GenericReference:
    return app.generic_reference(SERVICE, version="1.0.0", group=estate_group, timeout=5.0)


def test_the_dubbo_provider_is_discovered_from_zookeeper(
    users: GenericReference, dubbo_provider: JavaDubboProvider
) -> None:
    assert [p.address for p in users.providers] == [dubbo_provider.address]
    assert users.providers[0].protocol == "dubbo"


def test_a_bean_comes_back_as_a_dict_with_its_class(users: GenericReference) -> None:
    user = users.invoke("getUser", ["java.lang.Long"], [7])
    assert user["class"] == "estate.User"
    assert user["id"] == 7
    assert user["name"] == "user-7@u1"
    assert user["balance"] == Decimal("12.50")
    assert user["created"] == datetime.fromtimestamp(1700000000.123, UTC)
    assert list(user["tags"]) == ["a", "b"]


def test_a_dict_goes_to_java_as_the_bean_and_back(users: GenericReference) -> None:
    sent = {
        "class": "estate.User",
        "id": 9,
        "name": "zoë",
        "balance": Decimal("-3.25"),
        "created": datetime(2024, 2, 29, 12, 30, 1, 500000, tzinfo=UTC),
        "tags": ["x"],
    }
    back = users.invoke("save", ["estate.User"], [sent])
    assert back == {**sent, "name": "ZOË"}


def test_lists_maps_dates_and_decimals_reach_java_as_their_java_types(
    users: GenericReference,
) -> None:
    when = datetime(2001, 9, 9, 1, 46, 40, 250000, tzinfo=UTC)
    out = users.invoke(
        "describe",
        ["java.util.List", "java.util.Map", "java.util.Date", "java.math.BigDecimal"],
        [[1, "two", 3.5, None, 2**40], {"k": [1, 2], "n": None}, when, Decimal("41.125")],
    )
    assert out["itemTypes"] == [
        "java.lang.Integer",
        "java.lang.String",
        "java.lang.Double",
        "null",
        "java.lang.Long",
    ]
    assert out["items"] == [1, "two", 3.5, None, 2**40]
    assert out["map"] == {"k": [1, 2], "n": None}
    assert out["whenMillis"] == 1_000_000_000_250
    assert out["when"] == when
    assert out["amountPlusOne"] == Decimal("42.125")


def test_a_java_exception_is_raised_with_its_class_message_and_cause(
    users: GenericReference,
) -> None:
    with pytest.raises(dubbo_py.JavaException) as caught:
        users.invoke("getUser", ["java.lang.Long"], [0])
    error = caught.value
    assert error.java_class == "java.lang.IllegalArgumentException", error
    assert error.message == "no user 0 at u1"
    assert error.cause is not None
    assert error.cause.java_class == "java.lang.IllegalStateException"
    assert error.cause.message == "ids start at 1"


def test_java_null_and_primitive_arrays(users: GenericReference) -> None:
    assert users.invoke("nothing", [], []) is None
    assert users.invoke("sum", ["int[]"], [[1, 2, 3, 2**31 - 1]]) == 2**31 + 5


def test_attribute_calls_let_the_provider_find_the_method_by_name(
    users: GenericReference,
) -> None:
    assert users.getUser(3)["name"] == "user-3@u1"


def test_omitted_types_are_read_from_the_providers_service_definition(
    users: GenericReference, dubbo_provider: JavaDubboProvider, estate_group: str
) -> None:
    done = users.invoke_result("save", None, [{"id": 4, "name": "eve"}])
    assert done.parameter_types == ("estate.User",)
    path = f"/dubbo/metadata/{SERVICE}/1.0.0/{estate_group}/provider/java-estate-generic"
    assert done.signature_source == path
    assert done.value["class"] == "estate.User" and done.value["name"] == "EVE"
    assert done.provider.address == dubbo_provider.address
    assert [p.address for p in done.attempts] == [dubbo_provider.address]
    # describe's List<Object> and Map<String,Object> are sent erased, as $invoke names them.
    described = users.invoke_result("describe", None, [[1], {}, datetime.now(UTC), Decimal(1)])
    assert described.parameter_types == (
        "java.util.List",
        "java.util.Map",
        "java.util.Date",
        "java.math.BigDecimal",
    )


def test_an_overload_without_types_is_refused_listing_the_candidates(
    users: GenericReference,
) -> None:
    # kind(String) and kind(long) both take one argument: the values alone do not say which.
    # Sent without types, the provider would refuse it too (GenericFilter: no unique method).
    with pytest.raises(dubbo_py.GenericSignatureError) as caught:
        users.kind("x")
    message = str(caught.value)
    assert "estate.UserService#kind is overloaded with 1 parameter(s)" in message
    assert "java.lang.String kind(java.lang.String)" in message
    assert "java.lang.String kind(long)" in message
    with pytest.raises(dubbo_py.GenericSignatureError, match=r"takes 1 argument\(s\), not 2"):
        users.invoke("getUser", None, [1, 2])
    with pytest.raises(dubbo_py.GenericSignatureError, match=r"did you mean 'getUser'"):
        users.getUsr(1)
    # Named types still pick one overload, as before.
    assert users.invoke("kind", ["long"], [5]) != users.invoke("kind", ["java.lang.String"], ["5"])


def test_without_a_stored_definition_no_types_are_sent(
    app: dubbo_py.Application,
    dubbo_provider: JavaDubboProvider,
    zookeeper: ZooKeeperServer,
    estate_group: str,
) -> None:
    from kazoo.client import KazooClient

    path = f"/dubbo/metadata/{SERVICE}/1.0.0/{estate_group}/provider/java-estate-generic"
    client = KazooClient(hosts=zookeeper.address)
    client.start(timeout=10)
    stored, _ = client.get(path)
    client.delete(path)
    try:
        ref = app.generic_reference(SERVICE, version="1.0.0", group=estate_group, timeout=5.0)
        done = ref.invoke_result("getUser", None, [3])
        assert done.parameter_types is None and done.signature_source == ""
        assert done.value["name"] == "user-3@u1"  # the provider found getUser by its name
        ref.close()
    finally:
        client.create(path, stored)
        client.stop()
        client.close()


def test_an_unknown_method_fails_with_the_providers_status_and_message(
    users: GenericReference,
) -> None:
    # Not the service's exception but Dubbo's (GenericFilter finds no such method): the
    # provider answers status SERVICE_ERROR with the error's text, as it does to a Java consumer.
    with pytest.raises(DubboRemoteError) as caught:
        users.invoke("noSuchMethod", ["java.lang.String"], ["x"])
    assert caught.value.status == Status.SERVICE_ERROR
    assert "No such method noSuchMethod in class interface estate.UserService" in str(caught.value)


def test_a_version_nobody_serves_raises_no_provider(
    app: dubbo_py.Application, estate_group: str
) -> None:
    ref = app.generic_reference(SERVICE, version="9.9.9", group=estate_group, check=0.5)
    assert ref.providers == ()
    with pytest.raises(dubbo_py.NoProviderError, match=r"estate\.UserService\.getUser"):
        ref.invoke("getUser", ["java.lang.Long"], [7])


def test_concurrent_asyncio_calls_share_one_connection(users: GenericReference) -> None:
    async def many() -> list[int]:
        return list(
            await asyncio.gather(
                *(users.invoke_async("sleep", ["int"], [50 + i]) for i in range(20))
            )
        )

    assert asyncio.run(many()) == [50 + i for i in range(20)]


def test_a_call_beyond_its_timeout_fails_and_the_connection_carries_on(
    users: GenericReference,
) -> None:
    with pytest.raises(TimeoutError):
        users.invoke("sleep", ["int"], [800], timeout=0.2)
    assert users.invoke("sleep", ["int"], [1]) == 1


def greeter_protocols(zookeeper: ZooKeeperServer, group: str) -> set[str]:
    """The protocols demo.Greeter's providers of ``group`` are registered with."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zookeeper.address)
    client.start(timeout=10)
    try:
        nodes = [unquote(n) for n in client.get_children("/dubbo/demo.Greeter/providers")]
    finally:
        client.stop()
        client.close()
    return {n.split("://")[0] for n in nodes if f"group={group}" in n}


def test_grpc_references_still_skip_the_dubbo_providers(
    app: dubbo_py.Application,
    estate_registry: str,
    estate_group: str,
    dubbo_provider: JavaDubboProvider,
    zookeeper: ZooKeeperServer,
) -> None:
    # demo.Greeter is registered twice in the group: over dubbo:// by the DubboProvider and over
    # Triple by a Provider. The gRPC stub must take the Triple one only: a call sent to the
    # dubbo:// port would fail, so twenty calls under random balancing would show it.
    with JavaProvider(
        "--registry",
        estate_registry,
        "--application",
        "java-estate-generic-tri",
        "--name",
        "t1",
        "--service",
        f"1.0.0:{estate_group}",
    ) as triple:
        ref = app.reference_handle(
            greeter_pb2_grpc.GreeterStub,
            version="1.0.0",
            group=estate_group,
            check=10,
            retries=0,  # a call sent to the dubbo:// port would not be hidden by a retry
        )
        assert {"dubbo", "tri"} <= greeter_protocols(zookeeper, estate_group)
        for _ in range(20):
            reply = ref.stub.SayHello(greeter_pb2.HelloRequest(name="py"))
            assert reply.provider == triple.address
        ref.close()


def test_kill_9_of_one_provider_under_8_threads_fails_no_call(
    app: dubbo_py.Application, estate_registry: str, estate_group: str
) -> None:
    # Calls in flight on the killed provider's connection fail with a reset and go to the other
    # (failover); later calls still pick the dead one (its ZooKeeper node outlives it until its
    # session ends), are refused at connect and go on too. With retries=0 this fails by the
    # thousands.
    group = f"{estate_group}-ha"
    providers = [
        JavaDubboProvider(
            "--registry",
            estate_registry,
            "--application",
            f"java-estate-generic-{name}",
            "--name",
            name,
            "--version",
            "1.0.0",
            "--group",
            group,
        )
        for name in ("k1", "k2")
    ]
    for provider in providers:
        provider.start()
    try:
        ref = app.generic_reference(SERVICE, version="1.0.0", group=group, timeout=5.0)
        deadline = time.monotonic() + 10
        while len(ref.providers) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(ref.providers) == 2
        served: Counter[str] = Counter()
        failures: list[BaseException] = []
        stop = threading.Event()
        lock = threading.Lock()

        def worker() -> None:
            while not stop.is_set():
                try:
                    user = ref.invoke("getUser", ["java.lang.Long"], [1])
                except BaseException as error:  # every failure is the test's business
                    with lock:
                        failures.append(error)
                    continue
                with lock:
                    served[user["name"].split("@")[1]] += 1

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for thread in threads:
            thread.start()
        # Both providers answering before the kill (a fixed second was not always enough for
        # two fresh JVMs' first calls on a loaded machine).
        warm = time.monotonic() + 15
        while min(served.get("k1", 0), served.get("k2", 0)) == 0 and time.monotonic() < warm:
            time.sleep(0.05)
        time.sleep(0.5)
        with lock:
            before = dict(served)
        providers[0].kill()
        time.sleep(1.5)
        stop.set()
        for thread in threads:
            thread.join(10)
        assert failures == []
        assert before.get("k1", 0) > 0 and before.get("k2", 0) > 0, before
        assert served["k2"] > before["k2"]  # calls went on, on the survivor
    finally:
        for provider in providers:
            provider.stop()


def test_java_answers_our_heartbeats(dubbo_provider: JavaDubboProvider) -> None:
    # With a 0.2 s heartbeat the connection would close as dead after 0.6 s without a byte
    # read; Java's answers to the heartbeats keep it open through a second of silence.
    async def main() -> None:
        host, port = dubbo_provider.address.split(":")
        connection = await DubboConnection.open(host, int(port), heartbeat=0.2)
        try:
            await asyncio.sleep(1.0)
            assert not connection.closed
            assert connection.heartbeats_sent >= 3
            response = await connection.invoke(
                SERVICE,
                "$invoke",
                ["java.lang.String", "[Ljava.lang.String;", "[Ljava.lang.Object;"],
                ["nothing", TypedList("[string", []), TypedList("[object", [])],
                version="1.0.0",
                attachments={"generic": "true", "group": dubbo_provider_group(dubbo_provider)},
                timeout=5,
            )
            assert response.exception is None and response.value is None
        finally:
            await connection.close()

    asyncio.run(main())


def dubbo_provider_group(provider: JavaDubboProvider) -> str:
    return provider.args[provider.args.index("--group") + 1]


def test_a_provider_registered_only_as_an_application_instance_is_called(
    app: dubbo_py.Application, estate_registry: str, estate_group: str
) -> None:
    # Dubbo 3.3's register mode `instance`: no interface-level URL at all, only the instance,
    # the mapping and (metadata-type remote) its MetadataInfo. A generic reference reads the
    # application level as a stub reference does (APPLICATION_FIRST by default) and calls it.
    group = f"{estate_group}-instance"
    with JavaDubboProvider(
        "--registry", estate_registry, "--application", "java-estate-generic-instance",
        "--name", "i1", "--version", "1.0.0", "--group", group,
        "--register-mode", "instance", "--metadata-type", "remote",
    ) as provider:  # fmt: skip
        ref = app.generic_reference(SERVICE, version="1.0.0", group=group, timeout=5.0, check=15)
        assert [(p.address, p.protocol) for p in ref.providers] == [(provider.address, "dubbo")]
        assert ref.invoke("getUser", ["java.lang.Long"], [7])["name"] == "user-7@i1"
