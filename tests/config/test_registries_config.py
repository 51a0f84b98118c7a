"""Several registries in dubbo.yaml (``registries:``) and in code: what they become, and errors
that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest

import dubbo_py
from dubbo_py.app.registries import registry_choices
from dubbo_py.config.loader import parse_config
from dubbo_py.config.model import RegistryConfig
from dubbo_py.errors import ConfigError

TWO_ZONES = """
application: {name: shop, zone: A}
registry: {register_mode: interface}
registries:
  a: {address: "zookeeper://10.0.0.1:2181", zone: A}
  b: {address: "zookeeper://10.1.0.1:2181", zone: B, weight: 300, preferred: true}
  audit: {address: "etcd://10.2.0.1:2379", subscribe: false}
services:
  demo.Greeter: {registries: [a, b]}
references:
  demo.Greeter: {registries: [b]}
"""


def test_registries_section_gives_one_registry_config_each() -> None:
    config = parse_config(TWO_ZONES, environ={})
    assert config.zone == "A"
    assert config.registry.address is None
    assert list(config.registries) == ["a", "b", "audit"]
    b = config.registries["b"]
    assert b == RegistryConfig(
        "zookeeper://10.1.0.1:2181",
        register_mode="interface",
        zone="B",
        weight=300,
        preferred=True,
    )
    assert config.registries["audit"].subscribe is False
    assert config.registries["audit"].register is True
    assert config.services["demo.Greeter"].registries == ("a", "b")
    assert config.references["demo.Greeter"].registries == ("b",)
    # Not a URL parameter of the provider.
    assert "registries" not in config.services["demo.Greeter"].url_parameters()


def test_environment_registry_replaces_the_section() -> None:
    config = parse_config(TWO_ZONES, environ={"DUBBO_PY_REGISTRY": "zookeeper://z:2181"})
    assert config.registries == {}
    assert config.registry.address == "zookeeper://z:2181"


@pytest.mark.parametrize(
    ("text", "path", "problem"),
    [
        ("registries: {a: {zone: A}}", "registries.a.address", "required"),
        ("registries: {a: {address: 'nope'}}", "registries.a.address", "expected"),
        ("registries: {a: 'tri://h:1'}", "registries.a.address", "not a registry"),
        ("registries: {a: {address: 'zookeeper://h', weight: -1}}", "registries.a.weight", ">= 0"),
        ("registries: {a: {address: 'zookeeper://h', weight: x}}", "registries.a.weight", "int"),
        (
            "registries: {a: {address: 'zookeeper://h', colour: 1}}",
            "registries.a.colour",
            "unknown",
        ),
        (
            "registries: {a: {address: 'zookeeper://h', preferred: 1}}",
            "registries.a.preferred",
            "bool",
        ),
        ("registries: {a: {address: 'zookeeper://h', zone: ''}}", "registries.a.zone", "zone"),
        ("registries: {}", "registries", "at least one"),
        (
            "registry: 'zookeeper://x'\nregistries: {a: 'zookeeper://h'}",
            "registry.address",
            "registries:",
        ),
        (
            "registries: {a: 'zookeeper://h'}\nreferences: {demo.Greeter: {registries: [c]}}",
            "references.demo.Greeter.registries",
            "unknown registry id 'c'",
        ),
        (
            "registries: {a: 'zookeeper://h'}\nservices: {demo.Greeter: {registries: [c]}}",
            "services.demo.Greeter.registries",
            "unknown registry id 'c'",
        ),
        (
            "references: {demo.Greeter: {registries: [{x: 1}]}}",
            "references.demo.Greeter.registries",
            "list of registry ids",
        ),
        ("application: {name: shop, zone: 3}", "application.zone", "zone"),
    ],
)
def test_errors_name_the_field(text: str, path: str, problem: str) -> None:
    if not text.startswith("application"):
        text = f"application: shop\n{text}"
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="dubbo.yaml", environ={})
    assert info.value.path == path
    assert problem in info.value.problem
    assert str(info.value).startswith("dubbo.yaml: ")


def test_code_takes_a_string_a_list_or_a_mapping() -> None:
    (one,) = registry_choices("zookeeper://h:2181")
    assert one.id == "" and one.address.kind == "zookeeper"
    listed = registry_choices(["zookeeper://a:2181", "etcd://b:2379"])
    assert [c.id for c in listed] == ["zookeeper://a:2181", "etcd://b:2379"]
    mapped = registry_choices({"a": "zookeeper://a", "b": RegistryConfig("etcd://b", zone="B")})
    assert [(c.id, c.config.zone) for c in mapped] == [("a", None), ("b", "B")]
    with pytest.raises(ValueError, match="unique"):
        registry_choices(["zookeeper://a:2181", "zookeeper://a:2181"])
    with pytest.raises(ValueError, match="direct"):
        registry_choices(["zookeeper://a:2181", "tri://h:1"])
    with pytest.raises(ValueError, match="empty"):
        registry_choices([])


def test_a_string_registry_keeps_the_single_registry_application(tmp_path: Path) -> None:
    db = f"sqlite://{tmp_path}/r.db"
    with dubbo_py.Application("shop", db) as app:
        assert len(app.bindings) == 1
        assert str(app.address) == db
        assert app.registry_name == db
    with dubbo_py.Application("shop", [db, f"sqlite://{tmp_path}/s.db"], zone="A") as app:
        assert [b.id for b in app.bindings] == [db, f"sqlite://{tmp_path}/s.db"]
        assert app.zone == "A"
