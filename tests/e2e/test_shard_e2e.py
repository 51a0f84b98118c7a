"""Shard routing end to end (issue 6): one provider process per shard, rules pushed to the
config center, real calls through generated stubs.

Each provider is ``examples/quickstart/provider.py --shard i --shards n``; its replies carry its
address and shard, and with ``--record FILE`` it appends one line per call to FILE, which is how
the fan-out tests count calls per provider (broadcast and forking return one reply for several
providers). Where a call must land is computed independently, by the library's pure function
``dubbo_py.router.shard.locate``, and spot-checked against answers published by Elasticsearch's
and Solr's own tests.

The four-shard cluster is started once per registry backend for the routing, fan-out and
missing-key tests; each test pushes its own rule and waits until its consumer applies it. The
live split starts its own providers.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py.app.application import Reference
from dubbo_py.registry.layout import rule_key
from dubbo_py.router.chain import BoundChain
from dubbo_py.router.shard import BoundShardRouter, ShardRule, locate, parse_shard_rule
from tests.e2e.conftest import wait_until
from tests.support.processes import ProviderProcess

#: The config-center key of the Greeter's shard rule (version 1.0.0, no group).
RULE_KEY = f"{rule_key('demo.Greeter', '1.0.0')}.shard-router"


# ---------------------------------------------------------------- providers and consumers


@dataclass
class ShardProvider:
    """One provider process and the shard it advertises."""

    process: ProviderProcess
    shard: int
    shards: int | None
    record: Path

    @property
    def address(self) -> str:
        return self.process.address

    def calls(self, name: str) -> Counter[str]:
        """How many ``SayHello`` calls named ``name`` this provider served, per routing key."""
        if not self.record.exists():
            return Counter()
        found: Counter[str] = Counter()
        # Only complete lines: the provider may be writing the last one right now.
        for line in self.record.read_text(encoding="utf-8").split("\n")[:-1]:
            method, call_name, key = line.split("\t")
            if method == "SayHello" and call_name == name:
                found[key] += 1
        return found


def start_providers(
    registry: str, specs: list[tuple[int, int | None]], record_dir: Path
) -> list[ShardProvider]:
    """Start one provider per (shard, shards) spec, in parallel (each start is a Python
    interpreter importing grpc: seconds on a busy machine)."""

    made = []
    for shard, shards in specs:
        record = record_dir / f"calls-{uuid.uuid4().hex[:8]}.tsv"
        args = ["--shard", str(shard), "--record", str(record)]
        if shards is not None:
            args += ["--shards", str(shards)]
        made.append(ShardProvider(ProviderProcess(registry, *args), shard, shards, record))
    try:
        with ThreadPoolExecutor(len(made)) as pool:
            list(pool.map(lambda p: p.process.start(), made))
    except BaseException:
        for p in made:
            p.process.kill()
        raise
    return made


def bound_shard_router(chain: BoundChain) -> BoundShardRouter | None:
    """The shard router in a bound chain, if any."""
    for _name, router in chain.stages:
        if isinstance(router, BoundShardRouter):
            return router
    return None


def push_rule(app: dubbo_py.Application, ref: Reference, text: str) -> ShardRule:
    """Push a shard rule and wait until this consumer routes by it."""
    assert app.registry is not None
    app.registry.put_config(RULE_KEY, text)
    expected = parse_shard_rule(text, RULE_KEY)

    def applied() -> bool:
        bound = bound_shard_router(ref.directory.chain)
        return bound is not None and bound.rule == expected

    wait_until(applied, 10, f"the consumer to apply the shard rule {text!r}")
    return expected


@contextmanager
def consumer(
    registry: str, tmp_path: Path, providers: int, **options: Any
) -> Iterator[tuple[dubbo_py.Application, Reference]]:
    """A consumer application with a Greeter reference that sees ``providers`` providers."""
    options.setdefault("timeout", 5.0)
    with dubbo_py.Application("shop", registry, cache_path=tmp_path / "cache.json") as app:
        ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, version="1.0.0", **options)
        wait_until(lambda: len(ref.directory.providers) == providers, 15, "the providers")
        yield app, ref


@dataclass
class Cluster:
    """Four providers, shards 0-3 of 4, on one registry."""

    registry: str
    providers: list[ShardProvider]

    def of_shard(self, shard: int) -> ShardProvider:
        (found,) = (p for p in self.providers if p.shard == shard)
        return found

    def calls_per_shard(self, name: str, key: str) -> dict[int, int]:
        return {p.shard: p.calls(name)[key] for p in self.providers}


@pytest.fixture(scope="module", params=["zookeeper", "embedded"])
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """Providers for shards 0-3 (``--shard i --shards 4``), shared by this module's routing
    tests on each registry backend."""
    tmp = tmp_path_factory.mktemp(f"shard-{request.param}")
    if request.param == "zookeeper":
        zk = request.getfixturevalue("zookeeper")
        registry = f"zookeeper://{zk.address}/e2e-shard-{uuid.uuid4().hex[:8]}"
    else:
        registry = f"sqlite://{tmp}/registry.db"
    providers = start_providers(registry, [(i, 4) for i in range(4)], tmp)
    try:
        yield Cluster(registry, providers)
    finally:
        for p in providers:
            p.process.kill()


# ---------------------------------------------------------------- every key to its owner


def _es_keys() -> list[str]:
    # ASCII, BMP and astral (surrogate-pair) keys: Elasticsearch hashes UTF-16 code units.
    alphabet = ["tenant", "Ünïcødé", "日本語", "😀", "a\u0301"]
    keys = [f"{alphabet[i % len(alphabet)]}-{i}" for i in range(1000 - len(ES_KNOWN_HASHES))]
    return keys + list(ES_KNOWN_HASHES)


def _solr_keys() -> list[str]:
    # Plain ids and composite ids of 37 tenants (tenant!doc, tenant/N!doc, app!user!doc).
    keys = []
    for i in range(1000 - len(SOLR_KNOWN_SHARDS)):
        tenant = f"t{i % 37}"
        form = i % 4
        keys.append(
            [f"doc{i}", f"{tenant}!doc{i}", f"{tenant}/4!doc{i}", f"app{i % 3}!{tenant}!d{i}"][form]
        )
    return keys + list(SOLR_KNOWN_SHARDS)


#: Murmur3HashFunctionTests.testKnownValues (Elasticsearch): the routing hash of each string.
ES_KNOWN_HASHES = {
    "hell": 0x5A0CB7C3,
    "hello": 0xD7C31989,
    "hello w": 0x22AB2984,
    "hello wo": 0xDF0CA123,
    "hello wor": 0xE7744D61,
    "The quick brown fox jumps over the lazy dog": 0xE07DB09C,
    "The quick brown fox jumps over the lazy cog": 0x4E63D2AD,
}

#: Solr's ShardRoutingTest / TestHashPartitioner: the shard (shardN is our N-1) of these ids in a
#: four-shard collection.
SOLR_KNOWN_SHARDS = {
    "a": 2, "b": 0, "c": 1, "d": 2, "e": 3, "m": 3, "p": 0, "q": 1, "v": 0, "x": 2,
    "b!foo": 0, "c!bar": 1, "d!baz": 2, "e!qux": 3, "foo/0!b": 0, "foo/0!e": 3,
    "f1!f2!doc5": 2,
}  # fmt: skip


def _es_known_shard(key: str) -> int:
    # A four-shard index created before 9.4 has 1024 routing shards (calculateNumRoutingShards),
    # and IndexRouting.hashToShardId is floorMod(hash, 1024) / 256: bits 8-9 of the hash.
    return (ES_KNOWN_HASHES[key] & 0x3FF) >> 8


@pytest.mark.parametrize(
    ("rule", "keys", "known"),
    [
        pytest.param(
            "scheme: elasticsearch\nshards: 4\nkey: arguments[2]\n",
            _es_keys(),
            {k: _es_known_shard(k) for k in ES_KNOWN_HASHES},
            id="elasticsearch-argument",
        ),
        pytest.param(
            "scheme: solr\nshards: 4\nkey: attachments[route]\n",
            _solr_keys(),
            SOLR_KNOWN_SHARDS,
            id="solr-attachment",
        ),
    ],
)
def test_every_key_lands_on_its_owner(
    cluster: Cluster, tmp_path: Path, rule: str, keys: list[str], known: dict[str, int]
) -> None:
    assert len(set(keys)) == 1000
    with consumer(cluster.registry, tmp_path, 4, loadbalance="roundrobin") as (app, ref):
        parsed = push_rule(app, ref, rule)
        by_attachment = parsed.key.kind == "attachments"
        served: dict[str, tuple[int, str]] = {}
        for key in keys:
            request = greeter_pb2.HelloRequest(name="owner", key="" if by_attachment else key)
            metadata = [(parsed.key.name, key)] if by_attachment else None
            reply = ref.stub.SayHello(request, metadata=metadata)
            served[key] = (reply.shard, reply.provider)
    misrouted = {}
    for key, (shard, provider) in served.items():
        (owner,) = locate(parsed.scheme, 4, key).shards
        if shard != owner or provider != cluster.of_shard(owner).address:
            misrouted[key] = (owner, shard, provider)
    assert not misrouted, (
        f"{len(misrouted)} of {len(keys)} misrouted, e.g. {list(misrouted.items())[:5]}"
    )
    # The library's function agrees with Elasticsearch's / Solr's published answers, and so do
    # the providers that served those keys.
    for key, shard in known.items():
        assert locate(parsed.scheme, 4, key).shards == (shard,), key
        assert served[key][0] == shard, key
    # Every shard got its share: the keys are spread, not all on one provider.
    assert set(shard for shard, _ in served.values()) == {0, 1, 2, 3}


# ---------------------------------------------------------------- fan-out

#: Solr route prefixes and the shards of a four-shard collection they reach
#: (TestHashPartitioner.testCompositeHashCodes, ShardRoutingTest).
SOLR_ROUTE_PREFIXES = {"b!": (0,), "b/1!": (0, 1), "d/1!": (2, 3), "foo/0!": (0, 1, 2, 3)}
SOLR_PREFIX_RULE = "scheme: solr\nshards: 4\nkey: arguments[2]\n"


def test_route_prefix_broadcast_calls_every_owning_shard(cluster: Cluster, tmp_path: Path) -> None:
    name = f"broadcast-{uuid.uuid4().hex[:8]}"
    rounds = 3
    with consumer(cluster.registry, tmp_path, 4, cluster="broadcast") as (app, ref):
        push_rule(app, ref, SOLR_PREFIX_RULE)
        for prefix, owners in SOLR_ROUTE_PREFIXES.items():
            assert locate("solr", 4, prefix).shards == owners
            for _ in range(rounds):
                reply = ref.stub.SayHello(greeter_pb2.HelloRequest(name=name, key=prefix))
                assert reply.shard in owners
    # Broadcast returns after every routed provider answered, and each logs before answering.
    for prefix, owners in SOLR_ROUTE_PREFIXES.items():
        expected = {shard: rounds if shard in owners else 0 for shard in range(4)}
        assert cluster.calls_per_shard(name, prefix) == expected, prefix


def test_route_prefix_forking_stays_within_owning_shards(cluster: Cluster, tmp_path: Path) -> None:
    name = f"forking-{uuid.uuid4().hex[:8]}"
    rounds = 3
    prefixes = {p: s for p, s in SOLR_ROUTE_PREFIXES.items() if len(s) <= 2}
    expected = {
        prefix: {shard: rounds if shard in owners else 0 for shard in range(4)}
        for prefix, owners in prefixes.items()
    }

    def counted() -> dict[str, dict[int, int]]:
        return {prefix: cluster.calls_per_shard(name, prefix) for prefix in prefixes}

    # Two forks (the default): a prefix owned by two shards reaches both, one owned by one shard
    # reaches only it — the forks never escape the routed shards.
    with consumer(cluster.registry, tmp_path, 4, cluster="forking") as (app, ref):
        push_rule(app, ref, SOLR_PREFIX_RULE)
        for prefix, owners in prefixes.items():
            for _ in range(rounds):
                reply = ref.stub.SayHello(greeter_pb2.HelloRequest(name=name, key=prefix))
                assert reply.shard in owners
        # The losing fork may still be on its way when the winner's reply is back; wait while
        # the consumer (and so its channels) is still open.
        wait_until(lambda: counted() == expected, 15, "every fork to reach its provider")
    assert counted() == expected


# ---------------------------------------------------------------- missing routing key


def test_missing_key_is_an_error_naming_it_when_forced(cluster: Cluster, tmp_path: Path) -> None:
    with consumer(cluster.registry, tmp_path, 4) as (app, ref):
        push_rule(app, ref, "scheme: elasticsearch\nshards: 4\nkey: attachments[tenant]\n")
        with pytest.raises(grpc.RpcError) as info:
            ref.stub.SayHello(greeter_pb2.HelloRequest(name="no-key"))
        details = info.value.details() or ""
        assert "missing routing key attachments[tenant]" in details, details
        assert RULE_KEY in details, details
        # The same call with the key goes to the key's owner.
        (owner,) = locate("elasticsearch", 4, "acme").shards
        reply = ref.stub.SayHello(
            greeter_pb2.HelloRequest(name="key"), metadata=[("tenant", "acme")]
        )
        assert reply.shard == owner


def test_missing_key_passes_through_to_any_provider_unless_forced(
    cluster: Cluster, tmp_path: Path
) -> None:
    rule = "scheme: elasticsearch\nshards: 4\nkey: attachments[tenant]\nforce: false\n"
    with consumer(cluster.registry, tmp_path, 4, loadbalance="roundrobin") as (app, ref):
        push_rule(app, ref, rule)
        keyless = {ref.stub.SayHello(greeter_pb2.HelloRequest(name="any")).shard for _ in range(8)}
        assert keyless == {0, 1, 2, 3}
        (owner,) = locate("elasticsearch", 4, "acme").shards
        keyed = {
            ref.stub.SayHello(
                greeter_pb2.HelloRequest(name="key"), metadata=[("tenant", "acme")]
            ).shard
            for _ in range(8)
        }
        assert keyed == {owner}


def test_a_shard_without_provider_fails_naming_key_and_shard(
    cluster: Cluster, tmp_path: Path
) -> None:
    # A rule whose shard count the providers do not advertise (they say shards=4): no provider
    # serves any of its shards, and the error says which key and shard found nobody.
    with consumer(cluster.registry, tmp_path, 4) as (app, ref):
        push_rule(app, ref, "scheme: elasticsearch\nshards: 8\nkey: attachments[tenant]\n")
        (shard,) = locate("elasticsearch", 8, "acme").shards
        with pytest.raises(grpc.RpcError) as info:
            ref.stub.SayHello(greeter_pb2.HelloRequest(name="x"), metadata=[("tenant", "acme")])
        details = info.value.details() or ""
        assert f"routing key 'acme' -> shard {shard}: no provider serves that shard" in details


def test_binary_attachment_key_routes_by_its_text(cluster: Cluster, tmp_path: Path) -> None:
    # gRPC metadata text must be ASCII; a non-ASCII routing key can travel as a -bin attachment
    # (bytes), which the router reads as UTF-8.
    keys = ["日本語", "😀-tenant", "Ünïcødé", "acme"]
    with consumer(cluster.registry, tmp_path, 4) as (app, ref):
        push_rule(app, ref, "scheme: elasticsearch\nshards: 4\nkey: attachments[tenant-bin]\n")
        for key in keys:
            reply = ref.stub.SayHello(
                greeter_pb2.HelloRequest(name="bin"), metadata=[("tenant-bin", key.encode())]
            )
            assert reply.shard == locate("elasticsearch", 4, key).shards[0], key


# ---------------------------------------------------------------- live split 2 -> 4


@dataclass(frozen=True)
class Sample:
    """One call of the split load: when it started, its key, who served it, or its error."""

    started: float
    key: str
    provider: str = ""
    shard: int = -1
    error: str = ""


class KeyedLoad:
    """Steady calls over ``keys`` from two threads, each recording (start, key, where served)."""

    def __init__(self, call: Callable[[str], Any], keys: list[str], threads: int = 2) -> None:
        self.samples: list[Sample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._call = call
        self._keys = keys
        self._threads = [
            threading.Thread(target=self._run, args=(offset,), daemon=True)
            for offset in range(threads)
        ]

    def _run(self, offset: int) -> None:
        i = offset * 7919
        while not self._stop.is_set():
            key = self._keys[i % len(self._keys)]
            i += 1
            started = time.monotonic()
            try:
                reply = self._call(key)
                sample = Sample(started, key, reply.provider, reply.shard)
            except Exception as exc:
                sample = Sample(started, key, error=repr(exc))
            with self._lock:
                self.samples.append(sample)
            time.sleep(0.001)

    def __enter__(self) -> KeyedLoad:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()

    def count(self) -> int:
        with self._lock:
            return len(self.samples)


@dataclass
class ChainLog:
    """When the consumer's chain first routed each new shard to a provider of the new layout,
    and when each rule came into force (listener times: after the chain was swapped in, so a
    call that started later certainly routed on it or a newer chain)."""

    new_shards: int
    handoff: dict[int, float] = field(default_factory=dict)
    rules: dict[ShardRule, float] = field(default_factory=dict)

    def __call__(self, chain: BoundChain) -> None:
        now = time.monotonic()
        bound = bound_shard_router(chain)
        if bound is None:
            return
        self.rules.setdefault(bound.rule, now)
        providers = chain.snapshot.providers
        for shard, mask in enumerate(bound.masks):
            if shard in self.handoff or bound.rule.shards != self.new_shards:
                continue
            serving = [providers[i] for i in range(len(providers)) if mask >> i & 1]
            if any(p.get_int("shards") == self.new_shards for p in serving):
                self.handoff[shard] = now


SPLIT_KEYS = [f"tenant-{i}" for i in range(240)]
RULE_BEFORE = "scheme: elasticsearch\nshards: 2\nkey: attachments[tenant]\n"
RULE_DURING = (
    "scheme: elasticsearch\nshards: 4\nsplit_from: 2\nrouting_num_shards: 1024\n"
    "key: attachments[tenant]\n"
)
RULE_AFTER = (
    "scheme: elasticsearch\nshards: 4\nrouting_num_shards: 1024\nkey: attachments[tenant]\n"
)


def test_live_split_2_to_4_under_load_misroutes_nothing(
    registry_address: str, tmp_path: Path
) -> None:
    """Split an Elasticsearch-routed service from 2 to 4 shards under steady load.

    The protocol (docs/sharding.md, "A live split, step by step"), as an operator runs it:

    0. Before: providers P0 (``shard=0``, no count — as providers that predate any split) and
       P1 (``shard=1&shards=2``) and the rule ``shards: 2``. ``dubbo-py shard plan --scheme
       elasticsearch --from 2 --to 4`` says new shards 0, 1 take their keys from old shard 0 and
       new shards 2, 3 from old shard 1, with ``routing_num_shards: 1024`` kept.
    1. Push the "during" rule (``shards: 4, split_from: 2, routing_num_shards: 1024``). Both old
       providers are now read as the 2-shard layout; every key still goes to its old shard,
       because no new shard has a provider yet: nothing moves.
    2. Bring up N2 and N3 (``shard=2|3&shards=4``), the children of old shard 1, once they hold
       their data. Registering is the hand-off: keys of new shard 2 go to N2 from the moment the
       consumer sees it, likewise 3. Keys of old shard 0 keep their owner, P0.
    3. Bring up N0 and N1, the children of old shard 0: P0's keys move to them.
    4. Stop P0 and P1 gracefully (unregister, let consumers notice, drain). An old provider is
       not restarted in place: until its children are up it is the only holder of their keys,
       so its replacements come up first and it leaves after — no gap, no failed call.
    5. Push the "after" rule (no ``split_from``). Nothing moves.

    Asserted: no call failed, and every call was served by a provider that owned its key when
    the call started — the provider of its new shard, or its old parent shard's provider while
    (by the consumer's own chain) no provider of the new shard was routable. The ordering uses
    the consumer's chain-swap times, not durations: a call that started after the swap that
    made N_j routable must not reach the parent.
    """
    old_of = {k: locate("elasticsearch", 2, k).shards[0] for k in SPLIT_KEYS}
    new_of = {
        k: locate("elasticsearch", 4, k, routing_num_shards=1024).shards[0] for k in SPLIT_KEYS
    }
    # Elasticsearch's split property the protocol relies on: a key's new shard is a child of its
    # old shard (IndexMetadata.selectSplitShard).
    assert all(new_of[k] // 2 == old_of[k] for k in SPLIT_KEYS)
    assert set(new_of.values()) == {0, 1, 2, 3}

    roles: dict[str, tuple[int, int]] = {}  # provider address -> (shard, layout's shard count)

    def start(specs: list[tuple[int, int | None]]) -> list[ShardProvider]:
        started = start_providers(registry_address, specs, tmp_path)
        for p in started:
            roles[p.address] = (p.shard, p.shards or 2)
        return started

    old = start([(0, None), (1, 2)])
    new: list[ShardProvider] = []
    try:
        with consumer(registry_address, tmp_path, 2, loadbalance="roundrobin") as (app, ref):
            log = ChainLog(new_shards=4)
            ref.directory.add_listener(log)
            before = push_rule(app, ref, RULE_BEFORE)

            def call(key: str) -> Any:
                return ref.stub.SayHello(
                    greeter_pb2.HelloRequest(name="split"), metadata=[("tenant", key)]
                )

            def settle(load: KeyedLoad, calls: int = 150) -> None:
                # Let some calls run in the current phase before the next step.
                target = load.count() + calls
                wait_until(lambda: load.count() >= target, 20, f"{calls} more calls")

            with KeyedLoad(call, SPLIT_KEYS) as load:
                settle(load)
                during = push_rule(app, ref, RULE_DURING)
                settle(load)
                new += start([(2, 4), (3, 4)])
                wait_until(lambda: {2, 3} <= log.handoff.keys(), 15, "hand-off of shards 2, 3")
                settle(load)
                new += start([(0, 4), (1, 4)])
                wait_until(lambda: {0, 1} <= log.handoff.keys(), 15, "hand-off of shards 0, 1")
                settle(load)
                with ThreadPoolExecutor(2) as pool:
                    codes = list(pool.map(lambda p: p.process.terminate(), old))
                assert codes == [0, 0], codes
                wait_until(lambda: len(ref.directory.providers) == 4, 15, "old providers to go")
                settle(load)
                after = push_rule(app, ref, RULE_AFTER)
                settle(load)
    finally:
        for p in [*old, *new]:
            p.process.kill()

    samples = load.samples
    errors = [s for s in samples if s.error]
    assert not errors, f"{len(errors)} failed calls, e.g. {errors[:3]}"

    def owns(sample: Sample) -> bool:
        shard, count = roles[sample.provider]
        if shard != sample.shard:
            return False
        if count == 4:
            return shard == new_of[sample.key]
        handoff = log.handoff.get(new_of[sample.key], float("inf"))
        return shard == old_of[sample.key] and sample.started < handoff

    misrouted = [s for s in samples if not owns(s)]
    assert not misrouted, f"{len(misrouted)} of {len(samples)} misrouted, e.g. {misrouted[:3]}"

    # The run went through every phase, and each provider did the serving the protocol says.
    served = Counter(s.provider for s in samples)
    assert all(served[p.address] for p in [*old, *new]), served
    assert log.rules.keys() >= {before, during, after}
    after_start = log.rules[after]
    assert any(s.started > after_start for s in samples), "no call under the final rule"
    # While only shards 2 and 3 had been handed off, old shard 0's keys kept their owner P0.
    window = [
        s
        for s in samples
        if max(log.handoff[2], log.handoff[3]) < s.started < min(log.handoff[0], log.handoff[1])
        and old_of[s.key] == 0
    ]
    assert window and {s.provider for s in window} == {old[0].address}
