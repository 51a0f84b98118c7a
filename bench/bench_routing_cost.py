"""Routing cost per call at 10, 1 000 and 10 000 providers with 20 condition rules.

    python bench/bench_routing_cost.py [--repeats 7] [--seconds 0.3] [--baseline-seconds 0.5]

Twenty ``condition://`` router URLs (compiled by ``factory.compile_url``, as a consumer does):
ten read the invocation (``method``, ``arguments[N]``, ``attachments[key]``) and ten read only
consumer and provider URL fields; some of each kind do not apply to this consumer. Two ways of
routing the same invocations are timed in the same run:

* **ours**: ``RouterChain(routers).bind(Snapshot(providers), consumer)`` once, then
  ``BoundChain.route(invocation)`` per call. Binding is the cost moved to notify time and is
  timed separately, twice: a new snapshot (what a provider notification costs) and the same
  snapshot again (a rule push: the directory rebinds the current snapshot);
* **baseline**: what Dubbo 2.7's ``ConditionRouter.route`` did, per call and per rule in chain
  order: match the when side against the consumer URL and the invocation, then filter the
  provider list by the then side (empty and not forced: keep the input). It uses the same
  matcher functions (``merge_clauses``, ``Matcher.test``, ``read_invocation``, ``url_sample``),
  so only the strategy differs. Rules are parsed and ``$`` references resolved once, and each
  provider's URL sample is built once per snapshot (Dubbo 2.7 rebuilt ``url.toMap()`` per
  provider per rule per call): both favour the baseline, so the speed-ups are conservative.

The invocation mix (seeded): ``MIX`` invocations of ``demo.Greeter`` with a real
``HelloRequest``: 85 % SayHello / 15 % SayHelloStream; ``name`` (``arguments[0]``) drawn
Zipf(1.1) from 5 000 users, 5 % ``vip-<0..99>``, 0.2 % ``admin`` (blocked by a rule);
``count`` (``arguments[1]``) uniform 0..20; ``key`` (``arguments[2]``) uniform over 1 000 keys;
attachments ``tenant`` (80 %, Zipf(1.1) over 50), ``priority=high`` (10 %), ``dubbo.tag=gray``
(5 %), ``canary=true`` (3 %). Each timed batch routes fresh ``Invocation`` objects built from
the mix outside the timed region (so ``arguments`` is read from the request as in a live call).
The per-rule decision caches (512 entries each, keyed by the values a rule reads) see hits and
misses (``arguments[0]`` and ``arguments[2]`` have more distinct values than fit): the hit rate
over the timed calls is printed. Sizes are interleaved round by round so machine noise hits
them alike; figures are medians of the rounds.

The correctness guard asserts that both ways return the same providers (an empty baseline result
standing for ``NoProviderError``) for every invocation of the mix, or, where the baseline would
take minutes (10 000 providers), for an even sample of it (``--check-budget``).
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
import _paths  # noqa: E402,F401
from demo import greeter_pb2  # noqa: E402

from dubbo_py.errors import NoProviderError  # noqa: E402
from dubbo_py.invocation import Invocation  # noqa: E402
from dubbo_py.router import factory  # noqa: E402
from dubbo_py.router.chain import BoundChain, RouterChain  # noqa: E402
from dubbo_py.router.condition.matcher import (  # noqa: E402
    Matcher,
    merge_clauses,
    read_invocation,
    reads_invocation,
    url_sample,
)
from dubbo_py.router.condition.router import ConditionRouter  # noqa: E402
from dubbo_py.router.snapshot import Snapshot  # noqa: E402
from dubbo_py.url import URL, encode_component  # noqa: E402

SIZES = (10, 1_000, 10_000)
SERVICE = "demo.Greeter"
MIX = 2_000

#: (rule, reads the invocation). Listed in chain order (priority = position).
RULES: tuple[tuple[str, bool], ...] = (
    ("application = shop => env != gray", False),
    ("method = SayHelloStream => streaming = true", True),
    ("application = billing => region = r0", False),
    ("arguments[0] = vip-* => tier = gold", True),
    ("application = shop & region = r1,r2 => region = $region,r2", False),
    ("attachments[tenant] = t1,t2 => zone = z1,z2,z6", True),
    ("env = prod & application = shop,cart => weight = 50~200", False),
    ("attachments[dubbo.tag] = gray => env = gray", True),
    ("application = ops* => zone = z0", False),
    ("method = SayHello & arguments[1] = 1~5 => weight = 100~", True),
    ("zone = z3 => tag != canary", False),
    ("attachments[priority] = high => tier = gold", True),
    ("host = 10.1.* => application != greeter-9", False),
    ("method != SayHelloStream & attachments[tenant] = t3* => version = 1.0.0", True),
    ("application = legacy => false", False),
    ("arguments[0] = admin => false", True),
    ("env = staging => env = gray", False),
    ("attachments[canary] = true => tag = canary", True),
    ("application = shop => application = greeter-*", False),
    ("application = shop & arguments[2] = key-1* => zone = z1,z2,z7", True),
)

CONSUMER = URL.parse(
    f"consumer://10.1.0.1/{SERVICE}?application=shop&category=consumers&check=false"
    f"&env=prod&interface={SERVICE}&region=r1&side=consumer&version=1.0.0&zone=z3"
)


def provider_parameters(i: int, service: str = SERVICE) -> dict[str, str]:
    """Provider ``i``'s URL parameters: a spread of the fields the rules read."""
    params = {
        "anyhost": "true",
        "application": f"greeter-{i % 10}",
        "interface": service,
        "methods": "SayHello,SayHelloStream",
        "side": "provider",
        "version": "1.1.0" if i % 10 == 9 else "1.0.0",
        "weight": ("100", "200", "50", "300")[i % 4],
        "region": f"r{i % 5}",
        "zone": f"z{i % 10}",
        "env": "gray" if i % 10 == 0 else "prod",
        "tier": "gold" if i % 3 == 0 else "std",
        "streaming": "true" if i % 2 else "false",
        "timestamp": "1764675600000",
        "pid": str(1000 + i),
    }
    if i % 20 == 7:
        params["tag"] = "canary"
    return params


