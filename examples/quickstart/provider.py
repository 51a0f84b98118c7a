"""A Greeter provider: `python examples/quickstart/provider.py --registry sqlite:///tmp/r.db`.

Replies say which provider answered, so you can watch calls spread and fail over. Stop it with
Ctrl-C (graceful: unregister, drain) or kill -9 (consumers fail over and the node expires).
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _paths  # noqa: F401  (puts the generated demo package on sys.path)
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from dubbo_py import RegistryConfig


class CallLog:
    """Appends one line per call, ``<method> <name> <key>`` (tab-separated), to a file, so
    tests and demos can count which provider a call reached (broadcast and forking calls return
    one reply for several providers)."""

    def __init__(self, path: str | None) -> None:
        self._lock = threading.Lock()
        self._file = open(path, "a", encoding="utf-8", buffering=1) if path else None  # noqa: SIM115

    def add(self, method: str, request: Any) -> None:
        if self._file is not None:
            with self._lock:
                self._file.write(f"{method}\t{request.name}\t{request.key}\n")


def make_greeter(
    version: str,
    shard: int | None,
    tag: str | None,
    shards: int | None = None,
    record: str | None = None,
    warmup: int = 600_000,
    weight: int = 100,
    delay: float = 0.0,
    executes: int | None = None,
    parameters: dict[str, str] | None = None,
) -> Any:
    """A Greeter servicer class declared as a dubbo-py provider with these options; ``record``
    names a file that gets one line per call (see :class:`CallLog`); ``warmup`` is the ms over
    which the provider's weight ramps up after it starts; ``weight`` is its load-balancing
    weight; ``delay`` seconds are spent in every ``SayHello`` (a slow provider, to watch
    ``leastactive`` and ``shortestresponse`` steer around it); ``executes`` caps the calls of
    each method running at once (more are shed with RESOURCE_EXHAUSTED); ``parameters`` are
    extra URL parameters (``zone=a``) that rules can match."""
    calls = CallLog(record)
    limits = {} if executes is None else {"executes": executes}

    @dubbo_py.service(
        version=version,
        shard=shard,
        shards=shards,
        tags={**(parameters or {}), **({"dubbo.tag": tag} if tag else {})} or None,
        warmup=warmup,
        weight=weight,
        **limits,
    )
    class Greeter(greeter_pb2_grpc.GreeterServicer):
        address = ""

        def SayHello(self, request: Any, context: Any) -> Any:
            calls.add("SayHello", request)
            if delay:
                time.sleep(delay)
            if request.name == "fail":
                # An application error: consumers must see it as is, never retried.
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "asked to fail")
            return greeter_pb2.HelloReply(
                message=f"Hello, {request.name}!",
                provider=self.address,
                shard=-1 if shard is None else shard,
            )

        def SayHelloStream(self, request: Any, context: Any) -> Any:
            calls.add("SayHelloStream", request)
            for i in range(max(1, request.count)):
                yield greeter_pb2.HelloReply(
                    message=f"Hello #{i}, {request.name}!",
                    provider=self.address,
                    shard=-1 if shard is None else shard,
                )

    return Greeter()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--registry",
        action="append",
        default=None,
        help="registry address (default: embedded); repeat it to register in several",
    )
    parser.add_argument(
        "--zone", action="append", default=None, help="the zone of each --registry, in order"
    )
    parser.add_argument("--application", default="greeter-provider")
    parser.add_argument("--version", default="1.0.0")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--shard", type=int, default=None)
    parser.add_argument("--shards", type=int, default=None, help="shard count of --shard's layout")
    parser.add_argument("--tag", default=None)
    parser.add_argument("--grace", type=float, default=2.0)
    parser.add_argument("--record", default=None, help="append one line per call to this file")
    parser.add_argument(
        "--warmup", type=int, default=600_000, help="ms over which the weight ramps up (0: none)"
    )
    parser.add_argument("--weight", type=int, default=100, help="load-balancing weight")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds each SayHello takes")
    parser.add_argument(
        "--executes", type=int, default=None, help="calls of each method at once (more are shed)"
    )
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an extra URL parameter rules can match (zone=a); repeat it for several",
    )
    args = parser.parse_args(argv)
    parameters = dict(p.split("=", 1) for p in args.param)
    logging.basicConfig(level=logging.WARNING, format="provider %(levelname)s %(message)s")

    greeter = make_greeter(
        args.version,
        args.shard,
        args.tag,
        args.shards,
        args.record,
        warmup=args.warmup,
        weight=args.weight,
        delay=args.delay,
        executes=args.executes,
        parameters=parameters,
    )
    registries = args.registry or [None]
    if len(registries) == 1:
        app = dubbo_py.Application(args.application, registry=registries[0])
    else:
        zones = args.zone or []
        app = dubbo_py.Application(
            args.application,
            registry={
                f"r{i}": RegistryConfig(address, zone=zones[i] if i < len(zones) else None)
                for i, address in enumerate(registries)
            },
        )
    server = app.start(greeter, port=args.port)
    greeter.address = server.address
    # The line test harnesses and the demo script wait for.
    print(f"READY {server.address}", flush=True)
    app.wait(grace=args.grace)


if __name__ == "__main__":
    main()
