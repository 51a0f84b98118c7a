"""The no-silent-drop sweep (issue 31, item 7): every rule document of Apache Dubbo's and
dubbo-go's test suites (tests/fixtures/dubbo_rules/) through ``dubbo-py rules validate``.

For each document: every field is in its kind's table (:mod:`dubbo_py.rule_fields`, kept next
to the kind's compiler) -- so no field Dubbo writes is unknown to dubbo-py -- and every field
the table does not mark as acted on is named by a warning (``--strict`` refuses it). Documents
out of dubbo-py's scope are refused naming what they are; documents Dubbo refuses too are
refused."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from dubbo_py.admin.cli import cli
from dubbo_py.registry.rule_kinds import infer_kind
from dubbo_py.rule_fields import Field

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "dubbo_rules"
FILES = sorted(FIXTURES.glob("*.yaml"))

#: Refused, with what the refusal must say: out of scope (named), or refused by Dubbo too.
REFUSED = {
    "dubbo_VirtualServiceTest": "a mesh VirtualService rule",
    "dubbo_DestinationRuleTest": "a mesh DestinationRule",
    "dubbo_DestinationRuleTest2_1": "a mesh DestinationRule",
    "dubbo_DestinationRuleTest2_2": "a mesh VirtualService rule",
    "dubbo_ScriptRule": "JavaScript script rules",
    "dubbo-go_script_router_00": "JavaScript script rules",
    "dubbo-go_script_router_01": "JavaScript script rules",
    "dubbo-go_script_router_03": "JavaScript script rules",
    # dubbo-go refuses it too (its test expects an error).
    "dubbo-go_script_router_04": "unsupported script type 'errorType'",
    # Dubbo's ConfigParserTest expects IllegalStateException: an item without parameters.
    "dubbo_ServiceNoRule": "a non-empty mapping",
    # A ratio outside 0..100 is refused, naming it (a listed difference, docs/routing.md).
    "dubbo-go_affinity_router_01": "affinityAware.ratio must be within 0..100",
}


def _validate(path: Path, *extra: str) -> tuple[int, Any]:
    result = CliRunner().invoke(cli, ["rules", "validate", "--json", str(path), *extra])
    return result.exit_code, json.loads(result.stdout)


def _fields(
    data: Any, table: Mapping[str, Field], prefix: str = ""
) -> Iterator[tuple[str, Field | None]]:
    """Every field path of ``data`` with its table entry (None: not in the table)."""
    if isinstance(data, list):
        for i, item in enumerate(data):
            yield from _fields(item, table, f"{prefix}[{i}]")
        return
    if not isinstance(data, Mapping):
        return
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        spec = table.get(str(key))
        yield path, spec
        if spec is not None and spec.acted and spec.each is not None:
            yield from _fields(value, spec.each, path)


def test_the_fixtures_are_there() -> None:
    assert len(FILES) >= 40
    assert set(REFUSED) <= {f.stem for f in FILES}


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_every_field_is_acted_on_or_named(path: Path) -> None:
    code, out = _validate(path)
    if path.stem in REFUSED:
        assert code == 1 and REFUSED[path.stem] in out["error"], out
        return
    assert code == 0, out
    data = yaml.safe_load(path.read_text("utf-8"))
    kind = infer_kind(data)
    assert kind is not None and kind.field_table is not None and kind.name == out["kind"]
    table = kind.field_table()
    warned = {w["message"] for w in out["warnings"]}
    for field_path, spec in _fields(data, table):
        # Dubbo writes it, so the table knows it (acted on, or ignored with a reason).
        assert spec is not None, f"{path.name}: {field_path} is in no table of {kind.name}"
        if not spec.acted:
            assert any(f"field {field_path!r} is ignored" in w for w in warned), (
                field_path,
                warned,
            )
    assert not any(w["code"] == "unknown-field" for w in out["warnings"])
    if out["warnings"]:
        strict, refused = _validate(path, "--strict")
        assert strict == 1 and "refused with --strict" in refused["error"]
