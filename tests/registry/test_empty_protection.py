"""EmptyProtection alone (a fake probe): when it engages, what it keeps, when it lets go.
End to end with real processes and real packet loss: tests/e2e/test_network_faults.py."""

from __future__ import annotations

from dubbo_py.registry.address import parse_registry_address
from dubbo_py.registry.empty_protection import EmptyProtection
from dubbo_py.url import URL


def _url(port: int) -> URL:
    return URL.parse(f"tri://127.0.0.1:{port}/demo.Greeter?interface=demo.Greeter")


class _Probe:
    def __init__(self) -> None:
        self.answers: dict[str, bool | None] = {}
        self.asked: list[str] = []

    def __call__(self, url: URL) -> bool | None:
        self.asked.append(url.address)
        return self.answers.get(url.address, True)


def _protection(probe: _Probe, changes: list[int]) -> EmptyProtection:
    protection = EmptyProtection("demo.Greeter", probe, lambda: changes.append(1), interval=3600.0)
    protection._start = lambda: None  # type: ignore[method-assign]  # probe by hand here
    return protection


def test_all_providers_lost_are_kept_until_the_registry_lists_them_again() -> None:
    a, b = _url(1), _url(2)
    protection = _protection(_Probe(), [])
    assert protection.apply([a, b]) == [a, b]
    assert protection.apply([a]) == [a]  # one of two left: not most; dropped as always
    # The other's session expires a moment later: both left within the window, both kept
    # (sessions cut off at once expire one by one).
    assert protection.apply([]) == [a, b]
    assert protection.engaged
    assert protection.apply([a]) == [a] and not protection.engaged


def test_most_lost_at_once_keeps_each_that_answers_and_drops_the_others() -> None:
    urls = [_url(p) for p in range(1, 6)]
    probe = _Probe()
    changes: list[int] = []
    protection = _protection(probe, changes)
    protection.apply(urls)
    kept = protection.apply(urls[:2])  # 3 of 5 lost at once
    assert sorted(u.port for u in kept) == [1, 2, 3, 4, 5]
    probe.answers = {"127.0.0.1:3": False, "127.0.0.1:4": None}  # not serving; silent
    assert [u.port for u in protection.probe_once()] == [3]
    assert changes == [1]
    # One silent probe kept 4; the second drops it.
    assert [u.port for u in protection.probe_once()] == [4]
    assert sorted(u.port for u in protection.apply(urls[:2])) == [1, 2, 5]
    # One registered again (three listed, more than kept): the registry's list is the list.
    assert protection.apply(urls[:3]) == urls[:3]
    assert not protection.engaged


def test_providers_leaving_one_at_a_time_are_not_kept() -> None:
    urls = [_url(p) for p in range(1, 5)]
    clock = [0.0]
    protection = EmptyProtection(
        "demo.Greeter", _Probe(), lambda: None, window=10.0, clock=lambda: clock[0]
    )
    protection._start = lambda: None  # type: ignore[method-assign]
    protection.apply(urls)
    for n in (3, 2, 1):  # a rolling restart's departures, far apart
        clock[0] += 60.0
        assert protection.apply(urls[:n]) == urls[:n]
    assert not protection.engaged


def test_a_service_retired_cleanly_is_let_go_at_the_first_probe() -> None:
    a, b = _url(1), _url(2)
    probe = _Probe()
    protection = _protection(probe, [])
    protection.apply([a, b])
    assert len(protection.apply([])) == 2
    probe.answers = {"127.0.0.1:1": False, "127.0.0.1:2": False}  # NOT_SERVING / refused
    assert len(protection.probe_once()) == 2
    assert protection.apply([]) == [] and not protection.engaged


def test_the_address_parameter_is_read_and_checked() -> None:
    address = parse_registry_address("zookeeper://127.0.0.1:2181/x?enable-empty-protection=false")
    assert address.empty_protection is False and str(address) == "zookeeper://127.0.0.1:2181/x"
    assert parse_registry_address("etcd://127.0.0.1:2379").empty_protection is None
    for bad in ("?enable-empty-protection=maybe", "?empty=1"):
        try:
            parse_registry_address(f"etcd://127.0.0.1:2379{bad}")
        except ValueError as exc:
            assert "etcd://127.0.0.1:2379" in str(exc)
        else:
            raise AssertionError(f"{bad} was accepted")
