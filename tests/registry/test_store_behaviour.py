"""One behavioural suite for the coordination stores (ZooKeeper, embedded SQLite, etcd and
Nacos).

Every test runs against each backend through the ``store`` / ``make_store`` fixtures; a second
store from ``make_store`` is a separate session on the same namespace, like another process.

Nacos is not a tree (dubbo_py/registry/store/nacos): it holds rule-like data nodes (config data
ids) and provider folders (a Nacos service's instances) only. The tests of behaviour it can hold
take their paths from the ``at`` fixture (on the tree stores the very paths they always used;
on Nacos a config node or a providers folder whose children are provider URLs), the others are
skipped on Nacos with the limit that rules them out (:data:`NACOS_LIMITS`).
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
from dubbo_py.registry.store.nacos.store import content_version
from dubbo_py.url import URL
from tests.support.waiting import Recorder, wait_until

StoreFactory = Callable[[], Store]

# A provider node name as the registry writes it (an url-encoded URL: '%' and '_' included).
PROVIDER = "tri%3A%2F%2F10.0.0.5%3A50051%2Fdemo.Greeter%3Fapplication%3Dgreeter_provider"

_NO_TREE = "Nacos is not a tree: config data ids and service instances have no parents"
_NO_COUNTER = (
    "Nacos keeps no version counter: a version is the content's MD5 (NacosStore), the same "
    "for the same content"
)
#: The tests that do not run on Nacos, and the limit of Nacos that rules each out.
NACOS_LIMITS = {
    "test_binary_and_empty_data_round_trip": "Nacos config is text, and never empty",
    "test_each_set_bumps_the_version_and_returns_it": _NO_COUNTER,
    "test_makepath_creates_persistent_empty_parents": _NO_TREE,
    "test_without_makepath_a_missing_parent_fails": _NO_TREE,
    "test_ensure_path_creates_missing_nodes_and_keeps_existing_data": _NO_TREE,
    "test_children_are_sorted_names": (
        "a Nacos folder's children are provider URLs (instances), not free names"
    ),
    "test_root_lists_top_level_nodes": _NO_TREE,
    "test_non_recursive_delete_of_a_parent_fails": _NO_TREE,
    "test_recursive_delete_removes_the_subtree_only": _NO_TREE,
    "test_recursive_delete_checks_the_version_first": _NO_TREE,
    "test_ephemeral_nodes_cannot_have_children": _NO_TREE,
    "test_children_watch_on_an_absent_node_fires_when_it_appears": (
        "a Nacos providers folder always exists (a service name): it cannot appear or go"
    ),
    "test_data_watch_sees_a_recursive_delete_of_an_ancestor": _NO_TREE,
    "test_store_behaves_like_the_model": "the model is a tree; " + _NO_TREE,
}


@pytest.fixture(
    params=[
        pytest.param("zookeeper", marks=pytest.mark.zookeeper),
        "embedded",
        pytest.param("etcd", marks=pytest.mark.etcd),
        pytest.param("nacos", marks=pytest.mark.nacos),
    ],
)
def store_backend(request: pytest.FixtureRequest) -> str:
    """The backend a store test runs against; Nacos too in this file (tests/conftest.py)."""
    backend = str(request.param)
    name = request.node.originalname
    if backend == "nacos" and name in NACOS_LIMITS:
        pytest.skip(f"not on Nacos: {NACOS_LIMITS[name]}")
    return backend


class At:
    """The paths a test uses on its backend: on the tree stores the names given, on Nacos the
    places of Dubbo's layout that behave alike."""

    def __init__(self, backend: str) -> None:
        self.nacos = backend == "nacos"
        self._ports: dict[str, int] = {}

    def node(self, name: str) -> str:
        """A data node: ``/<name>``; on Nacos a rule's config data id in group ``dubbo``."""
        return f"/dubbo/config/dubbo/{name}.condition-router" if self.nacos else f"/{name}"

    def folder(self, name: str) -> str:
        """A folder of ephemeral children: ``/<name>``; on Nacos a providers folder."""
        return f"/dubbo/contract.{name}/providers" if self.nacos else f"/{name}"

    def child(self, folder: str, name: str) -> str:
        """The path of child ``name`` in ``folder``: on Nacos a provider URL (one port per
        name: Nacos keys an instance by address) carrying the name as ``application``, created
        ephemeral (``ephemeral=at.nacos``: a Nacos instance always is one, and the store
        refuses a persistent one)."""
        if not self.nacos:
            return f"{folder}/{name}"
        port = self._ports.setdefault(name, 20000 + len(self._ports))
        interface = folder.split("/")[2]
        url = URL("tri", "127.0.0.1", port, interface, parameters={"application": name})
        return f"{folder}/{url.encode()}"

    def names(self, children: list[str]) -> list[str]:
        """Children as names (on Nacos, the ``application`` of each URL), sorted."""
        if not self.nacos:
            return children
        return sorted(URL.decode(c).get_str("application") for c in children)

    def named(self, recorder: Recorder) -> Callable[[list[str]], None]:
        """A children callback that records names."""
        return lambda children: recorder(self.names(children))

    def version(self, data: bytes, count: int) -> int:
        """The version a node has with ``data`` after ``count`` changes: the count on a tree
        store, the content's digest on Nacos."""
        return content_version(data.decode()) if self.nacos else count


