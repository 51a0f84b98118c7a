"""A provider started under an override rule registers with it applied, follows changes, and
leaves nothing behind when it stops."""

from __future__ import annotations

import time

import dubbo_py
from dubbo_py.registry.registry import Registry
from examples.quickstart.provider import make_greeter
from tests.e2e.conftest import wait_until

KEY = "demo.Greeter:1.0.0:.configurators"


def _weight(value: int) -> str:
    return (
        "configVersion: v3.0\nscope: service\nkey: demo.Greeter:1.0.0\n"
        f"configs:\n  - side: provider\n    parameters: {{weight: {value}}}\n"
    )


def test_provider_registers_under_an_existing_override_and_follows_it(
    registry_address: str,
) -> None:
    with dubbo_py.Application("operator", registry_address) as operator:
        rules = operator.registry
        assert isinstance(rules, Registry)
        rules.put_config(KEY, _weight(0))
        with dubbo_py.Application("greeter", registry_address) as provider:
            server = provider.start(make_greeter("1.0.0", None, None))
            # Read straight after start(): the first registration already carries the rule.
            assert [u.get("weight") for u in rules.lookup("demo.Greeter")] == ["0"]
            assert server.urls[0].get("weight") == "100"  # what the code asked for

            rules.put_config(KEY, _weight(30))
            wait_until(
                lambda: [u.get("weight") for u in rules.lookup("demo.Greeter")] == ["30"],
                10,
                "the provider to re-register with the new override",
            )
            server.stop(grace=0.5)
            assert rules.lookup("demo.Greeter") == []
            rules.put_config(KEY, _weight(40))
            time.sleep(0.5)  # a stopped provider must not come back with the change
            assert rules.lookup("demo.Greeter") == []
