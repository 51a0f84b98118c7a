"""Calls from dubbo-py to a live Apache Dubbo 3.3.6 provider of a plain Java interface
(estate.UserService) exported over Triple without IDL: Hessian2 inside Triple's wrapper
messages, registered in ZooKeeper as ``tri://``.

Two paths: generic references (``$invoke`` over Triple, the provider's ``GenericFilter``
turning dicts into beans and back), chosen because the provider URL says ``tri://``; and the
protocol module's direct call of ``/<interface>/<method>`` with typed Hessian2 arguments, as a
Java consumer holding the interface sends it. The Java provider is the oracle.
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
from typing import Any

import grpc
import pytest

import dubbo_py
from dubbo_py.consumer.generic import GenericReference
from dubbo_py.protocol.serialization.hessian2 import JavaObject, TypedList
from dubbo_py.protocol.triple_wrapper import (
    TripleWrapperChannels,
    TripleWrapperError,
    TripleWrapperResult,
    invoke,
)
from tests.support.java_estate import JavaDubboProvider

pytestmark = pytest.mark.zookeeper

SERVICE = "estate.UserService"


def tri_provider(registry: str, group: str, name: str) -> JavaDubboProvider:
    """estate.DubboProvider exporting UserService 1.0.0 of ``group`` over Triple (no IDL)."""
    return JavaDubboProvider(
        "--registry",
        registry,
        "--application",
        "java-estate-tri-noidl",
        "--name",
        name,
        "--version",
        "1.0.0",
        "--group",
        group,
        "--protocol",
        "tri",
    )


@pytest.fixture(scope="module")
def provider(estate_registry: str, estate_group: str) -> Iterator[JavaDubboProvider]:
    with tri_provider(estate_registry, estate_group, "t1") as started:
        yield started


@pytest.fixture(scope="module")
def app(
    estate_registry: str,
    provider: JavaDubboProvider,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dubbo_py.Application]:
    cache: Path = tmp_path_factory.mktemp("tri-noidl") / "cache.json"
    with dubbo_py.Application("py-tri-noidl-consumer", estate_registry, cache_path=cache) as app:
        yield app


@pytest.fixture(scope="module")
def users(app: dubbo_py.Application, estate_group: str) -> GenericReference:
    return app.generic_reference(SERVICE, version="1.0.0", group=estate_group, timeout=5.0)


def direct(
    provider: JavaDubboProvider,
    group: str,
    method: str,
    types: list[str],
    args: list[object],
    *,
    service: str = SERVICE,
    **options: Any,
) -> TripleWrapperResult:
    """One direct (non-generic) call of ``UserService.method`` on a channel of its own."""

    async def call() -> TripleWrapperResult:
        channels = TripleWrapperChannels()
        try:
            return await invoke(
                channels.get(provider.address),
                provider.address,
                service,
                method,
                types,
                args,
                headers=(("tri-service-version", "1.0.0"), ("tri-service-group", group)),
                timeout=5.0,
                **options,
            )
        finally:
            await channels.close()

    return asyncio.run(call())


# ------------------------------------------------------------------ generic references


def test_the_triple_provider_is_discovered_and_called_over_tri(
    users: GenericReference, provider: JavaDubboProvider
) -> None:
    assert [(p.protocol, p.address) for p in users.providers] == [("tri", provider.address)]
    assert users.invoke("getUser", ["java.lang.Long"], [7])["name"] == "user-7@t1"


def test_a_dict_goes_to_java_as_the_bean_and_back(users: GenericReference) -> None:
    sent = {
        "class": "estate.User",
        "id": 9,
        "name": "zoë",
        "balance": Decimal("-3.25"),
        "created": datetime(2024, 2, 29, 12, 30, 1, 500000, tzinfo=UTC),
        "tags": ["x", "y"],
    }
    assert users.invoke("save", ["estate.User"], [sent]) == {**sent, "name": "ZOË"}


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
    assert out["label"] == "t1"


def test_java_null_and_primitive_arrays(users: GenericReference) -> None:
    assert users.invoke("nothing", [], []) is None
    assert users.invoke("sum", ["int[]"], [[1, 2, 3, 2**31 - 1]]) == 2**31 + 5


def test_a_java_exception_is_raised_with_its_class_message_and_cause(
    users: GenericReference,
) -> None:
    with pytest.raises(dubbo_py.JavaException) as caught:
        users.invoke("getUser", ["java.lang.Long"], [0])
    error = caught.value
    assert error.java_class == "java.lang.IllegalArgumentException", error
    assert error.message == "no user 0 at t1"
    assert error.cause is not None
    assert error.cause.java_class == "java.lang.IllegalStateException"
    assert error.cause.message == "ids start at 1"


def test_an_unknown_method_arrives_as_the_providers_rpc_exception(
    users: GenericReference,
) -> None:
    # GenericFilter finds no such method and throws Dubbo's RpcException. Over dubbo:// that is
    # a SERVICE_ERROR status; over Triple the provider sends the exception object itself, with
    # tri-exception-code, as for the service's own exceptions, and a Java consumer gets it the
    # same way: the Java class and message, not a status (docs/java-services.md).
    with pytest.raises(dubbo_py.JavaException) as caught:
        users.invoke("noSuchMethod", ["java.lang.String"], ["x"])
    assert caught.value.java_class == "org.apache.dubbo.rpc.RpcException"
    assert caught.value.message == (
        "No such method noSuchMethod in class interface estate.UserService"
    )


def test_attribute_calls_and_asyncio(users: GenericReference) -> None:
    assert users.getUser(3)["name"] == "user-3@t1"

    async def many() -> list[int]:
        return list(
            await asyncio.gather(
                *(users.invoke_async("sleep", ["int"], [20 + i]) for i in range(10))
            )
        )

    assert asyncio.run(many()) == [20 + i for i in range(10)]


def test_parameter_types_pick_one_of_two_overloads(users: GenericReference) -> None:
    assert users.invoke("kind", ["java.lang.String"], ["5"]) == "String:5"
    assert users.invoke("kind", ["long"], [5]) == "long:5"


def test_attachments_reach_the_java_provider_with_their_case(
    app: dubbo_py.Application, estate_group: str
) -> None:
    ref = app.generic_reference(
        SERVICE,
        version="1.0.0",
        group=estate_group,
        timeout=5.0,
        attachments={"tenant": "t-9"},
    )
    try:
        # Headers are lower case on HTTP/2: tri-header-convert names traceId's original case.
        assert (
            ref.invoke(
                "attachment", ["java.lang.String"], ["traceId"], attachments={"traceId": "abc"}
            )
            == "abc"
        )
        assert ref.invoke("attachment", ["java.lang.String"], ["tenant"]) == "t-9"
        assert ref.invoke("attachment", ["java.lang.String"], ["absent"]) is None
    finally:
        ref.close()


def test_a_tri_url_given_directly_is_called_with_the_references_version_and_group(
    app: dubbo_py.Application, provider: JavaDubboProvider, estate_group: str
) -> None:
    ref = app.generic_reference(
        SERVICE, version="1.0.0", group=estate_group, url=f"tri://{provider.address}"
    )
    try:
        assert [p.protocol for p in ref.providers] == ["tri"]
        assert ref.invoke("getUser", ["java.lang.Long"], [4], timeout=5.0)["name"] == "user-4@t1"
        # the headers the call carries: the reference's version and group, the URL having none
        sent = dict(ref._triple_headers(ref.providers[0]))
        assert (sent["tri-service-version"], sent["tri-service-group"]) == ("1.0.0", estate_group)
    finally:
        ref.close()


def test_a_call_beyond_its_timeout_fails_and_the_channel_carries_on(
    users: GenericReference,
) -> None:
    with pytest.raises(TimeoutError):
        users.invoke("sleep", ["int"], [800], timeout=0.2)
    assert users.invoke("sleep", ["int"], [1]) == 1


@pytest.fixture(scope="module")
def mixed(
    app: dubbo_py.Application, estate_registry: str, estate_group: str
) -> Iterator[tuple[JavaDubboProvider, JavaDubboProvider, GenericReference]]:
    """A group of its own with one tri:// and one dubbo:// provider, and a reference to it."""
    group = f"{estate_group}-mixed"
    with (
        tri_provider(estate_registry, group, "tri-side") as tri,
        JavaDubboProvider(
            "--registry",
            estate_registry,
            "--application",
            "java-estate-dubbo-side",
            "--name",
            "dubbo-side",
            "--version",
            "1.0.0",
            "--group",
            group,
        ) as dubbo,
    ):
        ref = app.generic_reference(
            SERVICE, version="1.0.0", group=group, loadbalance="roundrobin", timeout=5.0
        )
        deadline = time.monotonic() + 10
        while len(ref.providers) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            yield tri, dubbo, ref
        finally:
            ref.close()


