"""A provider registers with the override rules that match it already applied, and follows them
(Dubbo's provider-side OverrideListener)."""

from __future__ import annotations

import logging
import time

import pytest

from dubbo_py.cluster import configurators
from dubbo_py.errors import StoreError
from dubbo_py.registry.provider_overrides import ProviderRegistry
from dubbo_py.registry.registry import Registry
from dubbo_py.url import URL
from tests.registry.test_directory_startup import SlowStore
from tests.support.memory_store import MemoryStore

SERVICE = "demo.Greeter"
KEY = f"{SERVICE}:1.0.0:.configurators"
PROVIDER = URL.parse(
    f"tri://127.0.0.1:5001/{SERVICE}?application=greeter&interface={SERVICE}"
    "&side=provider&version=1.0.0&weight=100"
)


def _override(parameters: str, enabled: bool = True) -> str:
    return (
        f"configVersion: v3.0\nscope: service\nkey: {SERVICE}:1.0.0\n"
        f"enabled: {str(enabled).lower()}\n"
        f"configs:\n  - side: provider\n    parameters: {{{parameters}}}\n"
    )


def _providers(registry: Registry) -> list[URL]:
    return registry.lookup(SERVICE)


def _registry(store: MemoryStore, wait: float = 5.0) -> ProviderRegistry:
    return ProviderRegistry(
        Registry(store),
        configurators.apply,
        validate=configurators.parse_configurators_yaml,
        wait=wait,
    )


def test_an_override_in_place_before_start_is_in_the_first_registration() -> None:
    store = SlowStore()
    Registry(store).put_config(KEY, _override("weight: 0"))
    store.slow[f"/dubbo/config/dubbo/{KEY}"] = 0.3  # the registry answers late
    providers = _registry(store)
    providers.register(PROVIDER)
    # Never registered with its own weight, not even briefly.
    assert [u.get("weight") for u in _providers(providers)] == ["0"]


def test_changes_re_register_and_the_last_good_rule_stays_when_a_new_one_is_bad() -> None:
    store = MemoryStore()
    providers = _registry(store)
    providers.register(PROVIDER)
    assert [u.get("weight") for u in _providers(providers)] == ["100"]
    operator = Registry(store)
    operator.put_config(KEY, _override("weight: 10, timeout: 3000"))
    (registered,) = _providers(providers)
    assert (registered.get("weight"), registered.get("timeout")) == ("10", "3000")
    operator.put_config(KEY, "configs: [oops")  # refused: the previous overrides stay
    assert [u.get("weight") for u in _providers(providers)] == ["10"]
    operator.delete_config(KEY)
    assert _providers(providers) == [PROVIDER]


def test_unregistering_removes_what_stands_for_the_url_and_stops_following_rules() -> None:
    store = MemoryStore()
    operator = Registry(store)
    operator.put_config(KEY, _override("weight: 0"))
    providers = _registry(store)
    providers.register(PROVIDER)
    providers.unregister(PROVIDER)
    assert _providers(providers) == []
    operator.put_config(KEY, _override("weight: 5"))
    assert _providers(providers) == []


def test_override_urls_in_the_configurators_category_apply_too() -> None:
    store = MemoryStore()
    operator = Registry(store)
    operator.register(
        URL.parse(
            f"override://0.0.0.0/{SERVICE}?category=configurators&dynamic=false"
            f"&disabled=true&interface={SERVICE}"
        )
    )
    providers = _registry(store)
    providers.register(PROVIDER)
    assert [u.get("disabled") for u in _providers(providers)] == ["true"]


def test_a_rule_source_that_never_answers_is_named_and_registration_goes_ahead(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = SlowStore()
    silent = f"/dubbo/config/dubbo/{KEY}"
    store.silent.add(silent)
    providers = _registry(store, wait=0.3)
    with caplog.at_level(logging.WARNING, logger="dubbo_py.registry.provider_overrides"):
        started = time.monotonic()
        providers.register(PROVIDER)
        assert time.monotonic() - started >= 0.3
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and silent in warnings[0], warnings
    assert _providers(providers) == [PROVIDER]


def test_other_urls_register_as_usual() -> None:
    store = MemoryStore()
    providers = _registry(store)
    consumer = URL.parse(
        f"consumer://127.0.0.1/{SERVICE}?application=shop&category=consumers&interface={SERVICE}"
    )
    providers.register(consumer)
    assert providers.lookup(SERVICE, "consumers") == [consumer]


def test_an_unreachable_registry_fails_the_registration_at_once() -> None:
    store = MemoryStore()
    providers = _registry(store, wait=30.0)
    store.close()  # every operation now raises StoreError, as while ZooKeeper is down
    started = time.monotonic()
    with pytest.raises(StoreError):
        providers.register(PROVIDER)
    assert time.monotonic() - started < 30.0  # it did not wait for the rules first
