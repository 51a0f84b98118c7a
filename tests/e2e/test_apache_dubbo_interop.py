"""Interoperability with apache-dubbo (Python) 3.0.0b1 on a real ZooKeeper, both ways.

apache-dubbo registers ``tri://host:port?service=demo.Greeter`` (no path, no ``interface``)
under ``/dubbo/demo.Greeter/providers`` and calls ``/demo.Greeter/<Method>`` on every provider
URL in that folder, with no version or group headers. The package is installed from PyPI into
its own venv under the user's cache directory (once; reused by later runs); without PyPI the
tests skip. apache-dubbo knows no ZooKeeper chroot, so these tests use the root ``/dubbo`` of
the session's ZooKeeper and clear ``/dubbo/demo.Greeter`` around each test.
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from demo import greeter_pb2, greeter_pb2_grpc
from kazoo.client import KazooClient

import dubbo_py
from dubbo_py.url import URL
from tests.support.local_server import free_port
from tests.support.processes import ProviderProcess, start_ready

pytestmark = [pytest.mark.e2e, pytest.mark.zookeeper, pytest.mark.network]

ROOT = Path(__file__).resolve().parents[2]
PEER = ROOT / "tests" / "support" / "apache_dubbo_peer.py"
PROTOS = ROOT / "examples" / "generated"
PACKAGE = "apache-dubbo[zookeeper]==3.0.0b1"
FOLDER = "/dubbo/demo.Greeter"


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dubbo-py-tests" / "apache-dubbo-3.0.0b1"


@pytest.fixture(scope="session")
def apache_python() -> Path:
    """The interpreter of a venv with apache-dubbo 3.0.0b1 (and the protobuf runtime our
    generated demo code needs); skips when it cannot be installed (no PyPI)."""
    venv = _cache_dir()
    python = venv / "bin" / "python"
    done = venv / ".installed"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / ".apache-dubbo.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel test runs install it once
        if done.exists():
            return python
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        protobuf = f"protobuf=={importlib.metadata.version('protobuf')}"
        try:
            result = subprocess.run(
                [
                    str(python),
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--timeout",
                    "20",
                    "--retries",
                    "1",
                    PACKAGE,
                    protobuf,
                ],
                capture_output=True,
                text=True,
                timeout=600,
            )
        except subprocess.TimeoutExpired:
            pytest.skip(f"could not install {PACKAGE} from PyPI in time")
        if result.returncode != 0:
            pytest.skip(f"could not install {PACKAGE} from PyPI: {result.stderr[-500:]}")
        done.write_text(f"{PACKAGE} {protobuf}\n")
    return python


@pytest.fixture
def root_registry(zookeeper: Any) -> Iterator[str]:
    """The session ZooKeeper without a chroot (apache-dubbo has none), demo.Greeter cleared."""
    client = KazooClient(zookeeper.address)
    client.start(10)
    client.delete(FOLDER, recursive=True)
    try:
        yield f"zookeeper://{zookeeper.address}"
    finally:
        client.delete(FOLDER, recursive=True)
        client.stop()
        client.close()


def test_an_apache_dubbo_consumer_calls_a_dubbo_py_provider(
    apache_python: Path, root_registry: str, zookeeper: Any
) -> None:
    provider = ProviderProcess(root_registry).start()
    try:
        result = subprocess.run(
            [
                str(apache_python),
                str(PEER),
                "consumer",
                "--zookeeper",
                zookeeper.address,
                "--protos",
                str(PROTOS),
                "--name",
                "ada",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        replies = [line for line in result.stdout.splitlines() if line.startswith("REPLY ")]
        assert replies == [f"REPLY Hello, ada! {provider.address}"], result.stdout[-2000:]
    finally:
        provider.kill()


@pytest.fixture
def apache_provider(apache_python: Path, root_registry: str, zookeeper: Any) -> Iterator[str]:
    """An apache-dubbo provider of demo.Greeter (its address), killed afterwards."""
    port = free_port()
    proc, address = start_ready(
        [
            str(apache_python),
            str(PEER),
            "provider",
            "--zookeeper",
            zookeeper.address,
            "--protos",
            str(PROTOS),
            "--port",
            str(port),
        ],
        timeout=None,
        what="the apache-dubbo provider",
    )
    try:
        yield address
    finally:
        proc.kill()
        proc.wait(10)


def test_a_dubbo_py_consumer_calls_an_apache_dubbo_provider(
    apache_provider: str, root_registry: str, tmp_path: Path
) -> None:
    # apache-dubbo's URL has no path and no interface: dubbo-py reads the interface from the
    # folder it is registered in (dubbo_py/registry/matching.py), as docs/registry.md says.
    host, port = apache_provider.rsplit(":", 1)
    with dubbo_py.Application("shop", root_registry, cache_path=tmp_path / "c.json") as app:
        assert app.registry is not None
        assert app.registry.lookup("demo.Greeter") == [
            URL("tri", host, int(port), "", parameters={"service": "demo.Greeter"})
        ]
        ref = app.reference_handle(greeter_pb2_grpc.GreeterStub, timeout=5)
        assert [p.address for p in ref.directory.providers] == [apache_provider]
        for i in range(5):
            reply = ref.stub.SayHello(greeter_pb2.HelloRequest(name=f"py{i}"))
            assert (reply.message, reply.provider) == (f"Hello, py{i}!", apache_provider)
