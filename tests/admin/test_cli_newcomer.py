"""The CLI snags a newcomer hit, typed as they typed them, on a real embedded registry (and a
real ZooKeeper): options after the subcommand, not-found errors naming the registry, a
mistyped embedded path, weights of warming-up providers, and what each history entry changed."""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from dubbo_py.admin.cli import cli
from dubbo_py.registry.registry import Registry
from dubbo_py.registry.store.embedded import EmbeddedStore
from dubbo_py.url import URL
from tests.support.zookeeper import ZooKeeperServer

RULE = """configVersion: v3.0
scope: service
key: demo.Greeter:1.0.0
force: false
conditions:
  - method = SayHello => host = 10.0.0.5
"""
KEY = "demo.Greeter:1.0.0:.condition-router"


def dubbo_py(command: str) -> Result:
    """Run ``dubbo-py ...`` as typed on a shell line (real stores, no test opener)."""
    args = shlex.split(command)
    assert args[0] == "dubbo-py"
    return CliRunner().invoke(cli, args[1:])


@pytest.fixture
def registry_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("DUBBO_PY_REGISTRY", raising=False)
    monkeypatch.delenv("DUBBO_PY_REGISTRY_AUTH", raising=False)
    monkeypatch.setenv("USER", "ada")
    return tmp_path / "registry.db"


@pytest.fixture
def live(registry_path: Path) -> Iterator[Registry]:
    """A session on the embedded registry, as a running provider holds one."""
    store = EmbeddedStore(str(registry_path))
    store.start(5.0)
    try:
        yield Registry(store)
    finally:
        store.close()


def provider(port: int, *, started_ms: int, warmup: int = 600_000, weight: int = 100) -> URL:
    return URL.parse(
        f"tri://127.0.0.1:{port}/demo.Greeter?application=greeter&methods=SayHello"
        f"&side=provider&timestamp={started_ms}&version=1.0.0&warmup={warmup}&weight={weight}"
    )


# --------------------------------------------------------------- options after the subcommand


def test_global_options_work_after_the_subcommand(registry_path: Path, live: Registry) -> None:
    live.register(provider(50051, started_ms=1))
    where = f"sqlite://{registry_path}"
    after = dubbo_py(f"dubbo-py services --registry {where} --json")
    before = dubbo_py(f"dubbo-py --registry {where} --json services")
    assert after.exit_code == 0, after.output
    assert after.stdout == before.stdout
    assert '"service": "demo.Greeter"' in after.stdout
    mixed = dubbo_py(f"dubbo-py --json providers demo.Greeter --registry {where}")
    assert mixed.exit_code == 0 and '"address": "127.0.0.1:50051"' in mixed.stdout
    # --auth after the subcommand is accepted too (the embedded registry has no ACLs).
    authed = dubbo_py(f"dubbo-py services --registry {where} --auth ops:secret")
    assert authed.exit_code == 0, authed.output
    assert "demo.Greeter" in authed.stdout


def _commands() -> list[list[str]]:
    out = []
    for name, command in cli.commands.items():
        sub = getattr(command, "commands", None)
        if sub:
            out.extend([name, s] for s in sub)
        else:
            out.append([name])
    return out


@pytest.mark.parametrize("path", _commands(), ids=" ".join)
def test_every_subcommand_help_shows_global_options_and_examples(path: list[str]) -> None:
    result = dubbo_py(f"dubbo-py {' '.join(path)} --help")
    assert result.exit_code == 0, result.output
    for option in ("--registry ADDRESS", "--auth USER:PASSWORD", "--json"):
        assert option in result.stdout, (path, option)
    assert "Examples:" in result.stdout
    examples = result.stdout.split("Examples:")[1].split("\n\n")[0]
    assert f"dubbo-py {' '.join(path)}" in examples


# --------------------------------------------------------------- not found names the registry


def test_not_found_names_the_registry_searched(registry_path: Path, live: Registry) -> None:
    live.register(provider(50051, started_ms=1))
    where = f"sqlite://{registry_path}"
    result = dubbo_py(f"dubbo-py providers demo.Greter --registry {where}")
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: no service 'demo.Greter' in registry {where}; did you mean 'demo.Greeter'?\n"
    )
    for command in (f"rules get {KEY}", f"rules history {KEY}", f"rules disable {KEY}"):
        result = dubbo_py(f"dubbo-py {command} --registry {where}")
        assert result.exit_code == 1, command
        assert result.stderr.startswith(f"error: no rule at {KEY} in registry {where}"), command
    rollback = dubbo_py(f"dubbo-py rules rollback {KEY} --registry {where}")
    assert rollback.exit_code == 1
    assert f"(searched registry {where})" in rollback.stderr


@pytest.mark.zookeeper
def test_not_found_on_zookeeper_names_it(zookeeper: ZooKeeperServer) -> None:
    where = f"zookeeper://{zookeeper.address}/newcomer"
    result = dubbo_py(f"dubbo-py consumers demo.Nothing --registry {where}")
    assert result.exit_code == 1
    assert result.stderr == f"error: no service 'demo.Nothing' in registry {where}\n"


# --------------------------------------------------------------- a mistyped embedded path


