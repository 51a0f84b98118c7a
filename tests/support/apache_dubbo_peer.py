"""An apache-dubbo (PyPI ``apache-dubbo`` 3.0.0b1) peer for the interoperability tests.

Runs under the interpreter of the venv those tests install apache-dubbo into (it must not
import dubbo_py). ``provider`` serves ``demo.Greeter/SayHello`` registered in ZooKeeper the way
apache-dubbo registers (``tri://host:port?service=demo.Greeter``) and prints ``READY host:port``;
``consumer`` looks ``demo.Greeter`` up in ZooKeeper, calls ``SayHello`` once and prints
``REPLY <message> <provider>``.

    python apache_dubbo_peer.py provider --zookeeper 127.0.0.1:2181 --protos DIR --port 50071
    python apache_dubbo_peer.py consumer --zookeeper 127.0.0.1:2181 --protos DIR --name ada
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from typing import Any

SERVICE = "demo.Greeter"


def provider(args: argparse.Namespace) -> None:
    """Serve SayHello until killed."""
    import dubbo
    from demo import greeter_pb2
    from dubbo.configs import RegistryConfig, ServiceConfig
    from dubbo.proxy.handlers import RpcMethodHandler, RpcServiceHandler

    address = f"127.0.0.1:{args.port}"

    def say_hello(request: Any) -> Any:
        return greeter_pb2.HelloReply(message=f"Hello, {request.name}!", provider=address)

    handler = RpcServiceHandler(
        service_name=SERVICE,
        method_handlers=[
            RpcMethodHandler.unary(
                say_hello,
                method_name="SayHello",
                request_deserializer=greeter_pb2.HelloRequest.FromString,
                response_serializer=greeter_pb2.HelloReply.SerializeToString,
            )
        ],
    )
    registry = RegistryConfig.from_url(f"zookeeper://{args.zookeeper}")
    config = ServiceConfig(handler, host="127.0.0.1", port=args.port)
    dubbo.Server(config, dubbo.Dubbo(registry_config=registry)).start()
    print(f"READY {address}", flush=True)
    threading.Event().wait()


def consumer(args: argparse.Namespace) -> None:
    """Call SayHello once through the registry (waiting for a provider to be listed)."""
    import dubbo
    from demo import greeter_pb2
    from dubbo.configs import ReferenceConfig, RegistryConfig

    registry = RegistryConfig.from_url(f"zookeeper://{args.zookeeper}")
    client = dubbo.Client(
        ReferenceConfig(protocol="tri", service=SERVICE), dubbo.Dubbo(registry_config=registry)
    )
    say_hello = client.unary(
        "SayHello",
        request_serializer=greeter_pb2.HelloRequest.SerializeToString,
        response_deserializer=greeter_pb2.HelloReply.FromString,
    )
    deadline = time.monotonic() + args.timeout
    while True:
        try:
            reply = say_hello(greeter_pb2.HelloRequest(name=args.name))
            break
        except Exception as exc:  # the provider list may not have arrived yet
            if time.monotonic() > deadline:
                print(f"FAILED {type(exc).__name__}: {exc}", flush=True)
                sys.exit(1)
            time.sleep(0.2)
    print(f"REPLY {reply.message} {reply.provider}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("role", choices=("provider", "consumer"))
    parser.add_argument("--zookeeper", required=True, help="host:port")
    parser.add_argument("--protos", required=True, help="directory of the generated demo package")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--name", default="ada")
    parser.add_argument("--timeout", type=float, default=20.0)
    args = parser.parse_args()
    sys.path.insert(0, args.protos)
    if args.role == "provider":
        provider(args)
    else:
        consumer(args)


if __name__ == "__main__":
    main()
