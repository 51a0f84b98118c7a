"""Throughput of several client variants measured in interleaved rounds, for the calls/s benchmarks.

On a small shared machine wall-clock throughput drifts and jumps by tens of percent from one
second to the next (other tenants, CPU steal), far more than the differences being measured. So
every variant runs once per round, in an order that alternates round by round (A B, B A, ...), and
the figures compare variants *within* rounds:

* ``ratio``: the variant's calls over its time, summed over all rounds, against the baseline's;
* ``per-round``: the median of the per-round ratios, with the quartiles (the middle half of the
  rounds lies between them), which says how far one round can be trusted.

CPU time per call is also kept, for the client process and for the provider processes: when both
cores are saturated, throughput is set by the CPU a call costs on *both* sides.

Even interleaved, two *identical* variants can differ by 5-10 % over 20 one-second rounds here
(an A/A check: two raw grpcio channels to one provider gave 0.937 once). :func:`side_by_side`
runs the baseline and a variant at the same time, half the threads each, so every round
compares them under the same conditions: it is precise (the same A/A check: 0.999, quartiles
[0.994, 1.001]) but *compressed*: the threads of both sides take turns at the GIL call by call,
so a side that costs more per call loses less than its cost. Calibrated with a variant that
adds a known client cost (:func:`with_cpu`): 100 µs per call read 0.894 / 0.923 interleaved
(1 / 8 threads) and 0.956 / 0.964 / 0.947 side by side (1+1 / 4+4 / 8+8); 300 µs read 0.680 /
0.468 and 0.871 / 0.774 / 0.709. So a side-by-side shortfall is about half of the real one:
read it with the calibration variant the benchmarks print in the same run, and take the
interleaved ratio as the measure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Call = Callable[[], Any]


def add_round_options(
    parser: argparse.ArgumentParser, *, rounds: int, side_threads: list[int] | None = None
) -> None:
    """The options every calls/s benchmark takes: ``--seconds`` and ``--rounds`` per variant,
    ``--calibration-us`` (the known extra cost of the calibration variant), and, with
    ``side_threads``, ``--side-rounds`` and ``--side-threads`` for :func:`side_by_side`."""
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument(
        "--calibration-us", type=float, default=100.0, help="known extra cost (0: no such run)"
    )
    if side_threads is not None:
        parser.add_argument("--side-rounds", type=int, default=15)
        parser.add_argument("--side-threads", type=int, nargs="+", default=side_threads)


@contextmanager
def provider_in_registry(zookeeper: bool, chroot: str) -> Iterator[tuple[str, Any]]:
    """A Greeter provider process registered in a registry of its own: a ZooKeeper server the
    benchmark starts, or (``zookeeper`` false) a throw-away embedded registry, so nothing is
    left in the working tree. Yields the registry address and the provider process."""
    from tests.support.processes import ProviderProcess
    from tests.support.zookeeper import ZooKeeperServer

    zk = None
    registry = f"sqlite://{Path(tempfile.mkdtemp(prefix='dubbo-bench-')) / 'registry.db'}"
    if zookeeper:
        zk = ZooKeeperServer()
        zk.start()
        registry = f"zookeeper://{zk.address}/{chroot}"
    try:
        provider = ProviderProcess(registry).start()
        try:
            yield registry, provider
        finally:
            provider.kill()
    finally:
        if zk is not None:
            zk.stop()


def burn(micros: float) -> None:
    """Spin the CPU for ``micros`` microseconds (holding the GIL, as Python code does)."""
    end = time.perf_counter() + micros / 1e6
    while time.perf_counter() < end:
        pass


def with_cpu(call: Call, micros: float) -> Call:
    """``call`` plus a known client cost per call: the calibration variant, which shows how an
    overhead of that size reads in each mode of the same run."""

    def costly() -> Any:
        result = call()
        burn(micros)
        return result

    return costly


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Run:
    """One variant's run in one round."""

    calls: int
    seconds: float
    client_cpu: float
    provider_cpu: float

    @property
    def rate(self) -> float:
        """Calls per second."""
        return self.calls / self.seconds


def run(call: Call, threads: int, seconds: float, providers: Sequence[int] = ()) -> Run:
    """``threads`` threads calling ``call`` in a loop for ``seconds``."""
    served0 = sum(process_cpu(pid) for pid in providers)
    cpu0 = time.process_time()
    start = time.perf_counter()
    counts = _hammer([call] * threads, seconds)
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    served = sum(process_cpu(pid) for pid in providers) - served0
    return Run(sum(counts), elapsed, cpu, served)


