"""``--json`` errors as the console script gives them: with no CliEnv handed in (as tests of
one command do), the root group creates it while running, and a refused command must still
print its JSON error object on stdout (it printed only the stderr line before)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dubbo_py.admin.cli import cli


@pytest.mark.parametrize("where", ["after", "before"])
def test_a_refused_command_prints_its_json_error_object(tmp_path: Path, where: str) -> None:
    registry = f"sqlite:///{tmp_path}/none.db"
    command = ["providers", "demo.Greeter"]
    args = (
        ["--registry", registry, *command, "--json"]
        if where == "after"
        else ["--json", "--registry", registry, *command]
    )
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1
    error = json.loads(result.stdout)
    assert error["reason"] == "unreachable"
    assert "no embedded registry" in error["error"]
    assert result.stderr.startswith("error: no embedded registry")
