"""EmptyProtection alone (a fake probe): when it engages, what it keeps, when it lets go; and
the provider list's departures and arrivals it reads. End to end with real processes and real
packet loss: tests/e2e/test_network_faults.py."""

from __future__ import annotations

from collections.abc import Callable

from dubbo_py.registry.empty_protection import EmptyProtection
from dubbo_py.registry.matching import ProviderFilter
from dubbo_py.registry.provider_list import ProviderList
from dubbo_py.registry.store.address import parse_registry_address
from dubbo_py.url import URL


def _url(port: int, version: str = "1.0.0") -> URL:
    return URL.parse(
        f"tri://127.0.0.1:{port}/demo.Greeter?interface=demo.Greeter&version={version}"
    )


class _Probe:
    def __init__(self) -> None:
        self.answers: dict[str, bool | None] = {}

    def __call__(self, url: URL) -> bool | None:
        return self.answers.get(url.address, True)


class _Directory:
    """What the registry directory does with it: the provider list's changes in, the kept
    providers added to the list."""

    def __init__(self, probe: _Probe, clock: Callable[[], float] | None = None) -> None:
        self.changes: list[int] = []
        self.probe = probe
        extra = {} if clock is None else {"window": 10.0, "clock": clock}
        self.protection = EmptyProtection(
            "demo.Greeter", probe, lambda: self.changes.append(1), interval=3600.0, **extra
        )
        self.protection._start = lambda: None  # type: ignore[method-assign]  # probed by hand
        consumer = URL.parse(
            "consumer://127.0.0.1/demo.Greeter?interface=demo.Greeter&version=1.0.0"
        )
        self.list = ProviderList(ProviderFilter(consumer, "demo.Greeter"), lambda p, _u, _d: p)
        self.registered: list[URL] = []

    def notify(self, registered: list[URL] | None = None) -> list[int]:
        if registered is not None:
            self.registered = registered
        update = self.list.update(self.registered, [], {}, False)
        kept = self.protection.apply(self.list.departed, self.list.arrived, update.providers)
        if kept:
            update = self.list.update([*self.registered, *kept], [], {}, False)
        return sorted(u.port for u in update.providers)


def test_all_providers_lost_are_kept_until_they_register_again() -> None:
    a, b = _url(1), _url(2)
    directory = _Directory(_Probe())
    assert directory.notify([a, b]) == [1, 2]
    assert directory.notify([a]) == [1]  # one of two left: not most; dropped as always
    # The other's session expires a moment later: both left within the window, both kept
    # (sessions cut off at once expire one by one).
    assert directory.notify([]) == [1, 2]
    assert directory.protection.engaged
    assert directory.notify([]) == [1, 2]  # a notification that changes nothing keeps them
    # Each is let go as it registers again.
    assert directory.notify([a]) == [1, 2] and directory.protection.engaged
    assert directory.notify([a, b]) == [1, 2] and not directory.protection.engaged


def test_most_lost_at_once_keeps_each_that_answers_and_drops_the_others() -> None:
    urls = [_url(p) for p in range(1, 6)]
    probe = _Probe()
    directory = _Directory(probe)
    directory.notify(urls)
    assert directory.notify(urls[:2]) == [1, 2, 3, 4, 5]  # 3 of 5 lost at once
    probe.answers = {"127.0.0.1:3": False, "127.0.0.1:4": None}  # not serving; silent
    assert [u.port for u in directory.protection.probe_once()] == [3]
    assert directory.changes == [1]
    assert directory.notify() == [1, 2, 4, 5]  # the rebuild the prober asked for
    # One silent probe kept 4; the second drops it.
    assert [u.port for u in directory.protection.probe_once()] == [4]
    assert directory.notify() == [1, 2, 5]
    # 3 registers again: 5 is still kept (the registry lists fewer than before the loss).
    assert directory.notify(urls[:3]) == [1, 2, 3, 5]
    # Replacements bring the registry back to five: the registry's list is the list again.
    assert directory.notify([*urls[:3], _url(6), _url(7)]) == [1, 2, 3, 6, 7]
    assert not directory.protection.engaged


