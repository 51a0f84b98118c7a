"""Dubbo's spelling of a Nacos identity, ``nacos://host:port?username=u&password=p`` (Dubbo 3.3's
NacosConnectionManager reads both parameters as the Nacos client's properties): both give the
registry's identity as ``user:password@`` does, one without the other is refused naming the
missing one, both spellings differing are refused naming both, and the password shows nowhere
an address is printed (the parsed address, the store, errors, registry ids and labels, the CLI).
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from dubbo_py import ConfigError, RegistryAddressError, RegistryConfig
from dubbo_py.admin.cli import cli
from dubbo_py.app.registries import RegistryBinding, registry_choices
from dubbo_py.config.loader import parse_config
from dubbo_py.registry.store.address import display_address, parse_registry_address
from dubbo_py.registry.store.nacos.store import NacosStore

SECRET = "s3cr3t-pw"


def test_both_parameters_are_the_identity_and_not_part_of_the_address() -> None:
    address = parse_registry_address(
        f"nacos://127.0.0.1:8848?namespace=prod&username=ops&password={SECRET}&group=G"
    )
    assert address.settings() == {"auth": f"ops:{SECRET}"}
    assert address.options == (("group", "G"), ("namespace", "prod"))
    assert str(address) == "nacos://127.0.0.1:8848?group=G&namespace=prod"
    # Same store as the address without an identity (the identity is the lease's key part).
    assert address == parse_registry_address("nacos://127.0.0.1:8848?namespace=prod&group=G")
    store = NacosStore.from_address(address, auth=("ops", SECRET))
    assert SECRET not in str(store) and SECRET not in repr(store)


def test_the_two_spellings_agreeing_are_one_identity() -> None:
    address = parse_registry_address(f"nacos://ops:{SECRET}@h:8848?username=ops&password={SECRET}")
    assert address.settings() == {"auth": f"ops:{SECRET}"}


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ("username=ops", "username= needs password= too"),
        (f"password={SECRET}", "password= needs username= too"),
        ("username=ops&password=", "option 'password' needs a value"),
        (f"username=ops&password={SECRET}&password=x", "option 'password' given twice"),
    ],
)
def test_one_without_the_other_is_refused_naming_it(query: str, problem: str) -> None:
    with pytest.raises(RegistryAddressError) as info:
        parse_registry_address(f"nacos://h:8848?{query}")
    assert problem in str(info.value)
    assert SECRET not in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        f"nacos://ops:{SECRET}@h:8848?username=ops&password=other",
        f"nacos://ops:other@h:8848?username=ops&password={SECRET}",
        f"nacos://ops:{SECRET}@h:8848?username=dev&password={SECRET}",
    ],
)
def test_the_two_spellings_differing_are_refused_naming_both(text: str) -> None:
    with pytest.raises(RegistryAddressError) as info:
        parse_registry_address(text)
    message = str(info.value)
    assert "user:password@" in message and "username=/password=" in message
    assert SECRET not in message and "other" not in message


def test_they_are_nacos_options_only() -> None:
    with pytest.raises(RegistryAddressError) as info:
        parse_registry_address(f"zookeeper://h:2181?username=ops&password={SECRET}")
    assert "a Nacos option: it needs nacos://" in str(info.value)
    assert SECRET not in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        f"nacos://h:8848?username=ops&password={SECRET}&zonee=a",
        f"nacos://ops:{SECRET}@h:8848?weight=heavy",
        f"nacos://ops:{SECRET}@:8848",
        f"zookeeper://ops:{SECRET}@h:2181?group=other",
    ],
)
def test_no_error_shows_the_password(text: str) -> None:
    with pytest.raises(RegistryAddressError) as info:
        parse_registry_address(text)
    assert SECRET not in str(info.value) and "***" in str(info.value)


def test_display_address_hides_passwords_only() -> None:
    assert display_address(f"nacos://ops:{SECRET}@h:1?username=ops&password={SECRET}&x=1") == (
        "nacos://ops:***@h:1?username=ops&password=***&x=1"
    )
    assert display_address("nacos://h:1?namespace=n") == "nacos://h:1?namespace=n"
    assert display_address("zookeeper://h:1/chroot?zone=a") == "zookeeper://h:1/chroot?zone=a"


def test_applications_take_it_and_never_print_the_password() -> None:
    text = f"nacos://127.0.0.1:8848?username=app&password={SECRET}"
    [only] = registry_choices(text)
    assert only.config.auth == f"app:{SECRET}"
    [listed] = registry_choices([text])
    assert listed.config.auth == f"app:{SECRET}" and SECRET not in listed.id
    binding = RegistryBinding(
        listed,
        application="a",
        auth=None,
        connect_timeout=1.0,
        cache_path=None,
        register_mode=None,
        migration_step=None,
    )
    assert binding.label == "nacos://127.0.0.1:8848"
    # An identity given twice, differently, is refused by name and user only.
    with pytest.raises(ConfigError) as info:
        registry_choices({"x": RegistryConfig(text, auth="app:another-pw")})
    assert SECRET not in str(info.value) and "another-pw" not in str(info.value)
    assert "app:***" in str(info.value)


def test_dubbo_yaml_takes_it() -> None:
    config = parse_config(
        "application: a\nregistries:\n"
        f"  nc: {{address: 'nacos://h:8848?username=app&password={SECRET}'}}\n"
    )
    assert config.registries["nc"].auth == f"app:{SECRET}"
    with pytest.raises(ConfigError) as info:
        parse_config(
            f"application: a\nregistries:\n  nc: {{address: 'nacos://h:8848?password={SECRET}'}}\n"
        )
    assert "registries.nc.address" in str(info.value) and SECRET not in str(info.value)


def test_the_cli_takes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from dubbo_py.admin import connection

    seen: list[object] = []

    def record(address: object, timeout: float, auth: object, **_: object) -> object:
        seen.append((str(address), auth))
        raise RegistryAddressError("recorded")

    monkeypatch.setattr(connection, "open_admin_store", record)
    text = f"nacos://127.0.0.1:1?username=ops&password={SECRET}"
    CliRunner().invoke(cli, ["--registry", text, "services"])
    assert seen == [("nacos://127.0.0.1:1", ("ops", SECRET))]
    refused = CliRunner().invoke(
        cli, ["--registry", "nacos://127.0.0.1:1?username=ops", "services"]
    )
    assert refused.exit_code != 0 and "username= needs password= too" in refused.stderr
    bad = CliRunner().invoke(cli, ["--registry", f"{text}&zonee=1", "services"])
    assert bad.exit_code != 0 and "'zonee'" in bad.stderr and SECRET not in bad.stderr


def test_a_registry_config_never_shows_the_password() -> None:
    [choice] = registry_choices(f"nacos://h:8848?username=app&password={SECRET}")
    shown = repr(choice.config)
    assert SECRET not in shown and "password=***" in shown and "'app:***'" in shown
    assert SECRET not in repr(choice) and SECRET not in repr(RegistryConfig(auth=f"u:{SECRET}"))
