"""What a provider run from a terminal says: where it listens and registered, that Ctrl-C
stops it, and one line (no traceback, no node path) when its registry cannot be reached; the
application's own logging configuration wins, and DUBBO_PY_LOG_LEVEL quiets it."""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import dubbo_py
from dubbo_py.registry.store.advice import start_advice

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
import _paths  # noqa: E402,F401  (the generated demo package)
from demo import greeter_pb2_grpc  # noqa: E402

PROVIDER = """
import logging, os, signal, sys, threading
import dubbo_py
from demo import greeter_pb2, greeter_pb2_grpc
{logging_setup}

@dubbo_py.service(version="1.0.0")
class Greeter(greeter_pb2_grpc.GreeterServicer):
    def SayHello(self, request, context):
        return greeter_pb2.HelloReply(message="hi")

# Ctrl-C soon after start-up (registration is done by then: serve() registers first). The
# application's modules are imported before the timer starts: on a busy machine importing
# them can take longer than the timer, and the ^C would then interrupt the import.
Application = dubbo_py.Application
ctrl_c = threading.Timer(float(sys.argv[2]), lambda: os.kill(os.getpid(), signal.SIGINT))
ctrl_c.daemon = True
ctrl_c.start()
Application("greeter", registry=sys.argv[1], connect_timeout=0.5).serve(Greeter())
print("served", flush=True)
"""


def serve(
    tmp_path: Path, registry: str, logging_setup: str = "", ctrl_c: float = 1.0, **env: str
) -> tuple[int, str]:
    script = tmp_path / "provider.py"
    script.write_text(PROVIDER.format(logging_setup=logging_setup), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), registry, str(ctrl_c)],
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("DUBBO_PY_")},
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "examples" / "generated")]),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stderr


def _dead_zookeeper() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"zookeeper://127.0.0.1:{sock.getsockname()[1]}"


def test_serve_says_where_it_listens_and_that_ctrl_c_stops_it(tmp_path: Path) -> None:
    registry = f"sqlite://{tmp_path}/registry.db"
    code, stderr = serve(tmp_path, registry)
    assert code == 0, stderr
    lines = stderr.splitlines()
    assert len(lines) == 2, stderr
    assert lines[0].startswith("dubbo-py INFO: greeter: serving demo.Greeter:1.0.0 on 127.0.0.1:")
    assert lines[0].endswith(f"(registered in {registry})")
    assert lines[1] == (
        "dubbo-py INFO: greeter: SIGINT received: unregistering, then finishing calls in flight "
        "(up to 5s)"
    )


def test_the_applications_logging_wins_and_nothing_is_printed_twice(tmp_path: Path) -> None:
    setup = 'logging.basicConfig(level=logging.INFO, format="APP %(name)s %(message)s")'
    code, stderr = serve(tmp_path, f"sqlite://{tmp_path}/registry.db", setup)
    assert code == 0, stderr
    serving = [ln for ln in stderr.splitlines() if "serving demo.Greeter" in ln]
    assert len(serving) == 1 and serving[0].startswith("APP dubbo_py.rpc.application greeter:")
    assert "dubbo-py INFO" not in stderr


def test_dubbo_py_log_level_quiets_the_start_up_lines(tmp_path: Path) -> None:
    code, stderr = serve(tmp_path, f"sqlite://{tmp_path}/registry.db", DUBBO_PY_LOG_LEVEL="WARNING")
    assert code == 0, stderr
    assert stderr == ""


def test_an_unreachable_registry_is_one_line_saying_what_to_do(tmp_path: Path) -> None:
    registry = _dead_zookeeper()
    code, stderr = serve(tmp_path, registry, ctrl_c=50.0)
    assert code == 1
    # One line: no "retrying in the background" from a process about to exit (issue 35, 2).
    assert stderr.splitlines() == [
        f"error: greeter: cannot register: the registry {registry} is unreachable. "
        + start_advice(registry)
    ]
    assert "Traceback" not in stderr and "%3A" not in stderr and "/dubbo/" not in stderr
    assert "kazoo" not in stderr.lower() and "Connection dropped" not in stderr


def test_a_consumer_says_when_its_registry_does_not_answer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    registry = _dead_zookeeper()
    app = dubbo_py.Application(
        "shop", registry, connect_timeout=0.5, cache_path=tmp_path / "cache.json"
    )
    with caplog.at_level(logging.INFO, logger="dubbo_py"):
        try:
            app.reference(greeter_pb2_grpc.GreeterStub, version="1.0.0", check=0.5)
        finally:
            app.close()
    mine = [r.getMessage() for r in caplog.records if r.name == "dubbo_py.rpc.application"]
    said = [m for m in mine if m.startswith("shop: the registry")]
    assert said == [
        f"shop: the registry {registry} does not answer (waited 0.5s): demo.Greeter:1.0.0 "
        f"starts with no providers and keeps trying; {start_advice(registry)}"
    ]
    assert not any("%2F" in m for m in mine), mine


def test_a_consumer_says_what_it_found(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    registry = f"sqlite://{tmp_path}/registry.db"
    with dubbo_py.Application("shop", registry) as app, caplog.at_level(logging.INFO, "dubbo_py"):
        app.reference(greeter_pb2_grpc.GreeterStub, version="9.9.9", check=0.2)
    # Where it looked, and how long it really waited (issue 35, finding 4: "waited 3s" after
    # 0.26 s, no registry named).
    [said] = [m for m in caplog.messages if "has no providers yet" in m]
    assert re.fullmatch(
        rf"shop: demo\.Greeter:9\.9\.9 has no providers yet in {re.escape(registry)} \(the "
        r"registry answered in \d+\.\d\ds; calls fail until one registers there\); "
        r"no routing rules",
        said,
    ), said
