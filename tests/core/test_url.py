"""The URL value: parsing and encoding exactly as Apache Dubbo does."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dubbo_py.errors import URLError
from dubbo_py.registry import layout
from dubbo_py.url import URL, encode_component


def test_parse_provider_url_fields() -> None:
    url = URL.parse("tri://admin:hello1234@10.20.130.230:20880/context/path?version=1.0.0&app=x")
    assert url.protocol == "tri"
    assert (url.username, url.password) == ("admin", "hello1234")
    assert (url.host, url.port) == ("10.20.130.230", 20880)
    assert url.path == "context/path"
    assert url.parameters == {"version": "1.0.0", "app": "x"}
    assert url.address == "10.20.130.230:20880"


def test_parse_follows_dubbo_value_of_corner_cases() -> None:
    # Dubbo's URLTest: no protocol, no port, file-style protocol, bare keys, default. prefix.
    assert URL.parse("10.20.130.230:20880").host == "10.20.130.230"
    assert URL.parse("file:/path/to/file.txt").protocol == "file"
    assert URL.parse("file:/path/to/file.txt").path == "path/to/file.txt"
    assert URL.parse("dubbo://10.0.0.1?flag").parameters == {"flag": "flag"}
    with_default = URL.parse("dubbo://10.0.0.1/s?default.timeout=3&retries=1")
    assert with_default.get("timeout") == "3"
    assert URL.parse("dubbo://10.0.0.1/s?default.timeout=3&timeout=5").get("timeout") == "5"


def test_ipv6_hosts() -> None:
    url = URL.parse("tri://[::1]:50051/demo.Greeter")
    assert (url.host, url.port) == ("[::1]", 50051)
    scoped = URL.parse("tri://[fe80::1%en0]/demo.Greeter")
    assert (scoped.host, scoped.port) == ("[fe80::1%en0]", 0)


@pytest.mark.parametrize(
    "bad", ["", "   ", "://host", "tri://host:notaport/x", "tri://host:99999/x"]
)
def test_bad_urls_raise_url_error_naming_the_input(bad: str) -> None:
    with pytest.raises(URLError):
        URL.parse(bad)


def test_special_keys_in_to_map() -> None:
    url = URL.parse("tri://10.0.0.5:50051/demo.Greeter?application=shop")
    m = url.to_map()
    assert m["host"] == "10.0.0.5"
    assert m["port"] == "50051"
    assert m["address"] == "10.0.0.5:50051"
    assert m["protocol"] == "tri"
    assert m["path"] == "demo.Greeter"
    assert m["application"] == "shop"


def test_encode_matches_java_url_encoder() -> None:
    # java.net.URLEncoder keeps A-Z a-z 0-9 . - * _ and writes space as '+'.
    assert encode_component("a b~c*d_e.f-g,h/i:j?k=l&m") == (
        "a+b%7Ec*d_e.f-g%2Ch%2Fi%3Aj%3Fk%3Dl%26m"
    )


def test_provider_node_is_what_dubbo_writes() -> None:
    # Hand-checked against Apache Dubbo's ZookeeperRegistry: the node name is
    # URL.encode(url.toFullString()) under /dubbo/<interface>/providers, parameters sorted.
    url = URL.parse(
        "tri://10.0.0.5:50051/demo.Greeter?weight=100&warmup=600000&version=1.0.0"
        "&timestamp=1764675600000&side=provider&release=0.1.0&pid=4242"
        "&methods=SayHello,SayHelloStream&interface=demo.Greeter&dubbo=2.0.2"
        "&application=greeter-provider&anyhost=true"
    )
    assert layout.node_path(url) == (
        "/dubbo/demo.Greeter/providers/"
        "tri%3A%2F%2F10.0.0.5%3A50051%2Fdemo.Greeter%3Fanyhost%3Dtrue"
        "%26application%3Dgreeter-provider%26dubbo%3D2.0.2%26interface%3Ddemo.Greeter"
        "%26methods%3DSayHello%2CSayHelloStream%26pid%3D4242%26release%3D0.1.0"
        "%26side%3Dprovider%26timestamp%3D1764675600000%26version%3D1.0.0"
        "%26warmup%3D600000%26weight%3D100"
    )


def test_rule_key_keeps_blank_parts_like_dubbo() -> None:
    assert layout.rule_key("demo.Greeter") == "demo.Greeter::"
    assert layout.rule_key("demo.Greeter", "1.0.0") == "demo.Greeter:1.0.0:"
    assert layout.rule_key("demo.Greeter", "1.0.0", "g") == "demo.Greeter:1.0.0:g"


def test_service_key_and_method_parameters() -> None:
    url = URL.parse("tri://h:1/demo.Greeter?group=g&version=1&timeout=5&SayHello.timeout=9")
    assert url.service_key == "g/demo.Greeter:1"
    assert url.get_method_parameter("SayHello", "timeout") == "9"
    assert url.get_method_parameter("Other", "timeout") == "5"


def test_equal_urls_hash_alike_and_are_immutable() -> None:
    a = URL.parse("tri://h:1/s?a=1&b=2")
    b = URL.parse("tri://h:1/s?b=2&a=1")
    assert a == b and hash(a) == hash(b)
    with pytest.raises(TypeError):
        a.parameters["a"] = "3"  # type: ignore[index]
    assert a.with_parameters(a="3").get("a") == "3" and a.get("a") == "1"


_token = st.text(
    alphabet=st.characters(
        codec="utf-8", exclude_characters="?&=/:@%[]", exclude_categories=("Cs", "Cc", "Zs")
    ),
    min_size=1,
    max_size=12,
).filter(lambda s: s == s.strip() and not s.startswith("default."))
_host = st.one_of(
    st.from_regex(r"\A[a-z][a-z0-9-]{0,10}(\.[a-z0-9-]{1,8}){0,2}\Z"),
    st.ip_addresses(v=4).map(str),
    st.ip_addresses(v=6).map(lambda a: f"[{a}]"),
)


@st.composite
def urls(draw: st.DrawFn) -> URL:
    user = draw(st.one_of(st.just(""), st.from_regex(r"\A[a-z]{1,6}\Z")))
    return URL(
        protocol=draw(st.sampled_from(["tri", "dubbo", "consumer", "route", "override"])),
        host=draw(_host),
        port=draw(st.integers(0, 65535)),
        path=draw(st.one_of(st.just(""), st.from_regex(r"\A[a-zA-Z][\w.]{0,20}\Z"))),
        username=user,
        password=draw(st.from_regex(r"\A[a-z0-9]{1,6}\Z")) if user else "",
        parameters=draw(st.dictionaries(_token, _token, max_size=6)),
    )


@given(urls())
def test_parse_of_to_string_is_identity(url: URL) -> None:
    assert URL.parse(url.to_string()) == url


@given(urls())
def test_decode_of_encode_is_identity(url: URL) -> None:
    assert URL.decode(url.encode()) == url


@given(st.text(max_size=60))
def test_arbitrary_text_parses_or_raises_url_error(text: str) -> None:
    with contextlib.suppress(URLError):
        URL.parse(text)


@pytest.mark.parametrize(
    "text",
    [
        "tri://10.0.0.5:50051?service=demo.Greeter",  # Dubbo 3 Python (3.0.0b1): no path
        "dubbo://192.168.1.7:20880/org.apache.dubbo.demo.DemoService?anyhost=true"
        "&application=demo-provider&deprecated=false&dubbo=2.0.2&dynamic=true&generic=false"
        "&interface=org.apache.dubbo.demo.DemoService&methods=sayHello,sayHelloAsync&pid=1"
        "&release=3.3.0&service-name-mapping=true&side=provider&timestamp=1700000000000",
        "tri://[2001:db8::7]:50051/demo.Greeter?side=provider",
        "dubbo://fe80::1%eth0:20880/demo.Greeter",
        "consumer://10.0.0.1/demo.Greeter?category=consumers&check=false&side=consumer",
        "empty://0.0.0.0/demo.Greeter?category=routers",
        "override://0.0.0.0/demo.Greeter?category=configurators&dynamic=false&timeout=5000",
        "route://0.0.0.0/demo.Greeter?category=routers&router=condition&rule=%3D%3E+host%3D1",
        "condition://0.0.0.0/demo.Greeter?category=routers&rule=host+%3D+1",
        "script://0.0.0.0/demo.Greeter?category=routers&type=starlark&rule=x",
        "override://*/demo.Greeter?category=configurators&disabled=true",
        "tri://admin:secret@provider-7.prod.example.com:443/a/b/demo.Greeter",
    ],
)
def test_decode_accepts_every_url_shape_dubbo_writes(text: str) -> None:
    assert URL.decode(encode_component(text)) == URL.parse(text)


@pytest.mark.parametrize(
    "node",
    [
        "hello",
        "hello world",
        "garbage://",
        "1tri://h/s",
        "tri://ho st/s",
        "://h/s",
        "a%00b",
        "tri://:50051/s",
        "tri://h/s%00x",
        "..",
        "%E2%98%83",
    ],
)
def test_decode_refuses_text_that_is_not_a_url(node: str) -> None:
    with pytest.raises(URLError, match="not a URL"):
        URL.decode(node)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_decode_of_any_node_name_is_a_url_with_a_host_or_a_url_error(name: str) -> None:
    try:
        url = URL.decode(name)
    except URLError:
        return
    assert url.protocol and url.host


def test_urls_parsed_from_one_fleet_share_their_parameter_strings() -> None:
    # What keeps a consumer of 100 000 providers small (bench/bench_notify_bind.py prints the
    # bytes per provider): the keys and the values providers repeat are one string each.
    def node(i: int) -> str:
        return URL(
            "tri",
            f"10.0.0.{i}",
            50051,
            "demo.Greeter",
            parameters={"application": "greeter", "interface": "demo.Greeter", "pid": str(i)},
        ).encode()

    a, b = URL.decode(node(1)), URL.decode(node(2))
    assert a == URL.parse(a.to_string()) and a.parameters["pid"] == "1"
    key_a = next(k for k in a.parameters if k == "application")
    key_b = next(k for k in b.parameters if k == "application")
    assert key_a is key_b
    assert a.parameters["application"] is b.parameters["application"]
    assert a.parameters["interface"] is b.parameters["interface"] is b.path
    assert a.protocol is b.protocol
