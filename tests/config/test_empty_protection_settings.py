"""``enable-empty-protection`` from every place it can be set, which one wins, and errors that
name the field (the behaviour itself: tests/registry/test_empty_protection.py and
tests/e2e/test_network_faults.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import dubbo_py
from dubbo_py.config.loader import parse_config
from dubbo_py.errors import ConfigError


def _setting(app: dubbo_py.Application) -> list[bool]:
    return [binding.empty_protection for binding in app.bindings]


def _app(tmp_path: Path, text: str, **kwargs: object) -> dubbo_py.Application:
    config = parse_config(text, environ={})
    return dubbo_py.Application(
        config.name,
        config.registry.address,
        config=config,
        cache_path=tmp_path / "c.json",
        **kwargs,  # type: ignore[arg-type]
    )


def test_on_by_default(tmp_path: Path) -> None:
    app = _app(tmp_path, "application: shop\nregistry: zookeeper://127.0.0.1:1\n")
    assert _setting(app) == [True]


@pytest.mark.parametrize("key", ["enable-empty-protection", "enable_empty_protection"])
def test_the_registry_section_and_the_application_section(tmp_path: Path, key: str) -> None:
    in_registry = f"application: shop\nregistry: {{address: 'etcd://127.0.0.1:1', {key}: false}}\n"
    assert _setting(_app(tmp_path, in_registry)) == [False]
    in_application = f"application: {{name: shop, {key}: false}}\nregistry: etcd://127.0.0.1:1\n"
    assert _setting(_app(tmp_path, in_application)) == [False]


def test_the_registry_wins_over_the_application_and_the_address_over_both(tmp_path: Path) -> None:
    text = (
        "application: {name: shop, enable-empty-protection: false}\n"
        "registries:\n"
        "  a: {address: 'zookeeper://127.0.0.1:1', enable-empty-protection: true}\n"
        "  b: {address: 'zookeeper://127.0.0.1:2?enable-empty-protection=false'}\n"
        "  c: {address: 'zookeeper://127.0.0.1:3'}\n"
    )
    config = parse_config(text, environ={})
    app = dubbo_py.Application(config.name, config=config, cache_path=tmp_path / "c.json")
    assert _setting(app) == [True, False, False]
    code = dubbo_py.Application(
        "shop",
        "zookeeper://127.0.0.1:1",
        enable_empty_protection=False,
        cache_path=tmp_path / "d.json",
    )
    assert _setting(code) == [False]
    address_wins = dubbo_py.Application(
        "shop",
        "zookeeper://127.0.0.1:1?enable-empty-protection=true",
        enable_empty_protection=False,
        cache_path=tmp_path / "e.json",
    )
    assert _setting(address_wins) == [True]


@pytest.mark.parametrize(
    ("text", "path"),
    [
        (
            "application: shop\nregistry: {address: 'zookeeper://h:1', "
            "enable-empty-protection: maybe}\n",
            "registry.enable-empty-protection",
        ),
        (
            "application: {name: shop, enable-empty-protection: 1.5}\n",
            "application.enable-empty-protection",
        ),
        (
            "application: shop\nregistry: {address: 'zookeeper://h:1', "
            "enable-empty-protection: true, enable_empty_protection: false}\n",
            "registry.enable_empty_protection",
        ),
        (
            "application: shop\nregistry: 'zookeeper://h:1?enable-empty-protection=maybe'\n",
            "registry.address",
        ),
    ],
)
def test_errors_name_the_field(text: str, path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, environ={})
    assert path in str(caught.value)
