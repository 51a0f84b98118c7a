"""Dubbo's registry URL parameters wherever an address is accepted (issue 31, item 5): the
address parser, ``Application(registry=...)``'s choices, ``dubbo.yaml`` (``registry:`` and
``registries:``), ``$DUBBO_PY_REGISTRY`` and the CLI's ``--registry``; checked as the same
fields of ``registries:`` are, unknown names refused naming them and the address, Dubbo's
parameters without a meaning here logged once."""

from __future__ import annotations

import logging

import pytest
from click.testing import CliRunner

from dubbo_py import ConfigError, RegistryAddressError, RegistryConfig
from dubbo_py.admin.cli import cli
from dubbo_py.app.registries import registry_choices
from dubbo_py.config.loader import parse_config
from dubbo_py.registry.store import parameters
from dubbo_py.registry.store.address import parse_registry_address


def test_settings_connection_and_identity() -> None:
    address = parse_registry_address(
        "zookeeper://shop:pw@h1:2181/prod?backup=h2:2181,h3&zone=a&registry.weight=50"
        "&preferred=true&register=false&subscribe=true&register-mode=instance"
        "&timeout=2000&session=30000&group=/dubbo"
    )
    assert (address.location, address.chroot) == ("h1:2181,h2:2181,h3:2181", "/prod")
    assert str(address) == "zookeeper://h1:2181,h2:2181,h3:2181/prod"
    assert address.settings() == {
        "zone": "a",
        "weight": 50,
        "preferred": True,
        "register": False,
        "subscribe": True,
        "register_mode": "instance",
        "auth": "shop:pw",
    }
    assert (address.parameters.connect_timeout, address.parameters.session_timeout) == (2.0, 30.0)
    # The parameters are not part of the address's identity (one store for both).
    assert address == parse_registry_address("zookeeper://h1:2181,h2:2181,h3:2181/prod")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("zookeeper://h?zonee=a", "unknown registry parameter 'zonee'"),
        ("zookeeper://h?weight=-1", "weight must be >= 0"),
        ("zookeeper://h?weight=heavy", "weight must be an integer"),
        ("zookeeper://h?preferred=yes", "preferred must be true or false"),
        ("zookeeper://h?zone=", "zone must be a zone name"),
        ("zookeeper://h?zone=a&registry.zone=b", "'registry.zone' repeats 'zone'"),
        ("zookeeper://h?register-mode=both", "is not a register mode"),
        ("zookeeper://h?group=other", "group=other asks for the registry root /other"),
        ("zookeeper://h?timeout=0", "timeout must be >= 1"),
        ("zookeeper://user@h", "expected user:password@"),
        ("sqlite:///tmp/r.db?session=10", "session is a parameter of a registry server"),
        ("tri://127.0.0.1:1?zone=a", "a direct provider address takes no parameters"),
    ],
)
def test_bad_parameters_are_refused_naming_them_and_the_address(text: str, problem: str) -> None:
    with pytest.raises(RegistryAddressError) as info:
        parse_registry_address(text)
    assert problem in str(info.value) and repr(text) in str(info.value)


def test_dubbos_parameters_without_a_meaning_are_logged_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parameters, "_logged", set())
    caplog.set_level(logging.WARNING, "dubbo_py.registry.store.parameters")
    for _ in range(3):
        parse_registry_address("zookeeper://h:2181?check=false&file=/tmp/c&dynamic")
    names = sorted(r.getMessage().split("'")[1] for r in caplog.records)
    assert names == ["check", "dynamic", "file"]


def test_choices_and_the_environment_read_them() -> None:
    [a, b] = registry_choices(["zookeeper://zkA?zone=a", "zookeeper://zkB?zone=b&weight=10"])
    assert (a.config.zone, b.config.zone, b.config.weight) == ("a", "b", 10)
    [only] = registry_choices({"x": RegistryConfig("zookeeper://zkA?preferred=true", zone="a")})
    assert only.config.preferred and only.config.zone == "a"
    with pytest.raises(ConfigError, match="zone=b, but the registry's zone is 'a'"):
        registry_choices({"x": RegistryConfig("zookeeper://zkA?zone=b", zone="a")})
    config = parse_config("application: a\n", environ={"DUBBO_PY_REGISTRY": "zookeeper://z?zone=e"})
    assert config.registry.zone == "e"


def test_dubbo_yaml_reads_them_and_names_the_entry() -> None:
    config = parse_config(
        "application: a\nregistries:\n  hz: {address: 'zookeeper://zk?zone=hz&weight=5'}\n"
    )
    assert (config.registries["hz"].zone, config.registries["hz"].weight) == ("hz", 5)
    with pytest.raises(ConfigError) as info:
        parse_config("application: a\nregistries:\n  hz: {address: 'zookeeper://zk?zonee=hz'}\n")
    assert "registries.hz.address" in str(info.value) and "'zonee'" in str(info.value)
    with pytest.raises(ConfigError) as info:
        parse_config(
            "application: a\nregistries:\n  hz: {address: 'zookeeper://zk?zone=a', zone: b}\n"
        )
    assert "registries.hz.address" in str(info.value)


def test_the_cli_refuses_an_unknown_parameter() -> None:
    result = CliRunner().invoke(cli, ["--registry", "zookeeper://127.0.0.1:1?zonee=a", "services"])
    assert result.exit_code != 0 and "'zonee'" in result.stderr


def test_the_cli_takes_the_identity_written_in_the_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dubbo_py.admin import connection

    seen: list[object] = []

    def record(address: object, timeout: float, auth: object, **_: object) -> object:
        seen.append(auth)
        raise RegistryAddressError("recorded")

    monkeypatch.setattr(connection, "open_admin_store", record)
    CliRunner().invoke(cli, ["--registry", "zookeeper://ops:pw@127.0.0.1:1", "services"])
    CliRunner().invoke(
        cli, ["--registry", "zookeeper://ops:pw@127.0.0.1:1", "--auth", "me:x", "services"]
    )
    assert seen == [("ops", "pw"), ("me", "x")]