def test_providers_leaving_one_at_a_time_are_not_kept() -> None:
    urls = [_url(p) for p in range(1, 5)]
    clock = [0.0]
    directory = _Directory(_Probe(), clock=lambda: clock[0])
    directory.notify(urls)
    for n in (3, 2, 1):  # a rolling shutdown's departures, far apart
        clock[0] += 60.0
        assert directory.notify(urls[:n]) == [u.port for u in urls[:n]]
    assert not directory.protection.engaged
    # The last one leaving is all of them: kept until its probe says it stopped serving.
    clock[0] += 60.0
    assert directory.notify([]) == [1]
    directory.probe.answers = {"127.0.0.1:1": False}
    directory.protection.probe_once()
    assert directory.notify() == [] and not directory.protection.engaged


def test_a_service_retired_cleanly_is_let_go_at_the_first_probe() -> None:
    a, b = _url(1), _url(2)
    probe = _Probe()
    directory = _Directory(probe)
    directory.notify([a, b])
    assert directory.notify([]) == [1, 2]
    probe.answers = {"127.0.0.1:1": False, "127.0.0.1:2": False}  # NOT_SERVING / refused
    assert len(directory.protection.probe_once()) == 2
    assert directory.notify() == [] and not directory.protection.engaged
    # Dropped providers are not taken for lost again by the rebuilds that follow.
    assert directory.notify() == []


def test_only_providers_this_consumer_may_call_count() -> None:
    mine = [_url(1), _url(2)]
    others = [_url(p, version="2.0.0") for p in range(10, 20)]
    directory = _Directory(_Probe())
    directory.notify(mine + others)
    # Ten providers of another version remain: for this consumer, every provider is gone.
    assert directory.notify(others) == [1, 2]
    assert directory.protection.engaged


def test_the_address_parameter_is_read_and_checked() -> None:
    address = parse_registry_address("zookeeper://127.0.0.1:2181/x?enable-empty-protection=false")
    assert address.empty_protection is False and str(address) == "zookeeper://127.0.0.1:2181/x"
    assert parse_registry_address("etcd://127.0.0.1:2379?session=2500").session_seconds == 2.5
    assert parse_registry_address("etcd://127.0.0.1:2379").empty_protection is None
    for bad in ("?enable-empty-protection=maybe", "?empty=1", "?session=0", "?session=1s"):
        try:
            parse_registry_address(f"etcd://127.0.0.1:2379{bad}")
        except ValueError as exc:
            assert "etcd://127.0.0.1:2379" in str(exc)
        else:
            raise AssertionError(f"{bad} was accepted")


def _after_empty_list(switched: bool) -> tuple[list[int], bool]:
    """A directory with empty protection handed providers 1 and 2, then an empty list (as a
    SwitchedProviders list when ``switched``): its providers and whether protection engaged."""
    from dubbo_py.registry.directory import RegistryDirectory
    from dubbo_py.registry.empty_protection import SwitchedProviders
    from dubbo_py.registry.registry import Registry, empty_url
    from dubbo_py.router import factory
    from tests.support.memory_store import MemoryStore

    listeners: list[Callable[[str, list[URL]], None]] = []

    def subscribe(
        _interface: str, listener: Callable[[str, list[URL]], None], _categories: object
    ) -> Callable[[], None]:
        listeners.append(listener)
        return lambda: None

    consumer = URL.parse("consumer://127.0.0.1/demo.Greeter?interface=demo.Greeter&version=1.0.0")
    directory = RegistryDirectory(
        consumer,
        Registry(MemoryStore()),
        factory.new_rulebook(),
        subscribe=subscribe,
        empty_protection=lambda _url: True,  # every provider still serves
    )
    assert directory.empty_protection is not None
    directory.empty_protection._start = lambda: None  # type: ignore[method-assign]
    try:
        directory.start(wait=0.1)
        [listener] = listeners
        listener("providers", [_url(1), _url(2)])
        assert sorted(u.port for u in directory.providers) == [1, 2]
        empty = [empty_url("demo.Greeter", "providers")]
        listener("providers", SwitchedProviders(empty) if switched else empty)
        return sorted(u.port for u in directory.providers), directory.empty_protection.engaged
    finally:
        directory.close()


def test_a_level_switch_is_not_a_loss_the_directory_keeps_providers_for() -> None:
    # A migration rule moving a consumer to a level with no provider (FORCE_* with force: true)
    # hands the directory an empty SwitchedProviders list: nothing left the registry, so
    # empty protection keeps nothing (Dubbo's consumer has no provider then either); the same
    # empty list from the registry itself is a loss, and the providers are kept.
    assert _after_empty_list(switched=False) == ([1, 2], True)
    assert _after_empty_list(switched=True) == ([], False)