@pytest.fixture
def at(store_backend: str) -> At:
    """Paths for this test's backend."""
    return At(store_backend)


# -- nodes, data and versions ---------------------------------------------------------------


def test_created_node_has_its_data_and_version_zero(store: Store, at: At) -> None:
    node = at.node("app") if at.nacos else "/app/config"
    store.create(node, b"timeout=3")
    assert store.exists(node)
    assert store.get(node) == (b"timeout=3", at.version(b"timeout=3", 0))


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


def test_set_with_a_stale_version_is_refused(store: Store, at: At) -> None:
    node = at.node("n")
    store.create(node, b"a")
    store.set(node, b"b", version=at.version(b"a", 0))
    with pytest.raises(BadVersionError, match=node):
        store.set(node, b"lost", version=at.version(b"a", 0))
    assert store.get(node) == (b"b", at.version(b"b", 1))


def test_delete_with_a_stale_version_is_refused(store: Store, at: At) -> None:
    node = at.node("n")
    store.create(node, b"a")
    store.set(node, b"x")
    with pytest.raises(BadVersionError):
        store.delete(node, version=at.version(b"a", 0))
    assert store.exists(node)
    store.delete(node, version=at.version(b"x", 1))
    assert not store.exists(node)


def test_creating_an_existing_node_fails(store: Store, at: At) -> None:
    node = at.node("n")
    store.create(node, b"first")
    with pytest.raises(NodeExistsError, match=node):
        store.create(node, b"second")
    assert store.get(node) == (b"first", at.version(b"first", 0))


@pytest.mark.parametrize(
    "operation",
    [
        lambda s, node: s.get(node),
        lambda s, node: s.set(node, b"x"),
        lambda s, node: s.delete(node),
        lambda s, node: s.children(node),
    ],
    ids=["get", "set", "delete", "children"],
)
def test_operations_on_a_missing_node_raise_no_node(
    store: Store, at: At, operation: Callable[[Store, str], object], request: pytest.FixtureRequest
) -> None:
    if at.nacos and request.node.callspec.id.endswith("children"):
        pytest.skip(f"not on Nacos: {_NO_TREE} (a config data id has no children to list)")
    node = at.node("missing")
    with pytest.raises(NoNodeError, match=node):
        operation(store, node)
    assert not store.exists(node)


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
    # Nacos too: a path is checked before it is mapped onto Dubbo's layout.
    with pytest.raises(StoreError, match="invalid node path"):
        store.create(path)


def test_the_root_cannot_be_deleted(store: Store) -> None:
    with pytest.raises(StoreError):
        store.delete("/", recursive=True)


# -- ephemeral nodes ------------------------------------------------------------------------


def test_ephemeral_nodes_disappear_when_their_owner_closes(
    make_store: StoreFactory, at: At
) -> None:
    owner, observer = make_store(), make_store()
    folder = "/dubbo/demo.Greeter/providers" if at.nacos else "/svc/providers"
    rule = at.node("svc") if at.nacos else "/svc/configurators/rule"
    owner.create(f"{folder}/{PROVIDER}", b"", ephemeral=True)
    owner.create(rule, b"persistent")
    assert observer.children(folder) == [PROVIDER]

    owner.close()

    wait_until(lambda: observer.children(folder) == [], what="ephemeral node removal")
    # Parents made for the ephemeral node, and persistent nodes, stay.
    assert observer.exists(folder)
    assert observer.get(rule) == (b"persistent", at.version(b"persistent", 0))


