"""Application-level documents in Dubbo 3.3's formats: instance node, metadata, revision."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dubbo_py.registry.application.discovery import provider_url
from dubbo_py.registry.application.instance import InstanceError, ServiceInstance
from dubbo_py.registry.application.metadata import (
    EMPTY_REVISION,
    MetadataError,
    MetadataInfo,
    ServiceInfo,
    compute_revision,
    java_map_string,
)
from dubbo_py.url import URL
from tests.support.java_app_level import DOCUMENTED_INSTANCE, java_instance, java_metadata

PROVIDER = URL.parse(
    "tri://10.0.0.5:50051/demo.Greeter?anyhost=false&application=greeter&dubbo=2.0.2"
    "&interface=demo.Greeter&methods=SayHello,SayHelloStream&pid=4242&release=0.9.0"
    "&side=provider&timestamp=1700000000000&version=1.0.0&weight=100"
)


def test_dubbo_documented_instance_node_reads_with_its_fields() -> None:
    instance = ServiceInstance.parse(DOCUMENTED_INSTANCE)
    assert (instance.app, instance.host, instance.port) == (
        "first-dubbo-provider",
        "30.221.146.35",
        20880,
    )
    assert instance.id == "30.221.146.35:20880"
    assert instance.revision == "871fbc9cb2730caea9b0d858852d5ede"
    assert instance.storage_type == "local"
    assert instance.endpoints() == {"dubbo": 20880}
    assert instance.registration_time_ms == 1674960781893


def test_our_instance_node_is_curators_json_field_for_field() -> None:
    instance = ServiceInstance(
        "greeter",
        "10.0.0.5",
        50051,
        {
            "timestamp": "1",
            "meta-v": "2.0.0",
            "dubbo.metadata.storage-type": "remote",
            "dubbo.metadata.revision": "abc",
            "dubbo.endpoints": '[{"port":50051,"protocol":"tri"}]',
        },
        registration_time_ms=1,
    )
    # Byte for byte what Java writes for the same instance (hand-written in Java's layout).
    assert instance.to_json() == java_instance("greeter", "10.0.0.5", 50051, "abc")
    doc = json.loads(instance.to_json())
    assert list(doc) == [
        "name",
        "id",
        "address",
        "port",
        "sslPort",
        "payload",
        "registrationTimeUTC",
        "serviceType",
        "uriSpec",
    ]
    assert doc["payload"]["@class"] == "org.apache.dubbo.registry.zookeeper.ZookeeperInstance"
    assert ServiceInstance.parse(instance.to_json()) == instance


@pytest.mark.parametrize(
    "data",
    [b"", b"[]", b'{"name":"a"}', b'{"name":"a","address":"h","port":0}', b"\xff"],
)
def test_bad_instance_nodes_are_refused_with_a_reason(data: bytes) -> None:
    with pytest.raises(InstanceError, match="/services/a/x"):
        ServiceInstance.parse(data, "/services/a/x")


def test_java_metadata_document_reads_and_builds_the_provider_url() -> None:
    info = MetadataInfo.parse(java_metadata("shop-java", "r1", "demo.Greeter", version="1.0.0"))
    assert info.app == "shop-java" and info.revision == "r1"
    (service,) = info.services_of("demo.Greeter")
    assert service.match_key == "demo.Greeter:1.0.0:tri"
    instance = ServiceInstance.parse(java_instance("shop-java", "10.1.1.1", 50070, "r1"))
    url = provider_url(instance, service)
    assert (url.protocol, url.address, url.path) == ("tri", "10.1.1.1:50070", "demo.Greeter")
    assert url.get_str("version") == "1.0.0"
    assert url.get_str("interface") == "demo.Greeter"
    assert url.get_str("application") == "shop-java"
    assert url.get_str("timeout") == "3000"
    assert url.get_str("timestamp") == "1"  # from the instance
    assert not [k for k in url.parameters if k.startswith("dubbo.")]


def test_java_test_document_without_port_uses_the_instance_endpoint() -> None:
    # The shape of Dubbo's own ServiceInstancesChangedListenerTest documents: no port, no group.
    text = (
        '{"app":"app1","revision":"555","services":{"org.apache.dubbo.demo.DemoService:dubbo":'
        '{"name":"org.apache.dubbo.demo.DemoService","protocol":"tri",'
        '"path":"org.apache.dubbo.demo.DemoService","params":{"side":"provider"}}}}'
    )
    (service,) = MetadataInfo.parse(text).services_of("org.apache.dubbo.demo.DemoService")
    instance = ServiceInstance(
        "app1", "10.0.0.1", 20880, {"dubbo.endpoints": '[{"port":50052,"protocol":"tri"}]'}
    )
    assert provider_url(instance, service).port == 50052


@pytest.mark.parametrize(
    "text", ["", "[]", '{"services":[]}', '{"services":{"k":{"port":1}}}', "{bad"]
)
def test_bad_metadata_documents_are_refused_with_a_reason(text: str) -> None:
    with pytest.raises(MetadataError, match="/dubbo/metadata/a/r"):
        MetadataInfo.parse(text, "/dubbo/metadata/a/r")


def test_revision_is_md5_of_app_and_service_descriptions_as_java_computes_it() -> None:
    info = MetadataInfo.of("greeter", [PROVIDER])
    service = info.services["demo.Greeter:1.0.0:tri"]
    # pid and timestamp are kept out (Dubbo's DefaultMetadataParamsFilter).
    assert "pid" not in service.params and "timestamp" not in service.params
    desc = (
        "demo.Greeter:1.0.0:tri50051demo.Greeter{anyhost=false, application=greeter, "
        "dubbo=2.0.2, interface=demo.Greeter, methods=SayHello,SayHelloStream, release=0.9.0, "
        "side=provider, version=1.0.0, weight=100}"
    )
    assert service.desc() == desc
    assert info.revision == hashlib.md5(("greeter" + desc).encode()).hexdigest()
    assert MetadataInfo.of("greeter", []).revision == EMPTY_REVISION


def test_revision_ignores_process_details_and_follows_what_consumers_see() -> None:
    other_process = PROVIDER.with_parameters(pid="1", timestamp="2")
    assert (
        MetadataInfo.of("greeter", [other_process]).revision
        == MetadataInfo.of("greeter", [PROVIDER]).revision
    )
    heavier = PROVIDER.with_parameters(weight="200")
    assert (
        MetadataInfo.of("greeter", [heavier]).revision
        != MetadataInfo.of("greeter", [PROVIDER]).revision
    )


def test_metadata_round_trips_through_its_json() -> None:
    info = MetadataInfo.of("greeter", [PROVIDER, PROVIDER.with_parameters(version="2.0.0")])
    back = MetadataInfo.parse(info.to_json())
    assert back == info
    assert compute_revision(back.app, back.services) == info.revision


def _utf16_units(text: str) -> list[int]:
    """Java's String.compareTo order: UTF-16 code units."""
    units: list[int] = []
    for ch in text:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    return units


