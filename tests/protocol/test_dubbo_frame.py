"""dubbo:// framing on its own: the header Dubbo's ExchangeCodec writes, heartbeats, frames cut
from a stream arriving in any pieces, and streams that lost their framing refused."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dubbo_py.protocol.dubbo import (
    DubboFrameError,
    Frame,
    FrameDecoder,
    RequestIds,
    Status,
    encode_frame,
    heartbeat_request,
    heartbeat_response,
)
from dubbo_py.protocol.serialization.hessian2 import dumps


def test_a_two_way_hessian2_request_has_dubbos_header() -> None:
    body = dumps("2.0.2", "com.example.UserService", "1.0", "getUser", "J", 7, {})
    data = encode_frame(Frame(request=True, request_id=5, body=body, status=0))
    assert data[:16] == bytes.fromhex("dabb c2 00 0000000000000005") + len(body).to_bytes(4, "big")
    assert data[16:] == body


def test_heartbeats_are_null_events_answered_with_the_same_id() -> None:
    ping = heartbeat_request(9)
    assert encode_frame(ping) == bytes.fromhex("dabb e2 00 0000000000000009 00000001 4e")
    (got,) = FrameDecoder().feed(encode_frame(ping))
    assert got.heartbeat and got.request and got.two_way
    pong = heartbeat_response(got)
    assert encode_frame(pong) == bytes.fromhex("dabb 22 14 0000000000000009 00000001 4e")
    (answer,) = FrameDecoder().feed(encode_frame(pong))
    assert answer.heartbeat and not answer.request and answer.status == Status.OK


def test_an_error_response_keeps_its_status() -> None:
    frame = Frame(
        request=False, request_id=3, body=b"x", two_way=False, status=Status.SERVICE_ERROR
    )
    assert FrameDecoder().feed(encode_frame(frame)) == [frame]


_frames = st.builds(
    lambda request, rid, body, two_way, event, status: Frame(
        request=request,
        request_id=rid,
        body=body,
        two_way=two_way if request else False,
        event=event,
        status=0 if request else status,
    ),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.binary(max_size=300),
    st.booleans(),
    st.booleans(),
    st.sampled_from(list(Status)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_frames, max_size=8), st.data())
def test_frames_come_out_of_a_stream_cut_anywhere(frames: list[Frame], data: st.DataObject) -> None:
    stream = b"".join(encode_frame(f) for f in frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    decoder = FrameDecoder()
    got: list[Frame] = []
    previous = 0
    for cut in [*cuts, len(stream)]:
        got += decoder.feed(stream[previous:cut])
        previous = cut
    assert got == frames and decoder.pending == 0


def test_a_bad_magic_fails_the_stream_for_good() -> None:
    decoder = FrameDecoder()
    good = encode_frame(heartbeat_request(1))
    assert len(decoder.feed(good)) == 1
    with pytest.raises(DubboFrameError, match="bad magic 0x1234 at stream offset 17"):
        decoder.feed(b"\x12\x34" + good[2:])
    with pytest.raises(DubboFrameError, match="bad magic"):
        decoder.feed(good)


def test_a_huge_declared_body_is_refused_before_it_is_buffered() -> None:
    decoder = FrameDecoder(max_payload=1024)
    header = bytes.fromhex("dabb c2 00 0000000000000001 7fffffff")
    with pytest.raises(DubboFrameError, match="declares a body of 2147483647 bytes"):
        decoder.feed(header)
    with pytest.raises(DubboFrameError, match="declares a body of -1 bytes"):
        FrameDecoder().feed(bytes.fromhex("dabb c2 00 0000000000000001 ffffffff"))
    with pytest.raises(DubboFrameError, match="exceeds the payload limit of 4"):
        encode_frame(Frame(request=True, request_id=1, body=b"12345"), max_payload=4)


def test_request_ids_count_up_and_wrap_as_a_java_long() -> None:
    ids = RequestIds()
    assert [ids.next() for _ in range(3)] == [0, 1, 2]
    near = RequestIds(2**63 - 1)
    assert [near.next(), near.next()] == [2**63 - 1, -(2**63)]
