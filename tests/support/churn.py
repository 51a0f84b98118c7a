"""Rule and provider churn under load: the soak behind "a rule push never costs a call".

A consumer calls two stable providers and a third that restarts every ``restart_every`` seconds,
from several threads (or asyncio tasks), each call carrying a ``tenant`` attachment and a varying
argument. Meanwhile an operator process rewrites rules straight in the registry every
``interval`` seconds, in turn: a condition rule reading ``attachments[tenant]`` and
``arguments[0]`` (``force: false``), a tag rule (calls carry ``dubbo.tag`` now and then), and an
override document changing weights and disabling the restarting provider. None of this leaves a
call without a legitimate provider: the two stable providers are never disabled, and a tag
names one of them at most, so every call must succeed. Each failed call is kept with its
status and message.

``run_churn`` is used by ``tests/e2e/test_rule_churn.py`` (a minute in the suite) and
``bench/soak_rule_churn.py`` (as long as you like).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from demo import greeter_pb2, greeter_pb2_grpc

import dubbo_py
from tests.support.processes import ROOT, ProviderProcess

KINDS = ("condition", "tag", "override")
SERVICE_KEY = "demo.Greeter:1.0.0"
PROVIDER_APP = "greeter-provider"
TENANTS = ("t0", "t1", "t2", "t3")


@dataclass(frozen=True)
class Failure:
    """One failed call: when (seconds into the run), the gRPC status and the message."""

    at: float
    status: str
    message: str


@dataclass
class ChurnResult:
    """What a churn run did: calls made, failures (each kept), pushes and restarts."""

    calls: int = 0
    failures: list[Failure] = field(default_factory=list)
    pushes: int = 0
    restarts: int = 0
    served: collections.Counter[str] = field(default_factory=collections.Counter)
    seconds: float = 0.0

    def summary(self) -> str:
        """One line: calls, failed, pushes, restarts, where calls landed."""
        served = ", ".join(f"{a}: {n}" for a, n in sorted(self.served.items()))
        return (
            f"{self.calls} calls, {len(self.failures)} failed, {self.pushes} pushes, "
            f"{self.restarts} restarts in {self.seconds:.0f} s ({served})"
        )


def _failure(started: float, exc: BaseException) -> Failure:
    if isinstance(exc, grpc.RpcError):
        code = exc.code()  # type: ignore[attr-defined]
        return Failure(started, getattr(code, "name", str(code)), str(exc.details()))  # type: ignore[attr-defined]
    return Failure(started, type(exc).__name__, str(exc))


def _metadata(rng: random.Random) -> tuple[tuple[str, str], ...] | None:
    # A fifth of the calls are plain (no metadata): those take the method's call plan.
    if rng.random() < 0.2:
        return None
    md: list[tuple[str, str]] = [("tenant", rng.choice(TENANTS))]
    if rng.random() < 0.3:
        md.append(("dubbo.tag", rng.choice(("gray", "canary"))))
    return tuple(md)


class _Calls:
    """The shared record of a run's calls (threads or tasks append to it)."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.lock = threading.Lock()
        self.result = ChurnResult()

    def ok(self, provider: str) -> None:
        with self.lock:
            self.result.calls += 1
            self.result.served[provider] += 1

    def failed(self, started: float, exc: BaseException) -> None:
        with self.lock:
            self.result.calls += 1
            self.result.failures.append(_failure(started - self.start, exc))


def _blocking_load(
    app: dubbo_py.Application,
    calls: _Calls,
    stop: threading.Event,
    threads: int,
    timeout: float,
    check: float = 5.0,
) -> list[threading.Thread]:
    stub = app.reference(
        greeter_pb2_grpc.GreeterStub, version="1.0.0", timeout=timeout, check=check
    )

    def run(seed: int) -> None:
        rng = random.Random(seed)
        n = 0
        while not stop.is_set():
            n += 1
            started = time.monotonic()
            request = greeter_pb2.HelloRequest(name=f"{rng.choice('abcxyz')}{n}")
            try:
                reply = stub.SayHello(request, metadata=_metadata(rng))
            except Exception as exc:  # every failure is the finding, whatever its type
                calls.failed(started, exc)
            else:
                calls.ok(reply.provider)

    workers = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(threads)]
    for w in workers:
        w.start()
    return workers


