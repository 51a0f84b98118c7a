"""The Triple wire's pieces: request headers, Dubbo's attachment-key conversion, and which
servicer of several (versions, groups) a call reaches."""

from __future__ import annotations

import json
from typing import Any

import pytest
from demo import greeter_pb2_grpc
from hypothesis import given, settings
from hypothesis import strategies as st

import dubbo_py
from dubbo_py.protocol.attachments import attachments_from_metadata, metadata_from_attachments
from dubbo_py.protocol.triple import (
    HEADER_CONVERT,
    TripleCaller,
    from_wire,
    service_headers,
    to_wire,
)
from dubbo_py.provider.dispatch import Export, ServiceTable, TripleContext, tables_of
from dubbo_py.url import URL

_KEY_CHARS = st.characters(whitelist_categories=(), whitelist_characters="abcdefgHIJKLxyzXYZ019_.-")
keys = st.text(_KEY_CHARS, min_size=1, max_size=12).filter(
    lambda k: not k.lower().startswith(("tri-", "grpc-")) and k.strip("-") == k
)
text_values = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=20)


@settings(max_examples=200)
@given(st.dictionaries(keys, st.one_of(text_values, st.binary(max_size=16)), max_size=6))
def test_attachments_survive_the_wire_with_their_keys(pairs: dict[str, str | bytes]) -> None:
    # Keys that differ only in case collide on the wire (as in Dubbo); keep one of each.
    unique: dict[str, tuple[str, str | bytes]] = {}
    for key, value in pairs.items():
        base = key.removesuffix("-bin")
        if base and base.lower() not in unique:
            unique[base.lower()] = (key, value)
    sent = list(unique.values())
    wire = to_wire(sent)
    assert all(k == k.lower() for k, _ in wire)
    assert all(isinstance(v, bytes) for k, v in wire if k.endswith("-bin"))
    expected = []
    for key, value in sent:
        if isinstance(value, bytes) and not key.endswith("-bin"):
            expected.append((key + "-bin", value))
        elif key.endswith("-bin") and isinstance(value, str):
            expected.append((key, value.encode()))
        else:
            expected.append((key, value))
    assert sorted(from_wire(wire)) == sorted(expected)


def test_keys_are_lowered_with_the_originals_in_tri_header_convert() -> None:
    wire = dict(to_wire([("traceId", "t-1"), ("tenant", "acme"), ("spanBytes", b"\x01")]))
    assert wire["traceid"] == "t-1"
    assert wire["tenant"] == "acme"
    assert wire["spanbytes-bin"] == b"\x01"
    # The JSON Dubbo's StreamUtils writes (keys without the -bin suffix).
    assert json.loads(str(wire[HEADER_CONVERT])) == {"traceid": "traceId", "spanbytes": "spanBytes"}
    assert HEADER_CONVERT not in dict(to_wire([("tenant", "acme")]))


def test_a_dubbo_sender_s_convert_header_is_undone() -> None:
    # What a Java consumer sends for attachments traceId (text) and rawKey (byte[]).
    wire = [
        ("traceid", "t-9"),
        ("rawkey-bin", b"\x00"),
        (HEADER_CONVERT, '{"traceid":"traceId","rawkey":"rawKey"}'),
        ("tri-consumer-appname", "java-shop"),
    ]
    assert from_wire(wire) == (
        ("traceId", "t-9"),
        ("rawKey-bin", b"\x00"),
        ("tri-consumer-appname", "java-shop"),
    )


def test_a_malformed_convert_header_renames_nothing() -> None:
    wire = [("traceid", "t"), (HEADER_CONVERT, "{not json")]
    assert from_wire(wire) == (("traceid", "t"),)


def test_percent_encoded_convert_header_is_read() -> None:
    wire = [("k", "v"), (HEADER_CONVERT, '{"k":"K%25"}'.replace("%25", "%2525"))]
    assert from_wire(wire) == (("K%25", "v"),)


def test_protocol_headers_cannot_be_forged_by_attachments() -> None:
    wire = dict(to_wire([("tri-service-version", "9.9.9"), ("Tri-Service-Group", "x"), ("a", "b")]))
    assert wire == {"a": "b"}


def test_retries_control_is_not_sent_and_bytes_become_bin_keys() -> None:
    attachments = attachments_from_metadata([("dubbo.retries", "0"), ("token", b"\xff")])
    assert attachments == {"dubbo.retries": "0", "token-bin": "\udcff"}
    assert metadata_from_attachments(attachments) == (("token-bin", b"\xff"),)


