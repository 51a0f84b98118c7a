"""Binary (``-bin``) call metadata survives the cluster channel and can carry a routing key.

Regression: the channel decoded ``bytes`` metadata values as Latin-1 text and the invoker sent
that text on as metadata, so any call with a ``-bin`` key (which gRPC requires to be ``bytes``)
failed with a ``TypeError`` before leaving the process, and a shard key in a binary attachment
was hashed as mojibake instead of its UTF-8 text.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc
from hypothesis import given
from hypothesis import strategies as st

import dubbo_py
from dubbo_py.invocation import Invocation
from dubbo_py.protocol.attachments import attachments_from_metadata, metadata_from_attachments
from dubbo_py.router.chain import RouterChain
from dubbo_py.router.shard import ShardRouter, locate, parse_shard_rule
from dubbo_py.router.snapshot import Snapshot
from dubbo_py.url import URL


@given(st.binary())
def test_binary_values_round_trip_exactly(value: bytes) -> None:
    attachments = attachments_from_metadata([("key-bin", value)])
    assert metadata_from_attachments(attachments) == (("key-bin", value),)


@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E)))
def test_text_values_pass_through_unchanged(value: str) -> None:
    attachments = attachments_from_metadata([("tenant", value)])
    assert attachments == {"tenant": value}
    assert metadata_from_attachments(attachments) == (("tenant", value),)


def test_text_set_by_hand_on_a_binary_key_is_sent_as_utf8() -> None:
    # e.g. reference(attachments={"tenant-bin": "日本"}): gRPC needs bytes there.
    assert metadata_from_attachments({"tenant-bin": "日本"}) == (("tenant-bin", "日本".encode()),)


class _Echo(greeter_pb2_grpc.GreeterServicer):
    """Replies with the hex of the ``tenant-bin`` metadata it received."""

    def SayHello(self, request: Any, context: grpc.ServicerContext) -> Any:
        received = dict(context.invocation_metadata()).get("tenant-bin", b"")
        assert isinstance(received, bytes)
        return greeter_pb2.HelloReply(message=received.hex())


@pytest.fixture
def echo_address() -> Iterator[str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    greeter_pb2_grpc.add_GreeterServicer_to_server(_Echo(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(None)


def test_binary_metadata_reaches_the_provider_byte_for_byte(echo_address: str) -> None:
    value = b"\xff\x00\xfe tenant \xc3"  # not UTF-8: must still arrive unchanged
    with dubbo_py.Application("shop", registry=f"tri://{echo_address}") as app:
        greeter = app.reference(greeter_pb2_grpc.GreeterStub)
        reply = greeter.SayHello(
            greeter_pb2.HelloRequest(name="x"), metadata=[("tenant-bin", value)]
        )
    assert reply.message == value.hex()


def test_a_binary_attachment_routes_by_its_utf8_text() -> None:
    rule = parse_shard_rule("scheme: elasticsearch\nshards: 4\nkey: attachments[tenant-bin]\n")
    providers = tuple(URL.parse(f"tri://10.0.0.{i}:50051/demo.Greeter?shard={i}") for i in range(4))
    chain = RouterChain([ShardRouter(rule)]).bind(
        Snapshot(providers), URL.parse("consumer://10.0.0.9/demo.Greeter")
    )
    for key in ("日本", "😀 tenant", "acme"):
        attachments = attachments_from_metadata([("tenant-bin", key.encode())])
        (routed,) = chain.route(Invocation("demo.Greeter", "SayHello", attachments=attachments))
        assert routed.get_int("shard") == locate("elasticsearch", 4, key).shards[0], key
