"""A rule push never costs a call: a minute of rule and provider churn under load, per registry.

Two stable providers and one restarting every 10 s (drained, then back on its port); a consumer
calling from blocking threads and asyncio tasks at once, each call with a ``tenant`` attachment
and a varying argument; an operator process rewriting a condition rule (``force: false``,
reading ``attachments[tenant]`` and ``arguments[0]``), a tag rule and an override document
straight in the registry every half second. Every call has a legitimate provider throughout
(see ``tests/support/churn.py``), so every call must succeed. The longer run is
``bench/soak_rule_churn.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.churn import run_churn

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

SECONDS = 60.0


def test_rule_and_provider_churn_costs_no_call(registry_address: str, tmp_path: Path) -> None:
    result = run_churn(
        registry_address,
        SECONDS,
        flavours=("blocking", "asyncio"),
        workers=2,
        cache_dir=tmp_path,
    )
    failed = [f"{f.at:.3f}s {f.status}: {f.message}" for f in result.failures]
    assert not failed, f"{result.summary()}\n" + "\n".join(failed[:20])
    # The churn really happened, and calls kept flowing through all of it.
    assert result.pushes >= SECONDS / 0.5 * 0.5, result.summary()
    assert result.restarts >= 3, result.summary()
    assert result.calls >= 10 * SECONDS, result.summary()
    assert len(result.served) == 3, result.summary()
