"""Consumers name the rule fields they do not act on (issue 31, item 7): a real consumer on the
embedded registry reads a Dubbo condition document with a field Dubbo reads and dubbo-py does
not act on (``runtime``) and a field neither knows; it applies the document (never refuses it),
logs the two fields once per document version, and counts them in ``/metrics``. A
configurators document's fields are judged item by item and counted the same way."""

from __future__ import annotations

import logging
import urllib.request
from pathlib import Path

import pytest
from demo import greeter_pb2_grpc

import dubbo_py
from dubbo_py.registry import layout
from tests.e2e.conftest import wait_until

KEY = "demo.Greeter:1.0.0:.condition-router"
DOC = """\
configVersion: v3.0
scope: service
key: demo.Greeter:1.0.0
runtime: false
colour: blue
conditions:
  - '=> host = 10.0.0.5'
"""
OVERRIDES = "demo.Greeter:1.0.0:.configurators"
OVERRIDE_DOC = """\
configVersion: v2.7
scope: service
key: demo.Greeter:1.0.0
configs:
  - side: consumer
    match: {param: [{key: zone, value: {exact: a}}]}
    parameters: {timeout: 1500}
"""


def _metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        return str(answer.read().decode())


def test_a_consumer_logs_and_counts_fields_it_does_not_act_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "dubbo_py.rule_fields")
    registry = f"sqlite://{tmp_path}/r.db"
    with dubbo_py.Application("shop", registry, cache_path=tmp_path / "c", qos_port=0) as app:
        ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0")
        store = app.bindings[0].registry
        assert store is not None and app.qos is not None

        def logged() -> list[str]:
            return [r.getMessage() for r in caplog.records if KEY in r.getMessage()]

        store.put_config(KEY, DOC)
        wait_until(lambda: len(logged()) == 1, 10, "the fields logged")
        # Applied, not refused: the condition router is in the chain.
        wait_until(
            lambda: any(
                r.source == layout.config_path(KEY) for r in ref.directory.routers_in_force()
            ),
            10,
            "the condition rule in force",
        )
        [line] = logged()
        assert "'runtime'" in line and "'colour'" in line
        assert layout.config_path(KEY) in line
        text = _metrics(app.qos.port)
        assert (
            'dubbo_py_rule_fields_unread_total{application_name="shop",field="runtime",'
            'kind="condition-router"}' in text
        )
        # A v3.0 match in a v2.7 document is not read (as in Dubbo): the override applies to
        # every consumer, and the match is counted.
        store.put_config(OVERRIDES, OVERRIDE_DOC)
        wait_until(
            lambda: ref.directory.consumer_overrides.get("timeout") == "1500", 10, "the override"
        )
        wait_until(
            lambda: 'field="configs[].match",kind="configurators"' in _metrics(app.qos.port),
            10,
            "the configurators field counted",
        )

        # The same version again (another consumer's read, a re-notification): not logged.
        store.put_config(KEY, DOC)
        store.put_config(KEY, DOC.replace("10.0.0.5", "10.0.0.6"))
        wait_until(lambda: len(logged()) == 2, 10, "the new version logged")
        assert len(logged()) == 2
