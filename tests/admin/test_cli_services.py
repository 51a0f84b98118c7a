"""``dubbo-py services|providers|consumers|override|registry status`` and the CLI's conventions:
registry selection, --help everywhere, suggestions, exit codes, one-line errors."""

from __future__ import annotations

import json
from typing import Any

import click
import pytest
from click.testing import CliRunner

from dubbo_py.admin.cli import cli
from dubbo_py.admin.common import CliEnv
from dubbo_py.admin.connection import RegistryUnreachable
from dubbo_py.registry import layout
from dubbo_py.registry.registry import Registry
from dubbo_py.registry.store.address import RegistryAddress
from dubbo_py.registry.store.base import Store
from dubbo_py.url import URL
from tests.support.cli_fixtures import CONSUMER, P1, P2, Cli, lines, run
from tests.support.memory_store import MemoryStore

__all__ = ["run"]


# ----------------------------------------------------------------------------- listing


def test_services_lists_counts(run: Cli) -> None:
    run.register(P1, P2, CONSUMER, "tri://10.0.0.9:1/demo.Other?application=x")
    assert run.json("services") == [
        {
            "service": "demo.Greeter",
            "providers": 2,
            "consumers": 1,
            "routers": 0,
            "configurators": 0,
            "instances": 0,
            "router_rules": [],
            "override_rules": [],
            "applications": [],
        },
        {
            "service": "demo.Other",
            "providers": 1,
            "consumers": 0,
            "routers": 0,
            "configurators": 0,
            "instances": 0,
            "router_rules": [],
            "override_rules": [],
            "applications": [],
        },
    ]
    table = run("services")
    assert table.exit_code == 0
    assert "demo.Greeter" in table.stdout and "demo.Other" in table.stdout


def test_empty_registry_lists_nothing(run: Cli) -> None:
    assert run.json("services") == []
    result = run("services")
    assert result.exit_code == 0 and "no services" in result.stdout


def test_providers_and_consumers(run: Cli) -> None:
    run.register(P1, P2, CONSUMER)
    providers = run.json("providers", "demo.Greeter")
    assert [p["address"] for p in providers] == ["10.0.0.5:50051", "10.0.0.6:50051"]
    assert providers[0] == {
        "url": URL.parse(P1).to_string(),
        "urls": {"interface": URL.parse(P1).to_string()},
        "address": "10.0.0.5:50051",
        "protocol": "tri",
        "application": "greeter",
        "version": "1.0.0",
        "group": "",
        "weight": 100,
        "effective_weight": 100,
        "warmup_ms": 600_000,
        "warmup_left_ms": 0,
        "overrides": [],
        "levels": ["interface"],
        "parameters": {},
    }
    assert run.json("consumers", "demo.Greeter") == [
        {
            "url": URL.parse(CONSUMER).to_string(),
            "address": "10.0.0.1",
            "application": "shop",
            "version": "1.0.0",
            "group": "",
        }
    ]


def test_unknown_service_is_not_found_with_a_suggestion(run: Cli) -> None:
    run.register(P1)
    for command in ("providers", "consumers"):
        result = run(command, "demo.Greter", "--registry", "sqlite:///srv/r.db")
        assert result.exit_code == 1
        assert lines(result.stderr) == [
            "error: no service 'demo.Greter' in registry sqlite:///srv/r.db; "
            "did you mean 'demo.Greeter'?"
        ]


# ----------------------------------------------------------------------------- overrides


def _overrides(run: Cli) -> list[URL]:
    return Registry(MemoryStore(run.tree)).lookup("demo.Greeter", layout.CONFIGURATORS)


def test_override_weight_writes_a_persistent_dubbo_override_url(run: Cli) -> None:
    run.register(P1, P2)
    result = run("override", "weight", "demo.Greeter", "10.0.0.5:50051", "50")
    assert result.exit_code == 0, result.output
    expected = URL.parse(
        "override://10.0.0.5:50051/demo.Greeter?category=configurators&dynamic=false"
        "&enabled=true&weight=50"
    )
    assert _overrides(run) == [expected]
    node = layout.node_path(expected)
    assert node.startswith("/dubbo/demo.Greeter/configurators/override%3A%2F%2F10.0.0.5%3A50051")
    assert run.tree.nodes[node].owner is None  # persistent: outlives the CLI's session
    providers = {p["address"]: p["overrides"] for p in run.json("providers", "demo.Greeter")}
    assert providers == {"10.0.0.5:50051": ["weight=50"], "10.0.0.6:50051": []}


def test_a_new_weight_replaces_the_old_one(run: Cli) -> None:
    run.register(P1)
    run("override", "weight", "demo.Greeter", "10.0.0.5:50051", "50")
    out = run.json("override", "weight", "demo.Greeter", "10.0.0.5:50051", "0")
    assert [(o["action"], o["url"].endswith("weight=0")) for o in out] == [
        ("removed", False),
        ("added", True),
    ]
    assert [u.get_int("weight", -1) for u in _overrides(run)] == [0]