_KEYS = st.text(
    st.characters(min_codepoint=33, max_codepoint=0x2FFFF, exclude_characters=",={}"),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(_KEYS, st.text(max_size=5), max_size=6))
def test_java_map_string_orders_keys_by_utf16_as_treemap_does(params: dict[str, str]) -> None:
    text = java_map_string(params)
    keys = sorted(params, key=_utf16_units)
    assert text == "{" + ", ".join(f"{k}={params[k]}" for k in keys) + "}"


_JAVA = """
import java.security.MessageDigest;
import java.util.*;
public class Rev {
  public static void main(String[] a) throws Exception {
    TreeMap<String,String> p = new TreeMap<>();
    for (int i = 2; i + 1 < a.length; i += 2) p.put(a[i], a[i + 1]);
    String s = a[0] + a[1] + p;
    byte[] d = MessageDigest.getInstance("MD5").digest(s.getBytes("UTF-8"));
    StringBuilder b = new StringBuilder();
    for (byte x : d) b.append(String.format("%02x", x));
    System.out.println(b);
  }
}
"""


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK")
def test_revision_matches_javas_treemap_and_md5(tmp_path: Path) -> None:
    """Java's own TreeMap.toString and MessageDigest over the same input: the parts of the
    revision where Python could differ from Java (key order with non-ASCII keys, map text)."""
    (tmp_path / "Rev.java").write_text(_JAVA)
    subprocess.run(["javac", "Rev.java"], cwd=tmp_path, check=True, timeout=120)
    params = {"b": "1", "a": "x y", "é": "2", "\U0001f600k": "3", "\uff5a": "4", "Z": "5"}
    service = ServiceInfo("demo.G", "", "1.0.0", "tri", 50051, "demo.G", params)
    args = ["app", f"{service.match_key}{service.port}{service.path}"]
    for k, v in params.items():
        args += [k, v]
    out = subprocess.run(
        ["java", "-Dfile.encoding=UTF-8", "-cp", str(tmp_path), "Rev", *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.strip()
    assert compute_revision("app", {service.match_key: service}) == out