def provider_host(i: int) -> str:
    """Provider ``i``'s host (never dialled: the benchmarks only route)."""
    return f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}"


def providers(n: int) -> tuple[URL, ...]:
    """``n`` provider URLs with a spread of the fields the rules read."""
    return tuple(
        URL("tri", provider_host(i), 50051 + i % 4, SERVICE, parameters=provider_parameters(i))
        for i in range(n)
    )


def routers() -> list[ConditionRouter]:
    """The 20 rules as registry router URLs, compiled the way a consumer compiles them."""
    out = []
    for priority, (rule, _) in enumerate(RULES):
        url = URL.parse(
            f"condition://0.0.0.0/{SERVICE}?category=routers&dynamic=false&force=false"
            f"&priority={priority}&rule={encode_component(rule)}"
        )
        router = factory.compile_url(url, f"/dubbo/{SERVICE}/routers/rule-{priority}")
        assert isinstance(router, ConditionRouter)
        out.append(router)
    return out


# --------------------------------------------------------------------------- the mix


def _zipf(n: int, s: float = 1.1) -> Callable[[random.Random], int]:
    """A Zipf(``s``) sampler over ``[0, n)``: rank ``k`` drawn with weight ``1 / (k + 1) ** s``
    (a few values are hot, most are rare)."""
    cumulative = list(itertools.accumulate(1 / (k + 1) ** s for k in range(n)))
    ranks = range(n)
    return lambda rng: rng.choices(ranks, cum_weights=cumulative)[0]


@dataclass(frozen=True)
class Call:
    """One entry of the mix: what a live call would carry."""

    method: str
    request: Any
    attachments: dict[str, str]

    def invocation(self) -> Invocation:
        """A fresh invocation, as the channel builds one per call."""
        return Invocation(SERVICE, self.method, self.request, self.attachments)


def mix(size: int, seed: int = 3) -> list[Call]:
    """The invocation mix described in the module docstring."""
    rng = random.Random(seed)
    user, tenant = _zipf(5_000), _zipf(50)
    calls = []
    for _ in range(size):
        method = "SayHelloStream" if rng.random() < 0.15 else "SayHello"
        draw = rng.random()
        if draw < 0.002:
            name = "admin"
        elif draw < 0.052:
            name = f"vip-{rng.randrange(100)}"
        else:
            name = f"user-{user(rng)}"
        request = greeter_pb2.HelloRequest(
            name=name, count=rng.randint(0, 20), key=f"key-{rng.randrange(1_000)}"
        )
        attachments = {}
        if rng.random() < 0.8:
            attachments["tenant"] = f"t{tenant(rng)}"
        if rng.random() < 0.10:
            attachments["priority"] = "high"
        if rng.random() < 0.05:
            attachments["dubbo.tag"] = "gray"
        if rng.random() < 0.03:
            attachments["canary"] = "true"
        calls.append(Call(method, request, attachments))
    return calls


