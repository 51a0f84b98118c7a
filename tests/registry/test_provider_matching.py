"""Which registered providers a consumer takes: Dubbo 3.3's ``UrlUtils.isMatch`` and the
protocol filter of its ``RegistryDirectory``, as property tests and through a directory."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dubbo_py.registry.directory import RegistryDirectory
from dubbo_py.registry.matching import (
    ProviderFilter,
    group_matches,
    is_match,
    is_match_category,
    is_usable,
    normalise_provider,
    split_list,
)
from dubbo_py.registry.registry import Registry
from dubbo_py.router import factory
from dubbo_py.url import URL
from tests.support.memory_store import MemoryStore

SERVICE = "demo.Greeter"
PROPS = settings(max_examples=200, deadline=None)

names = st.text(alphabet="abcxyz0123456789.-_", min_size=1, max_size=6)
optional = st.one_of(st.just(""), names)


def consumer(**params: str) -> URL:
    base = {"interface": params.pop("interface", SERVICE), "category": "consumers"}
    base.update({k: v for k, v in params.items() if v})
    return URL("consumer", "127.0.0.1", 0, SERVICE, parameters=base)


def provider(protocol: str = "tri", port: int = 50051, **params: str) -> URL:
    path = params.pop("path", SERVICE)
    return URL(protocol, "127.0.0.1", port, path, parameters={k: v for k, v in params.items() if v})


# ----------------------------------------------------------------- isMatch, property by property


@PROPS
@given(wanted=names, offered=names)
def test_interfaces_match_when_equal_or_either_side_is_any(wanted: str, offered: str) -> None:
    c, p = consumer(interface=wanted), provider(interface=offered)
    assert is_match(c, p) == (wanted == offered)
    assert is_match(consumer(interface="*"), p)
    assert is_match(c, provider(interface="*"))


@PROPS
@given(groups=st.lists(names, min_size=1, max_size=4), other=optional, blanks=st.booleans())
def test_a_group_list_matches_exactly_its_members(
    groups: list[str], other: str, blanks: bool
) -> None:
    separator = " , " if blanks else ","
    listed = separator.join(groups)
    for group in groups:
        assert is_match(consumer(group=listed), provider(group=group))
    assert is_match(consumer(group=listed), provider(group=other)) == (other in groups)
    # an empty provider group never matches a non-empty list
    assert not is_match(consumer(group=listed), provider())


@PROPS
@given(group=optional)
def test_any_group_matches_every_group_and_no_group_only_no_group(group: str) -> None:
    assert is_match(consumer(group="*"), provider(group=group))
    assert is_match(consumer(), provider(group=group)) == (group == "")


@PROPS
@given(wanted=optional, offered=optional)
def test_versions_match_when_equal_or_any(wanted: str, offered: str) -> None:
    assert is_match(consumer(version=wanted), provider(version=offered)) == (wanted == offered)
    assert is_match(consumer(version="*"), provider(version=offered))


@PROPS
@given(wanted=optional, offered=optional)
def test_classifier_matches_when_the_consumer_names_none_or_the_same(
    wanted: str, offered: str
) -> None:
    expected = wanted in ("", "*") or wanted == (offered or "*")
    assert is_match(consumer(classifier=wanted), provider(classifier=offered)) == expected


@PROPS
@given(enabled=st.sampled_from(["", "true", "TRUE", "false", "no", "yes"]), star=st.booleans())
def test_a_provider_with_enabled_not_true_matches_only_an_enabled_any_consumer(
    enabled: str, star: bool
) -> None:
    on = enabled == "" or enabled.lower() == "true"
    c = consumer(enabled="*" if star else "")
    assert is_match(c, provider(enabled=enabled)) == (on or star)
    # ...and even then it is not called unless an override says disabled=false
    p = provider(enabled=enabled)
    assert is_usable(p) == on
    assert is_usable(p.with_parameters(disabled="false"))
    assert not is_usable(p.with_parameters(disabled="true"))


@PROPS
@given(category=names)
def test_categories_as_dubbo_reads_them(category: str) -> None:
    assert is_match_category(category, "*")
    assert is_match_category(category, "") == (category == "providers")
    assert not is_match_category(category, f"-{category}")
    assert is_match_category(category, f"a,{category},b")


def test_only_provider_category_urls_are_providers_for_a_subscribing_consumer() -> None:
    assert is_match(consumer(), provider())  # no category means providers
    assert is_match(consumer(), provider(category="providers"))
    assert not is_match(consumer(), provider(category="consumers"))


@PROPS
@given(items=st.lists(names, max_size=4), blanks=st.sampled_from([",", " ,", ", ", ",,", " , "]))
def test_comma_lists_split_as_dubbo_splits_them(items: list[str], blanks: str) -> None:
    assert split_list(blanks.join(items)) == items
    if items:
        assert not group_matches(blanks.join(items), "")


# ----------------------------------------------------------------- protocols and odd URLs


@PROPS
@given(protocol=st.sampled_from(["tri", "grpc", "dubbo", "rest", "http", "hessian", "empty"]))
def test_a_consumer_takes_only_protocols_it_speaks(protocol: str) -> None:
    chosen = ProviderFilter(consumer(), SERVICE).select([provider(protocol)])
    assert bool(chosen) == (protocol in ("tri", "grpc"))


@PROPS
@given(
    asked=st.lists(st.sampled_from(["tri", "grpc", "dubbo"]), min_size=1, max_size=3),
    protocol=st.sampled_from(["tri", "grpc", "dubbo"]),
)
def test_a_protocol_option_narrows_to_the_named_protocols(asked: list[str], protocol: str) -> None:
    chosen = ProviderFilter(consumer(protocol=",".join(asked)), SERVICE).select(
        [provider(protocol)]
    )
    assert bool(chosen) == (protocol in asked and protocol != "dubbo")


def test_each_skipped_url_is_warned_about_once_not_per_notification(
    caplog: pytest.LogCaptureFixture,
) -> None:
    selector = ProviderFilter(consumer(), SERVICE)
    java = provider("dubbo", 20880, serialization="hessian2")
    rest = provider("rest", 8080)
    tri = provider()
    with caplog.at_level(logging.WARNING, logger="dubbo_py.registry.matching"):
        for _ in range(5):
            assert selector.select([tri, java, rest]) == [tri]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    # The Java dubbo:// endpoint's warning says what calls it.
    assert any(
        "dubbo://127.0.0.1:20880" in w
        and "a gRPC stub cannot call dubbo://" in w
        and f"app.generic_reference('{SERVICE}')" in w
        for w in warnings
    )
    assert any("rest://127.0.0.1:8080" in w for w in warnings)
    # a URL that left and came back is news again
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="dubbo_py.registry.matching"):
        selector.select([tri])
        selector.select([tri, java])
    assert len(caplog.records) == 1


def test_an_apache_dubbo_3_0_service_url_takes_its_interface_from_the_folder(
    caplog: pytest.LogCaptureFixture,
) -> None:
    odd = URL.parse(f"tri://127.0.0.1:50070?service={SERVICE}")
    assert odd.service_interface == ""
    assert normalise_provider(odd, SERVICE).service_interface == SERVICE
    # a URL with a path or interface is left alone
    assert normalise_provider(provider(), "other.Folder") == provider()
    with caplog.at_level(logging.DEBUG, logger="dubbo_py.registry.matching"):
        selector = ProviderFilter(consumer(), SERVICE)
        chosen = selector.select([odd])
        selector.select([odd])
    assert [u.address for u in chosen] == ["127.0.0.1:50070"]
    assert chosen[0].path == SERVICE
    notes = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert len(notes) == 1 and "apache-dubbo 3.0" in notes[0]
    # still matched like any other provider: a versioned consumer does not take it
    assert ProviderFilter(consumer(version="1.0.0"), SERVICE).select([odd]) == []


# ----------------------------------------------------------------- through a directory


def test_the_directory_lists_only_what_the_consumer_can_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = Registry(MemoryStore())
    urls = [
        provider(port=50051, interface=SERVICE, version="1.0.0", group="a"),
        provider("grpc", 50052, interface=SERVICE, version="1.0.0", group="b"),
        provider("dubbo", 20880, interface=SERVICE, version="1.0.0", group="a"),
        provider(port=50053, interface=SERVICE, version="1.0.0"),  # no group: not in "a,b"
        provider(port=50054, interface=SERVICE, version="2.0.0", group="a"),
        provider(port=50055, interface=SERVICE, version="1.0.0", group="a", enabled="false"),
        provider(port=50056, interface=SERVICE, version="1.0.0", group="a", classifier="x"),
    ]
    for url in urls:
        registry.register(url)
    c = consumer(version="1.0.0", group="a, b", application="shop")
    directory = RegistryDirectory(c, registry, factory.new_rulebook())
    try:
        with caplog.at_level(logging.WARNING, logger="dubbo_py.registry.matching"):
            directory.start(wait=5)
            assert sorted(p.address for p in directory.providers) == [
                "127.0.0.1:50051",
                "127.0.0.1:50052",
                "127.0.0.1:50056",
            ]
            # more notifications: the Java dubbo:// endpoint is still not warned about again
            for port in (50057, 50058):
                registry.register(provider(port=port, interface=SERVICE, version="1.0.0"))
            assert len(directory.providers) == 3
        skipped = [r.getMessage() for r in caplog.records if "20880" in r.getMessage()]
        assert len(skipped) == 1
    finally:
        directory.close()


def test_a_generic_consumer_takes_dubbo_and_tri_providers_and_no_grpc_one() -> None:
    # A generic reference's directory (generic=true) calls dubbo:// and tri:// providers
    # (dubbo_py.consumer.generic); a stub's directory skips dubbo:// and takes grpc://.
    urls = [
        URL("dubbo", "127.0.0.1", 20880, SERVICE, parameters={"interface": SERVICE}),
        URL("tri", "127.0.0.1", 50051, SERVICE, parameters={"interface": SERVICE}),
        URL("grpc", "127.0.0.1", 50052, SERVICE, parameters={"interface": SERVICE}),
    ]
    generic = URL("consumer", "127.0.0.1", 0, SERVICE, parameters={"generic": "true"})
    stub = URL("consumer", "127.0.0.1", 0, SERVICE)
    assert [p.protocol for p in ProviderFilter(generic, SERVICE).select(urls)] == ["dubbo", "tri"]
    assert [p.protocol for p in ProviderFilter(stub, SERVICE).select(urls)] == ["tri", "grpc"]
