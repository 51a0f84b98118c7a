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
from pathlib import Path

import pytest

import dubbo_py
from dubbo_py.consumer.generic import GenericReference
from dubbo_py.protocol.dubbo.connection import DubboCallError
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


#: dubbo-go 3.3.2's hessian2 response encoder writes one hessian null (``N``) after the attachments
#: of every response body; dubbo-py's decode_response_body refuses bytes after the last value, so
#: every call to a dubbo-go ``dubbo://`` provider fails with "malformed response ... bytes after
#: the response's last value". A dubbo-py defect against dubbo-go (reported, dubbo_py not changed
#: on this branch): when it is fixed these tests pass and the strict xfail says so.
TRAILING_NULL = pytest.mark.xfail(
    strict=True,
    raises=DubboCallError,
    reason="dubbo-go writes a trailing hessian null after a response's attachments; "
    "dubbo-py refuses trailing bytes",
)


def test_the_go_provider_is_discovered_from_zookeeper(
    users: GenericReference, go_users: GoUserService
) -> None:
    assert [p.address for p in users.providers] == [go_users.address]
    assert users.providers[0].protocol == "dubbo"


@TRAILING_NULL
def test_a_go_struct_comes_back_as_a_map_with_its_java_class(users: GenericReference) -> None:
    # Seen on the wire: {"name": "user-7@gu1", "class": "estate.User", "iD": 7} before the `m`
    # tags (the map generalizer ignores hessian tags and lower-cases the first letter only).
    assert users.invoke("getUser", ["java.lang.Long"], [7]) == {
        "class": "estate.User",
        "id": 7,
        "name": "user-7@gu1",
    }


@TRAILING_NULL
def test_a_string_goes_to_go_and_back(users: GenericReference) -> None:
    assert users.invoke("echo", ["java.lang.String"], ["zoë"]) == "gu1: zoë"


@TRAILING_NULL
def test_a_go_error_is_raised_as_a_java_throwable(users: GenericReference) -> None:
    # Seen on the wire: a java.lang.Throwable with detailMessage "gu1 refused x", no cause.
    with pytest.raises(dubbo_py.JavaException) as caught:
        users.invoke("fail", ["java.lang.String"], ["x"])
    assert caught.value.java_class == "java.lang.Throwable"
    assert caught.value.message == "gu1 refused x"
