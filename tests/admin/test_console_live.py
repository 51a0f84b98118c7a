"""The console's live column folds ``dubbo-py top``'s per-method provider rows into one row per
provider: calls/s added up, the slowest p99, and every consumer quarantining it."""

from __future__ import annotations

from dubbo_py.admin.console.live import LiveProvider, merge_rows


def test_rows_per_method_fold_into_one_per_provider() -> None:
    rows = [
        {"address": "10.0.0.5:1", "calls_per_second": 12.5, "p99_ms": 3.0, "error_rate": 0.0,
         "quarantined_by": []},
        {"address": "10.0.0.5:1", "calls_per_second": 7.5, "p99_ms": 9.0, "error_rate": 0.1,
         "quarantined_by": ["shop"]},
        {"address": "10.0.0.6:1", "calls_per_second": None, "p99_ms": 1.0, "error_rate": 0.0,
         "quarantined_by": ["shop", "cart"]},
        {"address": "", "calls_per_second": 1.0},
    ]  # fmt: skip
    assert merge_rows(rows) == {
        "10.0.0.5:1": LiveProvider("10.0.0.5:1", 20.0, 9.0, 0.1, ("shop",)),
        "10.0.0.6:1": LiveProvider("10.0.0.6:1", None, 1.0, 0.0, ("cart", "shop")),
    }