def label(ref: GenericReference) -> str:
    """Which provider served a call (its --name)."""
    out = ref.invoke(
        "describe",
        ["java.util.List", "java.util.Map", "java.util.Date", "java.math.BigDecimal"],
        [[], {}, datetime.now(UTC), Decimal(1)],
    )
    return str(out["label"])


def test_dubbo_and_tri_providers_of_one_interface_both_serve_a_reference(
    mixed: tuple[JavaDubboProvider, JavaDubboProvider, GenericReference],
) -> None:
    tri, dubbo, ref = mixed
    found = {p.protocol: p.address for p in ref.providers}
    assert found == {"tri": tri.address, "dubbo": dubbo.address}
    assert Counter(label(ref) for _ in range(6)) == {"tri-side": 3, "dubbo-side": 3}


def test_kill_9_of_the_tri_provider_under_8_threads_fails_no_call(
    mixed: tuple[JavaDubboProvider, JavaDubboProvider, GenericReference],
) -> None:
    # Calls in flight on the killed Triple provider fail with a gRPC status (UNAVAILABLE), later
    # ones still picked for it (its ZooKeeper node outlives it) fail at connect: each is a
    # TripleWrapperError, retried on the dubbo:// provider. With retries=0 this fails by the
    # hundreds (406 failed calls in one run).
    tri, _dubbo, ref = mixed
    served: Counter[str] = Counter()
    failures: list[BaseException] = []
    stop = threading.Event()
    lock = threading.Lock()

    def worker() -> None:
        while not stop.is_set():
            try:
                name = label(ref)
            except BaseException as error:  # every failure is the test's business
                with lock:
                    failures.append(error)
                continue
            with lock:
                served[name] += 1

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    with lock:
        before = dict(served)
    tri.kill()
    time.sleep(1.5)
    stop.set()
    for thread in threads:
        thread.join(10)
    assert failures == []
    assert before.get("tri-side", 0) > 0 and before.get("dubbo-side", 0) > 0, before
    assert served["dubbo-side"] > before["dubbo-side"]  # calls went on, on the survivor


