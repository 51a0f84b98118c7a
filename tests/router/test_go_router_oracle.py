"""dubbo-py's routers and configurators against dubbo-go 3.3.2's own, case by case.

The vectors (go_router_vectors.json) are the Java oracle's fast vectors, and for each way
dubbo-go 3.3.2 differs from dubbo-py one case found by the differential run
(scripts/differential_routers.py ``--oracle go``; the smallest one of two seeded runs, or for
configurators a case written by hand to show the row), with dubbo-go's answer and the reason
(tests/support/go_router_differences.py; docs/compatibility.md). The first test checks dubbo-py
alone against the recorded answers: each vector agrees, or differs for exactly its reason. The
live tests ask the real Go oracle (tests/peers/go/oracle): the vectors still hold dubbo-go's
answers, and 400 generated cases (80 of each kind, and 80 condition documents with their flags
written out) differ only where a reason is written down; and the Java oracle, that Dubbo Java
answers each vector as dubbo-py does wherever the table says so.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import go_router_differences, router_cases
from tests.support.router_oracle import (
    GO_KINDS,
    GoOracle,
    JavaOracle,
    compare,
    documented,
    dubbo_py_answer,
)

VECTORS: list[dict[str, Any]] = json.loads(
    (Path(__file__).with_name("go_router_vectors.json")).read_text()
)


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_dubbo_py_agrees_with_dubbo_go_or_differs_for_the_written_reason(
    vector: dict[str, Any],
) -> None:
    case, go = vector["case"], vector["dubbo_go"]
    python = dubbo_py_answer(case)
    if vector["reason"] is None:
        assert compare(go, python, "dubbo-go") is None
    else:
        assert compare(go, python, "dubbo-go") is not None, "no longer differs"
        assert go_router_differences.documented(case, go, python) == vector["reason"]


def test_every_written_reason_has_a_vector() -> None:
    reasons = {reason for reason, _ in go_router_differences.READINGS}
    reasons |= {reason for *_, reason in go_router_differences.REFUSALS}
    reasons |= {reason for reason, _ in go_router_differences.PANICS}
    reasons |= {reason for reason, _ in go_router_differences.OWN_ANSWERS}
    reasons |= {reason for reason, _ in go_router_differences.CONFIGURATOR_READINGS}
    reasons |= {
        go_router_differences.CONFIGURATOR_COPIED,
        go_router_differences.CONFIGURATOR_APPLICATION_KEY,
    }
    # (Two of the readings, `$name` on a when side and the v3.1 fields, are Dubbo Java's too.
    # A configurator vector may need two rows: dubbo-go copies configVersion onto every URL it
    # configures, so a row seen only where it configures comes with that one.)
    written = {part for v in VECTORS if v["reason"] for part in v["reason"].split(" + ")}
    assert reasons == written


@pytest.fixture(scope="module")
def oracle() -> Iterator[GoOracle]:
    with GoOracle.start() as running:
        yield running


def test_the_vectors_hold_dubbo_go_s_answers_today(oracle: GoOracle) -> None:
    answers = list(oracle.ask([v["case"] for v in VECTORS]))
    assert answers == [v["dubbo_go"] for v in VECTORS]


def test_generated_cases_differ_only_where_documented(oracle: GoOracle) -> None:
    rng = random.Random(20261207)
    cases = [router_cases.case(rng, kind) for kind in GO_KINDS for _ in range(80)]
    # and condition documents with their flags written out, most of which dubbo-go routes
    # (rather than refusing or panicking on them)
    cases += [
        router_cases.with_explicit_flags(router_cases.case(rng, "condition"), rng)
        for _ in range(80)
    ]
    unexplained = []
    agreed = 0
    for case, go in zip(cases, oracle.ask(cases), strict=True):
        python = dubbo_py_answer(case)
        category = compare(go, python, "dubbo-go")
        if category is None:
            agreed += 1
        elif go_router_differences.documented(case, go, python) is None:
            unexplained.append((category, case, go, python))
    assert not unexplained, unexplained[:3]
    assert agreed > len(cases) // 2  # the comparison is not all explained-away differences


def test_dubbo_java_answers_the_vectors_as_the_table_says() -> None:
    # docs/compatibility.md puts Dubbo Java with dubbo-py on every dubbo-go row except those
    # it shares with Java (where Java differs from dubbo-py for its own written reason).
    cases = [v["case"] for v in VECTORS]
    with JavaOracle.start() as java_oracle:
        answers = list(java_oracle.ask(cases))
    for vector, java in zip(VECTORS, answers, strict=True):
        python = dubbo_py_answer(vector["case"])
        if vector["java_agrees_with_dubbo_py"]:
            assert compare(java, python) is None, vector["name"]
        else:
            assert documented(vector["case"], java, python) is not None, vector["name"]


def test_dubbo_go_configures_only_at_the_provider_s_host_and_port(oracle: GoOracle) -> None:
    # dubbo-go 3.3.2 reads every configurators document as Dubbo 2.6 override URLs (the
    # version key it reads is never written): with `enabled: true` an item for
    # 10.0.0.1:20880 configures that provider only (and leaves configVersion on it), one for
    # the host alone configures none; Dubbo Java and dubbo-py configure both at the host.
    def case(address: str) -> dict[str, Any]:
        return {
            "kind": "configurator",
            "rule": (
                "configVersion: v3.0\nscope: service\nkey: com.foo.BarService\nenabled: true\n"
                f"configs:\n  - side: provider\n    addresses: ['{address}']\n"
                "    parameters:\n      weight: '0'\n"
            ),
            "consumer": "consumer://10.0.1.3/com.foo.BarService?side=consumer",
            "providers": [
                f"dubbo://10.0.0.1:{port}/com.foo.BarService?side=provider&application=pay"
                for port in (20880, 20881)
            ],
        }

    plain = {"application": "pay", "side": "provider"}
    configured = {**plain, "weight": "0", "configVersion": "v3.0", "providerAddresses": ""}
    with_port, host_only = oracle.ask([case("10.0.0.1:20880"), case("10.0.0.1")])
    assert with_port == {"urls": [configured, plain]}
    assert host_only == {"urls": [plain, plain]}
    assert dubbo_py_answer(case("10.0.0.1"))["urls"] == [{**plain, "weight": "0"}] * 2


def test_dubbo_go_matches_a_tag_address_on_loopback_as_dubbo_py_does(oracle: GoOracle) -> None:
    # Dubbo Java 3.3.6 never matches a tag address on loopback (test_java_router_oracle.py);
    # dubbo-go compares the address with the provider's host:port text, as dubbo-py does.
    case = {
        "kind": "tag",
        "rule": (
            "configVersion: v3.0\nkey: gp\nforce: false\ntags:\n"
            "  - name: gray\n    addresses: ['127.0.0.1:20880']\n"
        ),
        "consumer": "consumer://127.0.0.1/demo.Greeter?side=consumer&interface=demo.Greeter",
        "providers": [
            "tri://127.0.0.1:20880/demo.Greeter?side=provider&application=gp",
            "tri://127.0.0.1:20881/demo.Greeter?side=provider&application=gp",
        ],
        "invocation": {"method": "SayHello", "attachments": {"dubbo.tag": "gray"}},
    }
    assert list(oracle.ask([case])) == [{"kept": [0]}] == [dubbo_py_answer(case)]
