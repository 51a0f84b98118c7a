"""Shard routing end to end: shard providers on the embedded registry, a shard rule pushed to the
config center, and calls landing on the shard that owns their key.

Run it from the repository root:

    python examples/sharding/run_sharded.py           # 4 shards: keys land on their owners
    python examples/sharding/run_sharded.py --split   # a live split 2 -> 4 under load

Each provider is ``examples/quickstart/provider.py --shard i --shards n`` in its own process;
its replies say which provider and shard answered. Nothing is left behind: the registry lives
in a temporary directory and the providers are stopped on exit. See docs/sharding.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _paths  # noqa: F401  (puts the generated demo package on sys.path)
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py import (
    BoundShardRouter,
    Reference,
    config_path,
    locate,
    parse_shard_rule,
    plan_split,
    rule_key,
)

PROVIDER = Path(__file__).resolve().parent.parent / "quickstart" / "provider.py"
RULE_KEY = f"{rule_key('demo.Greeter', '1.0.0')}.shard-router"  # demo.Greeter:1.0.0:.shard-router
TENANTS = ["acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka"]


class Provider:
    """A Greeter provider process serving one shard."""

    def __init__(self, registry: str, shard: int, shards: int | None) -> None:
        self.shard, self.shards = shard, shards
        args = [sys.executable, str(PROVIDER), "--registry", registry, "--shard", str(shard)]
        if shards is not None:
            args += ["--shards", str(shards)]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("READY "):
            self.proc.kill()
            raise RuntimeError(f"provider for shard {shard} did not start: {line!r}")
        self.address = line.split()[1]

    @property
    def role(self) -> str:
        return f"shard {self.shard} of {self.shards or '?'}"


def stop(providers: list[Provider]) -> None:
    """Graceful shutdown of each (unregister, let consumers notice, drain in-flight calls)."""
    for p in providers:
        if p.proc.poll() is None:
            p.proc.terminate()
    for p in providers:
        p.proc.wait(30)


def start(registry: str, specs: list[tuple[int, int | None]]) -> list[Provider]:
    """Start providers for (shard, shards) specs, in parallel."""
    found: list[Provider] = []
    threads = [
        threading.Thread(target=lambda s=spec: found.append(Provider(registry, *s)))
        for spec in specs
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if len(found) != len(specs):
        stop(found)
        raise RuntimeError("a provider did not start")
    return sorted(found, key=lambda p: (p.shards or 0, p.shard))


def wait_for(what: str, condition: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.02)


def push_rule(app: dubbo_py.Application, ref: Reference, text: str) -> None:
    """Put the rule in the config center and wait until the consumer routes by it."""
    assert app.registry is not None
    print(f"\npushed to {config_path(RULE_KEY)}:")
    print("".join(f"    {line}\n" for line in text.splitlines()).rstrip())
    app.registry.put_config(RULE_KEY, text)
    expected = parse_shard_rule(text)

    def applied() -> bool:
        return any(
            isinstance(r, BoundShardRouter) and r.rule == expected
            for _, r in ref.directory.chain.stages
        )

    wait_for("the consumer to apply the rule", applied)


def say_hello(ref: Reference, tenant: str | None) -> Any:
    metadata = [("tenant", tenant)] if tenant is not None else None
    return ref.stub.SayHello(greeter_pb2.HelloRequest(name="demo"), metadata=metadata)


@contextmanager
def consumer(registry: str, cache: Path, providers: int) -> Iterator[tuple[Any, Reference]]:
    with dubbo_py.Application("shard-demo", registry, cache_path=cache) as app:
        ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0", timeout=5.0)
        wait_for(f"{providers} providers", lambda: len(ref.directory.providers) == providers)
        yield app, ref


def route_four_shards(registry: str, cache: Path) -> bool:
    providers = start(registry, [(i, 4) for i in range(4)])
    by_address = {p.address: p for p in providers}
    try:
        with consumer(registry, cache, 4) as (app, ref):
            push_rule(app, ref, "scheme: elasticsearch\nshards: 4\nkey: attachments[tenant]\n")
            print(f"\n{'tenant':10} {'owner (locate)':>14}   served by")
            ok = True
            for tenant in TENANTS:
                (owner,) = locate("elasticsearch", 4, tenant).shards
                reply = say_hello(ref, tenant)
                ok &= reply.shard == owner
                role = by_address[reply.provider].role
                print(f"{tenant:10} {owner:>14}   {reply.provider} ({role})")
            spread: Counter[int] = Counter()
            for i in range(1000):
                key = f"tenant-{i}"
                reply = say_hello(ref, key)
                ok &= reply.shard == locate("elasticsearch", 4, key).shards[0]
                spread[reply.shard] += 1
            per_shard = dict(sorted(spread.items()))
            print(f"\n1000 more tenants, per shard: {per_shard}; all on their owner: {ok}")
            try:
                say_hello(ref, None)
            except grpc.RpcError as exc:  # the point: a call without its key fails, saying why
                print(f"\nwithout the tenant attachment: {exc.details()}")
            return ok
    finally:
        stop(providers)


def live_split(registry: str, cache: Path) -> bool:
    keys = [f"tenant-{i}" for i in range(100)]
    old_of = {k: locate("elasticsearch", 2, k).shards[0] for k in keys}
    new_of = {k: locate("elasticsearch", 4, k, routing_num_shards=1024).shards[0] for k in keys}
    plan = plan_split("elasticsearch", 2, 4)
    old_providers = start(registry, [(0, 2), (1, 2)])
    roles = {p.address: p for p in old_providers}  # every provider started, by address
    # (key, provider address, shard) of each call under load, judged at the end: a new provider
    # can answer before start() has returned its address.
    samples: list[tuple[str, str, int]] = []
    failed: list[str] = []
    done = threading.Event()

    def show(step: str, ref: Reference) -> None:
        print(f"\n{step}")
        for tenant in ("initech", "wayne", "umbrella", "acme"):  # new shards 0, 1, 2, 3
            reply = say_hello(ref, tenant)
            (old,) = locate("elasticsearch", 2, tenant).shards
            (new,) = locate("elasticsearch", 4, tenant, routing_num_shards=1024).shards
            print(f"  {tenant:9} old shard {old}, new shard {new} -> {roles[reply.provider].role}")

    def load(ref: Reference) -> None:
        i = 0
        while not done.is_set():
            key = keys[i % len(keys)]
            i += 1
            try:
                reply = say_hello(ref, key)
                samples.append((key, reply.provider, reply.shard))
            except Exception as exc:  # counted and shown: there should be none
                failed.append(repr(exc))
            time.sleep(0.002)

    try:
        with consumer(registry, cache, 2) as (app, ref):
            rule = "scheme: elasticsearch\nshards: 2\nkey: attachments[tenant]\n"
            push_rule(app, ref, rule)
            show("before: 2 shards", ref)
            loader = threading.Thread(target=load, args=(ref,))
            loader.start()
            print(f"\nplan: new shard <- old shard {dict(enumerate(plan.sources))}")
            fields = {**plan.rule_fields(during=True), "key": "attachments[tenant]"}
            push_rule(app, ref, "".join(f"{k}: {v}\n" for k, v in fields.items()))
            show("step 1, split rule pushed: nothing moves yet", ref)
            roles.update((p.address, p) for p in start(registry, [(2, 4), (3, 4)]))
            wait_for("shards 2, 3", lambda: len(ref.directory.providers) == 4)
            show("step 2, shards 2 and 3 of 4 registered: old shard 1's keys moved to them", ref)
            roles.update((p.address, p) for p in start(registry, [(0, 4), (1, 4)]))
            wait_for("shards 0, 1", lambda: len(ref.directory.providers) == 6)
            show("step 3, shards 0 and 1 of 4 registered: old shard 0's keys moved to them", ref)
            stop(old_providers)
            wait_for("the old providers to leave", lambda: len(ref.directory.providers) == 4)
            fields = {**plan.rule_fields(during=False), "key": "attachments[tenant]"}
            push_rule(app, ref, "".join(f"{k}: {v}\n" for k, v in fields.items()))
            show("step 4, old providers stopped, split_from dropped", ref)
            done.set()
            loader.join()
    finally:
        done.set()
        stop(list(roles.values()))
    # Served by the key's new shard, or by its old shard on a provider of the old layout.
    wrong = [
        (key, roles[address].role)
        for key, address, shard in samples
        if shard != (new_of[key] if roles[address].shards == 4 else old_of[key])
    ]
    print(
        f"\nunder load: {len(samples)} calls served, {len(failed)} failed, {len(wrong)} misrouted"
    )
    for error in failed[:3]:
        print(f"  failed: {error}")
    return not failed and not wrong


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", action="store_true", help="run the live split 2 -> 4")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dubbo-py-shards-") as tmp:
        registry = f"sqlite://{tmp}/registry.db"
        run = live_split if args.split else route_four_shards
        ok = run(registry, Path(tmp) / "consumer-cache.json")
    print("\nok" if ok else "\nFAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