# ------------------------------------------------------------------ direct calls


def test_a_direct_call_sends_typed_hessian_and_gets_the_java_bean(
    provider: JavaDubboProvider, estate_group: str
) -> None:
    result = direct(provider, estate_group, "getUser", ["java.lang.Long"], [7])
    user = result.value
    assert isinstance(user, JavaObject) and user.java_class == "estate.User"
    assert user.get("name") == "user-7@t1"
    assert user.get("balance") == Decimal("12.50")
    assert user.get("created") == datetime.fromtimestamp(1700000000.123, UTC)
    assert result.exception is None
    total = direct(provider, estate_group, "sum", ["[I"], [TypedList("[int", [1, 2, 3])])
    assert total.value == 6


def test_a_direct_bean_argument_is_a_java_object(
    provider: JavaDubboProvider, estate_group: str
) -> None:
    sent = JavaObject(
        "estate.User",
        {"id": 5, "name": "ann", "balance": Decimal("1.5"), "created": None, "tags": ["t"]},
    )
    back = direct(provider, estate_group, "save", ["estate.User"], [sent]).value
    assert isinstance(back, JavaObject) and back.java_class == "estate.User"
    assert (back.get("name"), back.get("balance"), back.get("tags")) == (
        "ANN",
        Decimal("1.5"),
        ["t"],
    )


def test_a_direct_call_gets_the_exception_itself_not_a_generic_wrapper(
    provider: JavaDubboProvider, estate_group: str
) -> None:
    result = direct(provider, estate_group, "getUser", ["java.lang.Long"], [0])
    assert result.value is None and result.exception is not None
    assert result.exception.java_class == "java.lang.IllegalArgumentException"
    assert result.exception.message == "no user 0 at t1"
    assert result.exception.cause is not None
    assert result.exception.cause.java_class == "java.lang.IllegalStateException"
    assert any("UserServiceImpl.getUser" in frame for frame in result.exception.stack_trace)


def test_a_direct_call_picks_the_overload_by_the_wrappers_arg_types(
    provider: JavaDubboProvider, estate_group: str
) -> None:
    # Two methods of one name: Dubbo's provider matches argTypes against each one's signature
    # (DescriptorUtils.findTripleMethodDescriptor); the wrong types find none, and Dubbo 3.3.6
    # throws its UnimplementedException from inside the message listener, so the status is
    # UNKNOWN with its text, not UNIMPLEMENTED (docs/compatibility.md).
    assert direct(provider, estate_group, "kind", ["java.lang.String"], ["5"]).value == "String:5"
    assert direct(provider, estate_group, "kind", ["long"], [5]).value == "long:5"
    with pytest.raises(TripleWrapperError) as caught:
        direct(provider, estate_group, "kind", ["java.lang.Double"], [5.0])
    assert caught.value.code is grpc.StatusCode.UNKNOWN, caught.value
    assert "unimplemented method:kind" in str(caught.value)


def test_a_direct_call_of_an_unknown_method_names_the_method_and_status(
    provider: JavaDubboProvider, estate_group: str
) -> None:
    # Dubbo 3.3.6 answers UNKNOWN here, from a NullPointerException in its own method lookup
    # (DescriptorUtils.findTripleMethodDescriptor), not UNIMPLEMENTED: docs/compatibility.md.
    with pytest.raises(TripleWrapperError) as caught:
        direct(provider, estate_group, "noSuchMethod", [], [])
    assert caught.value.code is grpc.StatusCode.UNKNOWN
    assert f"{SERVICE}#noSuchMethod on {provider.address}" in str(caught.value)


def test_a_direct_call_of_an_interface_nobody_exports_is_unimplemented(
    provider: JavaDubboProvider, estate_group: str
) -> None:
    # (An unknown group of an exported interface is not refused: Dubbo's TriplePathResolver
    # falls back to the interface's export, RESOLVE_FALLBACK_TO_DEFAULT.)
    with pytest.raises(TripleWrapperError) as caught:
        direct(provider, estate_group, "nothing", [], [], service="estate.NoSuchService")
    assert caught.value.code is grpc.StatusCode.UNIMPLEMENTED, caught.value
    assert "estate.NoSuchService#nothing" in str(caught.value)
