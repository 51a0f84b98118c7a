"""What a consumer of many services keeps per rule and per watch, and what it no longer keeps
(issue 42, item 1: 1 000 services x 20 condition rules).

Each cut leaves behaviour alone: a router URL's version is the digest of its encoded form, an
equal URL delivered again is not recompiled, the provider values read to bind a rule are read
again after the snapshot settled, and every directory watches the same key objects for a
provider application.
"""

from __future__ import annotations

import pytest

from dubbo_py.invocation import Invocation
from dubbo_py.registry import layout, rule_kinds
from dubbo_py.registry.rule_kinds import RuleKind, Target
from dubbo_py.router import factory
from dubbo_py.router.chain import RouterChain
from dubbo_py.router.condition.router import _Columns
from dubbo_py.router.rulebook import rule_version
from dubbo_py.router.snapshot import Snapshot
from dubbo_py.url import URL, encode_component
from tests.support.fake_rules import compile_fake_document

SERVICE = "demo.Memory"
PREFIX = layout.category_path(SERVICE, layout.ROUTERS)
CONSUMER = URL.parse(f"consumer://10.0.0.1/{SERVICE}?application=shop&interface={SERVICE}")


def _rule_url(rule: str, priority: int = 0) -> URL:
    return URL.parse(
        f"condition://0.0.0.0/{SERVICE}?category=routers&force=false&priority={priority}"
        f"&rule={encode_component(rule)}"
    )


def _providers(n: int) -> tuple[URL, ...]:
    return tuple(
        URL.parse(f"tri://10.0.1.{i}:50051/{SERVICE}?application=greeter&region=r{i % 3}")
        for i in range(n)
    )


def test_a_router_url_keeps_its_version_and_an_equal_url_is_not_compiled_again() -> None:
    book = factory.new_rulebook()
    url = _rule_url("application = shop => region = r1")
    assert book.set_urls(PREFIX, [url])
    ((source, (version, _)),) = book.in_force().items()
    assert source == f"{PREFIX}/{url.encode()}"
    assert version == rule_version(url)
    (router,) = book.routers()
    assert book.source_of(router) == (source, rule_version(url))
    # The registry decodes a routers folder whole on every change: a new, equal URL object.
    assert not book.set_urls(PREFIX, [URL.parse(str(url))])
    assert book.routers()[0] is router
    # Another rule text is another source; the old one is dropped.
    other = _rule_url("application = shop => region = r2")
    assert book.set_urls(PREFIX, [other])
    assert list(book.in_force()) == [f"{PREFIX}/{other.encode()}"]


def test_the_rule_book_does_not_keep_the_full_string_on_the_router_url() -> None:
    url = _rule_url("application = shop => region = r1")
    factory.new_rulebook().set_urls(PREFIX, [url])
    assert url._full is None  # kept once, in the source name, not twice
    assert url.encode(keep=False) == url.encode()
    assert url._full is not None  # encode() keeps it, as before


def test_binding_reads_provider_values_until_the_snapshot_settles() -> None:
    book = factory.new_rulebook()
    book.set_urls(PREFIX, [_rule_url("application = shop => region = r1")])
    snapshot = Snapshot(_providers(9))
    chain = RouterChain(book.routers()).bind(snapshot, CONSUMER)
    columns = snapshot.scratch(_Columns, lambda: pytest.fail("no columns kept while binding"))
    assert isinstance(columns, _Columns)
    snapshot.settle()
    assert snapshot._scratch is None
    hosts = {p.host for p in chain.route(Invocation(SERVICE, "SayHello"))}
    assert hosts == {f"10.0.1.{i}" for i in (1, 4, 7)}
    # A rule pushed while the providers stay: bound to the settled snapshot, reading again.
    book.set_urls(PREFIX, [_rule_url("application = shop => region = r2", 1)])
    again = RouterChain(book.routers()).bind(snapshot, CONSUMER)
    hosts = {p.host for p in again.route(Invocation(SERVICE, "SayHello"))}
    assert hosts == {f"10.0.1.{i}" for i in (2, 5, 8)}


def test_a_bound_rule_reading_one_value_uses_the_rules_own_reader() -> None:
    book = factory.new_rulebook()
    book.set_urls(PREFIX, [_rule_url("attachments[tenant] = t1 => region = r0")])
    (router,) = book.routers()
    first = router.bind(Snapshot(_providers(3)), CONSUMER)
    second = router.bind(Snapshot(_providers(6)), CONSUMER)
    assert first.read is second.read  # type: ignore[attr-defined]
    assert first.decide is not second.decide  # type: ignore[attr-defined]
    call = Invocation(SERVICE, "SayHello", attachments={"tenant": "t1"})
    assert second.route(0b111111, call) == 0b001001
    assert second.route(0b111111, Invocation(SERVICE, "SayHello")) == 0b111111


def test_directories_watch_one_set_of_keys_per_provider_application(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = rule_kinds.provider_application_keys("greeter", "shop")
    second = rule_kinds.provider_application_keys("greeter", "shop")
    assert first == second and first is not second
    assert all(a is b for a, b in zip(first, second, strict=True))
    assert layout.config_path(first[0].key) is layout.config_path(first[0].key)
    # A test's own kinds table is read at call time, as before.
    lab = RuleKind(
        "lab-router", {Target.PROVIDER_APPLICATION: compile_fake_document}, fields=("lab",)
    )
    monkeypatch.setattr(rule_kinds, "RULE_KINDS", (*rule_kinds.RULE_KINDS, lab))
    with_lab = rule_kinds.provider_application_keys("greeter", "shop")
    assert [k.key for k in with_lab] == [*(k.key for k in first), "greeter.lab-router"]
