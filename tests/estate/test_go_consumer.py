"""A live dubbo-go 3.3.2 consumer calling a dubbo-py provider through ZooKeeper.

The dubbo-py provider (in this process) answers the peer contract's special names; the Go
consumer (tests/peers/go/estate) reports what its user saw, line by line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

import dubbo_py
from tests.estate.test_java_consumer import make_greeter
from tests.support.go_estate import GoConsumer

pytestmark = pytest.mark.zookeeper


@pytest.fixture(scope="module")
def py_provider(
    estate_registry: str, estate_group: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    cache = tmp_path_factory.mktemp("py-provider") / "cache.json"
    with dubbo_py.Application("py-go-estate-provider", estate_registry, cache_path=cache) as app:
        one = make_greeter("p1", "1.0.0", estate_group)
        two = make_greeter("p1", "2.0.0", estate_group)
        server = app.start(one, two, port=0, bind_host="127.0.0.1")
        one.address = two.address = server.address
        yield server.address


def consumer(registry: str, group: str, version: str) -> GoConsumer:
    return GoConsumer(
        "--registry",
        registry,
        "--application",
        "go-estate-consumer",
        "--version",
        version,
        "--group",
        group,
    )


def test_go_calls_a_dubbo_py_provider_by_version_and_streams(
    py_provider: str, estate_registry: str, estate_group: str
) -> None:
    with consumer(estate_registry, estate_group, "2.0.0") as go:
        result = go.call(3, name="g")
        assert result["ok"] == {"p1 [2.0.0": 3}, result
        assert result["messages"][0] == f"p1 [2.0.0:{estate_group}]: hello g"
        streamed = go.command("stream 2 name=s")
        assert streamed["messages"] == ["p1: hello s #0", "p1: hello s #1"], streamed


def test_a_dubbo_py_error_and_attachments_as_go_sees_them(
    py_provider: str, estate_registry: str, estate_group: str
) -> None:
    with consumer(estate_registry, estate_group, "1.0.0") as go:
        failed = go.call(1, name="fail")
        assert failed["ok"] == {}, failed
        [error] = failed["errors"]
        assert f"p1 [1.0.0:{estate_group}] refused fail" in error, failed
        seen = json.loads(go.call(1, name="attachments", **{"trace-id": "t-7"})["messages"][0])
        assert seen.get("trace-id") == "t-7", seen
