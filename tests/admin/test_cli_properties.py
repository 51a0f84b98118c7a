"""Property tests for the CLI's text handling: the ``enabled`` flip, rule keys, history."""

from __future__ import annotations

import string

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from dubbo_py.admin.rules import documents as rules
from dubbo_py.admin.rules.history import History
from dubbo_py.registry import layout, rule_kinds
from dubbo_py.registry.rule_kinds import Target
from tests.support.memory_store import MemoryStore

names = st.text(string.ascii_letters + "_", min_size=1, max_size=8).filter(
    lambda s: s.lower() not in {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}
)
scalars = st.one_of(
    st.integers(-1000, 1000),
    st.booleans(),
    st.text(string.ascii_letters + string.digits + " =>.,:*", max_size=20),
)
documents = st.dictionaries(
    names,
    st.one_of(scalars, st.lists(scalars, max_size=3), st.dictionaries(names, scalars, max_size=2)),
    min_size=1,
    max_size=6,
)


# No per-example deadline: a parse takes milliseconds, but on a loaded machine one example can
# take longer than Hypothesis' default 200 ms, and tests make no timed assertions.
@settings(deadline=None)
@given(documents, st.booleans(), st.booleans(), st.booleans())
def test_set_enabled_changes_only_the_enabled_field(
    doc: dict[str, object], enabled: bool, flow: bool, had: bool
) -> None:
    if had:
        doc = {**doc, "enabled": not enabled}
    text = yaml.safe_dump(doc, default_flow_style=flow, sort_keys=False)
    out = rules.set_enabled(text, enabled, "t.yaml")
    assert yaml.safe_load(out) == {**doc, "enabled": enabled}
    assert rules.set_enabled(out, enabled, "t.yaml") == out
    if not flow:
        # Block documents keep every other line as it was.
        kept = [ln for ln in text.splitlines() if not ln.startswith("enabled:")]
        assert [ln for ln in out.splitlines() if not ln.startswith("enabled:")] == kept


dotted = st.lists(
    st.text(string.ascii_letters, min_size=1, max_size=6), min_size=1, max_size=3
).map(".".join)
parts = st.text(string.ascii_letters + string.digits + ".-", max_size=6)


@given(dotted, parts, parts, st.sampled_from(["condition-router", "shard-router", "configurators"]))
def test_service_keys_round_trip(interface: str, version: str, group: str, kind: str) -> None:
    spec = interface
    if version:
        spec = f"{spec}:{version}"
    if group:
        spec = f"{group}/{spec}"
    target = rules.service_target(spec)
    assert target == layout.rule_key(interface, version, group)
    assert rules.service_target(target) == target
    parsed = rules.parse_key(f"{target}.{kind}")
    assert (parsed.interface, parsed.kind, parsed.application_scoped) == (interface, kind, False)


@given(dotted, st.sampled_from(sorted(rules.KINDS)))
def test_application_keys(app: str, kind: str) -> None:
    key = f"{app}.{kind}"
    rule_kind = rule_kinds.kind_named(kind)
    assert rule_kind is not None
    if rule_kind.application_target is None:
        try:
            rules.parse_key(key)
        except ValueError as exc:
            assert "keyed by service" in str(exc)
        else:
            raise AssertionError(f"{key} accepted")
        return
    parsed = rules.parse_key(key)
    assert (parsed.target, parsed.kind, parsed.application_scoped) == (app, kind, True)
    expected = {
        "condition-router": Target.APPLICATION,
        "configurators": Target.APPLICATION,
        "tag-router": Target.PROVIDER_APPLICATION,
        "script-router": Target.PROVIDER_APPLICATION,
        "affinity-router": Target.PROVIDER_APPLICATION,
        "migration": Target.APPLICATION,
    }[kind]
    assert parsed.read_as is expected


@settings(max_examples=30)
@given(st.integers(1, 6), st.lists(st.sampled_from(["a", "b", None]), min_size=1, max_size=15))
def test_history_keeps_the_newest_entries_in_order(limit: int, texts: list[str | None]) -> None:
    history = History(MemoryStore(), limit)
    for i, text in enumerate(texts):
        history.record("k.condition-router", "push", text, i, "op", now_ms=i)
    entries = history.entries("k.condition-router")
    expected = list(range(len(texts)))[-limit:]
    assert [e.seq for e in entries] == expected
    assert [e.text for e in entries] == [texts[i] for i in expected]