# --------------------------------------------------------------------------- the baseline


@dataclass(frozen=True)
class NaiveRule:
    """A rule as Dubbo 2.7's ConditionRouter held it: parsed once, evaluated per call."""

    when: tuple[Matcher, ...]
    then: tuple[Matcher, ...] | None
    force: bool


def _holds(
    matchers: Sequence[Matcher], sample: dict[str, str], invocation: Invocation, *, when: bool
) -> bool:
    for matcher in matchers:
        if reads_invocation(matcher.key, when=when):
            value = read_invocation(invocation, matcher.key)
        else:
            value = sample.get(matcher.key.name)
        if not matcher.test(value):
            return False
    return True


class NaiveChain:
    """Per call, for each rule: when against consumer + invocation, then filter every provider."""

    def __init__(
        self, compiled: Sequence[ConditionRouter], snapshot: Snapshot, consumer: URL
    ) -> None:
        consumer_sample = url_sample(consumer)
        self.consumer_sample = consumer_sample
        self.rules = [
            NaiveRule(
                merge_clauses(r.rule.when, consumer_sample),
                None if r.rule.then is None else merge_clauses(r.rule.then, consumer_sample),
                r.force,
            )
            for r in RouterChain(compiled).routers  # chain order: priority, then name
            if isinstance(r, ConditionRouter) and r.enabled
        ]
        # The one liberty taken over Dubbo 2.7: each provider's sample is built once.
        self.providers = [(p, url_sample(p)) for p in snapshot.providers]

    def route(self, invocation: Invocation) -> list[URL]:
        """The providers this invocation may reach (empty: none)."""
        invokers = self.providers
        for rule in self.rules:
            if not _holds(rule.when, self.consumer_sample, invocation, when=True):
                continue
            if rule.then is None:
                invokers = []
                continue
            result = [
                (url, sample)
                for url, sample in invokers
                if _holds(rule.then, sample, invocation, when=False)
            ]
            if result or rule.force:
                invokers = result
        return [url for url, _ in invokers]


# --------------------------------------------------------------------------- timing


def ours(chain: BoundChain) -> Callable[[Invocation], tuple[URL, ...]]:
    """Route through the bound chain; a NoProviderError is an empty result."""

    def route(invocation: Invocation) -> tuple[URL, ...]:
        try:
            return chain.route(invocation)
        except NoProviderError:
            return ()

    return route


def per_call_us(
    route: Callable[[Invocation], object], calls: Sequence[Call], seconds: float
) -> float:
    """µs per routed call over passes of the mix (fresh invocations each pass, built outside
    the timed region), for at least ``seconds`` and at least 20 calls."""
    elapsed = 0.0
    routed = 0
    position = 0
    while elapsed < seconds or routed < 20:
        batch = [c.invocation() for c in calls[position : position + 256]]
        position = (position + 256) % len(calls)
        start = time.perf_counter()
        for invocation in batch:
            route(invocation)
        elapsed += time.perf_counter() - start
        routed += len(batch)
    return elapsed / routed * 1e6


def cache_counts(chain: BoundChain) -> tuple[int, int]:
    """(hits, misses) summed over the chain's per-rule decision caches."""
    hits = misses = 0
    for _, bound in chain.stages:
        info = getattr(getattr(bound, "decide", None), "cache_info", None)
        if info is not None:
            stats = info()
            hits += stats.hits
            misses += stats.misses
    return hits, misses


def check(chain: BoundChain, naive: NaiveChain, calls: Sequence[Call]) -> None:
    """Assert that ours and the baseline agree on every invocation of the mix."""
    route = ours(chain)
    for call in calls:
        expected = naive.route(call.invocation())
        got = route(call.invocation())
        assert list(got) == expected, (call, len(got), len(expected))


@dataclass
class Size:
    """Everything measured at one number of providers."""

    n: int
    bound: BoundChain
    naive: NaiveChain
    bind_ms: float
    rebind_ms: float
    ours_us: list[float]
    base_us: list[float]


