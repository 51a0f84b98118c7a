"""``dubbo-py shard locate`` and ``dubbo-py shard plan`` through click's CliRunner."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from dubbo_py.admin.commands.shard import shard
from dubbo_py.router.shard.hashing import es_murmur3, to_int32


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(shard, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_locate_json_gives_one_object_per_key_in_order() -> None:
    code, out, _ = run(
        "locate", "--scheme", "elasticsearch", "--shards", "8", "--routing-num-shards", "8",
        "--json", "sEERfFzPSI", "cNRiIrjzYd", "hello",
    )  # fmt: skip
    assert code == 0
    # IndexRoutingTests.testBWC: sEERfFzPSI -> 1, cNRiIrjzYd -> 7
    assert json.loads(out) == [
        {"key": "sEERfFzPSI", "hash": es_murmur3("sEERfFzPSI"), "shards": [1]},
        {"key": "cNRiIrjzYd", "hash": es_murmur3("cNRiIrjzYd"), "shards": [7]},
        {"key": "hello", "hash": to_int32(0xD7C31989), "shards": [to_int32(0xD7C31989) % 8]},
    ]


def test_locate_solr_prefix_has_null_hash_and_several_shards() -> None:
    code, out, _ = run("locate", "--scheme", "solr", "--shards", "4", "--json", "b/1!", "b")
    assert code == 0
    assert json.loads(out) == [
        {"key": "b/1!", "hash": None, "shards": [0, 1]},
        {"key": "b", "hash": to_int32(0x95DE7E03), "shards": [0]},
    ]


def test_locate_partitioned_with_and_without_id() -> None:
    base = ["locate", "--scheme", "elasticsearch", "--shards", "6", "--routing-num-shards", "6"]
    base += ["--partition-size", "2", "--json"]
    # IndexRoutingTests.testPartitionedIndexBWC: routing b with id b_0 -> shard 5
    code, out, _ = run(*base, "--id", "b_0", "b")
    assert code == 0
    assert json.loads(out)[0]["shards"] == [5]
    code, out, _ = run(*base, "b")
    assert json.loads(out)[0]["shards"] == [0, 5]


def test_locate_table_shows_key_hash_and_shard() -> None:
    code, out, _ = run("locate", "--scheme", "elasticsearch-modulo", "--shards", "4", "hello")
    assert code == 0
    assert "elasticsearch-modulo, 4 shards" in out
    row = next(line for line in out.splitlines() if "hello" in line)
    assert str(to_int32(0xD7C31989)) in row and "d7c31989" in row
    assert row.rstrip("│ ").endswith(str(to_int32(0xD7C31989) % 4))


def test_locate_table_shows_a_prefix_range() -> None:
    code, out, _ = run("locate", "--scheme", "solr", "--shards", "4", "foo/0!")
    assert code == 0
    assert "range 80000000-7fffffff" in out
    assert "0, 1, 2, 3" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--scheme", "solr", "--shards", "4", "--routing-num-shards", "8", "k"],
         "--routing-num-shards: applies to the elasticsearch scheme only"),
        (["--scheme", "elasticsearch", "--shards", "3", "--routing-num-shards", "8", "k"],
         "--routing-num-shards: must be a multiple of shards (3)"),
        (["--scheme", "elasticsearch", "--shards", "0", "k"], "--shards: must be between 1"),
        (["--scheme", "elasticsearch", "--shards", "4", "--id", "x", "k"],
         "--id applies to partitioned routing only"),
        (["--scheme", "mongo", "--shards", "4", "k"], "Invalid value for '--scheme'"),
        (["--scheme", "solr", "--shards", "4"], "Missing argument 'KEYS...'"),
    ],
)  # fmt: skip
def test_locate_usage_errors_exit_2(args: list[str], message: str) -> None:
    code, _, err = run("locate", *args)
    assert code == 2
    assert message in err


def test_plan_prints_sources_and_rules() -> None:
    code, out, _ = run("plan", "--scheme", "elasticsearch", "--from", "2", "--to", "4")
    assert code == 0
    rows = [line.split("│")[1:3] for line in out.splitlines() if line.startswith("│")]
    assert [(a.strip(), b.strip()) for a, b in rows] == [
        ("0", "0"),
        ("1", "0"),
        ("2", "1"),
        ("3", "1"),
    ]
    assert "routing_num_shards: 1024 (kept across the split)" in out
    assert "split_from: 2" in out
    assert "shard=<n>&shards=4" in out


def test_plan_json() -> None:
    code, out, _ = run("plan", "--scheme", "solr", "--from", "3", "--to", "6", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["ok"] is True and data["refusal"] is None
    assert [s["from"] for s in data["new_shards"]] == [0, 0, 1, 1, 2, 2]
    assert data["new_shards"][0]["range"] == "80000000-aaaa7fff"
    assert data["rule_during_split"] == {"scheme": "solr", "shards": 6, "split_from": 3,
                                         "initial_shards": 3}  # fmt: skip
    assert data["rule_after_split"] == {"scheme": "solr", "shards": 6, "initial_shards": 3}


def test_plan_refusal_exits_1_with_the_reason() -> None:
    code, out, err = run("plan", "--scheme", "elasticsearch", "--from", "2", "--to", "6")
    assert code == 1
    assert out == ""
    assert "refused: the number of routing shards [1024] must be a multiple of" in err
    code, out, _ = run("plan", "--scheme", "solr", "--from", "2", "--to", "6", "--json")
    assert code == 1
    assert json.loads(out)["ok"] is False
    assert "halves" in json.loads(out)["refusal"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--scheme", "elasticsearch", "--from", "0", "--to", "2"], "--from: must be between 1"),
        (["--scheme", "elasticsearch", "--from", "2", "--to", "-1"], "--to: must be a positive"),
        (["--scheme", "solr", "--from", "2", "--to", "4", "--routing-num-shards", "8"],
         "--routing-num-shards: applies to the elasticsearch scheme only"),
        (["--scheme", "solr", "--from", "2"], "Missing option '--to'"),
    ],
)  # fmt: skip
def test_plan_usage_errors_exit_2(args: list[str], message: str) -> None:
    code, _, err = run("plan", *args)
    assert code == 2
    assert message in err
