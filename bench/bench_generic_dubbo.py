"""Generic calls over ``dubbo://`` against a Triple stub call, both to Java Dubbo 3.3.6, in one run.

    python bench/bench_generic_dubbo.py [--seconds 1] [--rounds 6] [--threads 1 8]

A ZooKeeper started here; two Java processes of tests/peers/java/estate: ``estate.DubboProvider``
(estate.UserService over dubbo://, Hessian2) and ``estate.Provider`` (demo.Greeter over Triple).
Variants, interleaved round by round (bench/interleave.py): dubbo-py's generated-stub reference
calling ``SayHello`` over Triple (the baseline: dubbo-py's own gRPC path), and dubbo-py generic
calls ``nothing()`` (no arguments, a null back) and ``getUser(Long)`` (a bean of five fields
back, as a map). The figures are calls/s over all rounds against the baseline's, and CPU per call
of this process and of the two JVMs together.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))
import _paths  # noqa: E402,F401
from demo import greeter_pb2, greeter_pb2_grpc  # noqa: E402
from interleave import HEADER, Call, compare  # noqa: E402

import dubbo_py  # noqa: E402
from tests.support.java_estate import JavaDubboProvider, JavaProvider  # noqa: E402
from tests.support.zookeeper import ZooKeeperServer  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()

    group = f"bench-{uuid.uuid4().hex[:6]}"
    with ZooKeeperServer() as zk:
        registry = f"zookeeper://{zk.address}"
        common = ["--registry", registry, "--name", "b1"]
        with (
            JavaDubboProvider(
                *common, "--application", "bench-dubbo", "--version", "1.0.0", "--group", group
            ) as dubbo_provider,
            JavaProvider(
                *common, "--application", "bench-tri", "--service", f"1.0.0:{group}"
            ) as tri_provider,
            dubbo_py.Application("bench-generic", registry) as app,
        ):
            assert dubbo_provider.proc is not None and tri_provider.proc is not None
            stub = app.reference(
                greeter_pb2_grpc.GreeterStub, version="1.0.0", group=group, check=10
            )
            users = app.generic_reference(
                "estate.UserService", version="1.0.0", group=group, timeout=5.0
            )
            request = greeter_pb2.HelloRequest(name="bench")
            variants: dict[str, Call] = {
                "Triple stub SayHello (baseline)": lambda: stub.SayHello(request),
                "generic dubbo:// nothing()": lambda: users.invoke("nothing", [], []),
                "generic dubbo:// getUser(Long)": lambda: users.invoke(
                    "getUser", ["java.lang.Long"], [7]
                ),
            }
            for call in variants.values():
                for _ in range(300):  # warm up connections, caches and the JVMs' JIT
                    call()
            print(f"# {args.rounds} rounds x {args.seconds}s per variant, interleaved")
            print(HEADER)
            pids = [dubbo_provider.proc.pid, tri_provider.proc.pid]
            for threads in args.threads:
                result = compare(variants, threads, args.rounds, args.seconds, pids)
                print("\n".join(result.lines()), flush=True)


if __name__ == "__main__":
    main()
