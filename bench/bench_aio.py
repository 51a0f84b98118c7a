"""Calls per second through dubbo-py's asyncio consumer against a raw ``grpc.aio`` stub.

    python bench/bench_aio.py [--seconds 1] [--rounds 20] [--tasks 1 16] [--no-zookeeper]
                              [--calibration-us 100] [--side-rounds 0] [--side-tasks 128]
                              [--frames 0]

The asyncio counterpart of ``bench_calls.py``: one provider process serves every variant; the
client side is a raw ``GreeterStub(grpc.aio.insecure_channel(...))``, a second raw channel (the
A/A control), dubbo-py's ``reference_async`` with a direct ``tri://`` address, and through a
real ZooKeeper (random balancer, failover, the mock and tag routers), and raw grpc.aio plus a
known ``--calibration-us`` of CPU per call (how an overhead of that size reads). ``--tasks``
concurrent coroutines call in a loop on one event loop; the variants alternate round by round
(interleaved) and the ratios are against raw grpc.aio (see ``bench/interleave.py``; "threads"
there is concurrent tasks here).

``--side-rounds N`` adds a side-by-side mode: raw grpc.aio on one event loop and each variant
on a second loop, in two threads, at the same time. Not on one loop: there the two sides'
tasks take turns call by call, so a side's share of the calls hardly depends on its cost (a
known 100 µs per call read 0.996 and 1.000 that way, against 0.84 and 0.78 interleaved).

``--frames N`` counts instead of timing: N calls of each variant by ``--side-tasks`` concurrent
tasks under cProfile, and the function calls per call, all of them (the event loop's included)
and dubbo-py's own frames (a count: load does not move it).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import cProfile
import pstats
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))
import _paths  # noqa: E402,F401
import grpc  # noqa: E402
from demo import greeter_pb2, greeter_pb2_grpc  # noqa: E402
from interleave import (  # noqa: E402
    HEADER,
    Comparison,
    Run,
    SideBySide,
    add_round_options,
    burn,
    process_cpu,
    provider_in_registry,
)

import dubbo_py  # noqa: E402
from tests.support.processes import ProviderProcess  # noqa: E402

AsyncCall = Callable[[], Awaitable[Any]]
T = TypeVar("T")


async def hammer(calls: list[AsyncCall], seconds: float) -> list[int]:
    """One task per entry of ``calls``, each calling in a loop until ``seconds`` are up; the
    number of calls each completed."""
    counts = [0] * len(calls)
    deadline = time.monotonic() + seconds

    async def worker(i: int, call: AsyncCall) -> None:
        while time.monotonic() < deadline:
            await call()
            counts[i] += 1

    await asyncio.gather(*(worker(i, c) for i, c in enumerate(calls)))
    return counts


async def timed(call: AsyncCall, tasks: int, seconds: float, provider: int) -> Run:
    cpu0, served0, t0 = time.process_time(), process_cpu(provider), time.monotonic()
    counts = await hammer([call] * tasks, seconds)
    elapsed = time.monotonic() - t0
    return Run(sum(counts), elapsed, time.process_time() - cpu0, process_cpu(provider) - served0)


async def compare(
    variants: dict[str, AsyncCall], tasks: int, rounds: int, seconds: float, provider: int
) -> Comparison:
    result = Comparison(tasks, {name: [] for name in variants})
    names = list(variants)
    for round_no in range(rounds):
        for name in names if round_no % 2 == 0 else reversed(names):
            result.runs[name].append(await timed(variants[name], tasks, seconds, provider))
    return result


@dataclass
class Variants:
    """The variants' calls, made on the running event loop (grpc.aio channels belong to it),
    and how to close what they hold."""

    calls: dict[str, AsyncCall]
    closers: list[Callable[[], Awaitable[Any]]]

    async def aclose(self) -> None:
        """Close every application and channel the variants opened."""
        for close in self.closers:
            await close()


async def make_variants(
    args: argparse.Namespace, registry: str | None, provider: ProviderProcess
) -> Variants:
    """Raw grpc.aio, its A/A control, dubbo-py direct and (with ``registry``) through the
    registry, and the calibration variant, all on the running loop."""
    request = greeter_pb2.HelloRequest(name="bench")
    raw_channel = grpc.aio.insecure_channel(provider.address)
    raw = greeter_pb2_grpc.GreeterStub(raw_channel)
    control_channel = grpc.aio.insecure_channel(provider.address)
    control = greeter_pb2_grpc.GreeterStub(control_channel)
    direct_app = dubbo_py.Application("bench-direct", registry=f"tri://{provider.address}")
    direct = await direct_app.reference_async(greeter_pb2_grpc.GreeterStub, version="1.0.0")
    calls: dict[str, AsyncCall] = {
        "raw grpc.aio": lambda: raw.SayHello(request),
        "raw grpc.aio, 2nd channel": lambda: control.SayHello(request),
        "dubbo-py asyncio direct": lambda: direct.SayHello(request),
    }
    if args.calibration_us > 0:

        async def costly() -> Any:
            # A known overhead: how one of that size reads in each mode of this run.
            reply = await control.SayHello(request)
            burn(args.calibration_us)
            return reply

        calls[f"raw grpc.aio + {args.calibration_us:g} µs CPU"] = costly
    closers: list[Callable[[], Awaitable[Any]]] = [
        direct_app.aclose,
        raw_channel.close,
        control_channel.close,
    ]
    if registry is not None:
        zk_app = dubbo_py.Application("bench-zk", registry=registry)
        via_zk = await zk_app.reference_async(greeter_pb2_grpc.GreeterStub, version="1.0.0")
        calls["dubbo-py asyncio via ZK"] = lambda: via_zk.SayHello(request)
        closers.insert(0, zk_app.aclose)
    for call in calls.values():
        for _ in range(200):  # warm up channels and caches
            await call()
    return Variants(calls, closers)


async def bench(args: argparse.Namespace, registry: str | None, provider: ProviderProcess) -> None:
    variants = await make_variants(args, registry, provider)
    try:
        print(f"# {args.rounds} rounds x {args.seconds}s per variant, interleaved")
        print(HEADER.replace("calls/s over", "calls/s (threads = concurrent tasks) over"))
        for tasks in args.tasks:
            result = await compare(variants.calls, tasks, args.rounds, args.seconds, provider.pid)
            print("\n".join(result.lines()), flush=True)
    finally:
        await variants.aclose()


async def frames(call: AsyncCall, calls: int, tasks: int) -> str:
    """Function calls per call of ``call``, ``calls`` calls made by ``tasks`` concurrent tasks
    on this loop, counted by cProfile: all of them, and dubbo-py's own Python frames."""

    async def worker(n: int) -> None:
        for _ in range(n):
            await call()

    share = [calls // tasks + (1 if i < calls % tasks else 0) for i in range(tasks)]
    profile = cProfile.Profile()
    profile.enable()
    await asyncio.gather(*(worker(n) for n in share))
    profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    everything = sum(counts[1] for counts in stats.values())
    own = sum(counts[1] for where, counts in stats.items() if "/dubbo_py/" in where[0])
    return f"{everything / calls:6.1f} function calls per call, {own / calls:5.1f} in dubbo_py"


async def count_frames(
    args: argparse.Namespace, registry: str | None, provider: ProviderProcess
) -> None:
    variants = await make_variants(args, registry, provider)
    try:
        for name, call in variants.calls.items():
            if "CPU" not in name:
                counted = await frames(call, args.frames, args.side_tasks[0])
                print(f"{name:32s} {counted}", flush=True)
    finally:
        await variants.aclose()


class LoopThread:
    """An event loop running in a thread of its own: the variants made on it run there."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coro`` on this loop."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self) -> None:
        """Stop the loop and its thread."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


def side_by_side(args: argparse.Namespace, registry: str | None, provider: ProviderProcess) -> None:
    """Raw grpc.aio on one event loop and each variant on another, in two threads, at the same
    time (``--side-tasks`` tasks each) for ``--side-rounds`` rounds: both sides meet the same
    machine at every instant, as in ``interleave.side_by_side`` (two threads sharing the GIL,
    so a side's cost is compressed there as here: read the calibration variant). Two loops
    and not one: on one loop the two sides' tasks take turns call by call and a cost barely
    shows (see the module's docstring)."""
    left, right = LoopThread(), LoopThread()
    try:
        base = left.submit(make_variants(args, registry, provider)).result()
        other = right.submit(make_variants(args, registry, provider)).result()
        baseline = base.calls["raw grpc.aio"]
        print(f"# side by side: {args.side_rounds} rounds x {args.seconds}s, two event loops")
        for per_side in args.side_tasks:
            for name, call in other.calls.items():
                rounds: list[tuple[int, int]] = []
                for _ in range(args.side_rounds):
                    a = left.submit(hammer([baseline] * per_side, args.seconds))
                    b = right.submit(hammer([call] * per_side, args.seconds))
                    rounds.append((sum(a.result()), sum(b.result())))
                line = SideBySide(name, per_side, rounds).line()
                print(line.replace(" threads ", " tasks "), flush=True)
        left.submit(base.aclose()).result()
        right.submit(other.aclose()).result()
    finally:
        left.close()
        right.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    add_round_options(parser, rounds=20)
    parser.add_argument("--tasks", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--side-rounds", type=int, default=0, help="side-by-side rounds (0: none)")
    parser.add_argument(
        "--side-tasks", type=int, nargs="+", default=[128], help="tasks per side, side by side"
    )
    parser.add_argument("--frames", type=int, default=0, help="count function calls per call")
    parser.add_argument("--no-zookeeper", action="store_true")
    args = parser.parse_args()

    with provider_in_registry(not args.no_zookeeper, "bench-aio") as (registry, provider):
        watched = None if args.no_zookeeper else registry
        if args.frames > 0:
            asyncio.run(count_frames(args, watched, provider))
            return
        if args.rounds > 0:
            asyncio.run(bench(args, watched, provider))
        if args.side_rounds > 0:
            side_by_side(args, watched, provider)


if __name__ == "__main__":
    main()
