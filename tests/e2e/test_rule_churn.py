"""A rule push never costs a call: half a minute of rule and provider churn under load.

Two stable providers and one restarting every 7 s (drained, then back on its port); a consumer
calling from blocking threads and asyncio tasks at once, each call with a ``tenant`` attachment
and a varying argument (a fifth of them plain calls, which take the call plans); an operator
process rewriting a condition rule (``force: false``, reading ``attachments[tenant]`` and
``arguments[0]``), a tag rule and an override document straight in the registry every half
second. Every call has a legitimate provider throughout (see ``tests/support/churn.py``), so
every call must succeed. ZooKeeper and the embedded registry run side by side, each with its
own providers, consumer and operator, for the same half minute. The longer run is
``bench/soak_rule_churn.py``.
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.churn import ChurnResult, run_churn
from tests.support.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.e2e, pytest.mark.zookeeper, pytest.mark.timeout(300)]

SECONDS = 30.0
# Short enough for the default suite, long enough for three rolling restarts.
RESTART_EVERY = 7.0


def test_rule_and_provider_churn_costs_no_call(zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    registries = {
        "zookeeper": f"zookeeper://{zookeeper.address}/churn-{uuid.uuid4().hex[:8]}",
        "embedded": f"sqlite://{tmp_path}/registry.db",
    }

    def churn(name: str) -> ChurnResult:
        cache = tmp_path / name
        cache.mkdir()
        return run_churn(
            registries[name],
            SECONDS,
            flavours=("blocking", "asyncio"),
            restart_every=RESTART_EVERY,
            workers=2,
            cache_dir=cache,
        )

    with ThreadPoolExecutor(len(registries)) as pool:
        results = dict(zip(registries, pool.map(churn, registries), strict=True))
    for name, result in results.items():
        failed = [f"{f.at:.3f}s {f.status}: {f.message}" for f in result.failures]
        assert not failed, f"{name}: {result.summary()}\n" + "\n".join(failed[:20])
        # The churn really happened, and calls kept flowing through all of it.
        assert result.pushes >= SECONDS / 0.5 * 0.5, f"{name}: {result.summary()}"
        assert result.restarts >= 3, f"{name}: {result.summary()}"
        assert result.calls >= 10 * SECONDS, f"{name}: {result.summary()}"
        assert len(result.served) == 3, f"{name}: {result.summary()}"
