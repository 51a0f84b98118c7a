"""The dead-provider quarantine: membership, partition, probing and its background thread."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from dubbo_py.cluster.quarantine import Quarantine, QuarantineEvent
from dubbo_py.url import URL


def provider(n: int, **params: str | int) -> URL:
    return URL.parse(f"tri://10.0.0.{n}:50051/demo.Greeter?interface=demo.Greeter").with_parameters(
        **params
    )


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        self.now += 1
        return self.now


def never(url: URL) -> bool:
    return False


CANDIDATES = (provider(1), provider(2), provider(3), provider(4))


def test_empty_quarantine_passes_the_same_tuple_through() -> None:
    q = Quarantine(never)
    healthy, quarantined = q.partition(CANDIDATES)
    assert healthy is CANDIDATES
    assert quarantined == ()


def test_partition_splits_in_order_and_is_stable_per_tuple() -> None:
    q = Quarantine(never)
    assert q.add(CANDIDATES[1], "UNAVAILABLE")
    assert q.add(CANDIDATES[3], "connection refused")
    healthy, quarantined = q.partition(CANDIDATES)
    assert healthy == (CANDIDATES[0], CANDIDATES[2])
    assert quarantined == (CANDIDATES[1], CANDIDATES[3])
    # the same healthy tuple object comes back, so the load balancer's cache stays warm
    assert q.partition(CANDIDATES)[0] is healthy
    q.remove(CANDIDATES[3])
    assert q.partition(CANDIDATES)[0] == (CANDIDATES[0], CANDIDATES[2], CANDIDATES[3])
    # nothing of these candidates quarantined: the input tuple itself
    others = (provider(7), provider(8))
    assert q.partition(others)[0] is others


def test_everyone_quarantined_leaves_no_healthy() -> None:
    q = Quarantine(never)
    for url in CANDIDATES:
        q.add(url, "down")
    assert q.partition(CANDIDATES) == ((), CANDIDATES)


def test_membership_is_by_address() -> None:
    q = Quarantine(never)
    q.add(provider(1, weight=100), "down")
    assert q.contains(provider(1, weight=50))
    assert provider(1) in q
    assert not q.contains(provider(2))
    assert len(q) == 1


def test_add_again_keeps_since_and_takes_the_new_reason() -> None:
    q = Quarantine(never, clock=Clock())
    assert q.add(CANDIDATES[0], "timeout")
    since = q.entries()[0].since
    assert not q.add(CANDIDATES[0], "connection refused")
    (entry,) = q.entries()
    assert (entry.since, entry.reason) == (since, "connection refused")


def test_entries_are_an_immutable_snapshot_oldest_first() -> None:
    q = Quarantine(never, clock=Clock())
    q.add(CANDIDATES[2], "a")
    q.add(CANDIDATES[0], "b")
    entries = q.entries()
    assert [e.url for e in entries] == [CANDIDATES[2], CANDIDATES[0]]
    assert [e.address for e in entries] == ["10.0.0.3:50051", "10.0.0.1:50051"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        entries[0].reason = "changed"  # type: ignore[misc]
    q.remove(CANDIDATES[2])
    assert len(entries) == 2  # the snapshot did not move


def test_retain_drops_providers_that_left_the_registry() -> None:
    q = Quarantine(never)
    events: list[QuarantineEvent] = []
    q.on_change(events.append)
    q.add(CANDIDATES[0], "down")
    q.add(CANDIDATES[1], "down")
    q.retain([CANDIDATES[1], CANDIDATES[2]])
    assert [e.url for e in q.entries()] == [CANDIDATES[1]]
    assert [(e.kind, e.entry.url) for e in events] == [
        ("added", CANDIDATES[0]),
        ("added", CANDIDATES[1]),
        ("removed", CANDIDATES[0]),
    ]


def test_probe_counts_attempts_and_revives() -> None:
    answers = {CANDIDATES[0].address: [False, False, True], CANDIDATES[1].address: [False] * 3}

    def probe(url: URL) -> bool:
        return answers[url.address].pop(0)

    q = Quarantine(probe)
    events: list[QuarantineEvent] = []
    q.on_change(events.append)
    q.add(CANDIDATES[0], "down")
    q.add(CANDIDATES[1], "down")
    assert q.probe_once() == ()
    assert q.probe_once() == ()
    assert [e.probe_attempts for e in q.entries()] == [2, 2]
    assert q.probe_once() == (CANDIDATES[0],)
    assert not q.contains(CANDIDATES[0])
    assert [e.probe_attempts for e in q.entries()] == [3]
    assert (events[-1].kind, events[-1].entry.url, events[-1].entry.probe_attempts) == (
        "revived",
        CANDIDATES[0],
        3,
    )


def test_before_revive_runs_while_the_provider_is_still_quarantined() -> None:
    # Calls pick a provider the moment it leaves quarantine, so what they need (a fresh
    # channel) must be ready before that; a "revived" listener runs too late.
    seen: list[tuple[str, bool]] = []

    def before_revive(url: URL) -> None:
        seen.append((url.address, q.contains(url)))

    q = Quarantine(lambda url: url == CANDIDATES[0])
    q.before_revive(before_revive)
    q.add(CANDIDATES[0], "down")
    q.add(CANDIDATES[1], "down")
    assert q.probe_once() == (CANDIDATES[0],)
    assert seen == [(CANDIDATES[0].address, True)]  # only the revived one, while still in
    assert not q.contains(CANDIDATES[0])


def test_a_failing_before_revive_hook_still_revives_and_hooks_unsubscribe() -> None:
    def before_revive(url: URL) -> None:
        raise RuntimeError("cannot reset the channel")

    calls: list[URL] = []
    q = Quarantine(lambda url: True)
    q.before_revive(before_revive)
    unsubscribe = q.before_revive(calls.append)
    q.add(CANDIDATES[0], "down")
    assert q.probe_once() == (CANDIDATES[0],)
    assert len(q) == 0
    assert calls == [CANDIDATES[0]]  # the next hook ran too
    unsubscribe()
    q.add(CANDIDATES[1], "down")
    assert q.probe_once() == (CANDIDATES[1],)
    assert calls == [CANDIDATES[0]]


def test_a_probe_that_raises_counts_as_dead() -> None:
    def probe(url: URL) -> bool:
        raise OSError("network is unreachable")

    q = Quarantine(probe)
    q.add(CANDIDATES[0], "down")
    assert q.probe_once() == ()
    assert q.entries()[0].probe_attempts == 1


def test_probe_racing_with_requarantine_does_not_revive_the_new_episode() -> None:
    q = Quarantine(never)

    def probe(url: URL) -> bool:
        q.remove(url)
        q.add(url, "failed again")
        return True

    q = Quarantine(probe)
    q.add(CANDIDATES[0], "down")
    assert q.probe_once() == ()
    (entry,) = q.entries()
    assert (entry.reason, entry.probe_attempts) == ("failed again", 0)


def test_listeners_that_raise_are_isolated_and_can_unsubscribe() -> None:
    q = Quarantine(never)
    seen: list[str] = []

    def broken(event: QuarantineEvent) -> None:
        raise RuntimeError("listener bug")

    q.on_change(broken)
    unsubscribe = q.on_change(lambda e: seen.append(e.kind))
    q.add(CANDIDATES[0], "down")
    unsubscribe()
    q.remove(CANDIDATES[0])
    assert seen == ["added"]


def test_background_thread_revives_a_provider() -> None:
    calls = {"n": 0}

    def probe(url: URL) -> bool:
        calls["n"] += 1
        return calls["n"] >= 3

    revived = threading.Event()
    q = Quarantine(probe, interval=0.01)
    q.on_change(lambda e: revived.set() if e.kind == "revived" else None)
    q.add(CANDIDATES[0], "down")
    with q:
        assert q.running
        assert revived.wait(10), "the background prober never revived the provider"
    assert not q.running
    assert not q.contains(CANDIDATES[0])
    assert calls["n"] == 3


def test_bad_interval_rejected() -> None:
    with pytest.raises(ValueError, match="interval"):
        Quarantine(never, interval=0)
