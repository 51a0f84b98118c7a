"""Generic calls (``$invoke``) from dubbo-py to a live dubbo-go 3.3.2 provider of the
Java-interface service estate.UserService over ``dubbo://`` with Hessian2, found through
ZooKeeper at interface level.

The Go provider (tests/peers/go/estate, ``userservice``) answers through dubbo-go's own provider
filter ``generic_service``: it realizes our arguments into the Go method's types and turns the
result into a map (its "map" generalizer). What comes back is what dubbo-go made of it; where
that differs from Java Dubbo 3.3 it is written down in docs/compatibility.md ("Generic calls to
a dubbo-go provider").
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import dubbo_py
from dubbo_py.consumer.generic import GenericReference
from tests.support.go_estate import GoUserService

pytestmark = pytest.mark.zookeeper

SERVICE = "estate.UserService"


@pytest.fixture(scope="module")
def go_users(estate_registry: str, estate_group: str) -> Iterator[GoUserService]:
    with GoUserService(
        "--registry",
        estate_registry,
        "--application",
        "go-estate-generic",
        "--name",
        "gu1",
        "--version",
        "1.0.0",
        "--group",
        estate_group,
    ) as provider:
        yield provider


@pytest.fixture(scope="module")
def users(
    estate_registry: str,
    estate_group: str,
    go_users: GoUserService,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GenericReference]:
    cache: Path = tmp_path_factory.mktemp("go-generic") / "cache.json"
    with dubbo_py.Application("py-go-generic-consumer", estate_registry, cache_path=cache) as app:
        yield app.generic_reference(SERVICE, version="1.0.0", group=estate_group, timeout=5.0)


def test_the_go_provider_is_discovered_from_zookeeper(
    users: GenericReference, go_users: GoUserService
) -> None:
    assert [p.address for p in users.providers] == [go_users.address]
    assert users.providers[0].protocol == "dubbo"


def test_a_go_struct_comes_back_as_a_map_with_its_java_class(users: GenericReference) -> None:
    # The keys are the User struct's `m` tags: without them dubbo-go's map generalizer writes the
    # Go field name with its first letter lower-cased ("iD"); it ignores the hessian tags.
    assert users.invoke("getUser", ["java.lang.Long"], [7]) == {
        "class": "estate.User",
        "id": 7,
        "name": "user-7@gu1",
    }


def test_a_dict_goes_to_go_as_the_struct_and_back(users: GenericReference) -> None:
    back = {"class": "estate.User", "id": 9, "name": "ZOË"}
    sent = {"class": "estate.User", "id": 9, "name": "zoë"}
    assert users.invoke("save", ["estate.User"], [sent]) == back
    # dubbo-go realizes the argument into the Go method's own type: the class key is not needed
    assert users.invoke("save", ["estate.User"], [{"id": 9, "name": "zoë"}]) == back


def test_a_string_goes_to_go_and_back(users: GenericReference) -> None:
    assert users.invoke("echo", ["java.lang.String"], ["zoë"]) == "gu1: zoë"


WHEN = datetime(2001, 9, 9, 1, 46, 40, 250000, tzinfo=UTC)


@pytest.fixture(scope="module")
def described(users: GenericReference) -> dict[str, Any]:
    """What the Go method ``Describe`` reports of a list, a map, a date, a decimal and bytes."""
    out = users.invoke(
        "describe",
        ["java.util.List", "java.util.Map", "java.util.Date", "java.math.BigDecimal", "byte[]"],
        [[1, "two", 3.5, None, 2**40, True], {"k": [1, 2], "n": None}, WHEN, Decimal("41.125"),
         b"\x00\xffab"],
    )  # fmt: skip
    assert isinstance(out, dict)
    return out


def test_lists_maps_dates_decimals_and_bytes_reach_go_as_its_types(
    described: dict[str, Any],
) -> None:
    # Java's Integer, String, Double, null, Long and Boolean as Go realizes them
    assert described["itemTypes"] == ["int32", "string", "float64", "<nil>", "int64", "bool"]
    assert described["items"] == [1, "two", 3.5, None, 2**40, True]
    assert described["mapType"] == "map[interface {}]interface {}"
    assert described["mapKeys"] == ["k", "n"]
    assert described["mapByString"] == {"k": [1, 2], "n": None}
    assert described["whenMillis"] == 1_000_000_000_250
    assert described["amount"] == "41.125"
    assert described["dataLen"] == 4


def test_dubbo_go_generalizes_dates_decimals_bytes_and_any_keyed_maps_lossily(
    described: dict[str, Any],
) -> None:
    # What dubbo-go 3.3.2's map generalizer makes of a result, where Java Dubbo sends the value
    # itself (docs/compatibility.md): a time.Time becomes an empty map (its fields are not
    # exported), a decimal a map of its unset hessian field, a []byte a list of ints, and the
    # keys of a map[any]any all one string naming the interface (so one entry is left).
    assert described["when"] == {}
    assert described["amountPlusOne"] == {"class": "java.math.BigDecimal", "value": ""}
    assert described["data"] == [0, 255, 97, 98]
    assert list(described["map"]) == ["<interface {} Value>"]
    assert described["map"]["<interface {} Value>"] in ([1, 2], None)


def test_go_nil_and_an_int_array(users: GenericReference) -> None:
    assert users.invoke("nothing", [], []) is None
    assert users.invoke("sum", ["int[]"], [[1, 2, 3, 2**31 - 1]]) == 2**31 + 5


def test_calls_without_types_are_served_by_the_go_signature(users: GenericReference) -> None:
    # dubbo-go realizes arguments by the Go method's parameter types, whatever types are sent
    done = users.invoke_result("echo", None, ["hi"])
    assert done.parameter_types is None and done.value == "gu1: hi"
    assert users.echo("there") == "gu1: there"


def test_a_go_side_java_exception_arrives_with_its_class_message_and_cause(
    users: GenericReference,
) -> None:
    # The Go method returns hessian's java_exception.IllegalArgumentException with a Cause:
    # dubbo-go writes a Throwabler as itself.
    with pytest.raises(dubbo_py.JavaException) as caught:
        users.invoke("getUser", ["java.lang.Long"], [0])
    error = caught.value
    assert error.java_class == "java.lang.IllegalArgumentException", error
    assert error.message == "no user 0 at gu1"
    assert error.cause is not None
    assert error.cause.java_class == "java.lang.IllegalStateException"
    assert error.cause.message == "ids start at 1"


def test_a_go_error_is_raised_as_a_java_throwable(users: GenericReference) -> None:
    # A plain Go error: dubbo-go sends a bare java.lang.Throwable with the error's text only.
    with pytest.raises(dubbo_py.JavaException) as caught:
        users.invoke("fail", ["java.lang.String"], ["x"])
    assert caught.value.java_class == "java.lang.Throwable"
    assert caught.value.message == "gu1 refused x"
    assert caught.value.cause is None


def test_an_unknown_method_is_a_throwable_naming_the_service_key(
    users: GenericReference, estate_group: str
) -> None:
    with pytest.raises(dubbo_py.JavaException) as caught:
        users.invoke("nope", ["java.lang.String"], ["x"])
    assert caught.value.java_class == "java.lang.Throwable"
    assert caught.value.message == (
        f'"nope" method is not found, service key: {estate_group}/{SERVICE}:1.0.0'
    )
