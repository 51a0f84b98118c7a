"""A Greeter provider and consumer in one fresh process that sets up no logging of its own
(unless asked), for the access-log test in a fresh process
(tests/qos/test_access_log_fresh_process.py).

    python tests/support/fresh_accesslog_peer.py --registry R [--handler] [--level LEVEL]

``--handler`` attaches a handler to ``dubbo.accesslog`` (nothing else: no level) that prints
``HANDLER <level name> <logger> <message>`` on stdout; ``--level`` sets that logger's level, as
an application that chose one would. Prints ``READY`` once the reference has its provider;
then, on a ``go`` line on stdin, waits (up to 30 s) until an override rule has switched the
reference's access log on, makes one ``SayHello`` call, waits for the access log's queued
lines and prints ``CALLED <accesslog target>``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "examples" / "quickstart"))
import _paths  # noqa: E402, F401  (the generated demo package)
from demo import greeter_pb2, greeter_pb2_grpc  # noqa: E402

import dubbo_py  # noqa: E402
from dubbo_py.qos.access_log import ACCESS_LOGGER, writer  # noqa: E402


@dubbo_py.service(version="1.0.0")
class Greeter(greeter_pb2_grpc.GreeterServicer):
    def SayHello(self, request: Any, context: Any) -> Any:
        return greeter_pb2.HelloReply(message=f"Hello, {request.name}!")


class Printed(logging.Handler):
    """Prints each record it is handed on stdout."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"HANDLER {record.levelname} {record.name} {record.getMessage()}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--registry", required=True)
    parser.add_argument("--handler", action="store_true")
    parser.add_argument("--level", default=None)
    args = parser.parse_args()
    access = logging.getLogger(ACCESS_LOGGER)
    if args.handler:
        access.addHandler(Printed())
    if args.level:
        access.setLevel(args.level)

    provider = dubbo_py.Application("greeter", args.registry)
    consumer = dubbo_py.Application("shop", args.registry)
    try:
        provider.start(Greeter(), port=0, host="127.0.0.1")
        stub: Any = consumer.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0", check=10.0)
        assembly = consumer.references[0].assembly
        print("READY", flush=True)
        sys.stdin.readline()
        deadline = time.monotonic() + 30
        while assembly.access_log is None and time.monotonic() < deadline:
            time.sleep(0.05)
        with assembly._lock:  # the target is set first, then the calls rewired: wait for both
            pass
        stub.SayHello(greeter_pb2.HelloRequest(name="ada"), timeout=10)
        writer().flush()
        print(f"CALLED {assembly.access_log!r}", flush=True)
    finally:
        consumer.close()
        provider.close()


if __name__ == "__main__":
    main()
