"""A ``demo.Chat`` provider process for end-to-end tests (a second service beside the quick
start's Greeter): prints ``READY <address>`` once serving, as examples/quickstart/provider.py
does, so :class:`~tests.support.processes.ProviderProcess` can run it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import _paths  # noqa: F401  (puts the generated demo package on sys.path)
from demo import chat_pb2, chat_pb2_grpc

import dubbo_py


class Chatter(chat_pb2_grpc.ChatServicer):
    """Collect joins the lines it is sent; Echo answers each line in upper case."""

    address = ""

    def Collect(self, request_iterator: Iterator[Any], context: Any) -> Any:
        texts = [line.text for line in request_iterator]
        return chat_pb2.Summary(count=len(texts), joined=" ".join(texts), provider=self.address)

    def Echo(self, request_iterator: Iterator[Any], context: Any) -> Iterator[Any]:
        for line in request_iterator:
            yield chat_pb2.Line(text=line.text.upper(), provider=self.address)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--registry", required=True)
    parser.add_argument("--application", default="chat-provider")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    app = dubbo_py.Application(args.application, registry=args.registry)
    chatter = Chatter()
    server = app.start(chatter, port=args.port)
    chatter.address = server.address
    print(f"READY {server.address}", flush=True)
    app.wait(grace=1.0)


if __name__ == "__main__":
    main()