def test_disable_then_enable(run: Cli) -> None:
    run.register(P1, P2)
    run("override", "weight", "demo.Greeter", "10.0.0.6:50051", "20")
    assert run("override", "disable", "demo.Greeter", "10.0.0.5:50051").exit_code == 0
    disabling = [u for u in _overrides(run) if u.get_bool("disabled")]
    assert [(u.address, u.get_str("dynamic")) for u in disabling] == [("10.0.0.5:50051", "false")]
    listed = run.json("override", "list", "demo.Greeter")
    assert sorted((o["address"], o["changes"]) for o in listed) == [
        ("10.0.0.5:50051", "disabled=true"),
        ("10.0.0.6:50051", "weight=20"),
    ]
    out = run.json("override", "enable", "demo.Greeter", "10.0.0.5:50051")
    assert [o["action"] for o in out] == ["removed"]
    assert [u.get_str("weight") for u in _overrides(run)] == ["20"]  # the weight stays
    again = run("override", "enable", "demo.Greeter", "10.0.0.5:50051")
    assert again.exit_code == 0 and "nothing to do" in again.stdout


def test_override_of_an_unknown_provider_needs_force(run: Cli) -> None:
    run.register(P1)
    result = run("override", "disable", "demo.Greeter", "10.9.9.9:1")
    assert result.exit_code == 1 and "--force" in result.stderr
    assert _overrides(run) == []
    forced = run("override", "disable", "demo.Greeter", "10.9.9.9:1", "--force")
    assert forced.exit_code == 0
    assert [u.address for u in _overrides(run)] == ["10.9.9.9:1"]


def test_override_version_and_group_narrow_the_url(run: Cli) -> None:
    run.register(P1)
    run("override", "weight", "demo.Greeter", "10.0.0.5", "7", "--version", "1.0.0")
    [url] = _overrides(run)
    assert (url.host, url.port, url.get_str("version"), url.get_str("weight")) == (
        "10.0.0.5",
        0,
        "1.0.0",
        "7",
    )


@pytest.mark.parametrize("args", [["10.0.0.5:50051", "-3"], ["a/b", "5"], ["10.0.0.5:x", "5"]])
def test_bad_override_arguments_are_usage_errors(run: Cli, args: list[str]) -> None:
    run.register(P1)
    result = run("override", "weight", "demo.Greeter", *args)
    assert result.exit_code == 2
    assert len(lines(result.stderr)) == 1


# ----------------------------------------------------------------------------- registry


def test_registry_comes_from_option_env_or_default(run: Cli) -> None:
    run("services")
    assert run.opened[-1].kind == "sqlite"  # the embedded default
    run("services", env={"DUBBO_PY_REGISTRY": "zookeeper://zk1:2181/prod"})
    assert run.opened[-1] == RegistryAddress("zookeeper", "zk1:2181", "/prod")
    run(
        "--registry",
        "sqlite:///tmp/x.db",
        "services",
        env={"DUBBO_PY_REGISTRY": "zookeeper://zk1:2181"},
    )
    assert run.opened[-1] == RegistryAddress("sqlite", "/tmp/x.db")


def test_bad_registry_address_is_a_usage_error(run: Cli) -> None:
    result = run("--registry", "consul://x", "services")
    assert result.exit_code == 2
    assert "unknown registry scheme" in result.stderr


def test_a_direct_address_is_not_a_registry() -> None:
    result = CliRunner().invoke(cli, ["--registry", "tri://127.0.0.1:50051", "services"])
    assert result.exit_code == 1
    assert "not a registry" in result.stderr


def test_registry_status(run: Cli) -> None:
    run.register(P1, P2, CONSUMER)
    run("override", "weight", "demo.Greeter", "10.0.0.5:50051", "50")
    run(
        "rules",
        "push",
        run.file("r.yaml", "scope: service\nkey: demo.Greeter\nconditions: ['=> host = 1']\n"),
    )
    status = run.json("registry", "status")
    assert status == {
        "registry": status["registry"],
        "kind": "embedded",
        "reachable": True,
        "error": None,
        "services": 1,
        "providers": 2,
        "consumers": 1,
        "routers": 0,
        "configurators": 1,
        "rules": 1,
        "applications": 0,
        "instances": 0,
        "consumer_modes": [
            {
                "service": "demo.Greeter",
                "application": "shop",
                "address": "10.0.0.1",
                "step": "APPLICATION_FIRST",
                "level": "interface",
                "source": "default",
            }
        ],
    }
    assert status["registry"].startswith("sqlite:///")


def _unreachable(address: RegistryAddress, timeout: float) -> Store:
    raise RegistryUnreachable(f"registry {address} unreachable (waited {timeout:g}s)")


