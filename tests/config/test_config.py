"""dubbo.yaml: what a file says becomes the same objects code would build; errors name the key."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dubbo_py.config.loader import load_config, parse_config
from dubbo_py.config.model import ReferenceConfig
from dubbo_py.config.tls import ClientTLS
from dubbo_py.errors import ConfigError
from dubbo_py.provider.service import ServiceOptions

FULL = """
application: shop
registry: {address: "zookeeper://127.0.0.1:2181/prod", auth: "admin:secret"}
protocol: {port: 50051, host: 10.0.0.5, tls: {cert_chain: s.pem, private_key: s.key}}
services:
  demo.Greeter: {version: 1.0.0, weight: 50, tags: {env: gray}, shard: 1, shards: 4}
references:
  demo.Greeter:
    version: 1.0.0
    loadbalance: roundrobin
    retries: 1
    timeout: 1.5
    tls: {ca: ca.pem}
    idempotent: [SayHello]
    methods: {SayHello: {retries: 0, mock: "fail:return {}"}}
"""


def test_full_file_gives_the_same_objects_as_code(tmp_path: Path) -> None:
    config = parse_config(FULL, base=tmp_path, environ={})
    assert config.name == "shop"
    assert config.registry.address == "zookeeper://127.0.0.1:2181/prod"
    assert config.registry.auth == "admin:secret"
    assert config.protocol.port == 50051 and config.protocol.host == "10.0.0.5"
    assert config.protocol.tls is not None
    assert Path(config.protocol.tls.cert_chain) == tmp_path / "s.pem"
    assert config.services["demo.Greeter"] == ServiceOptions(
        version="1.0.0", weight=50, tags={"env": "gray"}, shard=1, shards=4
    )
    assert config.references["demo.Greeter"] == ReferenceConfig(
        version="1.0.0",
        loadbalance="roundrobin",
        retries=1,
        timeout=1.5,
        tls=ClientTLS(ca=tmp_path / "ca.pem"),
        idempotent=frozenset({"SayHello"}),
        methods={"SayHello": {"retries": 0, "mock": "fail:return {}"}},
    )


def test_environment_overrides_the_file() -> None:
    env = {
        "DUBBO_PY_APPLICATION": "other",
        "DUBBO_PY_REGISTRY": "sqlite:///tmp/x.db",
        "DUBBO_PY_PROTOCOL_PORT": "6000",
        "DUBBO_PY_HOST": "192.0.2.1",
    }
    config = parse_config("application: shop\nprotocol: {port: 1}\n", environ=env)
    assert config.name == "other"
    assert config.registry.address == "sqlite:///tmp/x.db"
    assert config.protocol.port == 6000
    assert config.protocol.host == "192.0.2.1"


@pytest.mark.parametrize(
    ("text", "path", "problem"),
    [
        ("registry: {address: x}\n", "application", "required"),
        ("application: a\nregistry: {address: 'ftp://x'}\n", "registry.address", "scheme"),
        ("application: a\nregistry: {auth: nocolon}\n", "registry.auth", "user:password"),
        ("application: a\nprotocol: {port: 70000}\n", "protocol.port", "not a port"),
        ("application: a\nprotocol: {port: abc}\n", "protocol.port", "expected int"),
        ("application: a\nprotocol: {tls: {cert_chain: c}}\n", "protocol.tls.private_key", ""),
        (
            "application: a\nreferences: {s: {loadbalance: fastest}}\n",
            "references.s.loadbalance",
            "fastest",
        ),
        ("application: a\nreferences: {s: {retries: -1}}\n", "references.s.retries", ">= 0"),
        ("application: a\nreferences: {s: {timeout: true}}\n", "references.s.timeout", "boolean"),
        (
            "application: a\nreferences: {s: {methods: {M: {color: red}}}}\n",
            "references.s.methods.M.color",
            "unknown",
        ),
        (
            "application: a\nreferences: {s: {tls: {cert_chain: c}}}\n",
            "references.s.tls",
            "together",
        ),
        ("application: a\nservices: {s: {weight: -1}}\n", "services.s", "weight"),
        ("application: a\nservices: {s: {colour: x}}\n", "services.s.colour", "unknown key"),
        ("application: a\nregistr: {}\n", "registr", "unknown key"),
    ],
)
def test_errors_name_the_key_path_and_problem(text: str, path: str, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="dubbo.yaml", environ={})
    assert info.value.path == path
    assert problem in info.value.problem
    assert str(info.value).startswith("dubbo.yaml: ")


def test_yaml_syntax_errors_give_line_and_column() -> None:
    with pytest.raises(ConfigError, match=r"line 2, column 11: invalid YAML"):
        parse_config("application: a\nregistry: @x\n", environ={})


def test_unsafe_yaml_tags_are_refused() -> None:
    with pytest.raises(ConfigError, match="invalid YAML"):
        parse_config("application: !!python/object/apply:os.system ['true']\n", environ={})


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.yaml"):
        load_config(tmp_path / "nope.yaml")


def test_reference_config_merge_is_code_over_file() -> None:
    base = ReferenceConfig(version="1.0.0", timeout=2.0)
    merged = base.merged(timeout=0.5, loadbalance="roundrobin")
    assert (merged.version, merged.timeout, merged.loadbalance) == ("1.0.0", 0.5, "roundrobin")
    with pytest.raises(TypeError, match="colour"):
        base.merged(colour="red")
    assert base.merged(attachments=None, timeout=None) == base  # None: not given


@given(st.text(max_size=200))
def test_arbitrary_text_is_a_config_or_a_config_error(text: str) -> None:
    with contextlib.suppress(ConfigError):
        parse_config(text, environ={})


def test_tls_to_every_provider_and_unset_retries_from_the_file(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    text = (
        "application: shop\n"
        "references:\n"
        "  demo.Greeter: {tls: {ca: ca.pem, enabled: true}}\n"
        "  demo.Other: {parameters: {ssl-enabled: 'true'}}\n"
        "  demo.Plain: {tls: {enabled: false}}\n"
    )
    config = parse_config(text, base=tmp_path)
    greeter = config.references["demo.Greeter"]
    assert greeter.client_tls is not None and greeter.client_tls.enabled is True
    other = config.references["demo.Other"].client_tls
    assert other is not None and other.enabled is True
    plain = config.references["demo.Plain"].client_tls
    assert plain is not None and plain.enabled is False
    # Not set in the file: the providers' registered values apply (see docs/configuration.md).
    assert greeter.retries is None and greeter.timeout is None
    with pytest.raises(ConfigError, match=r"references\.demo\.Greeter\.tls\.enabled"):
        parse_config("application: a\nreferences: {demo.Greeter: {tls: {enabled: yes-ish}}}\n")
