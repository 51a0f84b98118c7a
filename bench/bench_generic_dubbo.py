"""Generic calls over ``dubbo://`` against a Triple stub call, both to Java Dubbo 3.3.6, in one run.

    python bench/bench_generic_dubbo.py [--seconds 1] [--rounds 6] [--threads 1 8]
    python bench/bench_generic_dubbo.py --clients [--also before=DIR]

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
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

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

PYPI_CLIENT = "dubbo-ssl-python==0.9.6"
PYPI_VENV = Path.home() / ".cache" / "dubbo-py" / "bench-pypi" / "dubbo-ssl-python"
METHODS = ("nothing", "kind")


class Driver:
    """One client process answering ``run THREADS SECONDS METHOD`` (bench/generic_driver.py,
    estate.GenericLoad) with its calls, errors, wall and CPU seconds."""

    def __init__(self, name: str, command: list[str]) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True,
        )  # fmt: skip
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline().strip()
        if ready != "READY":
            self.close()
            raise RuntimeError(f"{name} did not start (said {ready!r})")

    def run(self, threads: int, seconds: float, method: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"run {threads} {seconds} {method}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line.startswith("RESULT "):
            raise RuntimeError(f"{self.name}: {line!r}")
        result: dict[str, Any] = json.loads(line[len("RESULT ") :])
        return result

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def pypi_python() -> Path | None:
    """The Python of a virtual environment holding PyPI's dubbo-ssl-python (made on first use;
    None, said on stderr, when it cannot be installed)."""
    python = PYPI_VENV / "bin" / "python"
    if python.exists():
        return python
    try:
        subprocess.run([sys.executable, "-m", "venv", str(PYPI_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", PYPI_CLIENT], check=True)
    except subprocess.CalledProcessError as error:
        print(f"# {PYPI_CLIENT} could not be installed: {error}", file=sys.stderr)
        return None
    return python


def clients_main(args: argparse.Namespace) -> None:
    """--clients: dubbo-py, the Java consumer and PyPI's dubbo-ssl-python, each in a process of
    its own, calling one Java dubbo:// provider; rounds rotate the clients' order."""
    from interleave import process_cpu

    from tests.support.java_estate import java_peer

    group = f"bench-{uuid.uuid4().hex[:6]}"
    driver = str(ROOT / "bench" / "generic_driver.py")
    with ZooKeeperServer() as zk:
        registry = f"zookeeper://{zk.address}"
        with JavaDubboProvider(
            "--registry", registry, "--name", "b1", "--application", "bench-dubbo",
            "--version", "1.0.0", "--group", group,
        ) as provider:  # fmt: skip
            assert provider.proc is not None
            common = ["--version", "1.0.0", "--group", group]
            py_driver = [sys.executable, driver, "dubbo-py", "--registry", registry, *common]
            drivers = [
                Driver("dubbo-py generic", py_driver),
                *(
                    Driver(f"dubbo-py {name}", [*py_driver, "--root", root])
                    for name, root in (item.split("=", 1) for item in args.also)
                ),
                Driver(
                    "Java 3.3.6 generic",
                    java_peer().java_command(
                        "estate.GenericLoad",
                        "--registry",
                        registry,
                        "--application",
                        "bench-java",
                        *common,
                    ),
                ),
            ]
            python = pypi_python()
            if python is not None:
                drivers.append(
                    Driver(
                        "dubbo-ssl-python 0.9.6",
                        [str(python), driver, "dubbo-ssl-python", "--host", provider.address,
                         *common],
                    )
                )  # fmt: skip
            try:
                for each in drivers:  # warm up connections and the JVMs' JIT
                    for method in METHODS:
                        each.run(2, 2.0, method)
                print(
                    f"# {args.rounds} rounds x {args.seconds}s per client, order rotating; one"
                    " Java 3.3.6 dubbo:// provider (estate.UserService); CPU per call of the"
                    " client's process and of the provider's JVM"
                )
                print(
                    f"{'client':24} {'threads':>7} {'method':8} {'calls/s':>9} {'client us':>10}"
                    f" {'provider us':>12} {'errors':>7}"
                )
                for threads in args.threads:
                    for method in METHODS:
                        sums = {d.name: [0.0, 0.0, 0.0, 0.0, 0.0] for d in drivers}
                        for r in range(args.rounds):
                            order = drivers[r % len(drivers) :] + drivers[: r % len(drivers)]
                            for each in order:
                                before = process_cpu(provider.proc.pid)
                                got = each.run(threads, args.seconds, method)
                                spent = process_cpu(provider.proc.pid) - before
                                total = sums[each.name]
                                total[0] += got["calls"]
                                total[1] += got["wall_s"]
                                total[2] += got["cpu_s"]
                                total[3] += spent
                                total[4] += got["errors"]
                        for name, (calls, wall, cpu, provider_cpu, errors) in sums.items():
                            per = max(calls, 1.0)
                            print(
                                f"{name:24} {threads:>7} {method:8} {calls / wall:>9.0f}"
                                f" {cpu / per * 1e6:>10.1f} {provider_cpu / per * 1e6:>12.1f}"
                                f" {errors:>7.0f}",
                                flush=True,
                            )
            finally:
                for each in drivers:
                    each.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 8])
    parser.add_argument(
        "--clients",
        action="store_true",
        help="dubbo-py, the Java consumer and PyPI's dubbo-ssl-python side by side (processes)",
    )
    parser.add_argument(
        "--also",
        nargs="*",
        default=[],
        metavar="NAME=DIR",
        help="with --clients: also the dubbo-py of checkout DIR (e.g. an export of an earlier "
        "commit), shown as 'dubbo-py NAME', to compare two versions in one run",
    )
    args = parser.parse_args()
    if args.clients:
        clients_main(args)
        return

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
