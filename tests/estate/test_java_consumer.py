"""A live Apache Dubbo 3.3.6 consumer calling a dubbo-py provider through ZooKeeper.

The dubbo-py provider (in this process) answers PEER_CONTRACT.md's special names; the Java
consumer (tests/peers/java/estate) reports what its user saw, line by line.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from demo import chat_pb2, chat_pb2_grpc, greeter_pb2, greeter_pb2_grpc

import dubbo_py
from tests.support.java_estate import JavaConsumer

pytestmark = pytest.mark.zookeeper

# Every "sleep:" request the dubbo-py providers receive, in arrival order: how many tries a
# Java consumer really made.
SLEEP_ARRIVALS: list[str] = []


def make_greeter(name: str, version: str, group: str) -> Any:
    """A Greeter servicer answering the peer contract's special names, as ``name``."""

    @dubbo_py.service(version=version, group=group)
    class Greeter(greeter_pb2_grpc.GreeterServicer):
        address = ""

        def SayHello(self, request: Any, context: Any) -> Any:
            label = f"{name} [{version}:{group}]"
            if request.name == "fail":
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{label} refused fail")
            if request.name.startswith("sleep:"):
                SLEEP_ARRIVALS.append(label)
                time.sleep(int(request.name[6:]) / 1000)
            if request.name.startswith("big:"):
                message = "x" * int(request.name[4:])
            elif request.name == "attachments":
                seen = {k: v for k, v in context.invocation_metadata() if not k.endswith("-bin")}
                message = json.dumps(seen, sort_keys=True)
            else:
                message = f"{label}: hello {request.name}"
            return greeter_pb2.HelloReply(message=message, provider=self.address)

        def SayHelloStream(self, request: Any, context: Any) -> Any:
            for i in range(request.count):
                yield greeter_pb2.HelloReply(message=f"{name}: hello {request.name} #{i}")

    return Greeter()


def make_chat() -> Any:
    """A demo.Chat servicer (no version or group, as the estate peers serve it): Collect joins
    the lines with commas, Echo sends each line back as it arrives; both name ``address``."""

    @dubbo_py.service()
    class Chat(chat_pb2_grpc.ChatServicer):
        address = ""

        def Collect(self, request_iterator: Any, context: Any) -> Any:
            texts = [line.text for line in request_iterator]
            return chat_pb2.Summary(count=len(texts), joined=",".join(texts), provider=self.address)

        def Echo(self, request_iterator: Any, context: Any) -> Any:
            for line in request_iterator:
                yield chat_pb2.Line(text=line.text, provider=self.address)

    return Chat()


