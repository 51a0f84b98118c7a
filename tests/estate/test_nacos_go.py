"""Live interop with dubbo-go 3.3.2 on the same real Nacos server (issue 44, dubbo-go).

dubbo-go's own Nacos registry (``registry.WithNacos``, nacos-sdk-go v2) against dubbo-py's, at
the interface level, without and with a registry group. One demo.Greeter service per case has a
Go provider (``g1``, tests/peers/go/estate) and a dubbo-py one (``p1``, in this process); a Go
consumer and a dubbo-py consumer both reference it, so each side calls the other's provider.

The Go peers are given ``nacos://host:port`` or ``nacos://host:port?group=<G>``, the group
becoming ``registry.WithGroup(G)``; dubbo-py is given the same address with
``register-mode=interface``. dubbo-go 3.3.2 names the Nacos service as Dubbo Java does
(``providers:<interface>:<version>:<group>``, ``registry/nacos/registry.go`` getServiceName)
and registers and subscribes in the Nacos group its registry group names (``registry.group``,
``DEFAULT_GROUP`` without one): the layout dubbo-py and Dubbo 3.3 use, which Nacos's HTTP API
shows here. All processes are module-scoped and started together.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import pytest
from demo import greeter_pb2_grpc

import dubbo_py
from tests.estate.test_nacos_java import VERSION, make_greeter, py_served, until
from tests.support.go_estate import GoConsumer, GoProvider
from tests.support.nacos import NacosServer

pytestmark = pytest.mark.nacos


@dataclass
class Side:
    """One case's processes: the Go provider and consumer, the dubbo-py provider's address and
    a dubbo-py reference, all on ``registry`` (the Nacos group ``naming_group``) for the
    demo.Greeter service of ``group``."""

    naming_group: str
    group: str
    go_provider: GoProvider
    go_consumer: GoConsumer
    py_address: str
    py_greeter: Any

    @property
    def service(self) -> str:
        """The Nacos service name both frameworks use for the providers of this case."""
        return f"providers:demo.Greeter:{VERSION}:{self.group}"


def _ports_in_group(nacos: NacosServer, service: str, group: str) -> set[int]:
    """Ports of a service's instances in a Nacos group, from Nacos's own HTTP API."""
    query = urllib.parse.urlencode(
        {"namespaceId": "public", "groupName": group, "serviceName": service}
    )
    url = f"http://{nacos.address}/nacos/v3/client/ns/instance/list?{query}"
    with urllib.request.urlopen(url, timeout=10) as answer:
        return {int(i["port"]) for i in json.loads(answer.read())["data"]}


def go_served(go: GoConsumer, calls: int = 20) -> Counter[str]:
    """Who answered the Go consumer's calls (``p1`` or ``g1``); failed calls count under
    ``error`` (a provider may not have been pushed to the consumer yet)."""
    result = go.call(calls, name="n")
    served = Counter(result["ok"])
    if result["errors"]:
        served["error"] = sum(result["errors"].values())
    return served


@pytest.fixture(scope="module")
def sides(
    nacos: NacosServer, estate_group: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Side]]:
    """``plain`` (no registry group: Nacos's ``DEFAULT_GROUP``) and ``grouped`` (the registry
    group ``estate-ng-<id>``), each with its own service group so neither finds the other's."""
    naming_group = f"estate-ng-{uuid.uuid4().hex[:8]}"
    cases = {
        "plain": ("DEFAULT_GROUP", f"nacos://{nacos.address}", f"{estate_group}-plain"),
        "grouped": (
            naming_group,
            f"nacos://{nacos.address}?group={naming_group}",
            f"{estate_group}-grouped",
        ),
    }
    with ExitStack() as stack:
        processes: list[GoProvider | GoConsumer] = []
        built: dict[str, tuple[GoProvider, GoConsumer]] = {}
        for name, (_, registry, group) in cases.items():
            provider = GoProvider(
                "--registry", registry, "--application", f"go-nacos-{name}-provider",
                "--name", "g1", "--version", VERSION, "--group", group,
                "--register-mode", "interface", "--chat", "false", "--weight", "100",
            )  # fmt: skip
            consumer = GoConsumer(
                "--registry", registry, "--application", f"go-nacos-{name}-consumer",
                "--version", VERSION, "--group", group,
            )  # fmt: skip
            built[name] = (provider, consumer)
            processes += [provider, consumer]
        # Started together (each dubbo-go process takes a moment to be READY) and stopped
        # together, every started one even when another failed to start.
        pool = stack.enter_context(ThreadPoolExecutor(len(processes)))
        started = [pool.submit(p.start) for p in processes]
        stack.callback(lambda: list(pool.map(lambda p: p.stop(), processes)))
        # The dubbo-py applications are closed together too (each takes about a second to
        # leave Nacos), before the processes stop.
        apps: list[dubbo_py.Application] = []
        stack.callback(lambda: list(pool.map(lambda a: a.close(), apps)))
        result: dict[str, Side] = {}
        for name, (naming, registry, group) in cases.items():
            py_registry = f"{registry}{'&' if '?' in registry else '?'}register-mode=interface"
            cache = tmp_path_factory.mktemp(f"nacos-go-{name}")
            provider_app = dubbo_py.Application(
                f"py-nacos-go-{name}-provider", py_registry, cache_path=cache / "p.json"
            )
            apps.append(provider_app)
            greeter = make_greeter(group)
            server = provider_app.start(greeter, port=0, bind_host="127.0.0.1")
            greeter.address = server.address
            consumer_app = dubbo_py.Application(
                f"py-nacos-go-{name}-consumer", py_registry, cache_path=cache / "c.json"
            )
            apps.append(consumer_app)
            reference = consumer_app.reference(
                greeter_pb2_grpc.GreeterStub, version=VERSION, group=group, timeout=5.0
            )
            result[name] = Side(naming, group, *built[name], server.address, reference)
        for future in started:
            future.result()
        # Under load nacos-sdk-go can query before its client has connected ("client not
        # connected, current status:UNHEALTHY"); dubbo-go 3.3.2 then builds the reference
        # with no directory (a nil invoker) and the first call ends the process. Such a
        # consumer is started again, once; a second failure stays a failure.
        for name, (_provider, consumer) in built.items():
            if "client not connected" in consumer.log.read_text(errors="replace"):
                again = GoConsumer(*consumer.args)
                consumer.stop()
                processes.append(again)
                again.start()
                result[name].go_consumer = again
        yield result


