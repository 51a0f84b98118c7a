"""A Greeter consumer process with a QoS port, driven from its stdin, for the live-operations
end-to-end tests (router snapshots, access logs, log levels).

    python tests/support/live_ops_peer.py --registry R --accesslog-out FILE [--accesslog V]

Prints ``READY <qos port>`` once its reference has providers. Then, per line on stdin:

``call N``
    N ``SayHello`` calls; prints ``CALLED <ok> <failed> <provider addresses, comma-separated>``
    once the access log's queued lines are written.
``level``
    prints ``LEVEL <effective level name of the dubbo_py logger>``.

Lines of the ``dubbo.accesslog`` loggers go to ``--accesslog-out`` (one per line, nothing else).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "examples" / "quickstart"))
import _paths  # noqa: E402, F401  (the generated demo package)
from demo import greeter_pb2, greeter_pb2_grpc  # noqa: E402

import dubbo_py  # noqa: E402
from dubbo_py.qos.access_log import ACCESS_LOGGER, writer  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--registry", required=True)
    parser.add_argument("--accesslog-out", required=True)
    parser.add_argument("--accesslog", default=None, help="the reference's accesslog parameter")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    handler = logging.FileHandler(args.accesslog_out, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    access = logging.getLogger(ACCESS_LOGGER)
    access.addHandler(handler)
    access.setLevel(logging.INFO)
    access.propagate = False

    app = dubbo_py.Application("shop", args.registry, qos_port=0)
    parameters = {"accesslog": args.accesslog} if args.accesslog else {}
    stub: Any = app.reference(
        greeter_pb2_grpc.GreeterStub, version="1.0.0", check=10.0, parameters=parameters
    )
    assert app.qos is not None
    print(f"READY {app.qos.port}", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "call":
            ok = failed = 0
            served: list[str] = []
            for _ in range(int(words[1])):
                try:
                    reply = stub.SayHello(greeter_pb2.HelloRequest(name="ada"), timeout=5)
                except Exception as exc:
                    failed += 1
                    print(f"FAILED {exc}", file=sys.stderr, flush=True)
                else:
                    ok += 1
                    served.append(reply.provider)
            writer().flush()
            print(f"CALLED {ok} {failed} {','.join(served) or '-'}", flush=True)
        elif words[0] == "level":
            level = logging.getLogger("dubbo_py").getEffectiveLevel()
            print(f"LEVEL {logging.getLevelName(level)}", flush=True)
    app.close()


if __name__ == "__main__":
    main()
