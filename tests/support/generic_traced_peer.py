"""A consumer process with the OpenTelemetry SDK set up (an in-memory exporter) that makes generic
calls to a Java ``estate.UserService`` and prints what was traced, for
tests/estate/test_java_generic_observed.py (a tracer provider is set once per process, so the
test's own process stays untraced).

    python tests/support/generic_traced_peer.py --registry R --group G --protocol dubbo

Inside one ``checkout`` span: a blocking ``getUser(7)``, a blocking ``attachment("traceparent")``
(the provider returns the ``traceparent`` attachment it received), an awaited ``getUser(8)``
and a ``getUser(0)`` the provider answers with an exception. Prints one JSON line: the finished
spans (name, kind, trace and span ids, parent, attributes, status) and the ``traceparent`` the
provider saw.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

import dubbo_py  # noqa: E402


def _span(span: Any) -> dict[str, Any]:
    parent = span.parent
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": f"{span.context.trace_id:032x}",
        "span_id": f"{span.context.span_id:016x}",
        "parent": f"{parent.span_id:016x}" if parent is not None else None,
        "attributes": {k: v for k, v in (span.attributes or {}).items()},
        "status": span.status.status_code.name,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--registry", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--protocol", required=True)
    args = parser.parse_args()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    tracer = trace.get_tracer("generic-traced-peer")
    with dubbo_py.Application("py-generic-traced", args.registry) as app:
        users = app.generic_reference(
            "estate.UserService",
            version="1.0.0",
            group=args.group,
            timeout=5.0,
            protocol=args.protocol,
        )
        with tracer.start_as_current_span("checkout"):
            users.invoke("getUser", ["java.lang.Long"], [7])
            seen = users.invoke("attachment", ["java.lang.String"], ["traceparent"])
            asyncio.run(users.invoke_async("getUser", ["java.lang.Long"], [8]))
            with contextlib.suppress(dubbo_py.JavaException):
                users.invoke("getUser", ["java.lang.Long"], [0])
    spans = [_span(s) for s in exporter.get_finished_spans()]
    print(json.dumps({"spans": spans, "traceparent": seen}), flush=True)


if __name__ == "__main__":
    main()