@pytest.mark.parametrize("case", ["plain", "grouped"])
def test_dubbo_go_and_dubbo_py_share_the_nacos_service_and_group(
    nacos: NacosServer, sides: dict[str, Side], case: str
) -> None:
    side = sides[case]
    go_port = int(side.go_provider.address.rsplit(":", 1)[1])
    py_port = int(side.py_address.rsplit(":", 1)[1])
    until(
        lambda: _ports_in_group(nacos, side.service, side.naming_group) == {go_port, py_port},
        f"dubbo-go's and dubbo-py's providers as {side.service} in Nacos group {side.naming_group}",
    )
    if side.naming_group != "DEFAULT_GROUP":
        # The registry group is the Nacos group, not a part of the service name nor ignored.
        assert _ports_in_group(nacos, side.service, "DEFAULT_GROUP") == set()


@pytest.mark.parametrize("case", ["plain", "grouped"])
def test_dubbo_py_calls_the_go_provider_on_nacos(sides: dict[str, Side], case: str) -> None:
    side = sides[case]
    until(lambda: set(py_served(side.py_greeter)) == {"p1", "g1"}, "dubbo-py calls both")


@pytest.mark.parametrize("case", ["plain", "grouped"])
def test_the_go_consumer_calls_the_dubbo_py_provider_on_nacos(
    sides: dict[str, Side], case: str
) -> None:
    side = sides[case]
    until(lambda: set(go_served(side.go_consumer)) == {"p1", "g1"}, "dubbo-go calls both")
    result = side.go_consumer.call(1, name="x")
    assert result["errors"] == {}, result
