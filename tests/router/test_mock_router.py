"""Mock selector: mock:// providers serve only calls that ask for them.

Known answers ported from Apache Dubbo's MockInvokersSelectorTest (dubbo-cluster,
router/mock/MockInvokersSelectorTest.java).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dubbo_py import URL, Invocation
from dubbo_py.errors import NoProviderError
from dubbo_py.invocation import MOCK_ATTACHMENT
from dubbo_py.router.chain import RouterChain
from dubbo_py.router.mock import MockRouter
from dubbo_py.router.snapshot import Snapshot, iter_bits

CONSUMER = URL.parse("consumer://127.0.0.1/test")


def call(**attachments: str) -> Invocation:
    return Invocation("test", "sayHello", attachments=attachments)


def hosts(snapshot: Snapshot, mask: int) -> list[str]:
    return [snapshot.providers[i].to_string() for i in iter_bits(mask)]


@pytest.fixture
def dubbo_case() -> Snapshot:
    # Dubbo's test: two mock providers and one dubbo provider.
    return Snapshot(
        (
            URL.parse("mock://127.0.0.1/test"),
            URL.parse("mock://127.0.0.1/test"),
            URL.parse("dubbo://127.0.0.1/test"),
        )
    )


def test_ordinary_call_gets_only_normal_providers(dubbo_case: Snapshot) -> None:
    bound = MockRouter().bind(dubbo_case, CONSUMER)
    assert hosts(dubbo_case, bound.route(dubbo_case.all, call())) == ["dubbo://127.0.0.1/test"]


def test_call_asking_for_mock_gets_only_mock_providers(dubbo_case: Snapshot) -> None:
    bound = MockRouter().bind(dubbo_case, CONSUMER)
    result = bound.route(dubbo_case.all, call(**{MOCK_ATTACHMENT: "true"}))
    assert list(iter_bits(result)) == [0, 1]


def test_need_mock_is_case_insensitive(dubbo_case: Snapshot) -> None:
    bound = MockRouter().bind(dubbo_case, CONSUMER)
    assert list(iter_bits(bound.route(dubbo_case.all, call(**{MOCK_ATTACHMENT: "TRUE"})))) == [0, 1]


def test_need_mock_false_keeps_mock_providers_away(dubbo_case: Snapshot) -> None:
    # Dubbo would pass all three through here; we never send unmarked calls to mock providers.
    bound = MockRouter().bind(dubbo_case, CONSUMER)
    assert list(iter_bits(bound.route(dubbo_case.all, call(**{MOCK_ATTACHMENT: "false"})))) == [2]


def test_only_candidates_survive(dubbo_case: Snapshot) -> None:
    bound = MockRouter().bind(dubbo_case, CONSUMER)
    assert bound.route(0b001, call(**{MOCK_ATTACHMENT: "true"})) == 0b001
    assert bound.route(0b011, call()) == 0


def test_chain_names_mock_router_when_no_mock_provider_exists() -> None:
    snapshot = Snapshot((URL.parse("tri://10.0.0.1:50051/demo.Greeter"),))
    chain = RouterChain([MockRouter()]).bind(snapshot, CONSUMER)
    with pytest.raises(NoProviderError, match="after routing by mock"):
        chain.route(call(**{MOCK_ATTACHMENT: "true"}))
    assert chain.route(call()) == snapshot.providers


def test_mock_router_runs_first() -> None:
    assert MockRouter().priority == -100


@given(
    protocols=st.lists(st.sampled_from(["mock", "tri", "dubbo"]), max_size=12),
    candidates=st.integers(min_value=0),
    wants_mock=st.booleans(),
)
def test_result_is_the_candidates_of_the_wanted_kind(
    protocols: list[str], candidates: int, wants_mock: bool
) -> None:
    snapshot = Snapshot(tuple(URL.parse(f"{p}://10.0.0.{i}:1/s") for i, p in enumerate(protocols)))
    candidates &= snapshot.all
    bound = MockRouter().bind(snapshot, CONSUMER)
    result = bound.route(candidates, call(**({MOCK_ATTACHMENT: "true"} if wants_mock else {})))
    expected = {
        i for i in iter_bits(candidates) if (snapshot.providers[i].protocol == "mock") == wants_mock
    }
    assert set(iter_bits(result)) == expected