def test_ephemeral_nodes_of_another_live_session_stay(make_store: StoreFactory, at: At) -> None:
    first, second = make_store(), make_store()
    folder = at.folder("e")
    first.create(at.child(folder, "first"), ephemeral=True)
    second.create(at.child(folder, "second"), ephemeral=True)
    second.close()
    wait_until(
        lambda: at.names(first.children(folder)) == ["first"], what="only the closed one removed"
    )


def test_ephemeral_nodes_cannot_have_children(store: Store) -> None:
    store.create("/eph", ephemeral=True)
    with pytest.raises(StoreError, match="ephemeral"):
        store.create("/eph/child")
    assert store.children("/eph") == []


def test_a_closed_store_refuses_operations(make_store: StoreFactory, at: At) -> None:
    store = make_store()
    node = at.node("n")
    store.create(node, b"x")
    store.close()
    with pytest.raises(StoreError):
        store.get(node)


def test_a_listener_added_to_a_connected_store_hears_connected_once(store: Store, at: At) -> None:
    events, sentinel = Recorder(), Recorder()
    store.add_session_listener(events)
    store.watch_data(at.node("sentinel"), sentinel)
    events.wait_last(SessionState.CONNECTED)
    # Anything queued after the listener has been handled.
    store.create(at.node("sentinel"), b"later")
    sentinel.wait_last((b"later", at.version(b"later", 0)))
    assert events.calls == [SessionState.CONNECTED]


# -- watches ----------------------------------------------------------------------------------


def test_children_watch_reports_initial_state_then_every_change(store: Store, at: At) -> None:
    folder = at.folder("w")
    store.create(at.child(folder, "a"), ephemeral=at.nacos)
    seen = Recorder()
    store.watch_children(folder, at.named(seen))
    seen.wait_last(["a"])
    store.create(at.child(folder, "b"), ephemeral=at.nacos)
    seen.wait_last(["a", "b"])
    store.delete(at.child(folder, "a"))
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


def test_data_watch_follows_creation_updates_and_deletion(store: Store, at: At) -> None:
    node = at.node("cfg")
    seen = Recorder()
    store.watch_data(node, seen)
    seen.wait_last((None, -1))
    store.create(node, b"v0")
    seen.wait_last((b"v0", at.version(b"v0", 0)))
    store.set(node, b"v1")
    seen.wait_last((b"v1", at.version(b"v1", 1)))
    writes = 1
    if not at.nacos:  # Nacos: the same content is the same version, nothing changed
        store.set(node, b"v1")  # same bytes, new version: still a change
        seen.wait_last((b"v1", 2))
        writes = 2
    store.delete(node)
    seen.wait_last((None, -1))
    store.create(node, b"again")
    seen.wait_last((b"again", at.version(b"again", 0)))
    assert len(seen.calls) == 4 + writes


def test_data_watch_sees_a_recursive_delete_of_an_ancestor(store: Store) -> None:
    store.create("/top/mid/leaf", b"x")
    seen = Recorder()
    store.watch_data("/top/mid/leaf", seen)
    seen.wait_last((b"x", 0))
    store.delete("/top", recursive=True)
    seen.wait_last((None, -1))


def test_watches_report_only_changes(store: Store, at: At) -> None:
    folder = at.folder("quiet")
    node = at.node("quiet.a") if at.nacos else "/quiet/a"
    store.create(node, b"1")
    if at.nacos:  # a tree store's /quiet has the child /quiet/a; Nacos's folder an instance
        store.create(at.child(folder, "a"), ephemeral=at.nacos)
    elsewhere = at.node("elsewhere")
    kids, data, sentinel = Recorder(), Recorder(), Recorder()
    store.watch_children(folder, at.named(kids))
    store.watch_data(node, data)
    kids.wait_last(["a"])
    data.wait_last((b"1", at.version(b"1", 0)))
    store.create(elsewhere, b"unrelated")
    store.watch_data(elsewhere, sentinel)
    sentinel.wait_last((b"unrelated", at.version(b"unrelated", 0)))
    store.set(elsewhere, b"changed")
    sentinel.wait_last((b"changed", at.version(b"changed", 1)))
    assert kids.calls == [["a"]]
    assert data.calls == [(b"1", at.version(b"1", 0))]