def _asyncio_load(
    app: dubbo_py.Application, calls: _Calls, stop: threading.Event, tasks: int, timeout: float
) -> list[threading.Thread]:
    async def main() -> None:
        stub = await app.reference_async(
            greeter_pb2_grpc.GreeterStub, version="1.0.0", timeout=timeout
        )

        async def run(seed: int) -> None:
            rng = random.Random(seed)
            n = 0
            while not stop.is_set():
                n += 1
                started = time.monotonic()
                request = greeter_pb2.HelloRequest(name=f"{rng.choice('abcxyz')}{n}")
                try:
                    reply = await stub.SayHello(request, metadata=_metadata(rng))
                except Exception as exc:  # every failure is the finding, whatever its type
                    calls.failed(started, exc)
                else:
                    calls.ok(reply.provider)

        await asyncio.gather(*(run(i) for i in range(tasks)))
        await app.aclose()

    worker = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    worker.start()
    return [worker]


def run_churn(
    registry: str,
    seconds: float,
    *,
    flavours: Sequence[str] = ("blocking",),
    kinds: Sequence[str] = KINDS,
    interval: float = 0.5,
    restart_every: float = 10.0,
    timeout: float = 5.0,
    workers: int = 4,
    apps: int = 1,
    cache_dir: Path,
    log: Callable[[str], None] = lambda _line: None,
) -> ChurnResult:
    """Run the churn for ``seconds`` against ``registry`` and return what happened: one
    reference per flavour in ``flavours`` (``blocking``, ``asyncio``), each calling from
    ``workers`` threads or tasks, with a deadline of ``timeout`` seconds per call; in each of
    ``apps`` consumer applications of this process (each its own ``dubbo_py.Application``,
    directory and references; they share the process's registry session)."""
    stable = [ProviderProcess(registry).start(), ProviderProcess(registry).start()]
    churning = ProviderProcess(registry).start()
    ports = [p.port for p in (*stable, churning)]
    writer: subprocess.Popen[str] | None = None
    calls = _Calls(time.monotonic())
    stop = threading.Event()
    try:
        with contextlib.ExitStack() as opened:
            threads = []
            for index in range(apps):
                name = "shop" if apps == 1 else f"shop-{index}"
                app = opened.enter_context(
                    dubbo_py.Application(name, registry, cache_path=cache_dir / f"{name}.json")
                )
                for flavour in flavours:
                    if flavour == "blocking":
                        # Many applications open one after another (a minute on a loaded
                        # machine): each reference waits for its providers before calling.
                        check = 60.0 if apps > 1 else 5.0
                        threads += _blocking_load(app, calls, stop, workers, timeout, check)
                    else:
                        threads += _asyncio_load(app, calls, stop, workers, timeout)
            if apps > 1:  # the run's clock starts once every application calls
                calls.start = time.monotonic()
            writer = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.support.churn",
                    registry,
                    ",".join(kinds),
                    str(interval),
                    ",".join(map(str, ports)),
                ],
                cwd=ROOT,
                env=dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=os.pathsep.join(sys.path)),
                stdout=subprocess.PIPE,
                text=True,
            )
            deadline = calls.start + seconds
            next_restart = calls.start + restart_every
            while (now := time.monotonic()) < deadline:
                if restart_every > 0 and now >= next_restart:
                    # A rolling restart: drained (SIGTERM), then back on the same port.
                    churning.terminate()
                    churning = ProviderProcess(registry, port=ports[2]).start()
                    calls.result.restarts += 1
                    next_restart = time.monotonic() + restart_every
                    calls.result.seconds = time.monotonic() - calls.start
                    log(f"restarted {churning.address} ({calls.result.summary()})")
                time.sleep(0.1)
            stop.set()
            for t in threads:
                t.join(30)
    finally:
        stop.set()
        if writer is not None:
            writer.terminate()
            out, _ = writer.communicate(10)
            calls.result.pushes = sum(1 for line in out.splitlines() if line.startswith("pushed"))
        for p in (*stable, churning):
            p.kill()
    calls.result.seconds = time.monotonic() - calls.start
    return calls.result


