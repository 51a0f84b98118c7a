"""The examples in docs/cli.md are what the CLI does (real rule compilers, in-memory registry)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from dubbo_py.admin.cli import cli
from dubbo_py.admin.common import CliEnv
from dubbo_py.registry.application.publisher import InstancePublisher
from dubbo_py.registry.registry import Registry
from dubbo_py.url import URL
from tests.support.java_app_level import write_java_provider
from tests.support.memory_store import MemoryStore, MemoryTree

DOC = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")


def block_after(marker: str, lang: str = "") -> str:
    """The first fenced block after ``marker``."""
    start = DOC.index(marker)
    match = re.compile(rf"```{lang}\n(.*?)```", re.S).search(DOC, start)
    assert match, marker
    return match.group(1)


def transcript(marker: str) -> tuple[list[str], str]:
    """(``$ dubbo-py ...`` arguments, the output below it) of the block after ``marker``."""
    text = block_after(marker)
    first, _, output = text.partition("\n")
    assert first.startswith("$ dubbo-py "), first
    args = first.removeprefix("$ dubbo-py ").split("#")[0].split()
    return args, output


def same_lines(actual: str, documented: str) -> None:
    assert [ln.rstrip() for ln in actual.splitlines()] == [
        ln.rstrip() for ln in documented.splitlines()
    ]


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_route_test_example_and_its_json(cwd: Path) -> None:
    scenario = block_after("## `route test SCENARIO", "yaml")
    (cwd / "scenario.yaml").write_text(scenario, encoding="utf-8")
    result = CliRunner().invoke(cli, ["route", "test", "scenario.yaml", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == json.loads(block_after("for the scenario above", "json"))

    broken = scenario.replace(
        '"host = 10.0.0.1 => host = 10.0.0.5"', '"method = SayHello => host 10.0.0.5"'
    )
    (cwd / "scenario.yaml").write_text(broken, encoding="utf-8")
    args, output = transcript("its line and column in the scenario file")
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1
    assert result.stderr == output


PAGE_REGISTRY = "zookeeper://127.0.0.1:2181"


def test_push_dry_run_and_invalid_rule_examples(cwd: Path) -> None:
    tree = MemoryTree()
    live = Registry(MemoryStore(tree))
    for url in (
        "tri://10.0.0.5:50051/demo.Greeter?application=greeter&methods=SayHello&version=1.0.0",
        "tri://10.0.0.6:50051/demo.Greeter?application=greeter&methods=SayHello&version=1.0.0",
        "consumer://10.0.0.1/demo.Greeter?application=shop&category=consumers&version=1.0.0",
    ):
        live.register(URL.parse(url))

    def run(args: list[str]) -> tuple[int, str]:
        env = CliEnv(opener=lambda _address, _timeout: MemoryStore(tree))
        # The page's registry (writes name it); the store is the test's in-memory one.
        result = CliRunner().invoke(cli, args, obj=env, env={"DUBBO_PY_REGISTRY": PAGE_REGISTRY})
        return result.exit_code, result.stdout + result.stderr

    cat, rest = block_after("### `rules push FILE").split("\n", 1)
    assert cat == "$ cat greeter-condition.yaml"
    rule, _, push = rest.partition("$ dubbo-py ")
    (cwd / "greeter-condition.yaml").write_text(rule, encoding="utf-8")
    push_line, _, push_output = push.partition("\n")
    assert run(push_line.split()) == (0, push_output)

    edited = rule.replace("host = 10.0.0.5", "host = 10.0.0.6")
    (cwd / "greeter-condition.yaml").write_text(edited, encoding="utf-8")
    args, output = transcript("after editing\nthe file to send")
    code, out = run(args)
    assert code == 0
    same_lines(out, output)

    (cwd / "bad.yaml").write_text(edited.replace("host = ", "host "), encoding="utf-8")
    args, output = transcript("An invalid rule is refused with its file, line and column")
    assert run(args) == (1, output)


def test_providers_at_both_levels_example() -> None:
    tree = MemoryTree()
    live = MemoryStore(tree)
    publisher = InstancePublisher(live, "greeter")
    for host in ("10.0.0.5", "10.0.0.6"):
        # A dubbo-py provider in the default register mode: the provider URL and the instance.
        url = URL.parse(
            f"tri://{host}:50051/demo.Greeter?application=greeter"
            "&methods=SayHello,SayHelloStream&side=provider&version=1.0.0"
        )
        Registry(live).register(url)
        publisher.add(url)
    write_java_provider(live, "java-greeter", "10.0.0.9", 50070, "demo.Greeter", version="1.0.0")
    args, output = transcript("are three rows:")
    env = CliEnv(opener=lambda _address, _timeout: MemoryStore(tree))
    result = CliRunner().invoke(cli, args, obj=env)
    assert result.exit_code == 0, result.output
    same_lines(result.stdout, output)
