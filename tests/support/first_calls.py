"""A fresh consumer process that reports where its very first calls land.

``python -m tests.support.first_calls REGISTRY CALLS`` builds a reference to the demo Greeter
(round robin, so without routing the calls alternate over every provider), makes ``CALLS`` calls
the moment ``reference()`` returns, and prints one JSON line: the provider address of each call.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
import _paths  # noqa: E402,F401  (the generated demo package)
from demo import greeter_pb2, greeter_pb2_grpc  # noqa: E402

import dubbo_py  # noqa: E402


def main(registry: str, calls: int, cache: str) -> None:
    """Reference, call at once, print the providers as JSON."""
    logging.basicConfig(level=logging.WARNING, format="consumer %(levelname)s %(message)s")
    with dubbo_py.Application("first-calls", registry, cache_path=cache) as app:
        greeter = app.reference(
            greeter_pb2_grpc.GreeterStub, version="1.0.0", loadbalance="roundrobin", timeout=5.0
        )
        landed = [
            greeter.SayHello(greeter_pb2.HelloRequest(name=f"call-{i}")).provider
            for i in range(calls)
        ]
    print(json.dumps(landed), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
