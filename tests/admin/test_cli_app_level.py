"""The CLI on an estate with both levels: ``services`` and ``providers`` list application-level
providers, ``registry status`` says which step and level each consumer is in."""

from __future__ import annotations

from dubbo_py.registry.application.paths import migration_path
from dubbo_py.url import URL
from tests.support.cli_fixtures import CONSUMER, P1, Cli, run
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
    assert [(p["address"], p["level"]) for p in providers] == [
        ("10.0.0.5:50051", "interface"),
        ("10.0.0.9:50070", "application"),
    ]
    assert providers[1]["application"] == "java-greeter"
    assert providers[1]["version"] == "1.0.0"
    table = run("providers", "demo.JavaOnly")
    assert table.exit_code == 0 and "application" in table.stdout


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