def test_cancelled_watches_are_not_called_again(store: Store, at: At) -> None:
    # On a tree store one node /c has the data and the children; on Nacos a config node and a
    # providers folder.
    folder, node = at.folder("c"), at.node("c")
    kids, data, sentinel = Recorder(), Recorder(), Recorder()
    cancel_kids = store.watch_children(folder, kids)
    cancel_data = store.watch_data(node, data)
    kids.wait_count(1)
    data.wait_count(1)
    cancel_kids()
    cancel_data()
    before = (kids.calls, data.calls)

    store.watch_children(folder, at.named(sentinel))
    store.create(at.child(folder, "x"), b"", ephemeral=at.nacos)
    if at.nacos:
        store.create(node, b"changed")
    else:
        store.set(node, b"changed")
    sentinel.wait_last(["x"])
    store.create(at.child(folder, "y"), ephemeral=at.nacos)
    sentinel.wait_last(["x", "y"])

    assert (kids.calls, data.calls) == before


def test_a_callback_may_cancel_its_own_watch(store: Store, at: At) -> None:
    calls: list[list[str]] = []
    cancel: list[Callable[[], None]] = []

    def once(names: list[str]) -> None:
        calls.append(names)
        if names:
            cancel[0]()

    sentinel = Recorder()
    folder = at.folder("self")
    cancel.append(store.watch_children(folder, lambda children: once(at.names(children))))
    store.watch_children(folder, at.named(sentinel))
    store.create(at.child(folder, "a"), ephemeral=at.nacos)
    sentinel.wait_last(["a"])
    wait_until(lambda: calls[-1:] == [["a"]], what="the cancelling call")
    store.create(at.child(folder, "b"), ephemeral=at.nacos)
    sentinel.wait_last(["a", "b"])
    assert calls[-1] == ["a"]


def test_a_failing_callback_keeps_its_watch(store: Store, at: At) -> None:
    seen = Recorder()
    node = at.node("flaky")

    def flaky(data: bytes | None, version: int) -> None:
        seen(data, version)
        raise RuntimeError("callback bug")

    store.watch_data(node, flaky)
    seen.wait_last((None, -1))
    store.create(node, b"1")
    seen.wait_last((b"1", at.version(b"1", 0)))
    store.set(node, b"2")
    seen.wait_last((b"2", at.version(b"2", 1)))


def test_two_watches_on_one_path_are_independent(store: Store, at: At) -> None:
    folder = at.folder("shared")
    first, second = Recorder(), Recorder()
    cancel_first = store.watch_children(folder, at.named(first))
    store.watch_children(folder, at.named(second))
    store.create(at.child(folder, "a"), ephemeral=at.nacos)
    first.wait_last(["a"])
    second.wait_last(["a"])
    cancel_first()
    store.create(at.child(folder, "b"), ephemeral=at.nacos)
    second.wait_last(["a", "b"])
    assert first.last == ["a"]


def test_a_watch_added_to_a_watched_path_gets_its_current_state(store: Store, at: At) -> None:
    node = at.node("joined")
    v0, v1 = at.version(b"v0", 0), at.version(b"v1", 1)
    first, late = Recorder(), Recorder()
    store.watch_data(node, first)
    first.wait_last((None, -1))
    store.create(node, b"v0")
    first.wait_last((b"v0", v0))
    store.watch_data(node, late)
    late.wait_last((b"v0", v0))
    store.set(node, b"v1")
    first.wait_last((b"v1", v1))
    late.wait_last((b"v1", v1))
    assert first.calls == [(None, -1), (b"v0", v0), (b"v1", v1)]


def test_watches_see_changes_made_by_another_store(make_store: StoreFactory, at: At) -> None:
    watcher, writer = make_store(), make_store()
    kids, data = Recorder(), Recorder()
    watcher.watch_children("/dubbo/demo.Greeter/providers", kids)
    watcher.watch_data("/dubbo/config/dubbo/demo.condition-router", data)
    kids.wait_last([])
    data.wait_last((None, -1))

    writer.create("/dubbo/demo.Greeter/providers/" + PROVIDER, ephemeral=True)
    writer.create("/dubbo/config/dubbo/demo.condition-router", b"conditions: []")
    version = at.version(b"conditions: []", 0)
    kids.wait_last([PROVIDER])
    data.wait_last((b"conditions: []", version))

    writer.close()
    kids.wait_last([])  # the ephemeral provider went with its session
    assert data.last == (b"conditions: []", version)


def test_many_quick_changes_end_in_the_latest_state(store: Store, at: At) -> None:
    folder = at.folder("burst")
    seen = Recorder()
    store.watch_children(folder, at.named(seen))
    seen.wait_count(1)
    names = [f"n{i:02d}" for i in range(30)]
    for name in names:
        store.create(at.child(folder, name), ephemeral=at.nacos)
    seen.wait_last(names)
    for name in names[:-1]:
        store.delete(at.child(folder, name))
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
