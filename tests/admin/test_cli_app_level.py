"""The CLI on an estate with both levels: ``services`` and ``providers`` list application-level
providers (``providers`` one row per provider, with the levels it is registered at),
``registry status`` says which step and level each consumer is in."""

from __future__ import annotations

from dubbo_py.registry.application.paths import migration_path
from dubbo_py.registry.application.publisher import InstancePublisher
from dubbo_py.url import URL
from tests.support.cli_fixtures import CONSUMER, P1, P2, Cli, run
from tests.support.java_app_level import write_java_provider

__all__ = ["run"]

FORCED = CONSUMER.replace("application=shop", "application=admin") + (
    "&migration-step=FORCE_APPLICATION"
)


def test_services_and_providers_show_both_levels(run: Cli) -> None:
    run.register(P1)
    store = run.registry.store
    write_java_provider(store, "java-greeter", "10.0.0.9", 50070, "demo.Greeter", version="1.0.0")
    write_java_provider(store, "java-only", "10.0.0.8", 50071, "demo.JavaOnly")
    services = {r["service"]: r for r in run.json("services")}
    assert services["demo.Greeter"]["providers"] == 1
    assert services["demo.Greeter"]["instances"] == 1
    assert services["demo.Greeter"]["applications"] == ["java-greeter"]
    # Known only at the application level, and still listed.
    assert services["demo.JavaOnly"]["providers"] == 0
    assert services["demo.JavaOnly"]["instances"] == 1
    assert "mapping" not in services and "metadata" not in services
    providers = run.json("providers", "demo.Greeter")
    # Each registered at one level only: listed at that level.
    assert [(p["address"], p["levels"]) for p in providers] == [
        ("10.0.0.5:50051", ["interface"]),
        ("10.0.0.9:50070", ["application"]),
    ]
    assert list(providers[1]["urls"]) == ["application"]
    assert providers[1]["application"] == "java-greeter"
    assert providers[1]["version"] == "1.0.0"
    table = run("providers", "demo.JavaOnly")
    assert table.exit_code == 0
    assert _row(table.stdout, "10.0.0.8:50071")[:2] == ["10.0.0.8:50071", "application"]


def _row(table: str, address: str) -> list[str]:
    """The cells of the one table row of ``address``."""
    [line] = [ln for ln in table.splitlines() if ln.startswith(address)]
    return [cell.strip() for cell in line.split("│")]


def _both_levels(run: Cli, *urls: str) -> None:
    """Register providers as a dubbo-py provider in the default register mode (``all``) does:
    the provider URL and the application's instance."""
    publisher = InstancePublisher(run.registry.store, "greeter")
    for url in urls:
        run.register(url)
        publisher.add(URL.parse(url))


def test_a_provider_at_both_levels_is_one_row_naming_both(run: Cli) -> None:
    _both_levels(run, P1)
    table = run("providers", "demo.Greeter")
    assert table.exit_code == 0, table.output
    assert "LEVELS" in table.stdout
    assert _row(table.stdout, "10.0.0.5:50051")[:4] == [
        "10.0.0.5:50051",
        "interface+application",
        "tri",
        "greeter",
    ]
    [provider] = run.json("providers", "demo.Greeter")
    assert (provider["address"], provider["levels"]) == (
        "10.0.0.5:50051",
        ["interface", "application"],
    )
    assert (provider["application"], provider["version"], provider["weight"]) == (
        "greeter",
        "1.0.0",
        100,
    )
    # Both registrations are kept; the row shows the application level's, which a consumer
    # in the default migration step reads.
    assert list(provider["urls"]) == ["interface", "application"]
    assert URL.parse(provider["urls"]["interface"]) == URL.parse(P1)
    assert provider["url"] == provider["urls"]["application"]


def test_two_providers_at_both_levels_are_two_rows(run: Cli) -> None:
    _both_levels(run, P1, P2)
    run.register(P2.replace("version=1.0.0", "version=2.0.0"))
    listed = run.json("providers", "demo.Greeter")
    assert [(p["address"], p["version"], p["levels"]) for p in listed] == [
        ("10.0.0.5:50051", "1.0.0", ["interface", "application"]),
        ("10.0.0.6:50051", "1.0.0", ["interface", "application"]),
        # Another service version at the same address is another provider.
        ("10.0.0.6:50051", "2.0.0", ["interface"]),
    ]
    table = run("providers", "demo.Greeter")
    rows = [ln for ln in table.stdout.splitlines() if ln.startswith("10.0.0.")]
    assert len(rows) == 3
    assert [r.count("interface+application") for r in rows] == [1, 1, 0]
    # An override reaches the provider once, whichever level consumers read it from.
    result = run("override", "weight", "demo.Greeter", "10.0.0.5:50051", "50")
    assert result.exit_code == 0, result.output
    listed = run.json("providers", "demo.Greeter")
    assert [p["overrides"] for p in listed] == [["weight=50"], [], []]


def test_registry_status_says_each_consumers_step_and_level(run: Cli) -> None:
    run.register(P1, CONSUMER, FORCED)
    store = run.registry.store
    write_java_provider(store, "java-greeter", "10.0.0.9", 50070, "demo.Greeter", version="1.0.0")
    status = run.json("registry", "status")
    assert (status["applications"], status["instances"]) == (1, 1)
    modes = {m["application"]: m for m in status["consumer_modes"]}
    assert (modes["shop"]["step"], modes["shop"]["level"], modes["shop"]["source"]) == (
        "APPLICATION_FIRST",
        "application",
        "default",
    )
    assert (modes["admin"]["step"], modes["admin"]["source"]) == ("FORCE_APPLICATION", "consumer")
    # The shop application's migration rule moves its consumer to the interface level.
    store.create(migration_path("shop"), b"key: shop\nstep: FORCE_INTERFACE\n", makepath=True)
    modes = {m["application"]: m for m in run.json("registry", "status")["consumer_modes"]}
    assert (modes["shop"]["step"], modes["shop"]["level"], modes["shop"]["source"]) == (
        "FORCE_INTERFACE",
        "interface",
        "rule",
    )
    table = run("registry", "status")
    assert "FORCE_INTERFACE" in table.stdout and "FORCE_APPLICATION" in table.stdout
    assert URL.parse(FORCED).get_str("migration-step") == "FORCE_APPLICATION"