def test_reading_a_missing_embedded_folder_is_an_error_and_creates_nothing(
    tmp_path: Path, registry_path: Path
) -> None:
    missing = tmp_path / "missing-dir"
    for command in ("services", "providers demo.Greeter", "rules list", "registry status"):
        result = dubbo_py(f"dubbo-py {command} --registry sqlite://{missing}/x.db")
        assert result.exit_code == 1, (command, result.output)
        assert f"the folder {missing} does not exist" in result.stderr, command
        assert "no services registered" not in result.stdout
    assert not missing.exists()


def test_reading_a_missing_embedded_file_is_an_error_but_a_push_creates_it(
    tmp_path: Path, registry_path: Path
) -> None:
    where = f"sqlite://{registry_path}"
    result = dubbo_py(f"dubbo-py services --registry {where}")
    assert result.exit_code == 1
    assert "registry.db does not exist" in result.stderr
    assert not registry_path.exists()
    (tmp_path / "rule.yaml").write_text(RULE, encoding="utf-8")
    pushed = dubbo_py(f"dubbo-py rules push {tmp_path / 'rule.yaml'} --registry {where}")
    assert pushed.exit_code == 0, pushed.output
    assert registry_path.exists()
    assert dubbo_py(f"dubbo-py rules list --registry {where}").exit_code == 0


# --------------------------------------------------------------- warming-up providers


def test_providers_shows_effective_weight_and_warmup_left(
    registry_path: Path, live: Registry
) -> None:
    now = int(time.time() * 1000)
    live.register(provider(50051, started_ms=now - 60_000))  # one minute into 10
    live.register(provider(50052, started_ms=now - 3_600_000))  # warm
    live.register(provider(50053, started_ms=now - 1_000, warmup=0, weight=40))
    where = f"sqlite://{registry_path}"
    table = dubbo_py(f"dubbo-py providers demo.Greeter --registry {where}")
    assert table.exit_code == 0, table.output
    rows = {ln.split()[0]: ln for ln in table.stdout.splitlines() if "127.0.0.1:" in ln}
    assert (
        "│ 10 of 100 │ 9m0" in rows["127.0.0.1:50051"]
        or "│ 9 of 100 │ 9m0" in rows["127.0.0.1:50051"]
    )
    assert "left" in rows["127.0.0.1:50051"]
    assert "│ 100 " in rows["127.0.0.1:50052"] and "│ done" in rows["127.0.0.1:50052"]
    assert "│ 40 " in rows["127.0.0.1:50053"] and "│ done" in rows["127.0.0.1:50053"]

    data = dubbo_py(f"dubbo-py providers demo.Greeter --registry {where} --json")
    by_address = {p["address"]: p for p in json.loads(data.stdout)}
    warming = by_address["127.0.0.1:50051"]
    assert warming["weight"] == 100 and warming["warmup_ms"] == 600_000
    assert warming["effective_weight"] in (9, 10)
    assert 530_000 < warming["warmup_left_ms"] <= 540_000
    assert by_address["127.0.0.1:50052"]["effective_weight"] == 100


def test_an_override_shows_in_the_effective_weight(registry_path: Path, live: Registry) -> None:
    live.register(provider(50051, started_ms=1))
    where = f"sqlite://{registry_path}"
    set_weight = dubbo_py(
        f"dubbo-py override weight demo.Greeter 127.0.0.1:50051 50 --registry {where}"
    )
    assert set_weight.exit_code == 0, set_weight.output
    data = dubbo_py(f"dubbo-py providers demo.Greeter --json --registry {where}")
    (row,) = json.loads(data.stdout)
    assert (row["weight"], row["effective_weight"], row["overrides"]) == (100, 50, ["weight=50"])


# --------------------------------------------------------------- history says what changed


def test_history_shows_what_each_change_changed(tmp_path: Path, registry_path: Path) -> None:
    where = f"sqlite://{registry_path}"
    rule = tmp_path / "rule.yaml"
    rule.write_text(RULE, encoding="utf-8")
    assert dubbo_py(f"dubbo-py rules push {rule} --registry {where}").exit_code == 0
    rule.write_text(RULE.replace("10.0.0.5", "10.0.0.6"), encoding="utf-8")
    assert dubbo_py(f"dubbo-py rules push {rule} --registry {where}").exit_code == 0
    assert dubbo_py(f"dubbo-py rules disable {KEY} --registry {where}").exit_code == 0
    assert dubbo_py(f"dubbo-py rules rollback {KEY} --registry {where}").exit_code == 0
    assert dubbo_py(f"dubbo-py rules delete {KEY} --registry {where}").exit_code == 0
    result = dubbo_py(f"dubbo-py rules history {KEY} --registry {where}")
    assert result.exit_code == 0, result.output
    changes = [
        ln.rsplit("│", 1)[1].strip() for ln in result.stdout.splitlines() if ln[:1].isdigit()
    ]
    assert changes == [
        "created: 6 lines",
        "conditions[0]: 'method = SayHello => host = 10.0.0.5' -> "
        "'method = SayHello => host = 10.0.0.6'",
        "+enabled: false",
        "-enabled",
        "deleted",
    ]
    assert "6 lines: configVersion" not in result.stdout
