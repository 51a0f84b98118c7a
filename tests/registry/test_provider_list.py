"""The consumer's provider list updated notification by notification gives what judging,
overriding, filtering, deduplicating and sorting the whole list gives, and, when it was patched,
a delta that says exactly how it follows from the previous list."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from dubbo_py.cluster import configurators
from dubbo_py.registry.matching import ProviderFilter, is_usable
from dubbo_py.registry.provider_list import ProviderList
from dubbo_py.router.snapshot import Delta
from dubbo_py.url import URL

SERVICE = "demo.Greeter"
CONSUMER = URL.parse(
    f"consumer://10.1.0.1/{SERVICE}?application=shop&interface={SERVICE}&side=consumer"
    "&version=1.0.0"
)
# An override that changes some providers' weight and disables others (by application).
OVERRIDES = [
    URL.parse(
        f"override://0.0.0.0/{SERVICE}?category=configurators&dynamic=false&side=provider"
        "&application=app1&weight=7"
    ),
    URL.parse(
        f"override://0.0.0.0/{SERVICE}?category=configurators&dynamic=false&side=provider"
        "&application=app2&disabled=true"
    ),
]

registered = st.builds(
    lambda host, port, app, version, protocol, enabled: URL(
        protocol,
        f"10.0.0.{host}",
        port,
        SERVICE,
        parameters={
            "interface": SERVICE,
            "application": app,
            "version": version,
            **({} if enabled is None else {"enabled": enabled}),
        },
    ),
    st.integers(0, 60),
    st.sampled_from((50051, 50052)),
    st.sampled_from(("app0", "app1", "app2")),
    st.sampled_from(("1.0.0", "1.0.0", "1.0.0", "2.0.0")),
    st.sampled_from(("tri", "tri", "tri", "dubbo", "empty")),
    st.sampled_from((None, None, "false")),
)

# (kind, where as a fraction of the list, a new URL); "again" re-adds an equal URL as a new
# object (a registry that decoded the name again), "twin" a second object of a URL present.
edit = st.tuples(
    st.sampled_from(("add", "remove", "replace", "again", "twin")), st.floats(0, 1), registered
)


def full(raw: list[URL], overrides: list[URL]) -> tuple[URL, ...]:
    """The whole pipeline, as the directory ran it on every notification."""
    matching = ProviderFilter(CONSUMER, SERVICE).select(raw)
    configured = configurators.apply(matching, overrides, {})
    usable = {p for p in configured if is_usable(p)}
    return tuple(sorted(usable, key=lambda u: u.to_string()))


def apply(raw: list[URL], kind: str, where: float, url: URL) -> None:
    at = min(int(where * len(raw)), len(raw) - 1)
    if kind == "add" or not raw:
        raw.insert(max(at, 0), url)
    elif kind == "remove":
        del raw[at]
    elif kind == "replace":
        raw[at] = url
    elif kind == "again":
        old = raw[at]
        raw[at] = URL(old.protocol, old.host, old.port, old.path, parameters=old.parameters)
    else:
        raw.append(
            URL(
                raw[at].protocol,
                raw[at].host,
                raw[at].port,
                raw[at].path,
                parameters=raw[at].parameters,
            )
        )


@settings(max_examples=80, deadline=None)
@given(
    st.lists(registered, max_size=30),
    st.lists(st.lists(edit, min_size=1, max_size=3), min_size=1, max_size=6),
    st.booleans(),
)
def test_updates_give_the_full_pipelines_list(
    start: list[URL], notifications: list[list[tuple[str, float, URL]]], overridden: bool
) -> None:
    overrides = OVERRIDES if overridden else []
    docs: Mapping[str, str] = {}
    providers = ProviderList(ProviderFilter(CONSUMER, SERVICE), configurators.apply, limit=1_000)
    raw = list(start)
    previous = providers.update(raw, overrides, docs, True).providers
    assert previous == full(raw, overrides)
    for notification in notifications:
        raw = list(raw)  # a registry hands over a new list each time
        for kind, where, url in notification:
            apply(raw, kind, where, url)
        arrived = providers.arrivals(raw)
        update = providers.update(raw, overrides, docs, False)
        # Equal as the full pipeline's list: same providers in the same order.
        assert update.providers == full(raw, overrides)
        assert {id(u) for u in arrived} <= {id(u) for u in raw}
        if update.delta is not None:
            assert update.delta == Delta.between(previous, update.providers)
        previous = update.providers


def test_one_provider_replaced_in_a_large_list_is_patched() -> None:
    raw = [
        URL("tri", f"10.0.{i // 250}.{i % 250}", 50051, SERVICE, parameters={"interface": SERVICE})
        for i in range(400)
    ]
    providers = ProviderList(
        ProviderFilter(CONSUMER.replace(parameters={"interface": SERVICE}), SERVICE),
        configurators.apply,
    )
    providers.update(raw, [], {}, True)
    newcomer = raw[10].replace(port=1)
    after = [*raw[:10], *raw[11:], newcomer]
    assert providers.arrivals(after) == [newcomer]
    update = providers.update(after, [], {}, False)
    assert update.delta is not None and update.delta.size == 2
    assert newcomer in update.providers and raw[10] not in update.providers


names_edit = st.tuples(
    st.sampled_from(("add", "remove", "replace", "bad", "same")), st.floats(0, 1), registered
)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(registered, max_size=30),
    st.lists(st.lists(names_edit, min_size=1, max_size=3), min_size=1, max_size=6),
)
def test_node_names_through_the_registry_give_the_full_pipelines_list(
    start: list[URL], notifications: list[list[tuple[str, float, URL]]]
) -> None:
    # What a consumer sees: node names decoded by the registry, which says what changed since
    # its previous list (ChangedURLs), so that the provider list need not compare the fleet.
    from dubbo_py.registry.registry import ChangedURLs, Registry
    from tests.support.memory_store import MemoryStore

    registry = Registry(MemoryStore())
    path = f"/dubbo/{SERVICE}/providers"
    providers = ProviderList(ProviderFilter(CONSUMER, SERVICE), configurators.apply, limit=1_000)
    names = [u.encode() for u in start]
    raw = registry._decode(path, list(names))
    previous = providers.update(raw, [], {}, True).providers
    for notification in notifications:
        before = {id(u) for u in raw}
        for kind, where, url in notification:
            at = min(int(where * len(names)), len(names) - 1)
            if kind == "add" or not names:
                names.insert(max(at, 0), url.encode())
            elif kind == "remove":
                del names[at]
            elif kind == "replace":
                names[at] = url.encode()
            elif kind == "bad":
                names.insert(at, "not%20a%20url")
            else:
                names.append(names[at])  # a name listed twice
        raw = registry._decode(path, list(names))
        assert isinstance(raw, ChangedURLs)
        decoded = {u.to_string() for u in raw}
        assert decoded == {URL.decode(n).to_string() for n in names if n != "not%20a%20url"}
        assert len(decoded) == len(raw)  # each name once
        arrived = providers.arrivals(raw)
        assert {id(u) for u in arrived} <= {id(u) for u in raw} - before
        update = providers.update(raw, [], {}, False)
        assert update.providers == full(raw, [])
        if update.delta is not None:
            assert update.delta == Delta.between(previous, update.providers)
        previous = update.providers


def test_a_one_provider_change_from_the_registry_takes_no_pass_over_the_fleet() -> None:
    from dubbo_py.registry.registry import Registry
    from tests.support.memory_store import MemoryStore

    registry = Registry(MemoryStore())
    path = f"/dubbo/{SERVICE}/providers"
    fleet = [
        URL("tri", f"10.0.{i // 250}.{i % 250}", 50051, SERVICE, parameters={"interface": SERVICE})
        for i in range(400)
    ]
    names = [u.encode() for u in fleet]
    providers = ProviderList(
        ProviderFilter(CONSUMER.replace(parameters={"interface": SERVICE}), SERVICE),
        configurators.apply,
    )
    providers.update(registry._decode(path, list(names)), [], {}, True)
    names[10] = fleet[10].replace(port=1).encode()
    raw = registry._decode(path, list(names))
    # The list's own index is never rebuilt for it: what arrived comes from the registry.
    providers._index = None  # type: ignore[assignment,method-assign]
    (newcomer,) = providers.arrivals(raw)
    assert newcomer.port == 1
    update = providers.update(raw, [], {}, False)
    assert update.delta is not None and update.delta.size == 2
    assert newcomer in update.providers and fleet[10] not in update.providers
