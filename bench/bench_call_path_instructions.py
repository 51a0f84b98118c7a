"""Instructions per call of dubbo-py's blocking call path alone, under valgrind's callgrind.

    python bench/bench_call_path_instructions.py [--calls 5000] [--repeats 3]
                                                 [--loadbalance random] [--providers 1]

A blocking reference to direct ``tri://`` addresses whose gRPC multicallables are replaced by
one instance of a class with gRPC's ``__call__`` signature that returns a fixed reply (in both
of the invoker's dicts: the bound callables and the bare ones with their headers), so what is
counted is what dubbo-py executes around the provider call. The baseline is that instance
called as the headed raw stub calls gRPC's (``fake(request, metadata=HEADERS)``). Without
sockets and gRPC's threads, blocks of the same build agree to about ten instructions, which
shows cuts of a few hundred instructions that ``bench/bench_instructions.py`` (about
250,000 per call, most of them gRPC's) cannot tell apart from its spread. It imports the
``dubbo_py`` of the tree it is in: to compare two builds, run each tree's copy:

    python /path/to/build/bench/bench_call_path_instructions.py

It re-runs itself under ``valgrind --tool=callgrind --instr-atstart=no`` (instrumented only
after 1 000 warm-up calls, then 2 000 more of each kind before the first block) and prints,
per block, instructions per call of the reference and of the baseline, and their medians.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))
import _paths  # noqa: E402,F401
from bench_instructions import _callgrind_library, callgrind_command, totals  # noqa: E402
from demo import greeter_pb2, greeter_pb2_grpc  # noqa: E402

import dubbo_py  # noqa: E402

HEADERS = (("tri-service-version", "1.0.0"), ("tri-consumer-appname", "bench"))


class FakeMulticallable:
    """A stand-in for gRPC's blocking multicallable: a class instance with its ``__call__``."""

    __slots__ = ("reply",)

    def __init__(self, reply: Any) -> None:
        self.reply = reply

    def __call__(
        self,
        request: Any,
        timeout: float | None = None,
        metadata: Any = None,
        credentials: Any = None,
        wait_for_ready: Any = None,
        compression: Any = None,
    ) -> Any:
        return self.reply


def measure(calls: int, repeats: int, loadbalance: str, providers: int) -> None:
    """The instrumented side: warm up, then ``repeats`` blocks of each kind, dumped."""
    lib = _callgrind_library()
    fake = FakeMulticallable(greeter_pb2.HelloReply(message="hi"))
    addresses = [f"127.0.0.1:{i + 1}" for i in range(providers)]
    with dubbo_py.Application("bench", "tri://" + ",".join(addresses)) as app:
        ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, loadbalance=loadbalance)
        say = ref.stub.SayHello
        invoker = ref.contexts["SayHello"].call
        for address in addresses:
            invoker.multicallables[address] = partial(fake, metadata=HEADERS)
            bare = getattr(invoker, "_targets", None)
            if bare is not None:
                bare[address] = (fake, HEADERS)
        request = greeter_pb2.HelloRequest(name="bench")
        for _ in range(1000):
            say(request)
        lib.cg_start()
        for _ in range(2000):
            say(request)
            fake(request, metadata=HEADERS)
        for i in range(repeats):
            gc.collect()
            lib.cg_zero()
            for _ in range(calls):
                say(request)
            lib.cg_dump(f"dubbo-py.r{i}".encode())
            gc.collect()
            lib.cg_zero()
            for _ in range(calls):
                fake(request, metadata=HEADERS)
            lib.cg_dump(f"baseline.r{i}".encode())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=5000, help="calls per measured block")
    parser.add_argument("--repeats", type=int, default=3, help="measured blocks per kind")
    parser.add_argument("--loadbalance", default="random")
    parser.add_argument("--providers", type=int, default=1)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(args.calls, args.repeats, args.loadbalance, args.providers)
        return
    _callgrind_library()  # built once, before the process that loads it starts
    print(f"# dubbo_py from {Path(dubbo_py.__file__).parent}")
    with tempfile.TemporaryDirectory(prefix="bench-path-") as tmp:
        out = Path(tmp)
        command = [*callgrind_command(out), sys.executable, __file__, "--measure"]
        command += ["--calls", str(args.calls), "--repeats", str(args.repeats)]
        command += ["--loadbalance", args.loadbalance, "--providers", str(args.providers)]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"the measured process failed: {done.stderr[-3000:]}")
        found: dict[str, int] = {}
        for path in out.glob("cg.*"):
            pid = path.name.split(".")[1]
            if pid.isdigit():
                found.update(totals(out, int(pid)))
    for kind in ("dubbo-py", "baseline"):
        per_call = [found[f"{kind}.r{i}"] / args.calls for i in range(args.repeats)]
        shown = " ".join(f"{n:,.0f}" for n in per_call)
        print(f"{kind:9s} {statistics.median(per_call):8,.0f} instr/call (median)  [{shown}]")


if __name__ == "__main__":
    main()