def prepare(chain: RouterChain, compiled: Sequence[ConditionRouter], n: int, repeats: int) -> Size:
    """Bind and build the baseline for ``n`` providers. Two bind times (medians): a new
    snapshot (a provider notification) and the same snapshot again (a rule push)."""
    urls = providers(n)
    binds, rebinds = [], []
    for _ in range(repeats):
        snapshot = Snapshot(urls)
        start = time.perf_counter()
        bound = chain.bind(snapshot, CONSUMER)
        binds.append(time.perf_counter() - start)
        start = time.perf_counter()
        bound = chain.bind(snapshot, CONSUMER)
        rebinds.append(time.perf_counter() - start)
    naive = NaiveChain(compiled, bound.snapshot, CONSUMER)
    return Size(
        n,
        bound,
        naive,
        statistics.median(binds) * 1e3,
        statistics.median(rebinds) * 1e3,
        [],
        [],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed rounds (median kept)")
    parser.add_argument("--seconds", type=float, default=0.3, help="time per round (ours)")
    parser.add_argument(
        "--baseline-seconds", type=float, default=0.5, help="time per round (baseline)"
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument(
        "--check-budget",
        type=int,
        default=2_000_000,
        help="providers x invocations the correctness guard may check per size: the whole "
        "mix while providers * mix <= budget, else an even sample",
    )
    args = parser.parse_args()

    compiled = routers()
    calls = mix(MIX)
    invocation_rules = sum(reads for _, reads in RULES)
    print(
        f"# {len(RULES)} condition rules ({invocation_rules} read the invocation), "
        f"mix of {len(calls)} invocations; sizes interleaved, median of {args.repeats} rounds"
    )
    chain = RouterChain(compiled)
    sizes = [prepare(chain, compiled, n, args.repeats) for n in args.sizes]
    for size in sizes:
        # The guard: every invocation of the mix, or an even sample of it where the baseline
        # would take minutes (it is O(providers) per rule per call).
        stride = max(1, -(-size.n * len(calls) // args.check_budget))
        checked = calls[::stride]
        check(size.bound, size.naive, checked)
        print(f"correctness: providers={size.n}: ours == baseline on {len(checked)} invocations")
    hit_miss = {}
    for size in sizes:
        per_call_us(ours(size.bound), calls, 0.2)  # warm the decision caches
        hit_miss[size.n] = cache_counts(size.bound)
    for _ in range(args.repeats):
        for size in sizes:
            size.ours_us.append(per_call_us(ours(size.bound), calls, args.seconds))
            size.base_us.append(per_call_us(size.naive.route, calls, args.baseline_seconds))
    print(
        f"{'providers':>9} {'ours µs/call':>13} {'(min-max)':>15} {'baseline µs/call':>17}"
        f" {'speed-up':>9} {'bind ms':>8} {'rebind ms':>9} {'survivors':>9} {'cache hits':>10}"
    )
    for size in sizes:
        before, after = hit_miss[size.n], cache_counts(size.bound)
        hits, misses = after[0] - before[0], after[1] - before[1]
        survivors = statistics.median(len(ours(size.bound)(c.invocation())) for c in calls)
        ours_us = statistics.median(size.ours_us)
        base_us = statistics.median(size.base_us)
        spread = f"{min(size.ours_us):.1f}-{max(size.ours_us):.1f}"
        print(
            f"{size.n:>9,} {ours_us:>13.2f} {spread:>15} {base_us:>17.1f}"
            f" {base_us / ours_us:>8.1f}x {size.bind_ms:>8.2f} {size.rebind_ms:>9.2f}"
            f" {survivors:>9g} {hits / max(1, hits + misses):>10.0%}"
        )
    if len(sizes) > 1:
        first, last = sizes[0], sizes[-1]
        ratios = [b / a for a, b in zip(first.ours_us, last.ours_us, strict=True)]
        print(
            f"ours cost({last.n:,}) / cost({first.n:,}) = "
            f"{statistics.median(last.ours_us) / statistics.median(first.ours_us):.2f}x"
            f" (median of per-round ratios {statistics.median(ratios):.2f}x,"
            f" range {min(ratios):.2f}-{max(ratios):.2f}x);"
            f" baseline {statistics.median(last.base_us) / statistics.median(first.base_us):.0f}x"
        )


if __name__ == "__main__":
    main()
