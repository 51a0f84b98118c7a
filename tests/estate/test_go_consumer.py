"""A live dubbo-go 3.3.2 consumer calling a dubbo-py provider (demo.Greeter, demo.Chat) through
ZooKeeper.

The dubbo-py provider (in this process) answers the peer contract's special names; the Go
consumer (tests/peers/go/estate) reports what its user saw, line by line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import dubbo_py
from tests.estate.test_java_consumer import make_chat, make_greeter
from tests.support.go_estate import GoConsumer
from tests.support.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.zookeeper


@pytest.fixture(scope="module")
def py_provider(
    estate_registry: str, estate_group: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    cache = tmp_path_factory.mktemp("py-provider") / "cache.json"
    with dubbo_py.Application("py-go-estate-provider", estate_registry, cache_path=cache) as app:
        one = make_greeter("p1", "1.0.0", estate_group)
        two = make_greeter("p1", "2.0.0", estate_group)
        chat = make_chat()
        server = app.start(one, two, chat, port=0, bind_host="127.0.0.1")
        one.address = two.address = chat.address = server.address
        yield server.address


def consumer(registry: str, group: str, version: str, *extra: str) -> GoConsumer:
    return GoConsumer(
        "--registry",
        registry,
        "--application",
        "go-estate-consumer",
        "--version",
        version,
        "--group",
        group,
        *extra,
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


def test_go_client_and_bidi_streams_to_dubbo_py(
    py_provider: str, estate_registry: str, estate_group: str
) -> None:
    with consumer(estate_registry, estate_group, "1.0.0") as go:
        collected = go.command("collect 3 name=c")
        assert collected["errors"] == [], collected
        assert (collected["count"], collected["joined"]) == (3, "c#0,c#1,c#2"), collected
        assert collected["provider"] == py_provider, collected
        # Each echo is read before the next line is sent: the stream is answered as it goes.
        echoed = go.command("echo 3 name=e")
        assert echoed["errors"] == [], echoed
        assert echoed["messages"] == ["e#0", "e#1", "e#2"], echoed
        assert echoed["providers"] == {py_provider: 3}, echoed


def test_go_timeout_against_a_slow_dubbo_py_provider(
    py_provider: str, estate_registry: str, estate_group: str
) -> None:
    # --timeout on the Go client (client.WithClientRequestTimeout): sent as grpc-timeout and
    # kept by the Go caller, which gives up with deadline_exceeded.
    with consumer(estate_registry, estate_group, "1.0.0", "--timeout", "300") as go:
        slow = go.call(1, name="sleep:1500")
        assert slow["ok"] == {}, slow
        [error] = slow["errors"]
        assert error.startswith("deadline_exceeded"), slow
        # The consumer is still usable: the next call within its timeout answers.
        assert go.call(1, name="quick")["ok"] == {"p1 [1.0.0": 1}


@pytest.mark.xfail(
    strict=True,
    reason="dubbo-go 3.3.2 does not apply a reference's client.WithRequestTimeout nor a call's "
    "client.WithCallRequestTimeout on Triple: the call carries the client's timeout (default "
    "3 s; seen as the provider's time_remaining and the 'timeout: 3s' attachment), so a 300 ms "
    "reference waits 1.5 s for the reply. Strict, so a dubbo-go that applies them says so.",
)
@pytest.mark.parametrize(
    "where",
    [
        pytest.param(("--timeout-level", "reference", "--timeout", "300"), id="reference"),
        pytest.param(("--timeout-level", "reference", "--call-timeout", "300"), id="call"),
    ],
)
def test_go_reference_or_call_timeout_against_a_slow_dubbo_py_provider(
    py_provider: str, estate_registry: str, estate_group: str, where: tuple[str, ...]
) -> None:
    with consumer(estate_registry, estate_group, "1.0.0", *where) as go:
        slow = go.call(1, name="sleep:1500")
        assert slow["ok"] == {}, slow


def test_a_large_reply_from_dubbo_py_to_go(
    py_provider: str, estate_registry: str, estate_group: str
) -> None:
    with consumer(estate_registry, estate_group, "1.0.0") as go:
        size = 4 * 1024 * 1024 - 64
        under = go.call(1, name=f"big:{size}")
        assert under["sizes"] == [size], {k: v for k, v in under.items() if k != "messages"}
        # A 4 MiB string is 4 MiB and a few bytes as a message: past dubbo-go's default receive
        # limit (max-call-recv-msg-size, 4 MiB), which the Go caller is told about.
        over = go.call(1, name=f"big:{4 * 1024 * 1024}")
        assert over["ok"] == {}, {k: v for k, v in over.items() if k != "messages"}
        [error] = over["errors"]
        assert error.startswith("resource_exhausted: message size "), error
        assert error.endswith("is larger than configured max 4194304"), error


def test_go_finds_a_dubbo_py_provider_at_application_level(tmp_path: Path) -> None:
    # A dubbo-py provider registered at application level only (mapping, instance, metadata;
    # no interface-level node); the Go consumer discovers instances and reads the metadata
    # from the provider's MetadataServiceV2 (its instance says meta-v 2.0.0 and where). A
    # ZooKeeper of its own: the module's holds the mapping of the Go providers test_go_calls
    # ran, whose instances outlive them until their sessions expire, and the Go consumer
    # would wait on those.
    from tests.estate.test_go_calls import zk_children

    with (
        ZooKeeperServer() as zookeeper,
        dubbo_py.Application(
            "py-go-estate-app-provider",
            f"zookeeper://{zookeeper.address}",
            cache_path=tmp_path / "cache.json",
            register_mode="instance",
        ) as app,
    ):
        greeter = make_greeter("pa", "1.0.0", "app")
        server = app.start(greeter, port=0, bind_host="127.0.0.1")
        greeter.address = server.address
        assert not zk_children(zookeeper, "/dubbo/demo.Greeter/providers")
        assert zk_children(zookeeper, "/services/py-go-estate-app-provider")
        registry = f"zookeeper://{zookeeper.address}"
        with consumer(registry, "app", "1.0.0", "--discovery", "instance") as go:
            result = go.call(2, name="app")
            assert result["ok"] == {"pa [1.0.0": 2}, result
            # How it got the metadata: dubbo-go's own report layout (/dubbo/<app>/<revision>)
            # has nothing, and it falls back to the MetadataServiceV2 the instance names.
            logs = go.log.read_text(errors="replace")
            assert "report failed, fallback to RPC app=py-go-estate-app-provider" in logs
            assert "MetadataServiceV2?group=py-go-estate-app-provider" in logs
        # Nothing written in dubbo-go's layout, which a /dubbo listing would show as a service.
        assert "py-go-estate-app-provider" not in zk_children(zookeeper, "/dubbo")
