"""Dubbo's registry URL parameters, end to end (issue 31, item 5): two real ZooKeeper servers as
two zones, provider processes registered through ``--registry zookeeper://...?zone=..``, and
consumers given ``Application(registry=["zookeeper://zkA?zone=a", "zookeeper://zkB?zone=b"])``
that keep their calls in their zone, honour ``preferred``/``weight`` written in the URL, read
one ensemble through ``backup=``, and refuse a parameter no one knows."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.errors import RegistryAddressError
from tests.e2e import test_multi_registry as multi
from tests.support.chi_square import CHI2_999, chi_square
from tests.support.processes import ProviderProcess

pytestmark = [pytest.mark.zookeeper, pytest.mark.e2e]

# The two-ZooKeeper harness of the multi-registry tests (fixtures).
zones = multi.zones
addresses = multi.addresses
start = multi.start
reference = multi.reference

REQUEST = greeter_pb2.HelloRequest(name="url-parameters")


def test_zones_written_in_registry_urls_are_honoured(
    addresses: tuple[str, str], start: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    a, b = addresses
    # The providers are given the parameters too (the CLI's --registry): accepted, and a
    # provider registers in its zone's registry as before.
    p_a, p_b = start(f"{a}?zone=a"), start(f"{b}?zone=b")
    zone_of = {p_a.address: "a", p_b.address: "b"}
    urls = [f"{a}?zone=a", f"{b}?zone=b"]

    def zones_of(app: dubbo_py.Application, calls: int) -> Counter[str]:
        ref = reference(app, 2)
        return Counter(zone_of[ref.stub.SayHello(REQUEST).provider] for _ in range(calls))

    for own in ("a", "b"):
        with dubbo_py.Application(
            "shop", urls, zone=own, cache_path=tmp_path / f"{own}.json"
        ) as app:
            assert [b.config.zone for b in app.bindings] == ["a", "b"]
            assert zones_of(app, 60) == {own: 60}

    # preferred= in the URL: every call to b, although the application is in zone a.
    with dubbo_py.Application(
        "shop",
        [f"{a}?zone=a", f"{b}?zone=b&preferred=true"],
        zone="a",
        cache_path=tmp_path / "p.json",
    ) as app:
        assert zones_of(app, 60) == {"b": 60}

    # registry.weight= (Dubbo's spelling on the registry's URL): no zone given, 1:3 split.
    with dubbo_py.Application(
        "shop",
        [f"{a}?registry.weight=100", f"{b}?registry.weight=300"],
        cache_path=tmp_path / "w.json",
    ) as app:
        counts = zones_of(app, 800)
        assert chi_square(counts, {"a": 200, "b": 600}) < CHI2_999[1], counts


def test_backup_hosts_and_ignored_parameters(
    zones: tuple[object, object],
    addresses: tuple[str, str],
    start: Callable[..., ProviderProcess],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    a, _ = addresses
    provider = start(a)
    host, chroot = a.removeprefix("zookeeper://").split("/", 1)
    # A first host where nothing listens, the real one as Dubbo's backup= host: the session
    # is made with the backup (kazoo tries each host of the list).
    dead = "127.0.0.1:1"
    url = f"zookeeper://{dead}/{chroot}?backup={host}&session=20000&timeout=8000&check=false"
    caplog.set_level(logging.WARNING, "dubbo_py.registry.store.parameters")
    with dubbo_py.Application("shop", url, cache_path=tmp_path / "c.json") as app:
        assert app.address.hosts == (dead, host)
        ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0")
        assert ref.stub.SayHello(REQUEST).provider == provider.address
    assert any("'check'" in r.getMessage() for r in caplog.records)


def test_unknown_parameter_is_refused_naming_it_and_the_address(
    addresses: tuple[str, str], tmp_path: Path
) -> None:
    a, _ = addresses
    with pytest.raises(RegistryAddressError) as info:
        dubbo_py.Application("shop", [f"{a}?zone=a", f"{a}?zonee=b"], cache_path=tmp_path / "x")
    assert "'zonee'" in str(info.value) and a in str(info.value)
