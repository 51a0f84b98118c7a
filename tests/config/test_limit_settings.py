"""Overload-limit parameters parsed into settings (dubbo_py/config/limits.py): what a provider's
limits will be, and a bad value refused naming its parameter, without building any runtime
state."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dubbo_py.config.limits import (
    DEFAULT_TPS_INTERVAL_MS,
    GradientSettings,
    MethodLimitSettings,
    parse_limits,
)


def test_method_executes_falls_back_to_the_service_and_zero_or_negative_means_none() -> None:
    parsed = parse_limits(("A", "B", "C"), {"executes": "5", "A.executes": "2", "C.executes": "0"})
    assert dict(parsed.methods) == {
        "A": MethodLimitSettings(executes=2),
        "B": MethodLimitSettings(executes=5),
        "C": MethodLimitSettings(),
    }


def test_tps_defaults_to_dubbos_interval_and_a_negative_tps_means_no_limit() -> None:
    assert parse_limits(("A",), {"tps": "10"}).tps_interval_ms == DEFAULT_TPS_INTERVAL_MS
    assert parse_limits(("A",), {"tps": "-1", "tps.interval": "0"}).tps is None


def test_flowcontrol_per_method_with_its_bounds() -> None:
    parsed = parse_limits(
        ("A", "B"), {"A.flowcontrol": "gradient", "flowcontrol.min": "2", "flowcontrol.max": "9"}
    )
    assert dict(parsed.methods)["A"].flowcontrol == GradientSettings(
        initial=20, minimum=2, maximum=9
    )
    assert dict(parsed.methods)["B"].flowcontrol is None


def test_the_settings_are_frozen() -> None:
    parsed = parse_limits(("A",), {"tps": "1"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.tps = 2  # type: ignore[misc]


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"A.executes": "x"}, "A.executes='x'"),
        ({"tps": "1.5"}, "tps='1.5'"),
        ({"tps": "10", "tps.interval": "-5"}, "tps.interval must be > 0 ms, got -5"),
        ({"flowcontrol": "magic"}, "flowcontrol='magic'"),
        ({"flowcontrol": "gradient", "flowcontrol.max": "lots"}, "flowcontrol.max='lots'"),
        (
            {"flowcontrol": "gradient", "flowcontrol.min": "9", "flowcontrol.max": "3"},
            "flowcontrol.min",
        ),
    ],
)
def test_a_bad_value_is_refused_naming_its_parameter(params: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_limits(("A",), params)
    assert named in str(raised.value)


_VALUE = st.one_of(st.integers(-5, 500).map(str), st.text(max_size=4))


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "executes",
                "A.executes",
                "tps",
                "tps.interval",
                "flowcontrol",
                "A.flowcontrol",
                "flowcontrol.min",
                "flowcontrol.max",
                "flowcontrol.initial",
            ]
        ),
        st.one_of(_VALUE, st.just("gradient")),
    )
)
def test_any_parameters_give_settings_or_a_value_error(params: dict[str, str]) -> None:
    try:
        parsed = parse_limits(("A",), params)
    except ValueError:
        return
    ((_, own),) = parsed.methods
    assert own.executes is None or own.executes > 0
    assert parsed.tps is None or (parsed.tps >= 0 and parsed.tps_interval_ms > 0)
    if own.flowcontrol is not None:
        assert 1 <= own.flowcontrol.minimum <= own.flowcontrol.maximum