# -- the operator: a process of its own that rewrites rules straight in the registry ----------


def _condition(rng: random.Random, ports: Sequence[int]) -> tuple[str, str]:
    lines = []
    for tenant in rng.sample(TENANTS, 2):
        lines.append(f"attachments[tenant] = {tenant} => port = {rng.choice(ports)}")
    lines.append(f"arguments[0] = {rng.choice('abcxyz')}* => port = {rng.choice(ports)}")
    lines.append(f"arguments[0] != x* & attachments[tenant] = t3 => port != {rng.choice(ports)}")
    body = "".join(f"  - '{line}'\n" for line in lines)
    text = f"configVersion: v3.0\nscope: service\nkey: {SERVICE_KEY}\nforce: false\n"
    return f"{SERVICE_KEY}:.condition-router", f"{text}conditions:\n{body}"


def _tag(rng: random.Random, ports: Sequence[int]) -> tuple[str, str]:
    # One tag on one stable provider at most, so untagged calls always keep a stable one.
    tag = rng.choice(("gray", "canary"))
    text = (
        f"configVersion: v3.0\nkey: {PROVIDER_APP}\nforce: false\nenabled: true\n"
        f"tags:\n  - name: {tag}\n    addresses: ['127.0.0.1:{rng.choice(ports[:2])}']\n"
    )
    return f"{PROVIDER_APP}.tag-router", text


def _override(rng: random.Random, ports: Sequence[int]) -> tuple[str, str]:
    configs = [
        f"  - addresses: ['127.0.0.1:{ports[rng.randrange(2)]}']\n    side: provider\n"
        f"    parameters:\n      weight: {rng.choice((20, 100, 300))}\n"
    ]
    if rng.random() < 0.5:
        configs.append(
            f"  - addresses: ['127.0.0.1:{ports[2]}']\n    side: provider\n"
            "    parameters:\n      disabled: true\n"
        )
    text = f"configVersion: v3.0\nscope: service\nkey: {SERVICE_KEY}\nenabled: true\nconfigs:\n"
    return f"{SERVICE_KEY}:.configurators", text + "".join(configs)


def _blackhole(_rng: random.Random, _ports: Sequence[int]) -> tuple[str, str]:
    # Not part of the churn: a forced rule that leaves no provider, so that a run with this kind
    # shows the soak does see failed calls (``--kinds condition,blackhole``).
    text = (
        f"configVersion: v3.0\nscope: service\nkey: {SERVICE_KEY}\nforce: true\n"
        "conditions:\n  - '=> port = 1'\n"
    )
    return f"{SERVICE_KEY}:.condition-router", text


_WRITERS: dict[str, Callable[[random.Random, Sequence[int]], tuple[str, str]]] = {
    "condition": _condition,
    "tag": _tag,
    "override": _override,
    "blackhole": _blackhole,
}


def _operate(registry: str, kinds: Sequence[str], interval: float, ports: Sequence[int]) -> None:
    rng = random.Random(7)
    with dubbo_py.Application("operator", registry) as app:
        reg = app.registry
        assert reg is not None
        n = 0
        while True:
            kind = kinds[n % len(kinds)]
            key, text = _WRITERS[kind](rng, ports)
            try:
                reg.put_config(key, text)
                print(f"pushed {kind} {key}", flush=True)
            except Exception as exc:  # a short disconnection: the next round writes again
                print(f"write failed {kind}: {exc!r}", flush=True)
            n += 1
            time.sleep(interval)


if __name__ == "__main__":
    address, kind_list, every, port_list = sys.argv[1:5]
    _operate(address, kind_list.split(","), float(every), [int(p) for p in port_list.split(",")])