def test_unreachable_registry_is_one_line_and_exit_1() -> None:
    obj = CliEnv(opener=_unreachable)
    result = CliRunner().invoke(
        cli, ["--registry", "zookeeper://127.0.0.1:1", "--timeout", "0.5", "services"], obj=obj
    )
    assert result.exit_code == 1
    assert lines(result.stderr) == [
        "error: registry zookeeper://127.0.0.1:1 unreachable (waited 0.5s)"
    ]
    status = CliRunner().invoke(
        cli,
        ["--registry", "zookeeper://127.0.0.1:1", "registry", "status", "--json"],
        obj=CliEnv(opener=_unreachable),
    )
    assert status.exit_code == 1
    report = json.loads(status.stdout)
    assert report["reachable"] is False and "unreachable" in report["error"]


# ----------------------------------------------------------------------------- conventions


def _all_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [prefix]
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            out += _all_commands(command, (*prefix, name))
        else:
            out.append((*prefix, name))
    return out


@pytest.mark.parametrize("path", _all_commands(cli), ids=lambda p: " ".join(p) or "dubbo-py")
def test_help_everywhere(path: tuple[str, ...]) -> None:
    for flag in ("--help", "-h"):
        result = CliRunner().invoke(cli, [*path, flag])
        assert result.exit_code == 0, result.output
        assert result.stdout.startswith("Usage: ")


def test_json_everywhere_on_the_commands_that_print() -> None:
    for path in _all_commands(cli):
        command: click.Command = cli
        for name in path:
            assert isinstance(command, click.Group)
            command = command.commands[name]
        if not isinstance(command, click.Group):
            assert any("--json" in p.opts for p in command.params), path


@pytest.mark.parametrize(
    ("args", "suggestion"),
    [
        (["servics"], "services"),
        (["rules", "pusj"], "push"),
        (["rules", "rolback"], "rollback"),
        (["override", "wieght"], "weight"),
        (["route", "tset"], "test"),
        (["registry", "stats"], "status"),
    ],
)
def test_mistyped_subcommands_suggest_the_closest(args: list[str], suggestion: str) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    [line] = lines(result.stderr)
    assert f"did you mean {suggestion!r}?" in line


def test_usage_errors_are_one_line_with_exit_2() -> None:
    for args in (["rules", "push"], ["providers"], ["rules", "push", "x", "--bogus"]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, args
        [line] = lines(result.stderr)
        assert line.startswith("error: ") and "--help" in line


def test_zookeeper_auth_comes_from_the_option_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import dubbo_py.registry.store.zookeeper as zookeeper

    seen: list[object] = []

    class Recorder:
        def __init__(self, hosts: str, chroot: str, **options: object) -> None:
            seen.append((hosts, chroot, options.get("auth")))

        @classmethod
        def from_address(cls, address: Any, **options: object) -> Recorder:
            # The store table's constructor, as ZooKeeperStore.from_address calls __init__.
            return cls(address.location, address.chroot, auth=options.get("auth"))

        def start(self, timeout: float) -> bool:
            return False

        def close(self) -> None:
            pass

    monkeypatch.setattr(zookeeper, "ZooKeeperStore", Recorder)
    registry = ["--registry", "zookeeper://zk:2181/prod"]
    result = CliRunner().invoke(cli, [*registry, "--auth", "admin:s3cret", "services"])
    assert result.exit_code == 1 and "unreachable" in result.stderr
    result = CliRunner().invoke(
        cli, [*registry, "services"], env={"DUBBO_PY_REGISTRY_AUTH": "ops:pw:with:colons"}
    )
    assert result.exit_code == 1
    assert seen == [
        ("zk:2181", "/prod", ("admin", "s3cret")),
        ("zk:2181", "/prod", ("ops", "pw:with:colons")),
    ]
    bad = CliRunner().invoke(cli, [*registry, "--auth", "nocolon", "services"])
    assert bad.exit_code == 2
    assert lines(bad.stderr) == [
        "error: --auth / DUBBO_PY_REGISTRY_AUTH must be user:password "
        "(see 'dubbo-py services --help')"
    ]


def test_services_counts_the_rules_in_force_as_routers(run: Cli) -> None:
    """Issue 35, finding 3: a condition rule in force showed as ROUTERS 0."""
    run.register(P1, P2, CONSUMER)
    rule = "scope: service\nkey: demo.Greeter:1.0.0\nconditions: ['=> host = 1']\n"
    assert run("rules", "push", run.file("r.yaml", rule)).exit_code == 0
    off = rule.replace("1.0.0", "2.0.0") + "enabled: false\n"
    assert run("rules", "push", run.file("t.yaml", off)).exit_code == 0
    [row] = run.json("services")
    assert row["router_rules"] == ["demo.Greeter:1.0.0:.condition-router"]  # not the disabled one
    assert row["override_rules"] == []
    table = lines(run("services").stdout)
    header = [c.strip() for c in table[0].split("┃")]
    cells = [c.strip() for c in table[2].split("│")]
    assert dict(zip(header, cells, strict=True))["ROUTERS"] == "1"


def test_services_help_says_what_every_column_counts() -> None:
    text = CliRunner().invoke(cli, ["services", "--help"]).output
    for column in ("PROVIDERS", "INSTANCES", "CONSUMERS", "ROUTERS", "OVERRIDES", "APPLICATIONS"):
        assert f"\n    {column} " in text, column