def _hammer(calls: Sequence[Call], seconds: float) -> list[int]:
    """One thread per entry of ``calls``, each calling its entry in a loop for ``seconds``
    (started in list order); how many calls each made."""
    counts = [0] * len(calls)
    stop = threading.Event()

    def worker(i: int) -> None:
        call = calls[i]
        n = 0
        while not stop.is_set():
            call()
            n += 1
        counts[i] = n

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(len(calls))]
    for t in pool:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in pool:
        t.join()
    return counts


@dataclass
class Comparison:
    """Every variant's runs, round by round; the first variant is the baseline."""

    threads: int
    runs: dict[str, list[Run]] = field(default_factory=dict)

    @property
    def baseline(self) -> str:
        """The variant ratios are taken against."""
        return next(iter(self.runs))

    def rate(self, name: str) -> float:
        """Calls per second over all rounds."""
        runs = self.runs[name]
        return sum(r.calls for r in runs) / sum(r.seconds for r in runs)

    def ratio(self, name: str) -> float:
        """Overall calls/s against the baseline's."""
        return self.rate(name) / self.rate(self.baseline)

    def round_ratios(self, name: str) -> list[float]:
        """Calls/s against the baseline's in the same round, sorted."""
        pairs = zip(self.runs[name], self.runs[self.baseline], strict=True)
        return sorted(r.rate / b.rate for r, b in pairs)

    def cpu_per_call(self, name: str) -> tuple[float, float]:
        """(client, providers) CPU seconds per call over all rounds."""
        runs = self.runs[name]
        calls = max(1, sum(r.calls for r in runs))
        return sum(r.client_cpu for r in runs) / calls, sum(r.provider_cpu for r in runs) / calls

    def lines(self) -> list[str]:
        """One line per variant."""
        out = []
        for name in self.runs:
            ratios = self.round_ratios(name)
            low, mid, high = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
            client, served = self.cpu_per_call(name)
            out.append(
                f"threads={self.threads:<2} {name:<24} {self.rate(name):7.0f} calls/s"
                f"  ratio {self.ratio(name):.3f}"
                f"  per-round {mid:.3f} [{low:.3f}, {high:.3f}]"
                f"  CPU/call client {client * 1e6:4.0f} µs, providers {served * 1e6:4.0f} µs"
            )
        return out


def compare(
    variants: dict[str, Call],
    threads: int,
    rounds: int,
    seconds: float,
    providers: Sequence[int] = (),
) -> Comparison:
    """Run every variant once per round, alternating the order round by round."""
    result = Comparison(threads, {name: [] for name in variants})
    names = list(variants)
    for round_no in range(rounds):
        for name in names if round_no % 2 == 0 else reversed(names):
            result.runs[name].append(run(variants[name], threads, seconds, providers))
    return result


HEADER = (
    "# ratio: calls/s over all rounds against the first variant's; per-round: median ratio"
    " within a round [quartiles]; CPU time per call of this process and of the providers"
)


@dataclass(frozen=True)
class SideBySide:
    """A variant and the baseline run *at the same time*, ``per_side`` threads each, round by
    round: both meet the same machine at every instant, so CPU steal and neighbours, which
    move sequential rounds by tens of percent here, cancel out of the ratio."""

    name: str
    per_side: int
    #: (baseline calls, variant calls) per round.
    rounds: list[tuple[int, int]]

    def ratio(self) -> float:
        """The variant's calls against the baseline's, over all rounds."""
        return sum(v for _, v in self.rounds) / max(1, sum(b for b, _ in self.rounds))

    def line(self) -> str:
        """One line: overall ratio, per-round median [quartiles]."""
        ratios = sorted(v / max(1, b) for b, v in self.rounds)
        low, mid, high = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
        return (
            f"side by side, {self.per_side}+{self.per_side} threads  {self.name:<24}"
            f"  ratio {self.ratio():.3f}  per-round {mid:.3f} [{low:.3f}, {high:.3f}]"
        )


def side_by_side(
    name: str, baseline: Call, variant: Call, per_side: int, rounds: int, seconds: float
) -> SideBySide:
    """``per_side`` threads calling ``baseline`` and as many calling ``variant``, together, for
    ``seconds`` per round; the threads of the two sides start interleaved."""
    return SideBySide(
        name, per_side, [_together(baseline, variant, per_side, seconds) for _ in range(rounds)]
    )


def _together(baseline: Call, variant: Call, per_side: int, seconds: float) -> tuple[int, int]:
    counts = _hammer([baseline, variant] * per_side, seconds)
    return sum(counts[0::2]), sum(counts[1::2])