@pytest.fixture(scope="module")
def py_provider(
    estate_registry: str, estate_group: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    cache = tmp_path_factory.mktemp("py-provider") / "cache.json"
    with dubbo_py.Application("py-estate-provider", estate_registry, cache_path=cache) as app:
        one = make_greeter("p1", "1.0.0", estate_group)
        two = make_greeter("p1", "2.0.0", estate_group)
        # Bound to loopback only: the Java peer pins Dubbo's local host to 127.0.0.1
        # (tests/peers/java/estate Loopback.java), so it dials the 127.0.0.1 registered here.
        chat = make_chat()
        server = app.start(one, two, chat, port=0, bind_host="127.0.0.1")
        one.address = two.address = chat.address = server.address
        yield server.address


def settled_count(read: Callable[[], int], quiet: float = 0.5, limit: float = 3.0) -> int:
    """``read()`` once it has stayed the same for ``quiet`` seconds (at most ``limit``)."""
    deadline = time.monotonic() + limit
    value, since = read(), time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - since < quiet:
        time.sleep(0.05)
        now = read()
        if now != value:
            value, since = now, time.monotonic()
    return value


def consumer(registry: str, group: str, version: str = "1.0.0", *extra: str) -> JavaConsumer:
    return JavaConsumer(
        "--registry",
        registry,
        "--application",
        "java-estate-consumer",
        "--version",
        version,
        "--group",
        group,
        *extra,
    )


def test_java_calls_a_dubbo_py_provider_by_version(
    py_provider: str, estate_registry: str, estate_group: str
) -> None:
    with consumer(estate_registry, estate_group, "2.0.0") as java:
        result = java.call(3, name="j")
        assert result["ok"] == {"p1 [2.0.0": 3}, result
        assert result["messages"][0] == f"p1 [2.0.0:{estate_group}]: hello j"
        streamed = java.command("stream 2 name=s")
        assert streamed["messages"] == ["p1: hello s #0", "p1: hello s #1"]


def test_a_dubbo_py_error_and_attachments_as_java_sees_them(
    py_provider: str, estate_registry: str, estate_group: str, tmp_path: Path
) -> None:
    with consumer(estate_registry, estate_group) as java:
        failed = java.call(1, name="fail")
        assert failed["ok"] == {}
        [(error, count)] = failed["errors"].items()
        assert count == 1
        assert f"p1 [1.0.0:{estate_group}] refused fail" in error, error
        seen = json.loads(
            java.call(1, name="attachments", **{"trace-id": "t1", "Upper-Key": "U"})["messages"][0]
        )
        assert seen.get("trace-id") == "t1", seen
        # Header names are lower case on the wire; Dubbo sends the original spelling along
        # (tri-header-convert) and dubbo-py gives it back as a Java provider would.
        assert seen.get("Upper-Key") == "U", seen
        assert "upper-key" not in seen, seen


@pytest.mark.parametrize("migration", ["FORCE_INTERFACE", "FORCE_APPLICATION"])
def test_java_finds_the_dubbo_py_provider_in_each_migration_step(
    py_provider: str, estate_registry: str, estate_group: str, migration: str
) -> None:
    # FORCE_APPLICATION reads dubbo-py's mapping, instance and metadata (its MetadataService
    # or the metadata report); FORCE_INTERFACE only the providers folder.
    with consumer(estate_registry, estate_group, "1.0.0", "--migration", migration) as java:
        result = java.call(2, name="m")
        assert result["ok"] == {"p1 [1.0.0": 2}, result


def test_java_client_and_bidi_streams_to_dubbo_py(
    py_provider: str, estate_registry: str, estate_group: str
) -> None:
    with consumer(estate_registry, estate_group) as java:
        collected = java.command("collect 3 name=c")
        assert collected["errors"] == [], collected
        assert (collected["count"], collected["joined"]) == (3, "c#0,c#1,c#2"), collected
        assert collected["provider"] == py_provider, collected
        # Each echo is read before the next line is sent: the stream is answered as it goes.
        echoed = java.command("echo 3 name=e")
        assert echoed["errors"] == [], echoed
        assert echoed["messages"] == ["e#0", "e#1", "e#2"], echoed
        assert echoed["providers"] == {py_provider: 3}, echoed


def test_java_timeout_and_a_large_reply_from_dubbo_py(
    py_provider: str, estate_registry: str, estate_group: str
) -> None:
    with consumer(estate_registry, estate_group, "1.0.0", "--timeout", "300") as java:
        # Two timers race in Dubbo 3.3.6 for one deadline: the sync wait
        # (AbstractInvoker.waitForResultIfSync) throws "Invoke remote method timeout", which
        # failover retries (retries=2, three tries, "Tried 3 times"); the Triple client's scan
        # timer instead completes the call with DEADLINE_EXCEEDED as its result, which failover
        # hands back without a retry. Either way the user gets one RpcException naming the
        # timeout; a message that claims three tries matches three arrivals at the provider.
        before = len(SLEEP_ARRIVALS)
        slow = java.call(1, name="sleep:1500")
        assert slow["ok"] == {}, slow
        [(error, count)] = slow["errors"].items()
        assert count == 1, slow
        assert error.startswith("RpcException: "), error
        tries = settled_count(lambda: len(SLEEP_ARRIVALS) - before)
        if "Tried 3 times" in error:
            assert "Invoke remote method timeout" in error, error
            assert tries == 3, (tries, error)
        else:
            assert "DEADLINE_EXCEEDED" in error and "timeout: 300 ms" in error, error
            assert 1 <= tries <= 3, (tries, error)
        # A 4 MiB string reply (4 MiB and a few bytes as a message) is inside Dubbo's 8 MiB
        # payload; dubbo-py's provider sends it (its own 8 MiB default).
        size = 4 * 1024 * 1024
        big = java.call(1, name=f"big:{size}")
        assert big["ok"] == {f"<{size} chars>": 1}, big["errors"]
        assert big["sizes"] == [size]
