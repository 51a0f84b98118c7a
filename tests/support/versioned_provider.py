"""Two versions of demo.Greeter on one server, in their own process, for the Triple tests.

``python versioned_provider.py --registry zookeeper://... [--aio]`` serves ``V1``
(``@service(version="1.0.0")``) and ``V2`` (``"2.0.0"``) with one ``app.start`` (blocking) or
``app.start_async`` (asyncio) and prints ``READY host:port``. Each reply's message starts with
the servicer's name and lists the request metadata keys it saw; ``SayHello`` sends back, as
trailing metadata, the caller's ``traceId`` and every binary (``-bin``) value it received, plus
an upper-case key of its own (``spanId``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
import _paths  # noqa: E402,F401  (puts the generated demo package on sys.path)
from demo import greeter_pb2, greeter_pb2_grpc  # noqa: E402

import dubbo_py  # noqa: E402


def _reply(name: str, request: Any, context: Any) -> Any:
    metadata = context.invocation_metadata()
    keys = sorted(k for k, _ in metadata if not k.startswith(("grpc-", "user-agent")))
    echoed = [(k, v) for k, v in metadata if k == "traceId" or k.endswith("-bin")]
    context.set_trailing_metadata([*echoed, ("spanId", f"{name}-span")])
    return greeter_pb2.HelloReply(message=f"{name} Hello, {request.name}! {','.join(keys)}")


@dubbo_py.service(version="1.0.0")
class V1(greeter_pb2_grpc.GreeterServicer):
    def SayHello(self, request: Any, context: Any) -> Any:
        return _reply("V1", request, context)


@dubbo_py.service(version="2.0.0")
class V2(greeter_pb2_grpc.GreeterServicer):
    def SayHello(self, request: Any, context: Any) -> Any:
        return _reply("V2", request, context)


@dubbo_py.service(version="1.0.0")
class AsyncV1(greeter_pb2_grpc.GreeterServicer):
    async def SayHello(self, request: Any, context: Any) -> Any:
        return _reply("V1", request, context)


@dubbo_py.service(version="2.0.0")
class AsyncV2(greeter_pb2_grpc.GreeterServicer):
    async def SayHello(self, request: Any, context: Any) -> Any:
        return _reply("V2", request, context)


async def serve_async(registry: str) -> None:
    app = dubbo_py.Application("versions-provider", registry=registry)
    server = await app.start_async(AsyncV1(), AsyncV2(), port=0)
    print(f"READY {server.address}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--registry", required=True)
    parser.add_argument("--aio", action="store_true", help="serve on a grpc.aio server")
    args = parser.parse_args()
    if args.aio:
        asyncio.run(serve_async(args.registry))
        return
    app = dubbo_py.Application("versions-provider", registry=args.registry)
    server = app.start(V1(), V2(), port=0)
    print(f"READY {server.address}", flush=True)
    app.wait(grace=0.5)


if __name__ == "__main__":
    main()
