"""One client of the generic-call benchmark (bench/bench_generic_dubbo.py --clients) in a process
of its own, so that its CPU per call is its process's and nothing else's.

    python bench/generic_driver.py dubbo-py --registry R --version V --group G [--root DIR]
    <venv>/bin/python bench/generic_driver.py dubbo-ssl-python --host H:P --version V --group G

It prints ``READY``, then answers each stdin line ``run THREADS SECONDS METHOD`` (``nothing``,
or ``kind``: ``kind(String)`` with ``"bench"``) with ``RESULT {calls, errors, wall_s, cpu_s}``,
``cpu_s`` being this process's CPU time over the run -- the same protocol as the Java
consumer's ``estate.GenericLoad``. The ``dubbo-ssl-python`` client (PyPI, 0.9.6) runs in a
virtual environment of its own (the benchmark makes it), so this file imports nothing of
dubbo-py at module level.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Caller = Callable[[str], Any]


def dubbo_py_caller(args: argparse.Namespace) -> Caller:
    """dubbo-py's generic reference, found in the registry (its whole consumer chain); the
    dubbo-py of ``--root`` when given (another checkout, to compare two versions in one run)."""
    root = Path(args.root).resolve() if args.root else Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    import dubbo_py

    app = dubbo_py.Application("bench-generic-py", args.registry)
    users = app.generic_reference(
        "estate.UserService", version=args.version, group=args.group, timeout=5.0
    )

    def call(method: str) -> Any:
        if method == "kind":
            return users.invoke("kind", ["java.lang.String"], ["bench"])
        return users.invoke("nothing", [], [])

    return call


def dubbo_ssl_python_caller(args: argparse.Namespace) -> Caller:
    """PyPI's dubbo-ssl-python 0.9.6 on a direct address (its ZooKeeper discovery reads the
    provider folder once per call; a direct host is its cheapest path). It calls the method
    itself (not ``$invoke``) with parameter types taken from the Python values."""
    from dubbo_ssl.client import DubboClient

    client = DubboClient(
        interface="estate.UserService",
        group=args.group,
        version=args.version,
        dubbo_version="2.4.10",  # its default; "2.0.2" makes Dubbo answer flags it cannot read
        host=args.host,
    )

    def call(method: str) -> Any:
        if method == "kind":
            return client.call("kind", ["bench"], timeout=5)
        return client.call("nothing", [], timeout=5)

    return call


def run(call: Caller, threads: int, seconds: float, method: str) -> dict[str, Any]:
    counts = [[0, 0] for _ in range(threads)]
    cpu0, t0 = time.process_time(), time.perf_counter()
    end = t0 + seconds

    def work(slot: list[int]) -> None:
        while time.perf_counter() < end:
            try:
                call(method)
                slot[0] += 1
            except Exception:  # counted: a failed call is a figure here
                slot[1] += 1

    workers = [threading.Thread(target=work, args=(slot,)) for slot in counts]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return {
        "calls": sum(c for c, _ in counts),
        "errors": sum(e for _, e in counts),
        "wall_s": time.perf_counter() - t0,
        "cpu_s": time.process_time() - cpu0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("client", choices=["dubbo-py", "dubbo-ssl-python"])
    parser.add_argument("--registry", default="")
    parser.add_argument("--host", default="")
    parser.add_argument("--version", default="")
    parser.add_argument("--group", default="")
    parser.add_argument("--root", default="", help="the dubbo-py checkout to import")
    args = parser.parse_args()
    make = dubbo_py_caller if args.client == "dubbo-py" else dubbo_ssl_python_caller
    call = make(args)
    for method in ("nothing", "kind"):
        call(method)  # fails here, before READY, if the client cannot call at all
    print("READY", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "quit":
            break
        if words[0] != "run" or len(words) != 4:
            result: dict[str, Any] = {"error": "expected: run THREADS SECONDS METHOD"}
        else:
            result = run(call, int(words[1]), float(words[2]), words[3])
        print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
