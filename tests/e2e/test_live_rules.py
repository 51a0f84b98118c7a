"""Rules pushed through the registry change a live consumer's traffic within milliseconds, with no
failed call, and deleting them brings the traffic back."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.registry.registry import Registry
from tests.e2e.conftest import wait_until
from tests.support.load import Load
from tests.support.processes import ProviderProcess

# How long the consumer may take to apply a change before the test calls it broken. This is a
# sanity bound, not the performance promise: push-to-applied latency (target p99 <= 100 ms) is
# measured by bench/bench_push_latency.py. What the test asserts exactly is behaviour: every
# call that starts after the consumer swapped in the new routing obeys it, and none fails.
APPLY_BOUND = 2.0
#: Calls each phase (before the rule, under it, after its delete) is judged on; a phase lasts
#: until that many started in it (within PHASE_BOUND s), not a fixed time.
WINDOW_CALLS = 60
PHASE_BOUND = 20.0


def _scenario(
    registry_address: str,
    tmp_path: Path,
    providers: Callable[..., ProviderProcess],
    push: Callable[[Registry, ProviderProcess, ProviderProcess], str],
    attachments: dict[str, str] | None = None,
    provider_args: tuple[tuple[str, ...], tuple[str, ...]] = ((), ()),
) -> None:
    p1, p2 = providers(*provider_args[0]), providers(*provider_args[1])
    with dubbo_py.Application("shop", registry_address, cache_path=tmp_path / "c.json") as app:
        ref = app.reference_handle(
            greeter_pb2_grpc.GreeterStub,
            version="1.0.0",
            loadbalance="roundrobin",
            timeout=5.0,
            attachments=attachments,
        )
        wait_until(lambda: len(ref.directory.providers) == 2, 10, "both providers")
        registry = app.registry
        assert registry is not None
        swaps: list[float] = []  # when the consumer swapped in a new bound chain
        ref.directory.add_listener(lambda _chain: swaps.append(time.monotonic()))
        request = greeter_pb2.HelloRequest(name="load")
        with Load(lambda: ref.stub.SayHello(request).provider, threads=2) as load:

            def calls_since(since: float) -> Callable[[], bool]:
                # Enough calls started in a phase to judge it: 2**-WINDOW_CALLS is the chance
                # round robin puts them all on one of two providers by accident.
                return lambda: len(load.between(since)) >= WINDOW_CALLS

            wait_until(calls_since(0.0), PHASE_BOUND, "calls before the rule")
            pushed = time.monotonic()
            key = push(registry, p1, p2)
            wait_until(lambda: any(t >= pushed for t in swaps), APPLY_BOUND, "the rule applied")
            wait_until(
                calls_since(min(t for t in swaps if t >= pushed)), PHASE_BOUND, "calls under it"
            )
            deleted = time.monotonic()
            registry.delete_config(key)
            wait_until(lambda: any(t >= deleted for t in swaps), APPLY_BOUND, "the rule removed")
            wait_until(
                calls_since(min(t for t in swaps if t >= deleted)), PHASE_BOUND, "calls after it"
            )
        applied = min(t for t in swaps if t >= pushed)
        removed = min(t for t in swaps if t >= deleted)
        errors = [s for s in load.samples if s.error]
        assert not errors, errors[:3]
        before = load.between(0, pushed)
        during = load.between(applied, deleted)
        after = load.between(removed, float("inf"))
        assert {s.provider for s in before} == {p1.address, p2.address}
        assert during and {s.provider for s in during} == {p2.address}, {s.provider for s in during}
        assert {s.provider for s in after} == {p1.address, p2.address}


def test_condition_rule_push_and_delete_under_load(
    registry_address: str, providers: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    def push(registry: Registry, _p1: ProviderProcess, p2: ProviderProcess) -> str:
        key = "demo.Greeter:1.0.0:.condition-router"
        registry.put_config(
            key,
            "configVersion: v3.0\nscope: service\nkey: demo.Greeter\nforce: true\n"
            f"conditions:\n  - 'method = SayHello => port = {p2.port}'\n",
        )
        return key

    _scenario(registry_address, tmp_path, providers, push)


def test_invalid_rule_keeps_last_good_rules(
    registry_address: str, providers: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    p1, p2 = providers(), providers()
    with dubbo_py.Application("shop", registry_address, cache_path=tmp_path / "c.json") as app:
        ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0")
        wait_until(lambda: len(ref.directory.providers) == 2, 10, "both providers")
        assert app.registry is not None
        key = "demo.Greeter:1.0.0:.condition-router"
        head = "configVersion: v3.0\nscope: service\nkey: demo.Greeter\nforce: true\n"
        good = f"{head}conditions: ['=> port = {p2.port}']\n"
        app.registry.put_config(key, good)
        request = greeter_pb2.HelloRequest(name="x")

        def only_p2() -> bool:
            return {ref.stub.SayHello(request).provider for _ in range(10)} == {p2.address}

        wait_until(only_p2, 5, "the good rule to apply")
        app.registry.put_config(key, f"{head}conditions: ['=> port = ']\n")
        wait_until(lambda: bool(ref.directory.rule_errors), 5, "the bad rule to be refused")
        ((source, reason),) = ref.directory.rule_errors.items()
        assert (key in source and "line 1" in reason) or ":" in reason
        assert only_p2(), "the last good rule must stay in force"
        del p1


def test_registry_router_url_is_applied(
    registry_address: str, providers: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    from urllib.parse import quote

    from dubbo_py.url import URL

    p1, p2 = providers(), providers()
    with dubbo_py.Application("shop", registry_address, cache_path=tmp_path / "c.json") as app:
        ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0")
        wait_until(lambda: len(ref.directory.providers) == 2, 10, "both providers")
        assert app.registry is not None
        rule = URL.parse(
            "condition://0.0.0.0/demo.Greeter?category=routers&dynamic=false&force=true"
            f"&rule={quote(f'=> port = {p1.port}')}"
        )
        app.registry.register(rule)
        request = greeter_pb2.HelloRequest(name="x")
        wait_until(
            lambda: {ref.stub.SayHello(request).provider for _ in range(10)} == {p1.address},
            5,
            "the router URL to apply",
        )
        app.registry.unregister(rule)
        wait_until(
            lambda: (
                {ref.stub.SayHello(request).provider for _ in range(20)} == {p1.address, p2.address}
            ),
            5,
            "traffic to return after the router URL is removed",
        )


def test_tag_rule_push_and_delete_under_load(
    registry_address: str, providers: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    # Requests tagged gray: with no provider tagged gray they fall back to every provider;
    # the dynamic rule tags p2 gray, so they go to p2 alone until it is deleted.
    def push(registry: Registry, _p1: ProviderProcess, p2: ProviderProcess) -> str:
        key = "greeter-provider.tag-router"
        registry.put_config(
            key,
            "configVersion: v3.0\nkey: greeter-provider\nforce: false\n"
            f"tags:\n  - name: gray\n    addresses: ['{p2.address}']\n",
        )
        return key

    _scenario(registry_address, tmp_path, providers, push, attachments={"dubbo.tag": "gray"})


def test_script_rule_push_and_delete_under_load(
    registry_address: str, providers: Callable[..., ProviderProcess], tmp_path: Path
) -> None:
    def push(registry: Registry, _p1: ProviderProcess, p2: ProviderProcess) -> str:
        key = "greeter-provider.script-router"
        registry.put_config(
            key,
            "key: greeter-provider\ntype: starlark\nforce: true\nscript: |\n"
            "  def route(invokers, invocation, context):\n"
            f"      return [i for i in invokers if i.port == {p2.port}]\n",
        )
        return key

    _scenario(registry_address, tmp_path, providers, push)
