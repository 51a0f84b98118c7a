"""The registry's decoding of a folder's node names, notification after notification: the
URLs, and what arrived and departed, are those of comparing the whole lists as sets, whatever
the store does to the order, whether it hands over the same string objects or new ones, with
names listed twice and names that are not URLs; and a one-provider change does not hash the
fleet's names."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dubbo_py.registry.registry import ChangedURLs, Registry
from dubbo_py.url import URL
from tests.support.memory_store import MemoryStore

PATH = "/dubbo/demo.Greeter/providers"
BAD = "not%20a%20url"


def name(i: int) -> str:
    return URL("tri", f"10.0.{i // 250}.{i % 250}", 50051, "demo.Greeter").encode()


edit = st.tuples(
    st.sampled_from(("add", "remove", "replace", "bad", "twice", "move", "reverse", "copy")),
    st.floats(0, 1),
    st.integers(0, 80),
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(0, 80), max_size=30),
    st.lists(st.lists(edit, min_size=1, max_size=4), min_size=1, max_size=8),
)
def test_each_notification_gives_what_comparing_the_whole_lists_gives(
    start: list[int], notifications: list[list[tuple[str, float, int]]]
) -> None:
    registry = Registry(MemoryStore())
    names = [name(i) for i in start]
    urls = registry._decode(PATH, list(names))
    for notification in notifications:
        before = {u.to_string(): u for u in urls}
        for kind, where, i in notification:
            at = min(int(where * len(names)), max(len(names) - 1, 0))
            if kind == "add" or not names:
                names.insert(at, name(i))
            elif kind == "remove":
                del names[at]
            elif kind == "replace":
                names[at] = name(i)
            elif kind == "bad":
                names.insert(at, BAD)
            elif kind == "twice":
                names.insert(at, names[i % len(names)])
            elif kind == "move":
                names.insert(at, names.pop(i % len(names)))
            elif kind == "reverse":
                names.reverse()
            else:  # a store that makes new string objects for the same names
                names = [("x" + n)[1:] for n in names]
        urls = registry._decode(PATH, list(names))
        assert isinstance(urls, ChangedURLs)
        expected = {URL.decode(n).to_string() for n in names if n != BAD}
        now = {u.to_string(): u for u in urls}
        assert len(now) == len(urls) and set(now) == expected  # each provider once
        # Unchanged providers keep their URL objects; arrived and departed are exact.
        assert all(now[k] is before[k] for k in now.keys() & before.keys())
        if urls.base is not None:
            assert {u.to_string() for u in urls.arrived} == now.keys() - before.keys()
            assert {u.to_string() for u in urls.departed} == before.keys() - now.keys()
            assert all(before[u.to_string()] is u for u in urls.departed)


class CountedName(str):
    """A node name that counts how often it is hashed."""

    hashed = 0

    def __hash__(self) -> int:
        CountedName.hashed += 1
        return str.__hash__(self)


def test_a_one_provider_change_hashes_only_the_names_around_it() -> None:
    registry = Registry(MemoryStore())
    names = [CountedName(name(i)) for i in range(2_000)]
    registry._decode(PATH, list(names))
    for k, position in enumerate((0, 700, 1_999)):
        names[position] = CountedName(name(5_000 + k))
        CountedName.hashed = 0
        urls = registry._decode(PATH, list(names))
        (arrived,) = urls.arrived
        assert arrived.host == f"10.0.{(5_000 + k) // 250}.{(5_000 + k) % 250}"
        assert len(urls.departed) == 1 and len(urls) == 2_000
        # The old code hashed every name of the list (a set of 2 000) for each notification.
        assert CountedName.hashed < 20
