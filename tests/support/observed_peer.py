"""A Greeter provider or consumer process with a QoS port and the OpenTelemetry SDK set up (an
in-memory exporter), for the observability end-to-end tests.

    python tests/support/observed_peer.py provider --registry R --spans FILE
    python tests/support/observed_peer.py consumer --registry R --spans FILE --calls N
    python tests/support/observed_peer.py consumer --registry R --spans FILE --seconds S

Both print ``READY <grpc address or -> <qos port>`` once serving. The consumer makes its calls
inside one ``checkout`` span (``--calls``) or keeps calling from 4 threads for ``--seconds``
(or until its standard input closes, with ``--until-stdin-closes``), then prints
``DONE <succeeded> <failed>`` and keeps its QoS port open until killed. Finished spans are written
to ``--spans`` as JSON lines (name, kind, trace and span ids, parent), rewritten whenever new
spans finish.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "examples" / "quickstart"))
import _paths  # noqa: E402, F401  (the generated demo package)
from demo import greeter_pb2, greeter_pb2_grpc  # noqa: E402
from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from provider import make_greeter  # noqa: E402

import dubbo_py  # noqa: E402


def setup_tracing(path: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

    def dump() -> None:
        written = -1
        while True:
            spans = exporter.get_finished_spans()
            if len(spans) != written:
                rows = [
                    {
                        "name": s.name,
                        "kind": s.kind.name,
                        "trace_id": f"{s.context.trace_id:032x}",
                        "span_id": f"{s.context.span_id:016x}",
                        "parent": f"{s.parent.span_id:016x}" if s.parent else None,
                        "attributes": dict(s.attributes or {}),
                    }
                    for s in spans
                ]
                temporary = f"{path}.tmp"
                with open(temporary, "w", encoding="utf-8") as out:
                    out.writelines(json.dumps(r, default=str) + "\n" for r in rows)
                os.replace(temporary, path)
                written = len(spans)
            time.sleep(0.1)

    threading.Thread(target=dump, daemon=True).start()


def run_provider(args: argparse.Namespace) -> None:
    app = dubbo_py.Application(args.application, args.registry, qos_port=0)
    greeter = make_greeter("1.0.0", None, None, delay=args.delay)
    server = app.start(greeter, port=0)
    greeter.address = server.address
    assert app.qos is not None
    print(f"READY {server.address} {app.qos.port}", flush=True)
    app.wait(grace=2.0)


def run_consumer(args: argparse.Namespace) -> None:
    app = dubbo_py.Application(
        "shop", args.registry, qos_port=0, cache_path=Path(args.spans).with_suffix(".cache")
    )
    stub: Any = app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0", check=10.0)
    assert app.qos is not None
    print(f"READY - {app.qos.port}", flush=True)
    ok = failed = 0
    lock = threading.Lock()

    def one() -> None:
        nonlocal ok, failed
        try:
            stub.SayHello(greeter_pb2.HelloRequest(name="ada"), timeout=5)
            with lock:
                ok += 1
        except Exception as exc:
            with lock:
                failed += 1
            print(f"FAILED {exc}", flush=True)

    tracer = trace.get_tracer("observed_peer")
    if args.calls:
        with tracer.start_as_current_span("checkout"):
            for _ in range(args.calls):
                one()
    else:
        deadline = time.monotonic() + args.seconds
        finished = threading.Event()
        if args.until_stdin_closes:
            # The test says when it has seen what it waits for: the calls end then (or at the
            # deadline, a bound), not after a fixed time sized for a loaded machine.
            threading.Thread(target=lambda: (sys.stdin.read(), finished.set()), daemon=True).start()

        def loop() -> None:
            while time.monotonic() < deadline and not finished.is_set():
                one()

        workers = [threading.Thread(target=loop) for _ in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    print(f"DONE {ok} {failed}", flush=True)
    app.wait(grace=0.5)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=("provider", "consumer"))
    parser.add_argument("--registry", required=True)
    parser.add_argument("--spans", required=True)
    parser.add_argument("--application", default="greeter")
    parser.add_argument("--calls", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=0.0)
    parser.add_argument(
        "--until-stdin-closes",
        action="store_true",
        help="with --seconds: also stop calling once standard input is closed",
    )
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args()
    setup_tracing(args.spans)
    if args.role == "provider":
        run_provider(args)
    else:
        run_consumer(args)


if __name__ == "__main__":
    main()
