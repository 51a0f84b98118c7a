"""One behavioural suite for the coordination stores (ZooKeeper, embedded SQLite and etcd).

Every test runs against each backend through the ``store`` / ``make_store`` fixtures; a second
store from ``make_store`` is a separate session on the same namespace, like another process.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dubbo_py.errors import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError, StoreError
from dubbo_py.registry.store.base import SessionState, Store
from tests.support.waiting import Recorder, wait_until

StoreFactory = Callable[[], Store]

# A provider node name as the registry writes it (an url-encoded URL: '%' and '_' included).
PROVIDER = "tri%3A%2F%2F10.0.0.5%3A50051%2Fdemo.Greeter%3Fapplication%3Dgreeter_provider"


# -- nodes, data and versions ---------------------------------------------------------------


def test_created_node_has_its_data_and_version_zero(store: Store) -> None:
    store.create("/app/config", b"timeout=3")
    assert store.exists("/app/config")
    assert store.get("/app/config") == (b"timeout=3", 0)


def test_binary_and_empty_data_round_trip(store: Store) -> None:
    payload = bytes(range(256))
    store.create("/bin", payload)
    store.create("/empty")
    assert store.get("/bin") == (payload, 0)
    assert store.get("/empty") == (b"", 0)


def test_each_set_bumps_the_version_and_returns_it(store: Store) -> None:
    store.create("/n", b"a")
    assert store.set("/n", b"b") == 1
    assert store.set("/n", b"c") == 2
    assert store.get("/n") == (b"c", 2)


def test_set_with_a_stale_version_is_refused(store: Store) -> None:
    store.create("/n", b"a")
    store.set("/n", b"b", version=0)
    with pytest.raises(BadVersionError, match="/n"):
        store.set("/n", b"lost", version=0)
    assert store.get("/n") == (b"b", 1)


def test_delete_with_a_stale_version_is_refused(store: Store) -> None:
    store.create("/n")
    store.set("/n", b"x")
    with pytest.raises(BadVersionError):
        store.delete("/n", version=0)
    assert store.exists("/n")
    store.delete("/n", version=1)
    assert not store.exists("/n")


def test_creating_an_existing_node_fails(store: Store) -> None:
    store.create("/n", b"first")
    with pytest.raises(NodeExistsError, match="/n"):
        store.create("/n", b"second")
    assert store.get("/n") == (b"first", 0)


@pytest.mark.parametrize(
    "operation",
    [
        lambda s: s.get("/missing"),
        lambda s: s.set("/missing", b"x"),
        lambda s: s.delete("/missing"),
        lambda s: s.children("/missing"),
    ],
    ids=["get", "set", "delete", "children"],
)
def test_operations_on_a_missing_node_raise_no_node(
    store: Store, operation: Callable[[Store], object]
) -> None:
    with pytest.raises(NoNodeError, match="/missing"):
        operation(store)
    assert not store.exists("/missing")


def test_makepath_creates_persistent_empty_parents(store: Store) -> None:
    store.create("/dubbo/demo.Greeter/providers/p1", b"data")
    assert store.get("/dubbo/demo.Greeter") == (b"", 0)
    assert store.children("/dubbo/demo.Greeter") == ["providers"]


def test_without_makepath_a_missing_parent_fails(store: Store) -> None:
    with pytest.raises(NoNodeError):
        store.create("/no/parent", makepath=False)
    assert not store.exists("/no")
    store.create("/no", makepath=False)
    store.create("/no/parent", makepath=False)
    assert store.exists("/no/parent")


def test_ensure_path_creates_missing_nodes_and_keeps_existing_data(store: Store) -> None:
    store.create("/a", b"keep")
    store.ensure_path("/a/b/c")
    store.ensure_path("/a/b/c")
    assert store.get("/a") == (b"keep", 0)
    assert store.children("/a/b") == ["c"]


def test_children_are_sorted_names(store: Store) -> None:
    for name in ["zeta", PROVIDER, "alpha", "m_1", "m%1"]:
        store.create(f"/list/{name}")
    store.create("/list/alpha/grandchild")
    assert store.children("/list") == sorted(["zeta", PROVIDER, "alpha", "m_1", "m%1"])
    assert store.children("/list/zeta") == []


def test_root_lists_top_level_nodes(store: Store) -> None:
    store.create("/one/x")
    store.create("/two")
    assert {"one", "two"} <= set(store.children("/"))


def test_non_recursive_delete_of_a_parent_fails(store: Store) -> None:
    store.create("/p/c")
    with pytest.raises(NotEmptyError, match="/p"):
        store.delete("/p")
    assert store.exists("/p/c")


def test_recursive_delete_removes_the_subtree_only(store: Store) -> None:
    store.create("/svc/providers/a", b"1")
    store.create("/svc/providers/b/deep", b"2")
    store.create("/svc/providers-old/x")  # same name prefix, not below /svc/providers
    store.create("/svc/providers0")
    store.delete("/svc/providers", recursive=True)
    assert not store.exists("/svc/providers")
    assert not store.exists("/svc/providers/b/deep")
    assert store.children("/svc") == ["providers-old", "providers0"]
    assert store.exists("/svc/providers-old/x")


def test_recursive_delete_checks_the_version_first(store: Store) -> None:
    store.create("/tree/leaf")
    with pytest.raises(BadVersionError):
        store.delete("/tree", version=5, recursive=True)
    assert store.exists("/tree/leaf")


@pytest.mark.parametrize("path", ["relative", "/trailing/", "/double//slash", "/dot/./x", ""])
def test_invalid_paths_are_refused_with_the_path_named(store: Store, path: str) -> None:
    with pytest.raises(StoreError, match="invalid node path"):
        store.create(path)


def test_the_root_cannot_be_deleted(store: Store) -> None:
    with pytest.raises(StoreError):
        store.delete("/", recursive=True)


# -- ephemeral nodes ------------------------------------------------------------------------


def test_ephemeral_nodes_disappear_when_their_owner_closes(make_store: StoreFactory) -> None:
    owner, observer = make_store(), make_store()
    owner.create("/svc/providers/" + PROVIDER, b"", ephemeral=True)
    owner.create("/svc/configurators/rule", b"persistent")
    assert observer.children("/svc/providers") == [PROVIDER]

    owner.close()

    wait_until(lambda: observer.children("/svc/providers") == [], what="ephemeral node removal")
    # Parents made for the ephemeral node, and persistent nodes, stay.
    assert observer.exists("/svc/providers")
    assert observer.get("/svc/configurators/rule") == (b"persistent", 0)


def test_ephemeral_nodes_of_another_live_session_stay(make_store: StoreFactory) -> None:
    first, second = make_store(), make_store()
    first.create("/e/first", ephemeral=True)
    second.create("/e/second", ephemeral=True)
    second.close()
    wait_until(lambda: first.children("/e") == ["first"], what="only the closed one removed")


def test_ephemeral_nodes_cannot_have_children(store: Store) -> None:
    store.create("/eph", ephemeral=True)
    with pytest.raises(StoreError, match="ephemeral"):
        store.create("/eph/child")
    assert store.children("/eph") == []


def test_a_closed_store_refuses_operations(make_store: StoreFactory) -> None:
    store = make_store()
    store.close()
    with pytest.raises(StoreError):
        store.get("/")


def test_a_listener_added_to_a_connected_store_hears_connected_once(store: Store) -> None:
    events, sentinel = Recorder(), Recorder()
    store.add_session_listener(events)
    store.watch_data("/sentinel", sentinel)
    events.wait_last(SessionState.CONNECTED)
    store.create("/sentinel", b"later")  # anything queued after the listener has been handled
    sentinel.wait_last((b"later", 0))
    assert events.calls == [SessionState.CONNECTED]


# -- watches ----------------------------------------------------------------------------------


def test_children_watch_reports_initial_state_then_every_change(store: Store) -> None:
    store.create("/w/a")
    seen = Recorder()
    store.watch_children("/w", seen)
    seen.wait_last(["a"])
    store.create("/w/b")
    seen.wait_last(["a", "b"])
    store.delete("/w/a")
    seen.wait_last(["b"])


def test_children_watch_on_an_absent_node_fires_when_it_appears(store: Store) -> None:
    seen = Recorder()
    store.watch_children("/later", seen)
    assert seen.wait_count(1) == [[]]
    store.create("/later")
    assert seen.wait_count(2) == [[], []]  # the node appeared, still without children
    store.create("/later/x")
    seen.wait_last(["x"])
    store.delete("/later", recursive=True)
    seen.wait_last([])
    store.create("/later/y")  # created again (with makepath) after deletion
    seen.wait_last(["y"])


def test_data_watch_follows_creation_updates_and_deletion(store: Store) -> None:
    seen = Recorder()
    store.watch_data("/cfg", seen)
    seen.wait_last((None, -1))
    store.create("/cfg", b"v0")
    seen.wait_last((b"v0", 0))
    store.set("/cfg", b"v1")
    seen.wait_last((b"v1", 1))
    store.set("/cfg", b"v1")  # same bytes, new version: still a change
    seen.wait_last((b"v1", 2))
    store.delete("/cfg")
    seen.wait_last((None, -1))
    store.create("/cfg", b"again")
    seen.wait_last((b"again", 0))


def test_data_watch_sees_a_recursive_delete_of_an_ancestor(store: Store) -> None:
    store.create("/top/mid/leaf", b"x")
    seen = Recorder()
    store.watch_data("/top/mid/leaf", seen)
    seen.wait_last((b"x", 0))
    store.delete("/top", recursive=True)
    seen.wait_last((None, -1))


def test_watches_report_only_changes(store: Store) -> None:
    store.create("/quiet/a", b"1")
    kids, data, sentinel = Recorder(), Recorder(), Recorder()
    store.watch_children("/quiet", kids)
    store.watch_data("/quiet/a", data)
    kids.wait_last(["a"])
    data.wait_last((b"1", 0))
    store.create("/elsewhere", b"unrelated")
    store.watch_data("/elsewhere", sentinel)
    sentinel.wait_last((b"unrelated", 0))
    store.set("/elsewhere", b"changed")
    sentinel.wait_last((b"changed", 1))
    assert kids.calls == [["a"]]
    assert data.calls == [(b"1", 0)]


def test_cancelled_watches_are_not_called_again(store: Store) -> None:
    kids, data, sentinel = Recorder(), Recorder(), Recorder()
    cancel_kids = store.watch_children("/c", kids)
    cancel_data = store.watch_data("/c", data)
    kids.wait_count(1)
    data.wait_count(1)
    cancel_kids()
    cancel_data()
    before = (kids.calls, data.calls)

    store.watch_children("/c", sentinel)
    store.create("/c/x", b"")
    store.set("/c", b"changed")
    sentinel.wait_last(["x"])
    store.create("/c/y")
    sentinel.wait_last(["x", "y"])

    assert (kids.calls, data.calls) == before


def test_a_callback_may_cancel_its_own_watch(store: Store) -> None:
    calls: list[list[str]] = []
    cancel: list[Callable[[], None]] = []

    def once(names: list[str]) -> None:
        calls.append(names)
        if names:
            cancel[0]()

    sentinel = Recorder()
    cancel.append(store.watch_children("/self", once))
    store.watch_children("/self", sentinel)
    store.create("/self/a")
    sentinel.wait_last(["a"])
    wait_until(lambda: calls[-1:] == [["a"]], what="the cancelling call")
    store.create("/self/b")
    sentinel.wait_last(["a", "b"])
    assert calls[-1] == ["a"]


def test_a_failing_callback_keeps_its_watch(store: Store) -> None:
    seen = Recorder()

    def flaky(data: bytes | None, version: int) -> None:
        seen(data, version)
        raise RuntimeError("callback bug")

    store.watch_data("/flaky", flaky)
    seen.wait_last((None, -1))
    store.create("/flaky", b"1")
    seen.wait_last((b"1", 0))
    store.set("/flaky", b"2")
    seen.wait_last((b"2", 1))


def test_two_watches_on_one_path_are_independent(store: Store) -> None:
    first, second = Recorder(), Recorder()
    cancel_first = store.watch_children("/shared", first)
    store.watch_children("/shared", second)
    store.create("/shared/a")
    first.wait_last(["a"])
    second.wait_last(["a"])
    cancel_first()
    store.create("/shared/b")
    second.wait_last(["a", "b"])
    assert first.last == ["a"]


def test_a_watch_added_to_a_watched_path_gets_its_current_state(store: Store) -> None:
    first, late = Recorder(), Recorder()
    store.watch_data("/joined", first)
    first.wait_last((None, -1))
    store.create("/joined", b"v0")
    first.wait_last((b"v0", 0))
    store.watch_data("/joined", late)
    late.wait_last((b"v0", 0))
    store.set("/joined", b"v1")
    first.wait_last((b"v1", 1))
    late.wait_last((b"v1", 1))
    assert first.calls == [(None, -1), (b"v0", 0), (b"v1", 1)]


def test_watches_see_changes_made_by_another_store(make_store: StoreFactory) -> None:
    watcher, writer = make_store(), make_store()
    kids, data = Recorder(), Recorder()
    watcher.watch_children("/dubbo/demo.Greeter/providers", kids)
    watcher.watch_data("/dubbo/config/dubbo/demo.condition-router", data)
    kids.wait_last([])
    data.wait_last((None, -1))

    writer.create("/dubbo/demo.Greeter/providers/" + PROVIDER, ephemeral=True)
    writer.create("/dubbo/config/dubbo/demo.condition-router", b"conditions: []")
    kids.wait_last([PROVIDER])
    data.wait_last((b"conditions: []", 0))

    writer.close()
    kids.wait_last([])  # the ephemeral provider went with its session
    assert data.last == (b"conditions: []", 0)


def test_many_quick_changes_end_in_the_latest_state(store: Store) -> None:
    seen = Recorder()
    store.watch_children("/burst", seen)
    seen.wait_count(1)
    names = [f"n{i:02d}" for i in range(30)]
    for name in names:
        store.create(f"/burst/{name}")
    seen.wait_last(names)
    for name in names[:-1]:
        store.delete(f"/burst/{name}")
    seen.wait_last(names[-1:])


# -- model check ----------------------------------------------------------------------------

_segments = st.sampled_from(["a", "b", "c"])
_paths = st.lists(_segments, min_size=1, max_size=3).map(lambda parts: "/" + "/".join(parts))
_data = st.binary(max_size=4)
_versions = st.sampled_from([-1, 0, 1, 2])
_operations = st.one_of(
    st.tuples(st.just("create"), _paths, _data, st.booleans()),
    st.tuples(st.just("set"), _paths, _data, _versions),
    st.tuples(st.just("delete"), _paths, _versions, st.booleans()),
    st.tuples(st.just("get"), _paths),
    st.tuples(st.just("children"), _paths),
)
_example = itertools.count()


class _Model:
    """What a ZooKeeper-like tree must do, in a dict: path -> (data, version, ephemeral)."""

    def __init__(self) -> None:
        self.nodes: dict[str, tuple[bytes, int, bool]] = {}

    def _parent(self, path: str) -> str:
        return path.rsplit("/", 1)[0]

    def _below(self, path: str) -> list[str]:
        return [p for p in self.nodes if p.startswith(path + "/")]

    def apply(self, op: tuple[Any, ...]) -> object:
        kind, path = op[0], op[1]
        if kind == "create":
            _, _, data, ephemeral = op
            if path in self.nodes:
                return NodeExistsError
            parts = path.split("/")[1:]
            ancestors = ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]
            if any(self.nodes.get(a, (b"", 0, False))[2] for a in ancestors):
                return StoreError
            for ancestor in ancestors:
                self.nodes.setdefault(ancestor, (b"", 0, False))
            self.nodes[path] = (data, 0, ephemeral)
            return None
        if path not in self.nodes:
            return NoNodeError
        data, version, ephemeral = self.nodes[path]
        if kind == "get":
            return (data, version)
        if kind == "children":
            return sorted(p.rsplit("/", 1)[1] for p in self.nodes if self._parent(p) == path)
        if kind == "set":
            _, _, new, expected = op
            if expected not in (-1, version):
                return BadVersionError
            self.nodes[path] = (new, version + 1, ephemeral)
            return version + 1
        _, _, expected, recursive = op
        if expected not in (-1, version):
            return BadVersionError
        below = self._below(path)
        if below and not recursive:
            return NotEmptyError
        for p in [path, *below]:
            del self.nodes[p]
        return None


def _run(store: Store, base: str, op: tuple[Any, ...]) -> object:
    kind, path = op[0], base + op[1]
    try:
        if kind == "create":
            return store.create(path, op[2], ephemeral=op[3])
        if kind == "set":
            return store.set(path, op[2], version=op[3])
        if kind == "delete":
            return store.delete(path, version=op[2], recursive=op[3])
        if kind == "get":
            return store.get(path)
        return store.children(path)
    except StoreError as exc:
        return type(exc)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(operations=st.lists(_operations, max_size=15))
def test_store_behaves_like_the_model(store: Store, operations: list[tuple[Any, ...]]) -> None:
    base = f"/model{next(_example)}"  # a fresh subtree per example, in the test's namespace
    store.ensure_path(base)
    model = _Model()
    for op in operations:
        assert _run(store, base, op) == model.apply(op), op