def test_service_headers_come_from_the_provider_url() -> None:
    provider = URL.parse("tri://10.0.0.1:50051/demo.Greeter?version=1.0.0&group=blue")
    assert service_headers(provider, "shop") == (
        ("tri-service-version", "1.0.0"),
        ("tri-service-group", "blue"),
        ("tri-consumer-appname", "shop"),
    )
    bare = URL.parse("tri://10.0.0.1:50051/demo.Greeter")
    assert service_headers(bare, "shop") == (("tri-consumer-appname", "shop"),)


def test_a_wildcard_consumer_keys_callables_by_version_and_group() -> None:
    one = URL.parse("tri://10.0.0.1:50051/demo.Greeter?version=1.0.0")
    two = URL.parse("tri://10.0.0.1:50051/demo.Greeter?version=2.0.0")
    exact = TripleCaller.for_consumer("shop", "1.0.0", "")
    assert exact.key(one) == exact.key(two) == "10.0.0.1:50051"
    for caller in (
        TripleCaller.for_consumer("shop", "*", ""),
        TripleCaller.for_consumer("shop", "1.0.0", "a,b"),
        TripleCaller.for_consumer("shop", "1.0.0", "*"),
    ):
        assert caller.several_targets
        assert caller.key(one) != caller.key(two)


def _export(version: str, group: str = "", name: str = "") -> Export:
    return Export("demo.Greeter", version, group, {}, name or f"{group}/{version}")


def test_a_call_reaches_the_servicer_its_headers_name() -> None:
    table = ServiceTable([_export("1.0.0"), _export("2.0.0"), _export("2.0.0", "blue")])
    assert table.resolve("", "2.0.0").name == "/2.0.0"
    assert table.resolve("blue", "2.0.0").name == "blue/2.0.0"
    assert table.resolve("", "1.0.0").name == "/1.0.0"


def test_dubbo_fallback_version_1_0_0_then_the_default() -> None:
    table = ServiceTable([_export("2.0.0"), _export("1.0.0"), _export("1.0.0", "blue")])
    # Unknown version: that group's 1.0.0 (Dubbo's DEFAULT_VERSION) ...
    assert table.resolve("blue", "9.9.9").name == "blue/1.0.0"
    assert table.resolve("", "").name == "/1.0.0"
    # ... else the first exported (no servicer without version and group here).
    assert table.resolve("green", "9.9.9").name == "/2.0.0"


def test_the_unversioned_servicer_is_the_default() -> None:
    table = ServiceTable([_export("2.0.0"), _export("", name="plain")])
    assert table.resolve("green", "3.0.0").name == "plain"
    assert table.resolve("", "").name == "plain"
    assert table.resolve("", "2.0.0").name == "/2.0.0"


def test_two_servicers_with_one_version_and_group_are_refused() -> None:
    with pytest.raises(ValueError, match=r"both export demo\.Greeter:1\.0\.0"):
        ServiceTable([_export("1.0.0", name="A"), _export("1.0.0", name="B")])


def test_servicers_are_grouped_by_service_with_their_options() -> None:
    @dubbo_py.service(version="1.0.0")
    class V1(greeter_pb2_grpc.GreeterServicer):
        pass

    @dubbo_py.service(version="2.0.0", group="blue")
    class V2(greeter_pb2_grpc.GreeterServicer):
        pass

    (table,) = tables_of([V1(), V2()])
    assert [(e.name, e.version, e.group) for e in table.exports] == [
        ("V1", "1.0.0", ""),
        ("V2", "2.0.0", "blue"),
    ]
    assert set(table.exports[0].handlers) == {"SayHello", "SayHelloStream"}


class _Context:
    def __init__(self, metadata: Any) -> None:
        self.metadata = metadata
        self.trailing: Any = None

    def invocation_metadata(self) -> Any:
        return self.metadata

    def set_trailing_metadata(self, trailing: Any) -> None:
        self.trailing = trailing

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"


def test_the_servicer_context_speaks_dubbo_keys_both_ways() -> None:
    raw = _Context((("traceid", "t"), (HEADER_CONVERT, '{"traceid":"traceId"}')))
    context = TripleContext(raw)
    assert context.invocation_metadata() == (("traceId", "t"),)
    context.set_trailing_metadata([("spanId", "s"), ("blob", b"\x00")])
    assert dict(raw.trailing) == {
        "spanid": "s",
        "blob-bin": b"\x00",
        HEADER_CONVERT: '{"spanid":"spanId"}',
    }
    assert context.peer() == "ipv4:127.0.0.1:1"  # everything else is the real context's
