"""Providers' ``timeout`` and ``retries`` reach consumers that set none, in Dubbo's order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dubbo_py.cluster.method_settings import MethodSettings
from dubbo_py.consumer.settings import base_parameters, provider_defaults, resolve_settings

METHODS = ("SayHello", "SayHelloStream")


def _settings(
    consumer: dict[str, str], providers: list[dict[str, str]]
) -> dict[str, MethodSettings]:
    return resolve_settings(METHODS, consumer, provider=provider_defaults(METHODS, providers))


def test_a_consumer_that_sets_nothing_takes_the_providers_values() -> None:
    got = _settings({}, [{"timeout": "1500", "retries": "0"}])
    assert got["SayHello"] == MethodSettings(retries=0, timeout=1.5)


def test_nothing_anywhere_gives_the_defaults() -> None:
    base = base_parameters(
        retries=None, timeout=None, forks=2, sticky=False, loadbalance="random", methods={}
    )
    assert _settings(base, [{}])["SayHello"] == MethodSettings(retries=2, timeout=None)


def test_dubbos_order_method_level_first_then_the_consumer_before_the_provider() -> None:
    provider = {"timeout": "1000", "SayHello.timeout": "2000", "retries": "5"}
    # Consumer service level beats provider service level...
    got = _settings({"timeout": "3000", "retries": "1"}, [provider])
    assert got["SayHelloStream"] == MethodSettings(retries=1, timeout=3.0)
    # ...but a provider's method level beats the consumer's service level (Dubbo reads
    # <method>.timeout before timeout on the merged URL)...
    assert got["SayHello"].timeout == 2.0
    # ...and the consumer's method level beats everything.
    got = _settings({"timeout": "3000", "SayHello.timeout": "4000"}, [provider])
    assert got["SayHello"].timeout == 4.0


def test_dubbo_2_providers_default_prefixed_values_count_as_service_level() -> None:
    got = _settings({}, [{"default.timeout": "700", "default.retries": "1"}])
    assert got["SayHello"] == MethodSettings(retries=1, timeout=0.7)


def test_disagreeing_providers_give_the_longest_timeout_and_the_fewest_retries() -> None:
    got = _settings(
        {}, [{"timeout": "500", "retries": "3"}, {"timeout": "900", "retries": "1"}, {}]
    )
    assert got["SayHello"] == MethodSettings(retries=1, timeout=0.9)


def test_a_provider_value_that_does_not_parse_is_ignored() -> None:
    got = _settings({}, [{"timeout": "soon", "retries": "-1"}, {"timeout": "250"}])
    assert got["SayHello"] == MethodSettings(retries=2, timeout=0.25)


_ms = st.integers(min_value=1, max_value=100_000).map(str)


@settings(max_examples=100, deadline=None)
@given(
    consumer_method=st.none() | _ms,
    consumer_service=st.none() | _ms,
    provider_method=st.none() | _ms,
    provider_service=st.none() | _ms,
)
def test_the_first_level_that_sets_a_timeout_decides(
    consumer_method: str | None,
    consumer_service: str | None,
    provider_method: str | None,
    provider_service: str | None,
) -> None:
    consumer = {
        k: v
        for k, v in (("SayHello.timeout", consumer_method), ("timeout", consumer_service))
        if v is not None
    }
    provider = {
        k: v
        for k, v in (("SayHello.timeout", provider_method), ("timeout", provider_service))
        if v is not None
    }
    order = [consumer_method, provider_method, consumer_service, provider_service]
    first = next((v for v in order if v is not None), None)
    expected = None if first is None else float(first) / 1000.0
    assert _settings(consumer, [provider])["SayHello"].timeout == expected
